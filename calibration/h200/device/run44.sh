#!/usr/bin/env bash
# Device call 44 (nvidia-h200), session 11: blind set 12 (design_blind12.jsonl; predictions
# in engines/blind_predictions12.jsonl by the predictor that holds each phase under the
# board's power limit, and blind_predictions12_unheld.jsonl by the code before it, both
# committed before this call): prefills of 0.3-3 s whose kernels add up to more than the
# 700 W limit, under hf-eager on 5 shapes (one in no public list) and under hf-static on the
# unlisted one; then set 11's hf-static row that call 43 could not reach (mistral-small-24b,
# resumed: the measured row is copied in first and dropped after). Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run44.log"
E=calibration/h200/engines
END=$(( $(date +%s) + ${TOTAL_S:-575} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((${EAGER_S:-240} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_blind12.jsonl --out "$OUT/call44_blind12.jsonl" \
    --budget-s ${EAGER_S:-240} >> "$L" 2>&1
echo "hf-eager rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) < ${STATIC12_S:-110} ? $(left) - 15 : ${STATIC12_S:-110} ))
timeout $((B + 15)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind12.jsonl --out "$OUT/call44_static_blind12.jsonl" \
    --budget-s $B >> "$L" 2>&1
echo "hf-static set 12 rc=$? $(date +%T) left $(left) s" >> "$L"
cp $E/hf-static/raw/call43_blind11.jsonl "$OUT/call44_static_blind11.jsonl"
B=$(( $(left) - 10 ))
timeout $((B + 5)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind11.jsonl --out "$OUT/call44_static_blind11.jsonl" \
    --budget-s $B >> "$L" 2>&1
echo "hf-static set 11 rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
