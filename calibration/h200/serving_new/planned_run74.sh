#!/usr/bin/env bash
# Device call 74 (nvidia-h200), PLANNED in session 29, not yet run (issue 53 item 2); to
# run it, move it to calibration/h200/device/run74.sh and `run` it with PIEP_GIT_COMMIT
# set. Three serving shapes in no public list (configs/: MHA with head dim 64; GQA with
# two KV heads and head dim 96; deep and narrow, 48 layers of hidden 1536), each replayed
# at two loads (the tiny and code traces of calibration/h200/engines/hf-cb/traces) by
# transformers' continuous batching (hf-cb); each record keeps its host probe.
# Predicted before the call: predictions_blind.jsonl (`piep serve --json` at the commit it
# names, typical host). After it: copy the records to raw/, compare (benchmarks/
# families_accuracy.py's replay table reads the same records), then add them to
# calibration/h200/engines/hf-cb/raw for the leave-one-shape-out figures of
# reports/serving.md (`python benchmarks/serving_accuracy.py`).
# Then (added in session 31), in the time left: module samples of continuous batching's
# packed attention under its additive bf16 mask (`sdpa_paged`, 56 drawn shapes: decoding iterations of
# 1-512 requests, prompt chunks of up to 8192 queries over up to 131072 keys). hf-cb's
# attention is priced today as the unmasked SDPA times one fitted scale (1.97); its logged
# iterations show why that is not enough (python benchmarks/serving_iterations.py:
# decoding iterations measured/predicted 0.92 -> 1.30 as queries x keys grow, the largest
# prompt chunks 0.86). What time does not allow, a later call adds (copy this call's file
# to its --out first: the sampler skips the shapes a file holds). After the call: copy the file to
# calibration/h200/modules/, price hf-cb's attention rows as `sdpa_paged` (COMPUTE_KINDS,
# the tree's paged branch), `piep train --add-kinds`, refit hf-cb, and compare.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run74.log"
S=calibration/h200/serving_new
T=calibration/h200/engines/hf-cb/traces
END=$(( $(date +%s) + ${TOTAL_S:-580} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
for m in piep-serve-mha-hd64 piep-serve-gqa2-hd96 piep-serve-deep-narrow; do
    timeout ${CB_S:-170} python3 -m piep measure --engine hf-cb --model $S/configs/$m.json \
        --trace $T/tiny.jsonl $T/code.jsonl --out "$OUT/serving_s74_$m.jsonl" >> "$L" 2>&1
    echo "cb $m rc=$? $(date +%T) left $(left) s" >> "$L"
done
# the packed attention's samples in what is left
B=$(( $(left) - 25 ))
if [ "$B" -gt 30 ]; then
    timeout $(( B + 20 )) python3 -m piep calibrate modules --kinds sdpa_paged --modes graph \
        --seed 74 --per-kind 28 --repeat-every 1000 \
        --out "$OUT/modules_sdpa_paged_s74.jsonl" --budget-s $B >> "$L" 2>&1
    echo "sdpa_paged modules rc=$? $(date +%T)" >> "$L"
fi
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|requests" "$L" | tail -n 30
