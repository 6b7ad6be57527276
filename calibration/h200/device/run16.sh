#!/usr/bin/env bash
# Device call 16 (nvidia-h200; x2 not lent), session 4: the rest of call 15's designs.
# The committed call-15 records seed the outputs, so the grids skip what was measured.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
L="$OUT/run16.log"
E=calibration/h200/engines
cp $E/hf-static/raw/call15_tp1.jsonl "$OUT/hf_static_tp1.jsonl"
cp $E/hf-eager/raw/call15_tp1.jsonl "$OUT/hf_eager_tp1.jsonl"
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
run() { CUDA_VISIBLE_DEVICES=0 timeout $(($3 + 40)) python3 -m piep measure --engine $1 \
    --grid $E/$1/design_tp1.jsonl --out "$OUT/$2" --budget-s "$3" >> "$L" 2>&1
  echo "$1 rc=$?" >> "$L"; }
run hf-static hf_static_tp1.jsonl ${STATIC_S:-240}
run hf-eager hf_eager_tp1.jsonl ${EAGER_S:-250}
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 40
