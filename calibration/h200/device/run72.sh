#!/usr/bin/env bash
# Device call 72 (nvidia-h200), session 29 (issues 49 and 52):
# `bash calibration/h200/device/run72.sh` with PIEP_GIT_COMMIT set:
# (1) module samples of generate()'s decode-step experts (`experts_batched`: transformers
#     5.x switches a mixture of experts to batched_mm for decode on a GPU, gathering each
#     (token, expert) pair's weights; read in generation/utils.py `_optimize_model_for_decode`,
#     which explains call 71's Mixtral steps growing with the batch), from the trees of
#     calibration/h200/moe/configs -> modules_moe_decode_s72.jsonl;
# (2) module samples of row-wise FP8 projections (`fp8_linear`: piep.sampling.fp8, dynamic
#     per-token activations and torch._scaled_mm) drawn from the shipped dense models'
#     trees in FP8 -> modules_fp8_s72.jsonl;
# (3) transformers generate(), eager, on FP8 shapes (calibration/h200/fp8/design_eager.jsonl:
#     the layers' projections built as row-wise FP8 from random weights) -> fp8_s72_eager.jsonl;
# (4) a continuous-batching replay (hf-cb) of the tiny trace on the Qwen3-30B-A3B shape
#     -> moe_s72_cb.jsonl.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run72.log"
M=calibration/h200/moe
END=$(( $(date +%s) + ${TOTAL_S:-540} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout 100 python3 -m piep calibrate modules --kinds experts_batched --modes graph \
    --models $M/configs/*.json --seed 92 --per-kind 20 --repeat-every 1000 \
    --out "$OUT/modules_moe_decode_s72.jsonl" --budget-s 80 >> "$L" 2>&1
echo "moe modules rc=$? $(date +%T) left $(left) s" >> "$L"
timeout 110 python3 -m piep calibrate modules --kinds fp8_linear --modes graph \
    --seed 93 --per-kind 24 --repeat-every 1000 \
    --out "$OUT/modules_fp8_s72.jsonl" --budget-s 90 >> "$L" 2>&1
echo "fp8 modules rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 130 ))
timeout $((B + 20)) python3 -m piep measure --grid calibration/h200/fp8/design_eager.jsonl \
    --out "$OUT/fp8_s72_eager.jsonl" --budget-s $B >> "$L" 2>&1
echo "fp8 eager rc=$? $(date +%T) left $(left) s" >> "$L"
timeout $(( $(left) - 5 )) python3 -m piep measure --engine hf-cb \
    --model $M/configs/qwen3-30b-a3b-shape.json \
    --trace calibration/h200/engines/hf-cb/traces/tiny.jsonl \
    --out "$OUT/moe_s72_cb.jsonl" >> "$L" 2>&1
echo "moe cb rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|samples|^piep:" "$L" | tail -n 40
