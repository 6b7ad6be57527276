#!/usr/bin/env bash
# Device call 41 (nvidia-h200), session 10, on call 40's machine: (1) blind set 9's
# hf-static run that call 40's budget cut (piep-unlisted-deep64, batch 16; resumed: call
# 40's runs are skipped and stripped from the committed file); (2) the kernel census with
# durations of the 64-layer shape at batch 4 under hf-static (the fused pointwise kernels
# at a width of 2048). Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run41.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
cp $E/hf-static/raw/call40_layers.jsonl "$OUT/call41_layers.jsonl"
timeout ${STATIC_S:-200} python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_layers.jsonl --out "$OUT/call41_layers.jsonl" \
    --budget-s 150 >> "$L" 2>&1
echo "hf-static rc=$? $(date +%T)" >> "$L"
timeout ${CENSUS_S:-300} python3 -m piep.sampling.census --models piep-unlisted-deep64 \
    --engines hf-static --batch 4 --prompt-len 200 --gen-len 33 \
    --out "$OUT/census_deep64.jsonl" >> "$L" 2>&1
echo "census rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|us/layer" "$L" | tail -n 20
