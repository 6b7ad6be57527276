#!/usr/bin/env bash
# Device call 12 (nvidia-h200-x2), session 3: end-to-end runs of two more shapes in no
# public list (design_unlisted.jsonl: piep-unlisted-6b, -9b; tp1, tp2, pp2).
#  phase 1: the 1-GPU configurations, one shard per GPU side by side -> e2e_s3_unl_1gpu_s{0,1}
#  phase 2: the 2-GPU configurations (torchrun)                      -> e2e_s3_unl_2gpu
# Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING=false
L="$OUT/run12.log"
D=calibration/h200/e2e/design_unlisted.jsonl
echo "== phase 1 $(date +%T)" >> "$L"
for g in 0 1; do
  ( CUDA_VISIBLE_DEVICES=$g timeout 150 python3 -m piep measure --grid $D \
        --out "$OUT/e2e_s3_unl_1gpu_s$g.jsonl" --shard $g/2 --budget-s 110
    echo "grid1 $g rc=$?" ) > "$OUT/g$g.tmp" 2>&1 &
done
wait
cat "$OUT"/g0.tmp "$OUT"/g1.tmp >> "$L"; rm -f "$OUT"/g*.tmp
echo "== phase 2 $(date +%T)" >> "$L"
timeout 360 torchrun --standalone --nproc-per-node 2 -m piep measure --grid $D \
    --out "$OUT/e2e_s3_unl_2gpu.jsonl" --budget-s 310 >> "$L" 2>&1; echo "grid2 rc=$?" >> "$L"
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -c " J, " "$L"; tail -n 3 "$L"
