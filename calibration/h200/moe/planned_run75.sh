#!/usr/bin/env bash
# Device call 75 (nvidia-h200), PLANNED in session 29, not yet run (issue 52); to run it,
# move it to calibration/h200/device/run75.sh and `run` it with PIEP_GIT_COMMIT set.
# transformers generate(), eager, on the MoE families priced since session 29 and never
# measured (design_eager2.jsonl: gpt-oss-20b's shape in bf16, OLMoE-1B-7B's shape, and
# Llama 4 Scout's layer over 20 layers, our own, so that one H200 holds it; three
# workloads each) -> moe_s75_eager.jsonl. Predicted before the call:
# predictions_blind2.jsonl (`python benchmarks/heldout_accuracy.py moe --predict
# design_eager2.jsonl`, commit in the file). After it: copy the records to raw/ and
# `python benchmarks/heldout_accuracy.py moe --write`.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run75.log"
M=calibration/h200/moe
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
B=${TOTAL_S:-540}
timeout $((B + 20)) python3 -m piep measure --grid $M/design_eager2.jsonl \
    --out "$OUT/moe_s75_eager.jsonl" --budget-s $B >> "$L" 2>&1
echo "eager rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|^piep:" "$L" | tail -n 30
