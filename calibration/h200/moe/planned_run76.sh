#!/usr/bin/env bash
# Device call 76 (nvidia-h200), PLANNED in session 32, not yet run (no machine came in 16
# tries); to run it, move it to calibration/h200/device/run76.sh. One call that serves issues
# 52 and 53 where only one fits the device time left, taken from the planned calls 73 and
# 74: (1) the experts' grouped GEMMs with the weights in transformers' layout
# (op version 2: (experts, d_out, d_in), passed transposed; call 73's part 2) ->
# modules_moe_s76.jsonl: the MoE prefills run 15-27 % longer than priced at batch 8 and 32
# (python benchmarks/heldout_accuracy.py moe --phases); (2) continuous batching's packed
# attention under its additive bf16 mask (`sdpa_paged`, call 74's part 2) ->
# modules_sdpa_paged_s76.jsonl; (3) in what is left, one serving shape in no public list
# (GQA with two KV heads, head dim 96) replayed at two loads by hf-cb ->
# serving_s76_piep-serve-gqa2-hd96.jsonl (predicted before: serving_new/predictions_blind.jsonl).
# After it: copy modules_*.jsonl to calibration/h200/modules/ and the replays to
# calibration/h200/engines/hf-cb/raw/ (call76_*), then what calls 73 and 74 say after them.
# Run with PIEP_GIT_COMMIT set. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run76.log"
M=calibration/h200/moe
S=calibration/h200/serving_new
T=calibration/h200/engines/hf-cb/traces
END=$(( $(date +%s) + ${TOTAL_S:-540} ))
left() { echo $(( END - $(date +%s) )); }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT $GPU" >> "$L"
# the calibration is an H200's: a call that lands on another card measures nothing
case "$GPU" in *H200*) ;; *) echo "not an H200 ($GPU): stopping" | tee -a "$L"; exit 3 ;; esac
timeout 130 python3 -m piep calibrate modules --kinds experts_gate_up experts_down \
    --modes graph --models $M/configs/*.json --seed 94 --per-kind 16 --repeat-every 1000 \
    --out "$OUT/modules_moe_s76.jsonl" --budget-s 110 >> "$L" 2>&1
echo "moe modules rc=$? $(date +%T) left $(left) s" >> "$L"
timeout 230 python3 -m piep calibrate modules --kinds sdpa_paged --modes graph \
    --seed 74 --per-kind 28 --repeat-every 1000 \
    --out "$OUT/modules_sdpa_paged_s76.jsonl" --budget-s 210 >> "$L" 2>&1
echo "sdpa_paged modules rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 10 ))
if [ "$B" -gt 60 ]; then
    timeout $B python3 -m piep measure --engine hf-cb --model $S/configs/piep-serve-gqa2-hd96.json \
        --trace $T/tiny.jsonl $T/code.jsonl \
        --out "$OUT/serving_s76_piep-serve-gqa2-hd96.jsonl" >> "$L" 2>&1
    echo "cb rc=$? $(date +%T)" >> "$L"
fi
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|samples|requests" "$L" | tail -n 30
