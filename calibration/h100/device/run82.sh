#!/usr/bin/env bash
# Device call 82 (nvidia-h100-x1): a diagnosis on an H100, nothing here enters the H200's
# calibration (calibration/h100/README.md). Planned in session 35 (issue 53); run in
# session 37 after call 87 on the same H100, as `bash calibration/h100/device/run82.sh`
# (about a minute of GPU time).
# hf-cb's logged decoding iterations of 1e7-3e7 queries x keys (about 145 requests over
# 104k keys) run 1.14x the closed form `PackedKernel` gives them, the small ones 0.92x
# (python benchmarks/serving_iterations.py); call 81's A/B fitted that form on decoding
# iterations of at most 96 requests and 65,536 keys. Here benchmarks/paged_attention_ab.py
# at the iterations the H200 replays reached and beyond (32-512 decoding requests over
# 65,536-131,072 keys, and a prompt chunk beside 128 decoders), 32 and 24 heads of 128:
# does the masked kernel stay linear in waves x keys where its mask rows outgrow the L2
# -> paged_attention_ab_s82.jsonl.
# Read-only on the GPU: nothing here sets a clock or a limit.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
L="$OUT/run82.log"
echo "== start $(date +%T) $(nvidia-smi --query-gpu=name --format=csv,noheader)" >> "$L"
IT="32:32:131072 64:64:131072 96:96:98304 128:128:65536 128:128:131072 145:145:104400
    192:192:98304 256:256:65536 256:256:131072 384:384:98304 512:512:131072
    8:8:65536 32:32:65536 96:96:49152 129:8320:131072 129:2176:131072"
for h in 32 24; do
    timeout 120 python3 benchmarks/paged_attention_ab.py --heads $h --head-dim 128 --reps 10 \
        --iterations $IT --out "$OUT/paged_attention_ab_s82.jsonl" >> "$L" 2>&1
    echo "ab heads $h rc=$? $(date +%T)" >> "$L"
done
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; tail -n 40 "$L"
