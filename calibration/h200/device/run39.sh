#!/usr/bin/env bash
# Device call 39 (nvidia-h200), session 9: the kernel census with durations at 33 generated
# tokens (the prefill's timing noise shared among 32 steps; calls 35-38 used 9), now with
# the kernel time outside the layers by name, under hf-eager and hf-static, of three shapes
# at the batches of calls 35, 37 and 38: what the pointwise kernels and the generation loop
# take in situ, against the isolated samples piep prices them by. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run39.log"
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
census() { timeout ${CENSUS_S:-150} python3 -m piep.sampling.census --models $1 \
    --engines hf-eager hf-static --batch $2 --prompt-len $3 --gen-len 33 \
    --out "$OUT/census_g33.jsonl" >> "$L" 2>&1
  echo "census $1 rc=$? $(date +%T)" >> "$L"; }
census mistral-7b 8 3000
census llama-3-8b 16 512
census piep-unlisted-1b 12 215
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E "rc=|us/layer|Error" "$L" | tail -n 12
