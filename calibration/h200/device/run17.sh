#!/usr/bin/env bash
# Device call 17 (nvidia-h200), session 4: the blind test of the engine profiles. Models
# and shapes none of the engine runs had (design_blind.jsonl of hf-static and hf-eager),
# predicted before this call by the committed code (engines/blind_predictions.jsonl,
# benchmarks/engines_blind.py --predict). Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run17.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
run() { CUDA_VISIBLE_DEVICES=0 timeout $(($3 + 40)) python3 -m piep measure --engine $1 \
    --grid $E/$1/design_blind.jsonl --out "$OUT/$2" --budget-s "$3" >> "$L" 2>&1
  echo "$1 rc=$?" >> "$L"; }
run hf-static static_blind.jsonl ${STATIC_S:-230}
run hf-eager eager_blind.jsonl ${EAGER_S:-220}
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 40
