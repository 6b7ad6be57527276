#!/usr/bin/env bash
# Device call 19 (nvidia-h200), session 5: the four new load levels (low, surge, saturated,
# mid: calibration/h200/engines/hf-cb/traces, python -m piep.sampling.design traces)
# replayed in real time against transformers' continuous batching (hf-cb) on three shapes
# not measured before under hf-cb: llama-2-7b (MHA), piep-unlisted-9b (no public list),
# qwen2.5-7b (GQA, biases). One GPU, default ContinuousBatchingConfig, per-iteration host
# timestamps. Predicted before the run: calibration/h200/engines/hf-cb/predictions_blind.jsonl.
# Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run19.log"
T=calibration/h200/engines/hf-cb/traces
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
for m in llama-2-7b calibration/h200/engines/hf-cb/configs/piep-unlisted-9b.json qwen2.5-7b; do
    name=$(basename "$m" .json)
    echo "== $name $(date +%T)" >> "$L"
    timeout ${LIMIT_S:-185} python3 -m piep measure --engine hf-cb --model "$m" \
        --trace $T/low.jsonl $T/surge.jsonl $T/saturated.jsonl $T/mid.jsonl \
        --out "$OUT/hf_cb_$name.jsonl" >> "$L" 2>&1
    echo "rc=$? == $name done $(date +%T)" >> "$L"
done
wc -l "$OUT"/*.jsonl; grep -E "^piep:|Error|rc=" "$L" | tail -n 30
