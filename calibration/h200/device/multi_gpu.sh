#!/usr/bin/env bash
# READY, NOT YET RUN (issue 17): the N-GPU design (N = 4 or 8) on nvidia-h200-xN, when that
# kind is lent:
#   run(kind="nvidia-h200-x4", timeout_s=600, command="bash calibration/h200/device/multi_gpu.sh 4")
#   run(kind="nvidia-h200-x8", timeout_s=600, command="bash calibration/h200/device/multi_gpu.sh 8")
# The blind predictions (`python benchmarks/x4x8_predictions.py`) are committed before.
#  1. end-to-end runs of calibration/h200/e2e/design_xN.jsonl on all N GPUs (torchrun),
#     resumable: a second call with PRIOR=<the first call's e2e_xN.jsonl copied into the
#     working tree> skips what was measured                  -> e2e_xN.jsonl
#  2. collectives in isolation at n = N (AllReduce, AllGather, send/recv, 4 KiB-1 GiB,
#     graph and eager, energy on every GPU)                   -> collectives_xN.jsonl
#  3. AllReduce waiting times in real tp=N decoding            -> waits_xN.jsonl
# Budget: design_x4 sums to ~670 s of runs and design_x8 to ~545 s (estimated_s of
# piep/sampling/design.py); phase 1 gets E2E_BUDGET_S (default 280 s), so two calls per
# machine cover a design. Read-only on the GPUs.
# Afterwards: copy the files to calibration/h200/{e2e/raw,collectives,waits}/, run
# `python benchmarks/blind_unlisted.py` (blind), then retrain and `benchmarks/accuracy.py`.
set -uo pipefail
N=${1:?give the number of GPUs: 4 or 8}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING=false
L="$OUT/x$N.log"
E2E_BUDGET_S=${E2E_BUDGET_S:-280}
nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm --format=csv >> "$L" 2>&1
[ -n "${PRIOR:-}" ] && [ -f "$PRIOR" ] && cp "$PRIOR" "$OUT/e2e_x$N.jsonl"
echo "== e2e $(date +%T)" >> "$L"
timeout $((E2E_BUDGET_S + 60)) torchrun --standalone --nproc-per-node "$N" -m piep measure \
    --grid "calibration/h200/e2e/design_x$N.jsonl" --out "$OUT/e2e_x$N.jsonl" \
    --budget-s "$E2E_BUDGET_S" >> "$L" 2>&1; echo "e2e rc=$?" >> "$L"
echo "== collectives $(date +%T)" >> "$L"
timeout 150 torchrun --standalone --nproc-per-node "$N" -m piep calibrate collectives \
    --out "$OUT/collectives_x$N.jsonl" --min-window-s 0.5 >> "$L" 2>&1
echo "collectives rc=$?" >> "$L"
echo "== waits $(date +%T)" >> "$L"
timeout 90 torchrun --standalone --nproc-per-node "$N" -m piep calibrate waits \
    --out "$OUT/waits_x$N.jsonl" --models llama-3-8b llama-2-13b >> "$L" 2>&1
echo "waits rc=$?" >> "$L"
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl >> "$L"; tail -n 5 "$L"
