#!/usr/bin/env bash
# Device calls 68 and 69 (nvidia-h200), session 26 (issue 49), predicted before the call
# (calibration/h200/families/predictions_blind.jsonl, `python
# benchmarks/families_accuracy.py --predict`, commit named in the file):
#   PART=cb bash run68.sh      (call 68) three request traces (code, tiny, sparse;
#     calibration/h200/engines/hf-cb/traces) replayed in real time against transformers'
#     continuous batching (hf-cb) on the Qwen3 8B and Phi-4 shapes -> families_s68_cb_*.jsonl
#   PART=static bash run68.sh  (call 69) hf-static (static cache, compiled decode) on
#     calibration/h200/families/design_static.jsonl -> families_s69_static.jsonl
# (call 67 was taken back by the lender before it finished; it returned nothing).
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
F=calibration/h200/families
T=calibration/h200/engines/hf-cb/traces
if [ "${PART:-cb}" = cb ]; then
    L="$OUT/run68.log"
    echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
    for m in qwen3-8b-shape phi4-shape; do
        timeout ${CB_S:-160} python3 -m piep measure --engine hf-cb --model $F/configs/$m.json \
            --trace $T/code.jsonl $T/tiny.jsonl $T/sparse.jsonl \
            --out "$OUT/families_s68_cb_$m.jsonl" >> "$L" 2>&1
        echo "cb $m rc=$? $(date +%T)" >> "$L"
    done
else
    L="$OUT/run69.log"
    echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
    timeout $((${STATIC_S:-300} + 30)) python3 -m piep measure --grid $F/design_static.jsonl \
        --out "$OUT/families_s69_static.jsonl" --budget-s ${STATIC_S:-300} >> "$L" 2>&1
    echo "static rc=$? == done $(date +%T)" >> "$L"
fi
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|^piep:" "$L" | tail -n 30
