#!/usr/bin/env bash
# Device call 58 (nvidia-h200), session 17 (issue 33): how much boards differ. Call 57's
# board read 10-13 % less decode energy than predicted at small batches, time within 2 %.
# (1) the reference runner on design_boards.jsonl: configurations already measured on the
#     training boards, and the default workload -> e2e_s58_boards.jsonl;
# (2) the repeat-check module shapes (both shards; measured before on boards ff30712c and
#     55e8be14), two passes, 1 s windows -> repeat_boards_s58.jsonl.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run58.log"
END=$(( $(date +%s) + ${TOTAL_S:-420} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
timeout $((${E2E_S:-200} + 40)) python3 -m piep measure \
    --grid calibration/h200/e2e/design_boards.jsonl --out "$OUT/e2e_s58_boards.jsonl" \
    --budget-s ${E2E_S:-200} >> "$L" 2>&1
echo "e2e rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 20 ))
timeout $((B + 15)) python3 -m piep calibrate repeat --min-window-s 1.0 \
    --out "$OUT/repeat_boards_s58.jsonl" --budget-s $B >> "$L" 2>&1
echo "repeat rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
