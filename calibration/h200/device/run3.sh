#!/usr/bin/env bash
# Device call 3 (nvidia-h200-x2, one GPU used): in-situ kernel times per module kind in
# real eager prefill/decode (torch.profiler), to check the isolated module samples.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
CUDA_VISIBLE_DEVICES=0 python3 -m piep calibrate insitu --out "$OUT/insitu.jsonl" > "$OUT/insitu.log" 2>&1
echo rc=$?; tail -n 5 "$OUT/insitu.log"; wc -l "$OUT/insitu.jsonl"
