#!/usr/bin/env bash
# Device call 46 (nvidia-h200), session 12: the rest of blind set 13 (call 45 ran out of time: resumed, the measured rows copied in first and dropped after) (design_blind13.jsonl; predictions
# in engines/blind_predictions13.jsonl by the profiles refitted on call 44, committed before
# this call): batches of 96-128, generations of 1000-1200 tokens and a grouped-query ratio of
# 12 in no public list, under hf-eager (4 runs) and hf-static (3 runs, a compile each).
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run46.log"
E=calibration/h200/engines
END=$(( $(date +%s) + ${TOTAL_S:-400} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
cp $E/hf-eager/raw/call45_blind13.jsonl "$OUT/call46_blind13.jsonl"
cp $E/hf-static/raw/call45_blind13.jsonl "$OUT/call46_static_blind13.jsonl"
timeout $((${EAGER_S:-100} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_blind13.jsonl --out "$OUT/call46_blind13.jsonl" \
    --budget-s ${EAGER_S:-100} >> "$L" 2>&1
echo "hf-eager rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 15 ))
timeout $((B + 10)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind13.jsonl --out "$OUT/call46_static_blind13.jsonl" \
    --budget-s $B >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
