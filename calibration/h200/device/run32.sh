#!/usr/bin/env bash
# Device call 32 (nvidia-h200), session 8: (1) the rest of hf-eager's runs past a sliding
# window that call 31's limit cut (the grid resumes after call 31's rows, copied in first
# and dropped from the committed file afterwards); (2) hf-static on blind set 5's 1B shape;
# (3) the two hf-static 20B runs of blind set 4 that call 29 cut (resumed after call 29's
# rows likewise). Predictions: engines/blind_predictions5.jsonl, blind_predictions4.jsonl.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run32.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
cp $E/hf-eager/raw/call31_window.jsonl "$OUT/call32_window.jsonl"
timeout $((${WIN_S:-220} + 20)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_window.jsonl --out "$OUT/call32_window.jsonl" \
    --budget-s ${WIN_S:-220} >> "$L" 2>&1
echo "window rc=$? $(date +%T)" >> "$L"
timeout $((${S5_S:-120} + 20)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind5.jsonl --out "$OUT/call32_blind5.jsonl" \
    --budget-s ${S5_S:-120} >> "$L" 2>&1
echo "static blind5 rc=$? $(date +%T)" >> "$L"
cp $E/hf-static/raw/call29_blind4.jsonl "$OUT/call32_blind4.jsonl"
timeout $((${S4_S:-170} + 20)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind4.jsonl --out "$OUT/call32_blind4.jsonl" \
    --budget-s ${S4_S:-170} >> "$L" 2>&1
echo "static blind4 rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 30
