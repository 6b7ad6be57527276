#!/usr/bin/env bash
# Device call 10 (nvidia-h200-x2), session 3: AllReduce in isolation with the runner's SUM
# (session 2 and call 8 ran AVG, which NCCL runs as a pre-multiplied sum), 4 KiB .. 1 GiB,
# graph and eager, two passes a minute apart (their difference is the noise floor of the
# AllReduce energy error)                         -> collectives_sum_p{1,2}.jsonl
# Read-only on the GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
L="$OUT/run10.log"
for p in 1 2; do
  echo "== allreduce sum pass $p $(date +%T)" >> "$L"
  timeout 170 torchrun --standalone --nproc-per-node 2 -m piep calibrate collectives \
      --kinds allreduce --reduce-op sum --out "$OUT/collectives_sum_p$p.jsonl" \
      --min-window-s 0.3 >> "$L" 2>&1; echo "rc=$?" >> "$L"
done
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep "B graph:\|B eager:" "$L" | head -40
