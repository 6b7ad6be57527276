#!/usr/bin/env bash
# Device call 28 (nvidia-h200), session 7: (1) the third blind test of hf-static
# (design_blind3.jsonl: llama-2-13b, head dim 80 in no public list), predicted before
# call 27 (engines/blind_predictions3.jsonl); (2) more module samples of transformers'
# own kernels (seed 7: the masked SDPA, the DynamicCache concatenation, the paged gather,
# repeat_kv), whose five-fold errors were 13-33 % on 23-90 samples. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run28.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((${STATIC_S:-260} + 50)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind3.jsonl --out "$OUT/call28_blind3.jsonl" \
    --budget-s ${STATIC_S:-260} >> "$L" 2>&1
echo "hf-static rc=$? $(date +%T)" >> "$L"
timeout ${MOD_LIMIT_S:-250} python3 -m piep calibrate modules --kinds sdpa_masked kv_append \
    kv_gather kv_expand --seed 7 --per-kind 40 --out "$OUT/modules_engines_s7.jsonl" \
    --budget-s ${MOD_S:-210} >> "$L" 2>&1
echo "modules rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
