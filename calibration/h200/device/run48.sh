#!/usr/bin/env bash
# Device call 48 (nvidia-h200), session 12: two of call 47's hf-static replicates
# (design_replicates3.jsonl) on another board, with the GPU probe: does the probe move with
# the board's decode power? Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run48.log"
E=calibration/h200/engines
B=${STATIC_S:-190}
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit,temperature.gpu --format=csv >> "$L" 2>&1
timeout $((B + 10)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_replicates3.jsonl --out "$OUT/call48_replicates3.jsonl" \
    --budget-s $B >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
