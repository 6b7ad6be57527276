#!/usr/bin/env bash
# Device call 81 (nvidia-h100-x1): a diagnosis on an H100, nothing here enters the H200's
# calibration (calibration/h100/README.md). Session 34, issue 53.
# Run as `bash calibration/h100/device/run81.sh`.
# (1) benchmarks/paged_attention_ab.py: hf-cb's packed attention under its additive mask
#     beside the unmasked SDPA of the same tensors and, for decoding iterations, beside
#     each request's query over its own keys in one batched call (how the `attention`
#     module samples ran it), at 16, 24, 32 and 48 heads of 128 and 32 heads of 64: does
#     the masked kernel's cost follow queries x keys, the heads, or neither
#     -> paged_attention_ab_s81.jsonl;
# (2) the module sampler's `sdpa_paged` and `moe_mask` ops on a CUDA card for the first
#     time (planned calls 77 and 78 sample them on the H200), a few shapes each
#     -> modules_smoke_s81.jsonl (a check that they run; not a calibration).
# Read-only on the GPU: nothing here sets a clock or a limit.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
L="$OUT/run81.log"
echo "== start $(date +%T) $(nvidia-smi --query-gpu=name --format=csv,noheader)" >> "$L"
for h in 32 24 16 48; do
    timeout 80 python3 benchmarks/paged_attention_ab.py --heads $h --head-dim 128 --reps 10 \
        --out "$OUT/paged_attention_ab_s81.jsonl" >> "$L" 2>&1
    echo "ab heads $h rc=$? $(date +%T)" >> "$L"
done
timeout 60 python3 benchmarks/paged_attention_ab.py --heads 32 --head-dim 64 --reps 10 \
    --out "$OUT/paged_attention_ab_s81.jsonl" >> "$L" 2>&1
echo "ab hd64 rc=$? $(date +%T)" >> "$L"
timeout 90 python3 -m piep calibrate modules --kinds sdpa_paged moe_mask --modes graph \
    --models calibration/h200/moe/configs/qwen3-30b-a3b-shape.json --seed 81 --per-kind 3 \
    --repeat-every 1000 --out "$OUT/modules_smoke_s81.jsonl" --budget-s 60 >> "$L" 2>&1
echo "smoke rc=$? $(date +%T)" >> "$L"
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E "rc=|Error|x[0-9]" "$L" | tail -n 40
