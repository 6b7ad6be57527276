#!/usr/bin/env bash
# Device call 4 (nvidia-h200-x2), session 2:
#  1. collectives in isolation with energy on both GPUs (AllReduce, AllGather, send/recv;
#     8 KiB-256 MiB; graph and eager)                       -> collectives.jsonl
#  2. repeat check: the committed repeat-pair shapes again, two passes, 1 s windows,
#     one shard per GPU in parallel                         -> repeat_s{0,1}.jsonl
#  3. attention and rope with the in-situ op sequence (op_version 2), one shard per GPU
#                                                           -> modv2_s{0,1}.jsonl
#  4. GPU0: online batch-axis search of `piep optimize` (llama-2-7b tp1, eds)
#                                                           -> online.jsonl
#     GPU1: `piep measure --clock-plan ... --dry-run` for the llama-2-7b batch 1 and 64
#     plans                                                 -> clockplan.jsonl
# Everything read-only on the GPUs (NVML reads only; clock plans in dry-run).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
L="$OUT/run4.log"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >> "$L" 2>&1 && export PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm --format=csv >> "$L" 2>&1
echo "== collectives $(date +%T)" >> "$L"
timeout 150 torchrun --nproc-per-node 2 -m piep calibrate collectives \
    --out "$OUT/collectives.jsonl" --min-window-s 0.5 >> "$L" 2>&1; echo "rc=$?" >> "$L"
echo "== repeat + modules v2 $(date +%T)" >> "$L"
for g in 0 1; do
  ( CUDA_VISIBLE_DEVICES=$g timeout 120 python3 -m piep calibrate repeat \
        --out "$OUT/repeat_s$g.jsonl" --shard $g/2 --min-window-s 1.0 --budget-s 110
    echo "repeat $g rc=$?"
    CUDA_VISIBLE_DEVICES=$g timeout 200 python3 -m piep calibrate modules --kinds attention rope \
        --out "$OUT/modv2_s$g.jsonl" --shard $g/2 --budget-s 170 --min-window-s 0.3
    echo "modules $g rc=$?" ) >> "$OUT/gpu$g.tmp" 2>&1 &
done
wait
cat "$OUT"/gpu0.tmp "$OUT"/gpu1.tmp >> "$L"; rm -f "$OUT"/gpu*.tmp
echo "== online search + clock-plan dry-run $(date +%T)" >> "$L"
( CUDA_VISIBLE_DEVICES=0 timeout 170 python3 -m piep optimize --model llama-2-7b --tp 1 \
      --objective eds --online --online-axes batch --max-steps 7 --repeats 3 \
      --log "$OUT/online.jsonl" --json; echo "online rc=$?" ) > "$OUT/g0.tmp" 2>&1 &
( for b in 1 64; do
    CUDA_VISIBLE_DEVICES=1 timeout 80 python3 -m piep measure --model llama-2-7b --batch $b \
        --clock-plan calibration/h200/dvfs/plans/llama-2-7b_b$b.json --dry-run \
        --clock-state-dir /tmp/piep-clock-state --out "$OUT/clockplan.jsonl"
    echo "clockplan b$b rc=$?"
  done ) > "$OUT/g1.tmp" 2>&1 &
wait
cat "$OUT"/g0.tmp "$OUT"/g1.tmp >> "$L"; rm -f "$OUT"/g*.tmp
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl
tail -n 40 "$L"
