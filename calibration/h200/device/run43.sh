#!/usr/bin/env bash
# Device call 43 (nvidia-h200), session 10: blind set 11 (design_blind11.jsonl; predictions
# in engines/blind_predictions11.jsonl, committed before this call, by the profiles refitted
# on blind set 10): multi-head attention under hf-static (no K/V expansion) and
# mistral-small-24b at another point; under hf-eager the Qwen2 shape with biases at batch
# 12 and mistral-small-24b at a 3000-token prompt. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run43.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((${EAGER_S:-80} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_blind11.jsonl --out "$OUT/call43_blind11.jsonl" \
    --budget-s ${EAGER_S:-80} >> "$L" 2>&1
echo "hf-eager rc=$? $(date +%T)" >> "$L"
timeout $((${STATIC_S:-130} + 40)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind11.jsonl --out "$OUT/call43_static_blind11.jsonl" \
    --budget-s ${STATIC_S:-130} >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
