#!/usr/bin/env bash
# Device call 86 (nvidia-h200), session 37 (issue 52), after call 85 on the same machine.
# Run as `PIEP_GIT_COMMIT=<commit> bash calibration/h200/device/run86.sh`; read-only.
# (1) Llama 4's experts (`experts_bmm`: one torch.bmm over every expert) drawn from the
#     20-layer Scout shape's trees -> modules_llama4_bmm_s86.jsonl;
# (2) gpt-oss's eager attention with sinks, whole (`sinks_attention`: call 87's H100
#     census found its passes over rows of keys + 1 several times slower than the tree's
#     passes over aligned rows), drawn from gpt-oss-20b's trees -> modules_sinks_s86.jsonl;
# (3) an hf-cb replay of the tiny trace on DeepSeek-V2-Lite's shape (multi-head latent
#     attention under continuous batching; no fit reads it) -> cb_s86_tiny.jsonl.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run86.log"
M=calibration/h200/moe/configs
END=$(( $(date +%s) + ${TOTAL_S:-560} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid --format=csv,noheader >> "$L"
timeout 170 python3 -m piep calibrate modules --kinds experts_bmm --modes graph \
    --models $M/piep-llama4-scout-20l.json --seed 96 --per-kind 20 --repeat-every 1000 \
    --out "$OUT/modules_llama4_bmm_s86.jsonl" --budget-s 150 >> "$L" 2>&1
echo "bmm rc=$? $(date +%T) left $(left) s" >> "$L"
timeout 150 python3 -m piep calibrate modules --kinds sinks_attention --modes graph \
    --models $M/gpt-oss-20b-shape.json --seed 98 --per-kind 24 --repeat-every 1000 \
    --out "$OUT/modules_sinks_s86.jsonl" --budget-s 130 >> "$L" 2>&1
echo "sinks rc=$? $(date +%T) left $(left) s" >> "$L"
timeout $(( $(left) - 5 )) python3 -m piep measure --engine hf-cb \
    --model $M/deepseek-v2-lite-shape.json --trace calibration/h200/engines/hf-cb/traces/tiny.jsonl \
    --out "$OUT/cb_s86_tiny.jsonl" >> "$L" 2>&1
echo "cb tiny rc=$? $(date +%T) left $(left) s" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|samples|^piep:" "$L" | tail -n 30
