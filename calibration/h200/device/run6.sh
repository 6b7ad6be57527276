#!/usr/bin/env bash
# Device call 6 (nvidia-h200-x2), session 2:
#  GPU0: attention decode in eager mode, timed as captured kernels (op_version 3)
#                                                     -> mod_eager.jsonl
#  GPU1 (same time): pending 1-GPU configurations of the e2e design -> e2e_s2_1gpu.jsonl
#  then both GPUs: pending 2-GPU configurations (torchrun)        -> e2e_s2_2gpu.jsonl
# The e2e outputs start with the already-measured records (so the grid skips them); only
# the lines after them are new. Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING=false
L="$OUT/run6.log"
cat calibration/h200/e2e/raw/*.jsonl > /tmp/done.jsonl
cp /tmp/done.jsonl "$OUT/e2e_s2_1gpu.jsonl"; cp /tmp/done.jsonl "$OUT/e2e_s2_2gpu.jsonl"
echo "== phase 1 $(date +%T)" >> "$L"
( CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -m piep calibrate modules --kinds attention \
      --modes eager --out "$OUT/mod_eager.jsonl" --budget-s 170 --min-window-s 0.3
  echo "modules rc=$?" ) > "$OUT/g0.tmp" 2>&1 &
( CUDA_VISIBLE_DEVICES=1 timeout 200 python3 -m piep measure --grid calibration/h200/e2e/design.jsonl \
      --out "$OUT/e2e_s2_1gpu.jsonl" --budget-s 170
  echo "grid1 rc=$?" ) > "$OUT/g1.tmp" 2>&1 &
wait
cat "$OUT"/g0.tmp "$OUT"/g1.tmp >> "$L"; rm -f "$OUT"/g*.tmp
echo "== phase 2 $(date +%T)" >> "$L"
timeout 250 torchrun --standalone --nproc-per-node 2 -m piep measure \
    --grid calibration/h200/e2e/design.jsonl --out "$OUT/e2e_s2_2gpu.jsonl" --budget-s 200 \
    >> "$L" 2>&1; echo "grid2 rc=$?" >> "$L"
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl /tmp/done.jsonl
grep -c "J," "$L"; tail -n 8 "$L"
