#!/usr/bin/env bash
# Device call 89 (nvidia-h100-x1), session 41 (issues 52, 51's families): no H200 came in
# five tries; nothing here enters a calibration. Kernel censuses of transformers'
# generate() (the kernels and their counts are the H200's: same image; durations the
# H100's): (1) every priced family's small decoder (tests/_families.py), batch 2, prompt
# 16, 4 new tokens -> census_families_s89.jsonl, read by benchmarks/family_launches.py
# beside the tree's launches (the CPU census found LayerNorm, Gemma's norms, Llama 4's
# layer kinds and Gemma 2's attention miscounted: this checks them in CUDA kernels);
# (2) the three mixtures of experts priced from their code alone (Phi-3.5-MoE, MiniMax-M2,
# Hunyuan-A13B shapes, cut), batch 8, prompt 512 -> census_moe_s89.jsonl, read by
# benchmarks/moe_census.py. Run as `PIEP_GIT_COMMIT=<commit> bash
# calibration/h100/device/run89.sh`. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run89.log"
M=calibration/h200/moe/configs
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid --format=csv,noheader >> "$L"
timeout 300 python3 benchmarks/family_launches.py --run \
    --gpu "$OUT/census_families_s89.jsonl" >> "$L" 2>&1
echo "families rc=$? $(date +%T)" >> "$L"
timeout 200 python3 -m piep.sampling.census \
    --models $M/piep-phi35-moe-8l.json $M/piep-minimax-m2-6l.json $M/piep-hunyuan-a13b-6l.json \
    --batch 8 --prompt-len 512 --gen-len 9 --out "$OUT/census_moe_s89.jsonl" >> "$L" 2>&1
echo "moe census rc=$? $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E "failed|Error|rc=|hf-eager" "$L" | tail -n 30
