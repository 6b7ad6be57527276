#!/usr/bin/env bash
# Device call 9 (nvidia-h200-x2), session 3: both GPUs (torchrun), the 17 configurations of
# the main e2e design still unmeasured, then the eager pipeline-parallel design
# (design_eager_pp.jsonl). The output starts with the already-measured records (so the
# grid skips them); only the lines after them are new. Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING=false
L="$OUT/run9.log"
cat calibration/h200/e2e/raw/*.jsonl > "$OUT/e2e_s3_2gpu.jsonl"
wc -l "$OUT/e2e_s3_2gpu.jsonl" >> "$L"
cat calibration/h200/e2e/design_eager_pp.jsonl calibration/h200/e2e/design.jsonl > /tmp/grid.jsonl
timeout 480 torchrun --standalone --nproc-per-node 2 -m piep measure \
    --grid /tmp/grid.jsonl --out "$OUT/e2e_s3_2gpu.jsonl" --budget-s 430 \
    >> "$L" 2>&1; echo "grid rc=$?" >> "$L"
wc -l "$OUT/e2e_s3_2gpu.jsonl"; grep -c " J, " "$L"; tail -n 4 "$L"
