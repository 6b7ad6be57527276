#!/usr/bin/env bash
# Device call 96 (nvidia-h100-x1), session 47, planned for when no H200 comes: the H200's
# design 9 (calibration/h200/moe/design_eager9.jsonl: transformers generate(), eager, four
# MoE shapes at 512-1,536 (token, expert) pairs a decode step, past every module sample's
# 512) on an H100 -> moe_s96_eager.jsonl. piep's spec-sheet answers were committed before
# the call (calibration/h100/moe/predictions_blind_h100_9.jsonl). Mixtral cut to 4 layers at
# batch 96 needs 75 of the board's 79.7 GiB by piep's memory check (its decode copies
# each pair's experts): an OOM there is recorded in the log. Read-only on the GPU. Run as
# `PIEP_GIT_COMMIT=<commit> TOTAL_S=300 bash calibration/h100/device/run96.sh`.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run96.log"
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
B=$(( ${TOTAL_S:-300} - 20 ))
timeout $((B + 10)) python3 -m piep measure --grid calibration/h200/moe/design_eager9.jsonl \
    --out "$OUT/moe_s96_eager.jsonl" --budget-s $B >> "$L" 2>&1
echo "eager rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
