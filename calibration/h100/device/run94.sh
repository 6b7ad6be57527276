#!/usr/bin/env bash
# Device call 94 (nvidia-h100-x1, warm after call 93: no H200 came), session 46: the decode-step
# experts' table A/B (benchmarks/moe_kernels_ab.py --decode) over the MoE designs' shapes
# at batch 8 and 32: generate()'s gather + bmm from the module sampler's table of 8
# experts against from every expert of the model, routed (reports/moe.md: the census's
# decode steps stand x1.00-1.21 above the tree's kernels; is the small table why?).
# -> experts_table_ab_s94.jsonl. Read-only on the GPU. About a minute.
# Run as `TOTAL_S=200 bash calibration/h100/device/run94.sh` (10.6 s on the H100).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
L="$OUT/run94.log"
echo "== start $(date +%T)" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
timeout ${TOTAL_S:-150} python3 benchmarks/moe_kernels_ab.py --decode \
    --models calibration/h200/moe/configs/*.json --out "$OUT/experts_table_ab_s94.jsonl" \
    >> "$L" 2>&1
echo "ab rc=$? == done $(date +%T)" >> "$L"
tail -n 70 "$L"
