#!/usr/bin/env bash
# Device call 98 (nvidia-h100-x1), session 48, while no H200 started: the vision-language
# A/B (benchmarks/vl_text_ab.py). piep prices a VL model's text decoder as the family its
# row `runs_as` (Qwen2.5-VL as Qwen2, Qwen3-VL as Qwen3, GLM-4.1V as GLM-4): does a VL
# model's own generate() on text prompts take the time and energy of its stand-in's? Four
# configs (calibration/h100/families/vl/configs), hf-eager generate() at batch 1 and 8,
# 512-token prompts, 64 new tokens; piep's spec-sheet answers committed before
# (predictions_blind_h100.jsonl). -> vl_text_ab_s98.jsonl. Run as
# `PIEP_GIT_COMMIT=<commit> bash calibration/h100/device/run98.sh`; read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run98.log"
C=calibration/h100/families/vl/configs
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$L" 2>&1
for cfg in $C/qwen2.5-vl-7b.json $C/glm-4.1v-9b.json $C/piep-qwen3-vl-8b-shape.json \
        $C/qwen2.5-vl-3b.json; do  # (most asked first: a cut call keeps what it measured)
    timeout 100 python3 benchmarks/vl_text_ab.py --configs "$cfg" --workloads 1x512x64,8x512x64 \
        --reps 3 --out "$OUT/vl_text_ab_s98.jsonl" >> "$L" 2>&1
    echo "$(basename $cfg) rc=$? $(date +%T)" >> "$L"
done
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " x[0-9]|rc=|Error" "$L" | tail -n 20
