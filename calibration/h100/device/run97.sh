#!/usr/bin/env bash
# Device call 97 (nvidia-h100-x1), session 47: the decode-step experts' table A/B of call 94
# (benchmarks/moe_kernels_ab.py --decode) at batch 8 to 192 (64 to 1,536 (token, expert)
# pairs), after call 96 found design 9's large-batch generate() runs on this card priced
# +20-24 % long while its batch <= 48 runs were not: does the table's ratio
# (module_models.BATCHED_TABLE_TIME, measured at batch 8 and 32) hold at many pairs?
# Mixtral's shape to batch 64 (its copies at 192 would not fit 80 GB).
# -> experts_table_ab_s97.jsonl. Read-only on the GPU. Run as
# `bash calibration/h100/device/run97.sh` (about a minute).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
L="$OUT/run97.log"
C=calibration/h200/moe/configs
echo "== start $(date +%T)" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
timeout 150 python3 benchmarks/moe_kernels_ab.py --decode --batches 8,32,64,128,192 \
    --models $C/qwen3-30b-a3b-shape.json $C/olmoe-1b-7b-shape.json $C/piep-unlisted-moe.json \
    $C/deepseek-v2-lite-shape.json $C/gpt-oss-20b-shape.json \
    --out "$OUT/experts_table_ab_s97.jsonl" >> "$L" 2>&1
echo "ab rc=$? $(date +%T)" >> "$L"
timeout 60 python3 benchmarks/moe_kernels_ab.py --decode --batches 8,32,64 \
    --models $C/mixtral-8x7b-shape.json --out "$OUT/experts_table_ab_s97.jsonl" >> "$L" 2>&1
echo "ab rc=$? == done $(date +%T)" >> "$L"
tail -n 60 "$L"
