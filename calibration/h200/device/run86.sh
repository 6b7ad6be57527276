#!/usr/bin/env bash
# Planned in session 37; run in session 42 after call 85, which ran design 6: (3) is
# skipped here.
# Device call 86 (nvidia-h200), session 37 (issue 52), after call 85 on the same machine.
# Run as `PIEP_GIT_COMMIT=<commit> bash calibration/h200/device/run86.sh`; read-only.
# (1) the decode-step experts (`experts_batched`): a new draw over the seven MoE shapes
#     before design 5 (seed 95) -> modules_moe_decode_s86.jsonl;
# (2) a kernel census of gpt-oss-20b's and DeepSeek-V2-Lite's shapes on the H200 (call
#     87's ran on an H100), batch 8, prompt 512 -> census_moe_s86.jsonl;
# (3) transformers generate(), eager, on two MoE families no run has had (session 40:
#     design_eager6.jsonl, GLM-4.5-Air cut to 12 layers and ERNIE 4.5 21B-A3B's shape),
#     whose blind predictions were committed before this call (predictions_blind6.jsonl)
#     -> moe_s86_eager.jsonl; then, with what time is left, (2)'s census.
# Session 41 added three families priced from their code alone (Phi-3.5-MoE, MiniMax-M2,
# Hunyuan-A13B, cut to 6-8 layers) to (2)'s census.
# (Session 40 put (3) before (2) and dropped an hf-cb replay of DeepSeek-V2-Lite's shape;
# call 85 runs design 6 too: where it has, skip (3) here.)
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run86.log"
M=calibration/h200/moe/configs
END=$(( $(date +%s) + ${TOTAL_S:-560} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid --format=csv,noheader >> "$L"
OLD7="$M/mixtral-8x7b-shape.json $M/piep-unlisted-moe.json $M/qwen2-moe-a2.7b-shape.json"
OLD7="$OLD7 $M/qwen3-30b-a3b-shape.json $M/gpt-oss-20b-shape.json $M/olmoe-1b-7b-shape.json"
OLD7="$OLD7 $M/piep-llama4-scout-20l.json"
timeout 125 python3 -m piep calibrate modules --kinds experts_batched --modes graph \
    --models $OLD7 --seed 95 --per-kind 28 --repeat-every 1000 \
    --out "$OUT/modules_moe_decode_s86.jsonl" --budget-s 110 >> "$L" 2>&1
echo "experts_batched rc=$? $(date +%T) left $(left) s" >> "$L"
timeout $(( $(left) - 5 )) python3 -m piep.sampling.census \
    --models $M/gpt-oss-20b-shape.json $M/deepseek-v2-lite-shape.json \
    $M/piep-phi35-moe-8l.json $M/piep-minimax-m2-6l.json $M/piep-hunyuan-a13b-6l.json \
    --batch 8 --prompt-len 512 --gen-len 9 --out "$OUT/census_moe_s86.jsonl" >> "$L" 2>&1
echo "census rc=$? $(date +%T) left $(left) s" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|samples|^piep:" "$L" | tail -n 30
