#!/usr/bin/env bash
# Device call 29 (nvidia-h200), session 7: the fourth blind test of the engine profiles
# (design_blind4.jsonl of hf-eager and hf-static: head dim 112 and a 20B shape in no public
# list; new batch/prompt/gen draws of llama-3-8b and mistral-7b under hf-eager), predicted
# by the profiles refitted after set 3 with hf-eager's host queueing ahead of the GPU
# (engines/blind_predictions4.jsonl, committed before this call). Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run29.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
run() { timeout $(($2 + $3)) python3 -m piep measure --engine $1 \
    --grid $E/$1/design_blind4.jsonl --out "$OUT/$1_blind4.jsonl" --budget-s "$2" >> "$L" 2>&1
  echo "$1 rc=$? $(date +%T)" >> "$L"; }
run hf-eager ${EAGER_S:-290} 30
run hf-static ${STATIC_S:-220} 40
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 30
