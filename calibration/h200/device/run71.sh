#!/usr/bin/env bash
# Device call 71 (nvidia-h200), planned in session 27, run in session 29 (issue 52):
# `bash calibration/h200/device/run71.sh` with PIEP_GIT_COMMIT set:
# (1) module samples of what a mixture of experts runs (the router's GEMM, the routing's
#     softmax and top-k, the copies of hidden states in expert order, the experts'
#     grouped GEMMs: torch._grouped_mm over the experts reached), drawn from the trees of
#     calibration/h200/moe/configs, both modes -> modules_moe_s71.jsonl;
# (2) transformers generate(), eager, on the MoE design (calibration/h200/moe/
#     design_eager.jsonl: 4 shapes x 3 workloads; random weights route near-uniformly, as
#     piep assumes) -> moe_s71_eager.jsonl.
# Before it: `python benchmarks/heldout_accuracy.py moe --predict` (blind predictions, committed;
# After it: copy the records to calibration/h200/moe/raw/, `python benchmarks/
# heldout_accuracy.py moe` (blind vs measured); then `piep train --add-kinds` (1)).
# Read-only on the GPU. Mixtral 8x7B's bf16 weights take 87 GiB of the H200's 140.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run71.log"
M=calibration/h200/moe
END=$(( $(date +%s) + ${TOTAL_S:-560} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((${MOD_S:-150} + 20)) python3 -m piep calibrate modules \
    --kinds router routing moe_copy experts_gate_up experts_down --modes graph eager \
    --models $M/configs/*.json --seed 91 --per-kind 12 --repeat-every 1000 \
    --out "$OUT/modules_moe_s71.jsonl" --budget-s ${MOD_S:-150} >> "$L" 2>&1
echo "modules rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 30 ))
timeout $((B + 25)) python3 -m piep measure --grid $M/design_eager.jsonl \
    --out "$OUT/moe_s71_eager.jsonl" --budget-s $B >> "$L" 2>&1
echo "eager rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|samples" "$L" | tail -n 30
