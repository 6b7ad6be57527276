#!/usr/bin/env bash
# Device call 26 (nvidia-h200), session 6: the rest of call 25's blind design (its budget
# measured 9 of 12 hf-eager and 2 of 4 hf-static configurations; predicted at d6e49a9
# before call 25). The grids resume from call 25's records; run twice, the second time with
# EAGER_S=60 STATIC_S=1 for the last hf-eager configuration (log appended). Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run26.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
run() { cp $E/$1/raw/call25_blind2.jsonl "$OUT/$2"
  timeout $(($3 + 30)) python3 -m piep measure --engine $1 \
    --grid $E/$1/design_blind2.jsonl --out "$OUT/$2" --budget-s "$3" >> "$L" 2>&1
  echo "$1 rc=$? $(date +%T)" >> "$L"; }
run hf-eager eager_blind2.jsonl ${EAGER_S:-110}
run hf-static static_blind2.jsonl ${STATIC_S:-330}
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 12
