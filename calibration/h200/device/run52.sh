#!/usr/bin/env bash
# Device call 52 (nvidia-h200), session 13: the kernel census (python -m piep.sampling.census)
# of blind set 14's qwenhd64 shape under hf-eager (-29 % energy, -35 % time, measured twice:
# calls 50 and 51, 746 J both), beside qwen2.5-7b (Qwen2 biases, head dim 128) and
# piep-unlisted-hd64 (head dim 64, 8 query heads per K/V head) at its batch and prompt: what
# an eager decode step of it launches, and for how long. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run52.log"
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout ${CENSUS_S:-300} python3 -m piep.sampling.census --models piep-unlisted-qwenhd64 \
    qwen2.5-7b piep-unlisted-hd64 --batch 16 --prompt-len 600 --gen-len 33 \
    --out "$OUT/call52_census.jsonl" >> "$L" 2>&1
echo "census rc=$? == done $(date +%T)" >> "$L"
tail -n 8 "$L"
