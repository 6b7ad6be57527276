#!/usr/bin/env bash
# Device call 50 (nvidia-h200), session 13: blind set 14 (design_blind14.jsonl; predictions
# in engines/blind_predictions14.jsonl by the profiles fitted on calls 15-48, committed before
# this call): a Qwen2-type shape in no public list (head dim 64, 16 query heads per K/V
# head, 152k vocabulary) under both engines, qwen2.5-32b b16, a 7000-token prompt and
# multi-head attention at batch 48 under hf-eager (4 runs), llama-2-13b b32 g256 under
# hf-static (2 runs, a compile each). Each measure resumes a grid from rows already in $OUT.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run50.log"
E=calibration/h200/engines
END=$(( $(date +%s) + ${TOTAL_S:-570} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
timeout $((${EAGER_S:-220} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_blind14.jsonl --out "$OUT/call50_blind14.jsonl" \
    --budget-s ${EAGER_S:-220} >> "$L" 2>&1
echo "hf-eager rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 15 ))
timeout $((B + 10)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind14.jsonl --out "$OUT/call50_static_blind14.jsonl" \
    --budget-s $B >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
