#!/usr/bin/env bash
# Device call 79 (nvidia-h100-x1), session 33 (issue 52): a diagnosis on an H100 while no
# H200 came (calls 77-78 refused). Nothing here enters a calibration: the H200's stays the
# H200's. What it asks is a property of the kernels transformers launches, which any
# Hopper card shows, each A beside its B on the same card:
# (1) the experts' grouped GEMM in the sampler's first weight layout (op version 1) and in
#     transformers' (op version 2), at the MoE designs' prefill token counts
#     (benchmarks/grouped_layout.py) -> grouped_layout_s79.jsonl;
# (2) a kernel census of generate() on three MoE shapes (python -m piep.sampling.census:
#     kernels per layer in prefill and per decode step, by name, with their GPU time)
#     -> census_moe_s79.jsonl.
# Ran at 9dc4865: part (1) failed (the script read expert_ffn, None for gpt-oss and
# Mixtral; call 80 runs it again, as benchmarks/moe_kernels_ab.py), part (2) came back
# (calibration/h100/moe/census_moe_s79.jsonl, run79.log).
# Run as `PIEP_GIT_COMMIT=<commit> bash calibration/h100/device/run79.sh`. Read-only on
# the GPU: nothing here sets a clock or a limit.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run79.log"
M=calibration/h200/moe
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" >> "$L"
timeout 120 python3 benchmarks/grouped_layout.py --models $M/configs/*.json --reps 20 \
    --out "$OUT/grouped_layout_s79.jsonl" >> "$L" 2>&1
echo "layout rc=$? $(date +%T)" >> "$L"
timeout 300 python3 -m piep.sampling.census \
    --models $M/configs/qwen3-30b-a3b-shape.json $M/configs/mixtral-8x7b-shape.json \
    $M/configs/qwen2-moe-a2.7b-shape.json --batch 8 --prompt-len 512 --gen-len 9 \
    --out "$OUT/census_moe_s79.jsonl" >> "$L" 2>&1
echo "census rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; cat "$L" | tail -n 40
