#!/usr/bin/env bash
# Device call 34 (nvidia-h200), session 8, on the session's last minutes of device time:
# mistral-7b past its 4096-key window under hf-eager (design_window2.jsonl, blind set 7;
# predictions in engines/blind_predictions7.jsonl). Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run34.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((${WIN_S:-140} + 20)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_window2.jsonl --out "$OUT/call34_window2.jsonl" \
    --budget-s ${WIN_S:-140} >> "$L" 2>&1
echo "window2 rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 10
