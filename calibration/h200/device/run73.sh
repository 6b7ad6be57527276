#!/usr/bin/env bash
# Device call 73 (nvidia-h200), PLANNED in session 29, run in session 36 without its part
# (2) (run73.log; the census and the replays: calibration/h200/moe) (issue 52). Since
# session 33: its part (1) ran on an H100 (call 79: calibration/h100/moe, the kernels and
# counts are the H200's, their durations the H100's), and its part (2)'s question is
# answered (call 80's A/B: the layout changes nothing) and its samples are in planned call
# 77; what only it measures is part (3), and the census's H200 durations.
# Run it with PIEP_GIT_COMMIT and TOTAL_S set. What reports/moe.md left open: the MoE prefills run 16-27 % longer
# than priced at batch 8 and 32, and the decode steps' power is under-priced.
# (1) a kernel census of generate() on three MoE shapes (python -m piep.sampling.census:
#     kernels per layer and per decode step, by name, with their GPU time) -> which
#     kernels the prefill's missing time goes to -> census_moe_s73.jsonl;
# (2) the experts' grouped GEMMs again with the weights in transformers' layout (op
#     version 2: (experts, d_out, d_in), passed transposed), from the MoE trees ->
#     modules_moe_s73.jsonl; then `piep train --add-kinds` does not refit an existing
#     group: refit the `experts` group (remove it from predictor.json's kinds, then
#     `piep train --add-kinds`), and `python benchmarks/heldout_accuracy.py moe --write`;
# (3) hf-cb replays of two traces on the MoE shape of our own (a second MoE shape in
#     continuous batching beside call 72's Qwen3-30B-A3B replay) -> cb_s73_*.jsonl.
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run73.log"
M=calibration/h200/moe
T=calibration/h200/engines/hf-cb/traces
END=$(( $(date +%s) + ${TOTAL_S:-560} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout 200 python3 -m piep.sampling.census \
    --models $M/configs/qwen3-30b-a3b-shape.json $M/configs/mixtral-8x7b-shape.json \
    $M/configs/qwen2-moe-a2.7b-shape.json --batch 8 --prompt-len 512 --gen-len 9 \
    --out "$OUT/census_moe_s73.jsonl" >> "$L" 2>&1
echo "census rc=$? $(date +%T) left $(left) s" >> "$L"
# part (2) ran in call 77 (modules_moe_s77.jsonl): skipped unless SAMPLES=1
[ "${SAMPLES:-0}" = 1 ] && timeout 130 python3 -m piep calibrate modules --kinds experts_gate_up experts_down \
    --modes graph --models $M/configs/*.json --seed 94 --per-kind 16 --repeat-every 1000 \
    --out "$OUT/modules_moe_s73.jsonl" --budget-s 110 >> "$L" 2>&1
echo "modules rc=$? $(date +%T) left $(left) s" >> "$L"
for trace in tiny code; do
    timeout $(( $(left) / 2 )) python3 -m piep measure --engine hf-cb \
        --model $M/configs/piep-unlisted-moe.json --trace $T/$trace.jsonl \
        --out "$OUT/cb_s73_$trace.jsonl" >> "$L" 2>&1
    echo "cb $trace rc=$? $(date +%T)" >> "$L"
done
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|samples|^piep:" "$L" | tail -n 30
