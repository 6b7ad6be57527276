#!/usr/bin/env bash
# Device calls 61-63 (nvidia-h200), session 18 (issue 35): `piep calibrate gpu` on a real
# board, the 15-minute recipe from scratch under the name h200-quick15, in two calls: the
# first stops at its budget, the second resumes from the folder the first left (committed
# as calibration/h200/quick15/, copied back into the user data directory before it runs).
# The first try (7.2 device minutes, 464 tasks) came back without its folder (too deep for
# the device tool's return): the measurement was redone from scratch.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
export PIEP_DATA_DIR="$OUT/data"
L="$OUT/run61.log"
B=${BUDGET_S:-450}
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT budget $B s" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
mkdir -p "$PIEP_DATA_DIR/calibration"
if [ -d calibration/h200/quick15/h200-quick15 ]; then  # resume what an earlier call left
    cp -r calibration/h200/quick15/h200-quick15 "$PIEP_DATA_DIR/calibration/"
    echo "resuming: $(wc -l < "$PIEP_DATA_DIR/calibration/h200-quick15/modules/quick.jsonl") module rows" >> "$L"
fi
echo "calibrate start $(date +%s)" >> "$L"
timeout $((B + 90)) python3 -m piep calibrate gpu --name h200-quick15 --minutes 15 \
    --budget-s "$B" --json > "$OUT/calibrate_gpu.json" 2>> "$L"
echo "calibrate rc=$? end $(date +%s) $(date +%T)" >> "$L"
# the folder is too deep to come back as files: one archive (call 61's first try lost it)
tar czf "$OUT/h200-quick15.tgz" -C "$PIEP_DATA_DIR/calibration" h200-quick15
cat "$OUT/calibrate_gpu.json" >> "$L"
grep -vE "^\[" "$L" | tail -n 30
