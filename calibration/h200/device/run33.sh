#!/usr/bin/env bash
# Device call 33 (nvidia-h200), session 8: (1) hf-eager's six replicate runs measured
# again on a third host of the session, now with the tiny-decoder probe beside every window
# (does it track step time better than the launch probe?); (2) hf-static's sliding cache
# (design_window.jsonl, blind set 6: predictions in engines/blind_predictions6.jsonl).
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run33.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((${REPL_S:-170} + 20)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_replicates.jsonl --out "$OUT/call33_replicates.jsonl" \
    --budget-s ${REPL_S:-170} >> "$L" 2>&1
echo "replicates rc=$? $(date +%T)" >> "$L"
timeout $((${WIN_S:-200} + 20)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_window.jsonl --out "$OUT/call33_window.jsonl" \
    --budget-s ${WIN_S:-200} >> "$L" 2>&1
echo "static window rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 30
