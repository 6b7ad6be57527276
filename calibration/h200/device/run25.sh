#!/usr/bin/env bash
# Device call 25 (nvidia-h200), session 6: the second blind test of the engine profiles
# (design_blind2.jsonl of hf-eager and hf-static: shapes in no public list, head dim 96,
# qwen2.5-32b and mistral-small-24b under hf-static), predicted before this call by the
# profiles refitted on the engines' kernel samples (engines/blind_predictions2.jsonl,
# `python benchmarks/engines_blind.py --predict --set 2`). hf-eager reaches 40 runs.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run25.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
run() { timeout $(($3 + 40)) python3 -m piep measure --engine $1 \
    --grid $E/$1/design_blind2.jsonl --out "$OUT/$2" --budget-s "$3" >> "$L" 2>&1
  echo "$1 rc=$? $(date +%T)" >> "$L"; }
run hf-eager eager_blind2.jsonl ${EAGER_S:-270}
run hf-static static_blind2.jsonl ${STATIC_S:-230}
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 30
