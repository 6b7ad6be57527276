#!/usr/bin/env bash
# Device call 90 (nvidia-h200), issue 52; planned in session 42, run in session 45 (no H200
# started in sessions 42-44; the same designs ran on an H100 in session 44, call 92). Run as
# `PIEP_GIT_COMMIT=<commit> bash calibration/h200/device/run90.sh`; read-only on the GPU.
# 1. transformers generate(), eager, on design 7 (calibration/h200/moe/design_eager7.jsonl:
#    Phi-3.5-MoE cut to 8 layers, MiniMax-M2 and Hunyuan-A13B cut to 6, three families
#    priced from their code alone), blind predictions committed before (predictions_blind7,
#    commit 0ce7b4f) -> moe_s90_eager.jsonl.
# 2. hf-static (compiled decode, CUDA graphs) on design_static8.jsonl: OLMoE, our own MoE
#    and Qwen3-30B-A3B shapes, the first compiled MoE runs; blind predictions committed
#    before (predictions_blind_static8.jsonl) -> moe_s90_static.jsonl. A compile that
#    fails is recorded in the log.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run90.log"
M=calibration/h200/moe
END=$(( $(date +%s) + ${TOTAL_S:-570} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
timeout 260 python3 -m piep measure --grid $M/design_eager7.jsonl \
    --out "$OUT/moe_s90_eager.jsonl" --budget-s 230 >> "$L" 2>&1
echo "eager rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 15 ))
timeout $((B + 10)) python3 -m piep measure --engine hf-static --grid $M/design_static8.jsonl \
    --out "$OUT/moe_s90_static.jsonl" --budget-s $B >> "$L" 2>&1
echo "static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
