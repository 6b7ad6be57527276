#!/usr/bin/env bash
# Device call 92 (nvidia-h100-x1), issue 52; planned in session 43, run in session 44.
# The H200's design 7
# (calibration/h200/moe/design_eager7.jsonl: Phi-3.5-MoE cut to 8 layers, MiniMax-M2 and
# Hunyuan-A13B cut to 6; transformers generate(), eager) on an H100, while no H200 came;
# piep's spec-sheet answers for them were committed before the call
# (calibration/h100/moe/predictions_blind_h100_7.jsonl). Read-only on the GPU. Run as
# `PIEP_GIT_COMMIT=<commit> bash calibration/h100/device/run92.sh`.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run92.log"
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
timeout 330 python3 -m piep measure --grid calibration/h200/moe/design_eager7.jsonl \
    --out "$OUT/moe_s92_eager.jsonl" --budget-s 300 >> "$L" 2>&1
echo "runs rc=$? $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
