#!/usr/bin/env bash
# Device call 22 (nvidia-h200), session 5: the rest of hf-static's blind design (call 17's
# budget measured only its llama-3-8b configurations): mistral-7b and piep-unlisted-9b
# (no public list), predicted before call 17 by the profiles of commit 22f52b1
# (calibration/h200/engines/blind_predictions.jsonl; benchmarks/engines_blind.py). The
# grid resumes from call 17's records, so only the unmeasured configurations run.
# Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run22.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
cp $E/hf-static/raw/call17_blind.jsonl "$OUT/static_blind.jsonl"
timeout ${LIMIT_S:-450} python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind.jsonl --out "$OUT/static_blind.jsonl" \
    --budget-s ${BUDGET_S:-380} >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
