#!/usr/bin/env bash
# Device call 51 (nvidia-h200), session 13: is serving blind set 3's miss (call 49: every
# replay 13-30 % under in energy, 20-38 % in time; host-bound iterations 1.3-2.0x slower
# than predicted) the host or the new shapes and traces? On one host: an old shape on an
# old and a new trace (llama-3-8b: mid, fitted; rag, call 49's), a new shape on both
# (piep-unlisted-kv2), each replay with its host probe; then blind set 14's worst and best
# hf-eager runs measured again on this host (design_replicates4.jsonl). Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run51.log"
E=calibration/h200/engines
T=$E/hf-cb/traces
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
for m in llama-3-8b $E/hf-cb/configs/piep-unlisted-kv2.json; do
    name=$(basename "$m" .json)
    echo "== $name $(date +%T)" >> "$L"
    timeout ${LIMIT_S:-150} python3 -m piep measure --engine hf-cb --model "$m" \
        --trace $T/mid.jsonl $T/rag.jsonl --out "$OUT/call51_$name.jsonl" >> "$L" 2>&1
    echo "rc=$? == $name done $(date +%T)" >> "$L"
done
timeout ${EAGER_S:-200} python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_replicates4.jsonl --out "$OUT/call51_replicates4.jsonl" \
    --budget-s $(( ${EAGER_S:-200} - 20 )) >> "$L" 2>&1
echo "hf-eager rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E "^piep:|Error|rc=" "$L" | tail -n 20
