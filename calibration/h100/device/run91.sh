#!/usr/bin/env bash
# Device call 91 (nvidia-h100-x1), session 43: `piep calibrate gpu` on an H100 SXM, the
# quick recipe from scratch under the name h100-quick (9 planned minutes, one call): the
# first measured calibration of a GPU other than the H200, and H100 runs of the shipped
# models against which piep's spec-sheet H100 answers (--allow-uncalibrated) are scored.
# Read-only on the GPU. Run as
# `PIEP_GIT_COMMIT=<commit> bash calibration/h100/device/run91.sh`.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
export PIEP_DATA_DIR="$OUT/data"
L="$OUT/run91.log"
B=${BUDGET_S:-500}
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT budget $B s" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
mkdir -p "$PIEP_DATA_DIR/calibration"
echo "calibrate start $(date +%s)" >> "$L"
timeout $((B + 60)) python3 -m piep calibrate gpu --name h100-quick --minutes 9 \
    --budget-s "$B" --json > "$OUT/calibrate_gpu.json" 2>> "$L"
echo "calibrate rc=$? end $(date +%s) $(date +%T)" >> "$L"
# the folder is too deep to come back as files: one archive
tar czf "$OUT/h100-quick.tgz" -C "$PIEP_DATA_DIR/calibration" h100-quick
cat "$OUT/calibrate_gpu.json" >> "$L"
grep -vE "^\[" "$L" | tail -n 30
