#!/usr/bin/env bash
# Device call 13 (nvidia-h200-x2), session 3: head dims other than 128.
#  GPU0: attention and rope module samples of head dim 64 / 80 / 96 (synthetic shapes),
#        shard 0/2                                              -> modules_hd_s0.jsonl
#  GPU1: end-to-end runs of two unlisted shapes of head dim 64 and 96 (the blind test,
#        design_headdim.jsonl) -> e2e_s3_hd.jsonl, then module shard 1/2 -> modules_hd_s1.jsonl
# Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
L="$OUT/run13.log"
M="--kinds attention rope --head-dims 64 80 96 --seed 2 --repeat-every 1000"
echo "== start $(date +%T)" >> "$L"
( CUDA_VISIBLE_DEVICES=0 timeout 250 python3 -m piep calibrate modules $M --shard 0/2 \
      --out "$OUT/modules_hd_s0.jsonl" --budget-s 220
  echo "modules 0 rc=$?" ) > "$OUT/g0.tmp" 2>&1 &
( CUDA_VISIBLE_DEVICES=1 timeout 170 python3 -m piep measure \
      --grid calibration/h200/e2e/design_headdim.jsonl --out "$OUT/e2e_s3_hd.jsonl" --budget-s 130
  echo "grid rc=$?"
  CUDA_VISIBLE_DEVICES=1 timeout 110 python3 -m piep calibrate modules $M --shard 1/2 \
      --out "$OUT/modules_hd_s1.jsonl" --budget-s 80
  echo "modules 1 rc=$?" ) > "$OUT/g1.tmp" 2>&1 &
wait
cat "$OUT"/g0.tmp "$OUT"/g1.tmp >> "$L"; rm -f "$OUT"/g*.tmp
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -c " J, " "$L"; grep "rc=" "$L"
