#!/usr/bin/env bash
# Device call 60 (nvidia-h200), session 17 (issue 35): a quick one-GPU calibration from
# scratch, to check the simulated recipe of reports/calibration_cost.md (a 15-minute recipe
# of module samples and single-GPU runs): (1) module samples, a fresh stratified draw
# (seed 71, 8 per kind and phase, attention 2x) -> modules_quick_s71.jsonl; (2) the
# reference runner on design_quick2.jsonl (single-GPU runs of the shipped models at random)
# -> e2e_s60_quick.jsonl. Timestamps in the log give the device minutes each took.
# (a second draw, for the spread between quick calibrations; also pooled with call 59)
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run60.log"
END=$(( $(date +%s) + ${TOTAL_S:-330} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
echo "modules start $(date +%s)" >> "$L"
timeout $((${MOD_S:-160} + 20)) python3 -m piep calibrate modules --seed 71 --per-kind 8 \
    --repeat-every 1000 --out "$OUT/modules_quick_s71.jsonl" --budget-s ${MOD_S:-160} >> "$L" 2>&1
echo "modules rc=$? end $(date +%s) $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 25 ))
echo "e2e start $(date +%s)" >> "$L"
timeout $((B + 20)) python3 -m piep measure --grid calibration/h200/e2e/design_quick2.jsonl \
    --out "$OUT/e2e_s60_quick.jsonl" --budget-s $B >> "$L" 2>&1
echo "e2e rc=$? end $(date +%s) == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|samples" "$L" | tail -n 40
