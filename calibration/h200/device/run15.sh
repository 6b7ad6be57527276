#!/usr/bin/env bash
# Device call 15, session 4: transformers generate() measured by `piep measure --engine`
# on one GPU each, side by side on nvidia-h200-x2, one after the other on nvidia-h200
# (the only kind lent when it ran):
#   hf-static (compiled decode, static cache), models grouped (one compile each)
#   hf-eager (DynamicCache), models alternating
# Designs: calibration/h200/engines/{hf-static,hf-eager}/design_tp1.jsonl
# (python -m piep.sampling.design hf-eager/design_tp1.jsonl). Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
L="$OUT/run15.log"
{ echo "== start $(date +%T) commit $PIEP_GIT_COMMIT"; nvidia-smi -L
  python3 -c "import torch, transformers, accelerate; print('torch', torch.__version__, 'transformers', transformers.__version__, 'accelerate', accelerate.__version__)"
} >> "$L" 2>&1
GPUS=$(nvidia-smi -L | wc -l)
static() { CUDA_VISIBLE_DEVICES=$1 timeout $(($2 + 70)) python3 -m piep measure --engine hf-static \
    --grid calibration/h200/engines/hf-static/design_tp1.jsonl \
    --out "$OUT/hf_static_tp1.jsonl" --budget-s "$2" > "$OUT/g0.tmp" 2>&1; }
eager() { CUDA_VISIBLE_DEVICES=$1 timeout $(($2 + 70)) python3 -m piep measure --engine hf-eager \
    --grid calibration/h200/engines/hf-eager/design_tp1.jsonl \
    --out "$OUT/hf_eager_tp1.jsonl" --budget-s "$2" > "$OUT/g1.tmp" 2>&1; }
if [ "$GPUS" -ge 2 ]; then
  B=${BUDGET_S:-470}; static 0 "$B" & eager 1 "$B" & wait
else
  static 0 ${STATIC_S:-230}; eager 0 ${EAGER_S:-200}
fi
{ echo "== gpu0 hf-static"; cat "$OUT/g0.tmp"; echo "== gpu1 hf-eager"; cat "$OUT/g1.tmp"
  echo "== done $(date +%T)"; } >> "$L"; rm -f "$OUT"/g*.tmp
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error" "$L" | tail -n 40
