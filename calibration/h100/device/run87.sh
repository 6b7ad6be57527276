#!/usr/bin/env bash
# Device call 87 (nvidia-h100-x1), session 37 (issue 52): a diagnosis on an H100 while no
# H200 came (two starts failed). Nothing here enters a calibration. A kernel census of
# transformers' generate() (python -m piep.sampling.census), batch 8, prompt 512, on
# gpt-oss-20b's shape (its prefill runs 24-42 % longer than the tree prices on the H200:
# which kernels hold the time) and on DeepSeek-V2-Lite's (multi-head latent attention:
# the kernels the tree's MLA leaves stand for) -> census_moe_s87.jsonl. The kernels and
# their counts are the H200's (same image); their durations the H100's.
# Run as `PIEP_GIT_COMMIT=<commit> bash calibration/h100/device/run87.sh`. Read-only.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run87.log"
M=calibration/h200/moe/configs
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid --format=csv,noheader >> "$L"
timeout 240 python3 -m piep.sampling.census \
    --models $M/gpt-oss-20b-shape.json $M/deepseek-v2-lite-shape.json \
    --batch 8 --prompt-len 512 --gen-len 9 --out "$OUT/census_moe_s87.jsonl" >> "$L" 2>&1
echo "census rc=$? $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; tail -n 20 "$L"
