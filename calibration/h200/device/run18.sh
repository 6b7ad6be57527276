#!/usr/bin/env bash
# Device call 18 (nvidia-h200), session 4: five request traces (light, medium, burst,
# backlog, night: calibration/h200/engines/hf-cb/traces, python -m piep.sampling.design
# traces) replayed in real time against transformers' continuous batching (hf-cb) on
# llama-3-8b, one GPU, default ContinuousBatchingConfig. Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run18.log"
T=calibration/h200/engines/hf-cb/traces
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout ${LIMIT_S:-250} python3 -m piep measure --engine hf-cb --model llama-3-8b \
    --trace $T/night.jsonl $T/burst.jsonl $T/light.jsonl $T/medium.jsonl $T/backlog.jsonl \
    --out "$OUT/hf_cb.jsonl" >> "$L" 2>&1
echo "rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E "requests,|Error|rc=" "$L" | tail -n 20
