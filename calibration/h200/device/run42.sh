#!/usr/bin/env bash
# Device call 42 (nvidia-h200), session 10: blind set 10 (design_blind10.jsonl; predictions
# in engines/blind_predictions10.jsonl, committed before this call, by the profiles that
# refit their combiners on their own runs): shapes each engine's runs never had (under
# hf-static a Qwen2 with biases and a 30-layer shape, llama-2-13b at another point; under
# hf-eager the head dim 64 shape at batch 16, the 64-layer shape at batch 12, llama-3-8b
# with a 2000-token prompt, the 8-layer shape at batch 32). Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run42.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((${EAGER_S:-170} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_blind10.jsonl --out "$OUT/call42_blind10.jsonl" \
    --budget-s ${EAGER_S:-170} >> "$L" 2>&1
echo "hf-eager rc=$? $(date +%T)" >> "$L"
timeout $((${STATIC_S:-300} + 40)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind10.jsonl --out "$OUT/call42_static_blind10.jsonl" \
    --budget-s ${STATIC_S:-300} >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
