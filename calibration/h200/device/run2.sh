#!/usr/bin/env bash
# Device call 2 (nvidia-h200-x2): module sampler on both GPUs side by side (two shards),
# then the synchronized waiting-time sampler (tp=2), then more 2-GPU end-to-end points.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING=false
MOD_BUDGET_S=${MOD_BUDGET_S:-170}
for s in 0 1; do
  CUDA_VISIBLE_DEVICES=$s python3 -m piep calibrate modules --out "$OUT/modules_s$s.jsonl" \
    --shard "$s/2" --budget-s "$MOD_BUDGET_S" > "$OUT/modules_s$s.log" 2>&1 &
done
wait
torchrun --standalone --nproc-per-node 2 -m piep calibrate waits --out "$OUT/waits.jsonl" \
  --models llama-2-7b llama-3-8b > "$OUT/waits.log" 2>&1
# resume the end-to-end grid: already measured configurations are skipped
cat calibration/h200/e2e/raw/e2e_2gpu.jsonl calibration/h200/e2e/raw/e2e_2gpu_b.jsonl > /tmp/e2e_done.jsonl
cp /tmp/e2e_done.jsonl "$OUT/e2e_2gpu_c.jsonl"
torchrun --standalone --nproc-per-node 2 -m piep measure --grid calibration/h200/e2e/design.jsonl \
  --out "$OUT/e2e_2gpu_c.jsonl" --budget-s 50 > "$OUT/grid_2gpu_c.log" 2>&1
tail -n 3 "$OUT"/*.log
