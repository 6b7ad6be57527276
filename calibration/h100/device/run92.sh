#!/usr/bin/env bash
# Device call 92 (nvidia-h100-x1), issue 52; planned in session 43, run in session 44.
# 1. The H200's design 7 (calibration/h200/moe/design_eager7.jsonl: Phi-3.5-MoE cut to 8
#    layers, MiniMax-M2 and Hunyuan-A13B cut to 6; transformers generate(), eager) ->
#    moe_s92_eager.jsonl;
# 2. the H200's compiled design (design_static8.jsonl: OLMoE, our own MoE and Qwen3-30B-A3B
#    shapes under hf-static, CUDA graphs) -> moe_s92_static.jsonl;
# on an H100, while no H200 came. piep's spec-sheet answers for both were committed before
# the call (calibration/h100/moe/predictions_blind_h100_7.jsonl and
# predictions_blind_h100_static8.jsonl). Read-only on the GPU. Run as
# `PIEP_GIT_COMMIT=<commit> bash calibration/h100/device/run92.sh`.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run92.log"
M=calibration/h200/moe
END=$(( $(date +%s) + ${TOTAL_S:-570} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
timeout 260 python3 -m piep measure --grid $M/design_eager7.jsonl \
    --out "$OUT/moe_s92_eager.jsonl" --budget-s 230 >> "$L" 2>&1
echo "eager rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 15 ))
timeout $((B + 10)) python3 -m piep measure --engine hf-static --grid $M/design_static8.jsonl \
    --out "$OUT/moe_s92_static.jsonl" --budget-s $B >> "$L" 2>&1
echo "static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
