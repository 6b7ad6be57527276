#!/usr/bin/env bash
# Device call 85 (nvidia-h200), session 37 (issue 52). Run as
# `PIEP_GIT_COMMIT=<commit> bash calibration/h200/device/run85.sh`; read-only on the GPU.
# (1) transformers generate(), eager, on three MoE shapes no run has had
#     (calibration/h200/moe/design_eager5.jsonl: DeepSeek-V2-Lite, DeepSeek-V3 cut to 4
#     layers, Qwen3-235B-A22B cut to 12), whose blind predictions were committed before
#     this call (predictions_blind5.jsonl) -> moe_s85_eager.jsonl;
# (2) a kernel census of gpt-oss-20b's shape (its prefill runs 24-42 % longer than priced)
#     and of DeepSeek-V2-Lite's (multi-head latent attention), batch 8, prompt 512
#     -> census_moe_s85.jsonl;
# (3) the decode-step experts (`experts_batched`) on this board: call 72's draw again
#     (seed 92, its four shapes: the same shapes on a second board) and a new draw over
#     the seven MoE shapes before design 5 (seed 95) -> modules_moe_decode_s85.jsonl.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run85.log"
M=calibration/h200/moe/configs
END=$(( $(date +%s) + ${TOTAL_S:-585} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
timeout 320 python3 -m piep measure --grid calibration/h200/moe/design_eager5.jsonl \
    --out "$OUT/moe_s85_eager.jsonl" --budget-s 290 >> "$L" 2>&1
echo "runs rc=$? $(date +%T) left $(left) s" >> "$L"
timeout $(( $(left) - 140 )) python3 -m piep.sampling.census \
    --models $M/gpt-oss-20b-shape.json $M/deepseek-v2-lite-shape.json \
    --batch 8 --prompt-len 512 --gen-len 9 --out "$OUT/census_moe_s85.jsonl" >> "$L" 2>&1
echo "census rc=$? $(date +%T) left $(left) s" >> "$L"
OLD4="$M/mixtral-8x7b-shape.json $M/piep-unlisted-moe.json $M/qwen2-moe-a2.7b-shape.json $M/qwen3-30b-a3b-shape.json"
OLD7="$OLD4 $M/gpt-oss-20b-shape.json $M/olmoe-1b-7b-shape.json $M/piep-llama4-scout-20l.json"
timeout 60 python3 -m piep calibrate modules --kinds experts_batched --modes graph \
    --models $OLD4 --seed 92 --per-kind 20 --repeat-every 1000 \
    --out "$OUT/modules_moe_decode_s85.jsonl" --budget-s 50 >> "$L" 2>&1
echo "modules seed 92 rc=$? $(date +%T) left $(left) s" >> "$L"
timeout $(( $(left) - 5 )) python3 -m piep calibrate modules --kinds experts_batched \
    --modes graph --models $OLD7 --seed 95 --per-kind 28 --repeat-every 1000 \
    --out "$OUT/modules_moe_decode_s85.jsonl" --budget-s $(( $(left) - 20 )) >> "$L" 2>&1
echo "modules seed 95 rc=$? $(date +%T) left $(left) s" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|samples|^piep:" "$L" | tail -n 40
