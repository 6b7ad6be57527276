#!/usr/bin/env bash
# Device call 56 (nvidia-h200), session 14: blind set 16 (design_blind16.jsonl; predictions
# in engines/blind_predictions16.jsonl by the profiles fitted on calls 15-55, committed before
# this call, at the typical host and board, at a grid of host probes, naming the profiles'
# board): mistral-7b b32, the kv2 and 11B shapes in no public list, qwen2.5-14b at a
# 2500-token prompt under hf-eager (4 runs); llama-3-8b b24 and the qwen4b shape b16 under
# hf-static (2 runs, a compile each). Each measure resumes a grid from rows already in $OUT.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run56.log"
E=calibration/h200/engines
END=$(( $(date +%s) + ${TOTAL_S:-570} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
timeout $((${EAGER_S:-220} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_blind16.jsonl --out "$OUT/call56_blind16.jsonl" \
    --budget-s ${EAGER_S:-220} >> "$L" 2>&1
echo "hf-eager rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 15 ))
timeout $((B + 10)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_blind16.jsonl --out "$OUT/call56_static_blind16.jsonl" \
    --budget-s $B >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
