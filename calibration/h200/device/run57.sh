#!/usr/bin/env bash
# Device call 57 (nvidia-h200), session 17 (issue 33): piep's default workload
# (llama-2-7b, batch 1, prompt 512) is flagged out_of_range: its attention has no module
# sample of 32 query and 32 KV heads near batch 1 (the nearest, 36/12 heads at batch 2).
# (1) attention module samples drawn from llama-2-7b's and llama-2-13b's trees at tp 1 and
# 2 (seed 61, 16 per phase x2: prefill graph, decode graph and eager)
#     -> modules_mha_s61.jsonl;
# (2) the reference runner on design_mha.jsonl (MHA models at small batches, the default
# workload first), predicted before this call (e2e/predictions_mha.jsonl)
#     -> e2e_s57_mha.jsonl.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run57.log"
END=$(( $(date +%s) + ${TOTAL_S:-560} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
timeout $((${E2E_S:-230} + 40)) python3 -m piep measure \
    --grid calibration/h200/e2e/design_mha.jsonl --out "$OUT/e2e_s57_mha.jsonl" \
    --budget-s ${E2E_S:-230} >> "$L" 2>&1
echo "e2e rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 20 ))
timeout $((B + 15)) python3 -m piep calibrate modules --kinds attention \
    --models llama-2-7b llama-2-13b --tp 1 2 --seed 61 --per-kind 16 --repeat-every 1000 \
    --out "$OUT/modules_mha_s61.jsonl" --budget-s $B >> "$L" 2>&1
echo "modules rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
