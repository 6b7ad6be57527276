#!/usr/bin/env bash
# Device call 7 (nvidia-h200-x2), session 2: the remaining 2-GPU configurations of the
# e2e design (torchrun, both GPUs). The output starts with the already-measured records
# (so the grid skips them); only the lines after them are new. Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING=false
L="$OUT/run7.log"
cat calibration/h200/e2e/raw/*.jsonl > "$OUT/e2e_s2_2gpu_e.jsonl"
wc -l "$OUT/e2e_s2_2gpu_e.jsonl" >> "$L"
timeout 330 torchrun --standalone --nproc-per-node 2 -m piep measure \
    --grid calibration/h200/e2e/design.jsonl --out "$OUT/e2e_s2_2gpu_e.jsonl" --budget-s 290 \
    >> "$L" 2>&1; echo "grid2 rc=$?" >> "$L"
wc -l "$OUT/e2e_s2_2gpu_e.jsonl"; grep -c " J, " "$L"; tail -n 4 "$L"
