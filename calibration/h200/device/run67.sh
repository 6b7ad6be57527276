#!/usr/bin/env bash
# Device call 67 (nvidia-h200), session 26 (issue 49): (1) three request traces (code,
# tiny, sparse; calibration/h200/engines/hf-cb/traces) replayed in real time against
# transformers' continuous batching (hf-cb) on the Qwen3 8B shape -> families_s67_cb_*.jsonl;
# (2) hf-static (static cache, compiled decode) on new families' shapes,
# calibration/h200/families/design_static.jsonl -> families_s67_static.jsonl, in the time
# left. No predictor was fitted on these runs. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run67.log"
END=$(( $(date +%s) + ${TOTAL_S:-540} ))
left() { echo $(( END - $(date +%s) )); }
F=calibration/h200/families
T=calibration/h200/engines/hf-cb/traces
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
for m in ${CB_MODELS:-qwen3-8b-shape}; do
    timeout ${CB_S:-200} python3 -m piep measure --engine hf-cb --model $F/configs/$m.json \
        --trace $T/code.jsonl $T/tiny.jsonl $T/sparse.jsonl \
        --out "$OUT/families_s67_cb_$m.jsonl" >> "$L" 2>&1
    echo "cb $m rc=$? $(date +%T) left $(left) s" >> "$L"
done
B=$(( $(left) - 30 ))
timeout $((B + 25)) python3 -m piep measure --grid $F/design_static.jsonl \
    --out "$OUT/families_s67_static.jsonl" --budget-s $B >> "$L" 2>&1
echo "static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|^piep:" "$L" | tail -n 30
