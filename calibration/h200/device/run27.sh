#!/usr/bin/env bash
# Device call 27 (nvidia-h200), session 7: (1) a kernel census of transformers' eager
# generate(): CUDA kernels per layer and per decode step for head dims 64/80/96/128, MHA,
# Qwen2's biases (python -m piep.sampling.census); (2) hf-eager runs of calls 15, 16 and
# 25 measured again on this call's host (design_replicates.jsonl: does the time move with
# the host's launch probe?); (3) the third blind test of hf-eager (design_blind3.jsonl),
# predicted before this call (engines/blind_predictions3.jsonl). Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run27.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout ${CENSUS_S:-120} python3 -m piep.sampling.census --models piep-unlisted-hd64 \
    piep-unlisted-hd80 piep-unlisted-hd96 llama-3-8b llama-2-7b qwen2.5-7b \
    --out "$OUT/census_hf_eager.jsonl" >> "$L" 2>&1
echo "census rc=$? $(date +%T)" >> "$L"
run() { timeout $(($4 + 40)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/$1 --out "$OUT/$2" --budget-s "$4" >> "$L" 2>&1
  echo "$1 rc=$? $(date +%T)" >> "$L"; }
run design_replicates.jsonl call27_replicates.jsonl x ${REPL_S:-150}
run design_blind3.jsonl call27_blind3.jsonl x ${BLIND_S:-240}
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|/layer" "$L" | tail -n 30
