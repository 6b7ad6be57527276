#!/usr/bin/env bash
# Device call 5 (nvidia-h200-x2), session 2:
#  1. collectives in isolation with energy on both GPUs (call 4's attempt hung: the ranks
#     chose different call counts; fixed by agreeing on them)  -> collectives.jsonl
#  2. repeat check of the sub-20-us shapes again: median of 3 fresh builds per pass, two
#     passes, 1 s windows, one shard per GPU                    -> repeat_tiny_s{0,1}.jsonl
# Read-only on the GPUs (NVML reads only).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
L="$OUT/run5.log"
echo "== collectives $(date +%T)" >> "$L"
timeout 240 torchrun --nproc-per-node 2 -m piep calibrate collectives \
    --out "$OUT/collectives.jsonl" --min-window-s 0.5 >> "$L" 2>&1; echo "rc=$?" >> "$L"
echo "== tiny repeat $(date +%T)" >> "$L"
for g in 0 1; do
  ( CUDA_VISIBLE_DEVICES=$g timeout 240 python3 -m piep calibrate repeat --tiny-only \
        --captures 3 --out "$OUT/repeat_tiny_s$g.jsonl" --shard $g/2 --min-window-s 1.0 \
        --budget-s 220
    echo "repeat $g rc=$?" ) > "$OUT/gpu$g.tmp" 2>&1 &
done
wait
cat "$OUT"/gpu0.tmp "$OUT"/gpu1.tmp >> "$L"; rm -f "$OUT"/gpu*.tmp
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl
tail -n 30 "$L"
