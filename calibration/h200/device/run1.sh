#!/usr/bin/env bash
# Device call 1 (nvidia-h200-x2): probe, GPU test, 1-GPU end-to-end grid in two shards
# (one per GPU, run side by side). Read-only NVML: no clock/power/persistence changes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
GRID_BUDGET_S=${GRID_BUDGET_S:-280}
{
  date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,power.limit,clocks.sm,clocks.mem --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
  python3 -m piep.sampling.probe nocontext --seconds 30 --out "$OUT/probe_nocontext.json"
  torchrun --standalone --nproc-per-node 2 -m piep.sampling.probe main --seconds 30 --out "$OUT/probe_main.json"
  date -u
} > "$OUT/run.log" 2>&1
python3 -m pytest -q -s -m gpu tests/test_gpu.py -p no:cacheprovider > "$OUT/gpu_test.log" 2>&1
for s in 0 1; do
  CUDA_VISIBLE_DEVICES=$s python3 -m piep measure --grid calibration/h200/e2e/design.jsonl \
    --out "$OUT/e2e_1gpu_s$s.jsonl" --budget-s "$GRID_BUDGET_S" --shard "$s/2" > "$OUT/grid_1gpu_s$s.log" 2>&1 &
done
wait
date -u >> "$OUT/run.log"
tail -3 "$OUT"/*.log
