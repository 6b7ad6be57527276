#!/usr/bin/env bash
# Device call 70 (nvidia-h200), planned in session 26, run in session 29 (issue 49):
# `bash calibration/h200/device/run70.sh` with PIEP_GIT_COMMIT set:
# (1) module samples of what the new families run (q/k norms at their rows and widths,
#     GeGLU's gate, scalar multiplies, fused qkv and gate_up GEMMs, and since session 27
#     eager attention's passes over Gemma 2's soft-capped scores), drawn from the trees of
#     calibration/h200/families/configs and Gemma 2 2B's, both modes ->
#     modules_families_s70.jsonl;
# (2) hf-static on the rows call 69 did not reach, cheapest compile first
#     (calibration/h200/families/design_static2.jsonl) -> families_s70_static.jsonl.
# Before it: `python benchmarks/families_accuracy.py --predict` (blind predictions of (2)).
# After it: `piep train` with (1) among the module files, then families_accuracy.py again.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run70.log"
F=calibration/h200/families
END=$(( $(date +%s) + ${TOTAL_S:-560} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((${MOD_S:-170} + 20)) python3 -m piep calibrate modules \
    --kinds rmsnorm geglu scale scores qkv_proj gate_up_proj --modes graph eager \
    --models $F/configs/*.json benchmarks/data/model_census/gemma-2-2b-it.json --seed 81 --per-kind 12 --repeat-every 1000 \
    --out "$OUT/modules_families_s70.jsonl" --budget-s ${MOD_S:-170} >> "$L" 2>&1
echo "modules rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 30 ))
timeout $((B + 25)) python3 -m piep measure --grid $F/design_static2.jsonl \
    --out "$OUT/families_s70_static.jsonl" --budget-s $B >> "$L" 2>&1
echo "static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|samples" "$L" | tail -n 30
