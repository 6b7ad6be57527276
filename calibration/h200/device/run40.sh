#!/usr/bin/env bash
# Device call 40 (nvidia-h200), session 10: blind set 9 (design_layers.jsonl; predictions in
# engines/blind_predictions9.jsonl and, by the candidate profile without fused pointwise
# kernels, blind_predictions9_unfused.jsonl, both committed before this call): 8 and 64
# layers in no public list under hf-eager and hf-static, qwen2.5-32b's 64 under hf-static
# (every hf-static run before had 16-48 layers). Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run40.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((${EAGER_S:-150} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_layers.jsonl --out "$OUT/call40_layers.jsonl" \
    --budget-s ${EAGER_S:-150} >> "$L" 2>&1
echo "hf-eager rc=$? $(date +%T)" >> "$L"
timeout $((${STATIC_S:-330} + 40)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_layers.jsonl --out "$OUT/call40_static_layers.jsonl" \
    --budget-s ${STATIC_S:-330} >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
