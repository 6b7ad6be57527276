#!/usr/bin/env bash
# Device call 14 (nvidia-h200-x2), session 3: more samples of the small kinds whose
# module error is highest (embedding: the decode kernel's time is not monotone in the
# tokens; residual, sampling, rmsnorm), shape draw seed 3, one shard per GPU
#                                                          -> modules_small_s{0,1}.jsonl
# Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
L="$OUT/run14.log"
for g in 0 1; do
  ( CUDA_VISIBLE_DEVICES=$g timeout 130 python3 -m piep calibrate modules \
        --kinds embedding residual sampling rmsnorm --modes graph --seed 3 --per-kind 40 \
        --shard $g/2 --out "$OUT/modules_small_s$g.jsonl" --budget-s 100 --repeat-every 1000
    echo "modules $g rc=$?" ) > "$OUT/g$g.tmp" 2>&1 &
done
wait
cat "$OUT"/g0.tmp "$OUT"/g1.tmp >> "$L"; rm -f "$OUT"/g*.tmp
wc -l "$OUT"/*.jsonl; grep "rc=\|budget" "$L"
