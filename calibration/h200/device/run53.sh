#!/usr/bin/env bash
# Device calls 53 and 55 (nvidia-h200), session 14: serving blind set 4, the shapes given as
# arguments (call 53: the two in no public list; call 55: qwen2.5-32b):
#   CALL=53 bash run53.sh $C/configs/piep-unlisted-qwenhd64.json $C/configs/piep-unlisted-hd112.json
#   CALL=55 LIMIT_S=420 bash run53.sh qwen2.5-32b
# Three trace files no replay had (code, tiny, sparse: calibration/h200/engines/hf-cb/traces, python -m
# piep.sampling.design traces) replayed in real time against transformers' continuous
# batching (hf-cb) on three shapes no replay had: piep-unlisted-qwenhd64 (Qwen2 biases,
# head dim 64, 16 query heads per K/V head), piep-unlisted-hd112 (both in no public list)
# and qwen2.5-32b. Predicted before the run by the hf-cb profile fitted per host on calls
# 18-51, at the typical host and at a grid of host probes:
# calibration/h200/engines/hf-cb/predictions_blind4.jsonl. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
CALL=${CALL:-53}
L="$OUT/run$CALL.log"
C=calibration/h200/engines/hf-cb
T=$C/traces
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT: $*" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
for m in "$@"; do
    name=$(basename "$m" .json)
    echo "== $name $(date +%T)" >> "$L"
    timeout ${LIMIT_S:-185} python3 -m piep measure --engine hf-cb --model "$m" \
        --trace $T/code.jsonl $T/tiny.jsonl $T/sparse.jsonl \
        --out "$OUT/call${CALL}_$name.jsonl" >> "$L" 2>&1
    echo "rc=$? == $name done $(date +%T)" >> "$L"
done
wc -l "$OUT"/*.jsonl; grep -E "^piep:|Error|rc=" "$L" | tail -n 30
