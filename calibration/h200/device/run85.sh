#!/usr/bin/env bash
# Planned in session 37; run in session 42 (design 6, added in session 40, runs if TOTAL_S
# leaves time for it).
# Device call 85 (nvidia-h200), session 37 (issue 52). Run as
# `PIEP_GIT_COMMIT=<commit> bash calibration/h200/device/run85.sh`; read-only on the GPU.
# (1) transformers generate(), eager, on three MoE shapes no run has had
#     (calibration/h200/moe/design_eager5.jsonl: DeepSeek-V2-Lite, DeepSeek-V3 cut to 4
#     layers, Qwen3-235B-A22B cut to 12), whose blind predictions were committed before
#     this call (predictions_blind5.jsonl, commit a2214a806251) -> moe_s85_eager.jsonl;
# (2) the decode-step experts (`experts_batched`) on this board: call 72's draw again
#     (seed 92, its four shapes: the same shapes on a second board)
#     -> modules_moe_decode_s85.jsonl;
# (3) gpt-oss's eager attention with sinks, whole (`sinks_attention`: call 87's H100
#     census found its passes over rows of keys + 1 several times slower than the tree's
#     passes over aligned rows) -> modules_sinks_s85.jsonl;
# (4) Llama 4's experts (`experts_bmm`: one torch.bmm over every expert) drawn from the
#     20-layer Scout shape's trees -> modules_llama4_bmm_s85.jsonl.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run85.log"
M=calibration/h200/moe/configs
END=$(( $(date +%s) + ${TOTAL_S:-585} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
timeout 220 python3 -m piep measure --grid calibration/h200/moe/design_eager5.jsonl \
    --out "$OUT/moe_s85_eager.jsonl" --budget-s 200 >> "$L" 2>&1
echo "runs rc=$? $(date +%T) left $(left) s" >> "$L"
OLD4="$M/mixtral-8x7b-shape.json $M/piep-unlisted-moe.json $M/qwen2-moe-a2.7b-shape.json $M/qwen3-30b-a3b-shape.json"
timeout 60 python3 -m piep calibrate modules --kinds experts_batched --modes graph \
    --models $OLD4 --seed 92 --per-kind 20 --repeat-every 1000 \
    --out "$OUT/modules_moe_decode_s85.jsonl" --budget-s 50 >> "$L" 2>&1
echo "experts_batched rc=$? $(date +%T) left $(left) s" >> "$L"
if [ "$(left)" -ge 200 ]; then  # (a short call, TOTAL_S < ~500 s: design 6 waits for 86)
  timeout 190 python3 -m piep measure --grid calibration/h200/moe/design_eager6.jsonl \
      --out "$OUT/moe_s85_eager6.jsonl" --budget-s 170 >> "$L" 2>&1
  echo "runs6 rc=$? $(date +%T) left $(left) s" >> "$L"
fi
[ "$(left)" -ge 60 ] && timeout $(( ($(left) - 10) * 55 / 100 )) python3 -m piep calibrate modules \
    --kinds sinks_attention --modes graph --models $M/gpt-oss-20b-shape.json --seed 98 \
    --per-kind 20 --repeat-every 1000 --out "$OUT/modules_sinks_s85.jsonl" \
    --budget-s $(( ($(left) - 10) * 55 / 100 - 15 )) >> "$L" 2>&1
echo "sinks rc=$? $(date +%T) left $(left) s" >> "$L"
[ "$(left)" -ge 40 ] && timeout $(( $(left) - 8 )) python3 -m piep calibrate modules --kinds experts_bmm \
    --modes graph --models $M/piep-llama4-scout-20l.json --seed 96 --per-kind 16 \
    --repeat-every 1000 --out "$OUT/modules_llama4_bmm_s85.jsonl" \
    --budget-s $(( $(left) - 25 )) >> "$L" 2>&1
echo "bmm rc=$? $(date +%T) left $(left) s" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|samples|^piep:" "$L" | tail -n 40
