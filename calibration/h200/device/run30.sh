#!/usr/bin/env bash
# Device call 30 (nvidia-h200), prepared in session 7, not run yet: (1) hf-eager's six
# replicate runs measured again, now with the tiny-decoder host probe beside every window
# (host_probes[].tiny_decode_step_s): does it track the step time better than the launch
# probe? (compare with benchmarks/engines_accuracy.py's replicate table and
# piep/predict/train.py HOST_PROBE); (2) the two hf-static runs of blind set 4 that call
# 29's limit cut (piep-unlisted-20b; their blind predictions are committed in
# engines/blind_predictions4.jsonl). Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run30.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((${REPL_S:-170} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_replicates.jsonl --out "$OUT/call30_replicates.jsonl" \
    --budget-s ${REPL_S:-170} >> "$L" 2>&1
echo "hf-eager rc=$? $(date +%T)" >> "$L"
# call 29's two measured hf-static rows are skipped (the grid resumes from them)
cp $E/hf-static/raw/call29_blind4.jsonl "$OUT/call30_blind4.jsonl"
timeout $((${STATIC_S:-300} + 40)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind4.jsonl --out "$OUT/call30_blind4.jsonl" \
    --budget-s ${STATIC_S:-300} >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
