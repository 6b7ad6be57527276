#!/usr/bin/env bash
# Device call 47 (nvidia-h200), session 12: runs whose decode energy was mispredicted by
# 10-21 % on one board (calls 28, 43, 44) measured again on another (design_replicates2.jsonl
# of both engines), each record with the GPU probe (a metered HBM copy and a decode-like
# GEMM: piep.sampling.hf.gpu_probe) beside the host probe. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run47.log"
E=calibration/h200/engines
END=$(( $(date +%s) + ${TOTAL_S:-560} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
timeout $((${EAGER_S:-130} + 30)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_replicates2.jsonl --out "$OUT/call47_replicates2.jsonl" \
    --budget-s ${EAGER_S:-130} >> "$L" 2>&1
echo "hf-eager rc=$? $(date +%T) left $(left) s" >> "$L"
B=$(( $(left) - 15 ))
timeout $((B + 10)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_replicates2.jsonl --out "$OUT/call47_static_replicates2.jsonl" \
    --budget-s $B >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
