#!/usr/bin/env bash
# Device call 93 (nvidia-h100-x1), session 45: transformers generate(), eager, on ten dense
# runs of the H200's new families' shapes (Qwen3, Gemma 3, GLM-4, OLMo 2, Phi-4, Granite,
# SmolLM3, one of our own) at workloads no earlier run had
# (calibration/h100/families/design_h100_blind.jsonl) -> families_s93.jsonl. piep's
# spec-sheet answers were committed before the call: predictions_blind_h100.jsonl (the
# transfer's power rule of session 45) and predictions_blind_h100_tdp.jsonl (the rule
# before it, made by commit aed2e41): the runs test the rule blind. Read-only on the GPU.
# Run as `PIEP_GIT_COMMIT=<commit> bash calibration/h100/device/run93.sh`.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run93.log"
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
timeout ${TOTAL_S:-540} python3 -m piep measure --grid calibration/h100/families/design_h100_blind.jsonl \
    --out "$OUT/families_s93.jsonl" --budget-s $(( ${TOTAL_S:-540} - 30 )) >> "$L" 2>&1
echo "eager rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
