#!/usr/bin/env bash
# Device call 49 (nvidia-h200), session 13: serving blind set 3. Three trace files no replay
# had (chat, rag, flood: calibration/h200/engines/hf-cb/traces, python -m
# piep.sampling.design traces) replayed in real time against transformers' continuous
# batching (hf-cb) on three shapes no replay had: piep-unlisted-mha5b (multi-head
# attention), piep-unlisted-kv2 (12 query heads per K/V head; both in no public list) and
# mistral-small-24b. Predicted before the run by the hf-cb profile fitted on calls 18-21:
# calibration/h200/engines/hf-cb/predictions_blind3.jsonl. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run49.log"
C=calibration/h200/engines/hf-cb
T=$C/traces
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
for m in $C/configs/piep-unlisted-kv2.json $C/configs/piep-unlisted-mha5b.json \
         mistral-small-24b; do
    name=$(basename "$m" .json)
    echo "== $name $(date +%T)" >> "$L"
    timeout ${LIMIT_S:-185} python3 -m piep measure --engine hf-cb --model "$m" \
        --trace $T/chat.jsonl $T/rag.jsonl $T/flood.jsonl \
        --out "$OUT/call49_$name.jsonl" >> "$L" 2>&1
    echo "rc=$? == $name done $(date +%T)" >> "$L"
done
wc -l "$OUT"/*.jsonl; grep -E "^piep:|Error|rc=" "$L" | tail -n 30
