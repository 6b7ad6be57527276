#!/usr/bin/env bash
# Device call 20 (nvidia-h200), session 5: the four new load levels (low, surge, saturated,
# mid: calibration/h200/engines/hf-cb/traces, python -m piep.sampling.design traces)
# replayed in real time against transformers' continuous batching (hf-cb) on llama-3-8b
# (new load levels of the shape of call 18) and llama-2-13b (MHA, 40 layers), then night and
# medium of call 18 again on llama-3-8b (repeat spread). One GPU, default
# ContinuousBatchingConfig, per-iteration host timestamps. Predicted before the run:
# calibration/h200/engines/hf-cb/predictions_blind.jsonl.
# Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run20.log"
T=calibration/h200/engines/hf-cb/traces
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
for m in llama-3-8b llama-2-13b; do
    name=$(basename "$m" .json)
    echo "== $name $(date +%T)" >> "$L"
    timeout ${LIMIT_S:-185} python3 -m piep measure --engine hf-cb --model "$m" \
        --trace $T/low.jsonl $T/surge.jsonl $T/saturated.jsonl $T/mid.jsonl \
        --out "$OUT/hf_cb_$name.jsonl" >> "$L" 2>&1
    echo "rc=$? == $name done $(date +%T)" >> "$L"
done
echo "== repeat $(date +%T)" >> "$L"
timeout 90 python3 -m piep measure --engine hf-cb --model llama-3-8b \
    --trace $T/night.jsonl $T/medium.jsonl --out "$OUT/hf_cb_repeat_llama-3-8b.jsonl" >> "$L" 2>&1
echo "rc=$? == repeat done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E "^piep:|Error|rc=" "$L" | tail -n 30
