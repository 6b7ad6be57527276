#!/usr/bin/env bash
# Device call 38 (nvidia-h200), session 9: the kernel census with durations under hf-static
# (a compiled decode step) of three more shapes at batch 16, prompt 512: how much of a
# step's kernel time inductor's fused pointwise kernels take against the eager norms, rope,
# residuals and activation piep prices (call 37 found 2.3 us of RMSNorm a layer for the 1B
# at batch 12, where piep's eager kernels take ~38 us). Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run38.log"
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout ${CENSUS_S:-300} python3 -m piep.sampling.census --models llama-3-8b qwen2.5-7b \
    piep-unlisted-hd64 --engines hf-static --batch 16 --prompt-len 512 --gen-len 9 \
    --out "$OUT/census_static.jsonl" >> "$L" 2>&1
echo "census rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E "rc=|us/layer|Error" "$L" | tail -n 10
