#!/usr/bin/env bash
# Device call 23 (nvidia-h200), session 6: module samples of transformers' own kernels,
# which piep priced from the copy rate (K/V copies) or from its runner's attention (the
# masked SDPA of the static cache): kinds sdpa_masked, kv_expand, kv_append, kv_gather at
# shapes drawn at random (piep.sampling.calibrate.engine_kernel_shapes, seed 5, 45 per
# kind, sdpa_masked 90), not from the measured runs' trees. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run23.log"
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$L" 2>&1
timeout ${LIMIT_S:-420} python3 -m piep calibrate modules \
    --kinds sdpa_masked kv_expand kv_append kv_gather --seed 5 --per-kind 45 \
    --out "$OUT/modules_engines.jsonl" --budget-s ${BUDGET_S:-360} >> "$L" 2>&1
echo "modules rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -cE "error" "$OUT/modules_engines.jsonl"; tail -n 5 "$L"
