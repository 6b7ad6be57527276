#!/usr/bin/env bash
# Device call 36 (nvidia-h200), session 9: blind set 8 (design_window4.jsonl; predictions in
# engines/blind_predictions8.jsonl, committed before this call): a 2048-key window at head
# dim 96 in no public list under hf-eager and hf-static, mistral-7b and the 1024-key shape
# past the window at batches 16 and 24 under hf-eager. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run36.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((${EAGER_S:-250} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_window4.jsonl --out "$OUT/call36_window4.jsonl" \
    --budget-s ${EAGER_S:-250} >> "$L" 2>&1
echo "hf-eager rc=$? $(date +%T)" >> "$L"
timeout $((${STATIC_S:-220} + 40)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_window4.jsonl --out "$OUT/call36_static_window4.jsonl" \
    --budget-s ${STATIC_S:-220} >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
