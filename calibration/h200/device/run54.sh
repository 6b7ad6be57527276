#!/usr/bin/env bash
# Device call 54 (nvidia-h200), session 14: blind set 15 (design_blind15.jsonl; predictions
# in engines/blind_predictions15.jsonl by the profiles fitted on calls 15-51, committed before
# this call, at the typical host and at a grid of host probes): an 11B (5120 wide, 32
# layers) and a small Qwen2-type shape (biases, 7 query heads per K/V head, 152k
# vocabulary), both in no public list, under both engines; llama-2-7b b6 over 300 steps and
# qwen2.5-14b b64 under hf-eager (5 runs), hf-static 2 runs (a compile each). Each measure
# resumes a grid from rows already in $OUT.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run54.log"
E=calibration/h200/engines
END=$(( $(date +%s) + ${TOTAL_S:-570} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
timeout $((${EAGER_S:-220} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_blind15.jsonl --out "$OUT/call54_blind15.jsonl" \
    --budget-s ${EAGER_S:-220} >> "$L" 2>&1
echo "hf-eager rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 15 ))
timeout $((B + 10)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind15.jsonl --out "$OUT/call54_static_blind15.jsonl" \
    --budget-s $B >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
