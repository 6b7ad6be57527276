#!/usr/bin/env bash
# Device call 21 (nvidia-h200), session 5: a blind test of `piep serve`. Three trace files
# no replay had (trickle, steady, spike: calibration/h200/engines/hf-cb/traces, python -m
# piep.sampling.design traces) replayed in real time against transformers' continuous
# batching (hf-cb) on three shapes no replay had: mistral-7b (sliding-window layers),
# qwen2.5-14b (48 layers), piep-unlisted-hd64 (head dim 64, no public list). Predicted
# before the run by the profile fitted on calls 18-20:
# calibration/h200/engines/hf-cb/predictions_blind2.jsonl. Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run21.log"
T=calibration/h200/engines/hf-cb/traces
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
for m in mistral-7b calibration/h200/engines/hf-cb/configs/piep-unlisted-hd64.json qwen2.5-14b; do
    name=$(basename "$m" .json)
    echo "== $name $(date +%T)" >> "$L"
    timeout ${LIMIT_S:-170} python3 -m piep measure --engine hf-cb --model "$m" \
        --trace $T/trickle.jsonl $T/spike.jsonl $T/steady.jsonl \
        --out "$OUT/hf_cb_$name.jsonl" >> "$L" 2>&1
    echo "rc=$? == $name done $(date +%T)" >> "$L"
done
wc -l "$OUT"/*.jsonl; grep -E "^piep:|Error|rc=" "$L" | tail -n 30
