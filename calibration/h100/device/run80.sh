#!/usr/bin/env bash
# Device call 80 (nvidia-h100-x1), session 33 (issue 52): call 79's first part again, its
# script mended (gpt-oss's and Mixtral's experts have no moe_intermediate_size), with a
# second A/B. A diagnosis on an H100 while no H200 came; nothing here enters a
# calibration. Each A beside its B on the same card (benchmarks/moe_kernels_ab.py):
# (1) the experts' grouped GEMM in the sampler's first weight layout (op version 1) and in
#     transformers' (op version 2);
# (2) transformers' three masks a layer (`masked_fill` under a (rows, 1) mask) and the
#     row gather the tree prices them as (the `moe_copy` sample's op);
# at the MoE designs' prefill token counts -> moe_kernels_ab_s80.jsonl.
# Ran at 053042c (calibration/h100/moe/moe_kernels_ab_s80.jsonl, run80.log).
# Run as `PIEP_GIT_COMMIT=<commit> bash calibration/h100/device/run80.sh`. Read-only on
# the GPU: nothing here sets a clock or a limit.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run80.log"
M=calibration/h200/moe
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" >> "$L"
timeout 240 python3 benchmarks/moe_kernels_ab.py --models $M/configs/*.json --reps 20 \
    --out "$OUT/moe_kernels_ab_s80.jsonl" >> "$L" 2>&1
echo "ab rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; cat "$L" | tail -n 70
