#!/usr/bin/env bash
# Device call 81 (nvidia-h100-x1), session 33 (issue 53): a diagnosis on an H100 while no
# H200 came; nothing here enters a calibration. Continuous batching's packed attention
# under its additive bf16 mask (the `sdpa_paged` sampler op) against the unmasked SDPA of
# the same tensors, on one card, over decoding iterations and prompt chunks
# (benchmarks/paged_attention_ab.py) -> paged_attention_ab_s81.jsonl.
# Run as `PIEP_GIT_COMMIT=<commit> bash calibration/h100/device/run81.sh`. Read-only on
# the GPU: nothing here sets a clock or a limit.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run81.log"
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" >> "$L"
timeout 150 python3 benchmarks/paged_attention_ab.py --heads 32 --head-dim 128 --reps 10 \
    --out "$OUT/paged_attention_ab_s81.jsonl" >> "$L" 2>&1
echo "ab rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; cat "$L" | tail -n 25
