#!/usr/bin/env bash
# Device call 77 (nvidia-h200, asked with needs_h200: Llama 4 Scout's layer over 20 layers
# holds about 90 GB of bf16 weights, more than an H100's 78 GiB), PLANNED in session 33,
# run in session 36 (no H200 came in about 40 tries over sessions 33-35; run77.log); it
# replaces planned calls 75 and 76's part 1 (issue 52).
# Run as `TOTAL_S=<seconds> PIEP_GIT_COMMIT=<commit> bash calibration/h200/device/run77.sh`
# (the module samples first, 160 s, the A/Bs, 90 s at most; the runs in the rest).
# (1) planned call 75, after (2): transformers generate(), eager, on calibration/h200/moe/
#     design_eager2.jsonl (gpt-oss-20b's shape in bf16, OLMoE-1B-7B's shape, our 20-layer
#     Scout; three workloads each), predicted before in moe/predictions_blind2.jsonl
#     -> moe_s77_eager.jsonl;
# (2) part 1 of planned call 76: the experts' grouped GEMMs with the weights in
#     transformers' layout (op version 2), and transformers' masks of the routed rows
#     (`moe_mask`: masked_fill under a (rows, 1) mask, three a layer, priced as row copies
#     until sampled; call 79's census on an H100 ran them 2.5x slower a byte than its
#     row gathers) -> modules_moe_s77.jsonl; then benchmarks/moe_kernels_ab.py (call 80's
#     A/Bs, on this card: the grouped GEMM in both layouts, masked_fill against the row
#     gather) -> moe_kernels_ab_s77.jsonl.
# After it: copy (1) to calibration/h200/moe/raw/, (2) to calibration/h200/modules/, then
# `piep train --add-kinds` and `python benchmarks/heldout_accuracy.py moe --write`.
# Read-only on the GPU: nothing here sets a clock or a limit.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run77.log"
M=calibration/h200/moe
END=$(( $(date +%s) + ${TOTAL_S:-540} ))
left() { echo $(( END - $(date +%s) )); }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT $GPU" >> "$L"
# the calibration is an H200's: a call that lands on another card measures nothing
case "$GPU" in *H200*) ;; *) echo "not an H200 ($GPU): stopping" | tee -a "$L"; exit 3 ;; esac
# the samples first (they change what prices every MoE), the runs in what is left
timeout 160 python3 -m piep calibrate modules --kinds experts_gate_up experts_down moe_mask \
    --modes graph --models $M/configs/*.json --seed 94 --per-kind 16 --repeat-every 1000 \
    --out "$OUT/modules_moe_s77.jsonl" --budget-s 140 >> "$L" 2>&1
echo "moe modules rc=$? $(date +%T) left $(left) s" >> "$L"
timeout 90 python3 benchmarks/moe_kernels_ab.py --models $M/configs/*.json --reps 20 \
    --out "$OUT/moe_kernels_ab_s77.jsonl" >> "$L" 2>&1
echo "ab rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 25 ))
if [ "$B" -gt 60 ]; then
    timeout $((B + 20)) python3 -m piep measure --grid $M/design_eager2.jsonl \
        --out "$OUT/moe_s77_eager.jsonl" --budget-s $B >> "$L" 2>&1
    echo "eager rc=$? $(date +%T)" >> "$L"
fi
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|samples|^piep:" "$L" | tail -n 30
