#!/usr/bin/env bash
# PLANNED, not yet run: four starts failed in session 42, five in session 43 (no H200 came
# in either). To run it, move it to calibration/h200/device/run90.sh and run it from there.
# Device call 90 (nvidia-h200), issue 52. Run as
# `PIEP_GIT_COMMIT=<commit> bash calibration/h200/device/run90.sh`; read-only on the GPU.
# transformers generate(), eager, on design 7 (calibration/h200/moe/design_eager7.jsonl:
# Phi-3.5-MoE cut to 8 layers, MiniMax-M2 and Hunyuan-A13B cut to 6, three families priced
# from their code alone), whose blind predictions were committed before this call
# (predictions_blind7.jsonl, commit 0ce7b4f) -> moe_s90_eager.jsonl.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run90.log"
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
timeout 330 python3 -m piep measure --grid calibration/h200/moe/design_eager7.jsonl \
    --out "$OUT/moe_s90_eager.jsonl" --budget-s 300 >> "$L" 2>&1
echo "runs rc=$? $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
