#!/usr/bin/env bash
# Device call 95 (nvidia-h200), session 47, on the machine warm after call 90:
# 1. transformers generate(), eager, on design 9 (calibration/h200/moe/design_eager9.jsonl:
#    four MoE shapes measured before at batch <= 64, now at 512-1,536 (token, expert)
#    pairs a decode step, past every module sample's 512), blind predictions committed
#    before (predictions_blind9, commit 3908afb) -> moe_s95_eager.jsonl.
# 2. The decode-step experts' table A/B of call 94 (an H100) again on the H200
#    (benchmarks/moe_kernels_ab.py --decode): does the ratio priced since
#    (module_models.BATCHED_TABLE_TIME) hold on the card whose samples it corrects? At
#    batch 8 and 32 on every design shape, 64-192 on five (as calls 94 and 97 on H100s)
#    -> experts_table_ab_s95.jsonl.
# Run as `PIEP_GIT_COMMIT=<commit> TOTAL_S=420 bash calibration/h200/device/run95.sh`;
# read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run95.log"
M=calibration/h200/moe
END=$(( $(date +%s) + ${TOTAL_S:-420} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
timeout 60 python3 benchmarks/moe_kernels_ab.py --decode --models $M/configs/*.json \
    --out "$OUT/experts_table_ab_s95.jsonl" >> "$L" 2>&1
C=$M/configs  # (and at many pairs, as call 97 on an H100)
timeout 60 python3 benchmarks/moe_kernels_ab.py --decode --batches 64,128,192 \
    --models $C/qwen3-30b-a3b-shape.json $C/olmoe-1b-7b-shape.json $C/piep-unlisted-moe.json \
    $C/deepseek-v2-lite-shape.json $C/gpt-oss-20b-shape.json \
    --out "$OUT/experts_table_ab_s95.jsonl" >> "$L" 2>&1
echo "ab rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 15 ))
timeout $((B + 10)) python3 -m piep measure --grid $M/design_eager9.jsonl \
    --out "$OUT/moe_s95_eager.jsonl" --budget-s $B >> "$L" 2>&1
echo "eager rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
