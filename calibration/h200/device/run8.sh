#!/usr/bin/env bash
# Device call 8 (nvidia-h200-x2), session 3:
#  1. both GPUs: collectives in isolation with energy, 4 KiB .. 1 GiB 2x apart (session 2
#     measured 8x apart)                                   -> collectives_s3.jsonl
#  2. one shard per GPU: projection GEMMs (graph), shape draw seed 1, 60 per (kind, phase),
#     incl. the session-3 synthetic shapes (FFN sizes of low alignment)
#                                                          -> modules_lin_s{0,1}.jsonl
# The module outputs start with the already-measured records (so those shapes are
# skipped); only the lines after them are new. Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
L="$OUT/run8.log"
echo "== collectives $(date +%T)" >> "$L"
timeout 250 torchrun --standalone --nproc-per-node 2 -m piep calibrate collectives \
    --out "$OUT/collectives_s3.jsonl" --min-window-s 0.3 >> "$L" 2>&1; echo "rc=$?" >> "$L"
echo "== modules $(date +%T)" >> "$L"
KINDS="q_proj k_proj v_proj o_proj gate_proj up_proj down_proj"
for g in 0 1; do
  cat calibration/h200/modules/modules_s?.jsonl calibration/h200/modules/modules_v2_s*.jsonl > "$OUT/modules_lin_s$g.jsonl"
  ( CUDA_VISIBLE_DEVICES=$g timeout 200 python3 -m piep calibrate modules --kinds $KINDS \
        --modes graph --seed 1 --per-kind 60 --shard $g/2 --out "$OUT/modules_lin_s$g.jsonl" \
        --budget-s 175 --repeat-every 1000
    echo "modules $g rc=$?" ) > "$OUT/gpu$g.tmp" 2>&1 &
done
wait
cat "$OUT"/gpu0.tmp "$OUT"/gpu1.tmp >> "$L"; rm -f "$OUT"/gpu*.tmp
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl
grep -c "B graph:\|B eager:" "$L"; tail -n 12 "$L"
