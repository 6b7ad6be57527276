#!/usr/bin/env bash
# Device call 31 (nvidia-h200), session 8: blind set 5 under hf-eager (predictions
# committed in engines/blind_predictions5.jsonl before the call): (1) runs past a sliding
# window (design_window.jsonl: a 1024-key window in no public list, mistral-7b's 4096);
# (2) small shapes with tied embeddings, a Qwen2 with biases, the windowed shape below
# its window (design_blind5.jsonl). Every record names its cache layers (cache_layers)
# and carries the tiny-decoder host probe. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run31.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((${WIN_S:-260} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_window.jsonl --out "$OUT/call31_window.jsonl" \
    --budget-s ${WIN_S:-260} >> "$L" 2>&1
echo "window rc=$? $(date +%T)" >> "$L"
timeout $((${BLIND_S:-220} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_blind5.jsonl --out "$OUT/call31_blind5.jsonl" \
    --budget-s ${BLIND_S:-220} >> "$L" 2>&1
echo "blind5 rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 30
