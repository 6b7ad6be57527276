#!/usr/bin/env bash
# Device call 11 (nvidia-h200-x2), session 3: AllReduce SUM in graph mode again for
# 64 MiB .. 1 GiB, now with >= 32 uses of each buffer per captured graph (call 10 rescaled
# the buffer every 1-4 calls at these sizes, +2-14 % time)  -> collectives_sum_big.jsonl
# Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
L="$OUT/run11.log"
timeout 150 torchrun --standalone --nproc-per-node 2 -m piep calibrate collectives \
    --kinds allreduce --reduce-op sum --modes graph --sizes-from 67108864 \
    --out "$OUT/collectives_sum_big.jsonl" --min-window-s 0.3 >> "$L" 2>&1; echo "rc=$?" >> "$L"
wc -l "$OUT"/*.jsonl; grep "B graph:" "$L"
