#!/usr/bin/env bash
# Device call 66 (nvidia-h200), session 26 (issue 49): transformers generate() (hf-eager:
# DynamicCache, eager) on the shapes of new families, built by transformers from each
# family's own config (Qwen3, Gemma 3 text, Phi-4 as phi3, OLMo 2, GLM-4, SmolLM3, Granite)
# and two shapes of our own (calibration/h200/families/configs): two workloads a shape,
# calibration/h200/families/design_eager.jsonl -> families_s66_eager.jsonl. No predictor
# was fitted on these runs. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run66.log"
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
python3 -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)" >> "$L" 2>&1
timeout $((${E2E_S:-500} + 40)) python3 -m piep measure \
    --grid calibration/h200/families/design_eager.jsonl --out "$OUT/families_s66_eager.jsonl" \
    --budget-s ${E2E_S:-500} >> "$L" 2>&1
echo "e2e rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 30
