#!/usr/bin/env bash
# READY, NOT YET RUN (issue 17): the 4-GPU design on nvidia-h200-x4, when that kind is lent.
#   run(kind="nvidia-h200-x4", timeout_s=600, command="bash calibration/h200/device/x4.sh")
# Before the call: `python benchmarks/x4x8_predictions.py` is committed (the blind test).
#  1. end-to-end runs of calibration/h200/e2e/design_x4.jsonl on all 4 GPUs (torchrun),
#     resumable: a second call with PRIOR=<the first call's e2e_x4.jsonl copied into the
#     working tree> skips what was measured                  -> e2e_x4.jsonl
#  2. collectives in isolation at n = 4 (AllReduce, AllGather, send/recv, 4 KiB-1 GiB,
#     graph and eager, energy on every GPU)                   -> collectives_x4.jsonl
#  3. AllReduce waiting times in real tp=4 decoding            -> waits_x4.jsonl
# Budget (estimated_s of design.py): the design sums to ~670 s of runs; phase 1 gets
# E2E_BUDGET_S (default 280 s), so two calls cover it. Read-only on the GPUs.
# Afterwards: copy the files to calibration/h200/{e2e/raw,collectives,waits}/, run
# `python benchmarks/blind_unlisted.py` (blind), then retrain and `benchmarks/accuracy.py`.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING=false
L="$OUT/x4.log"
E2E_BUDGET_S=${E2E_BUDGET_S:-280}
nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm --format=csv >> "$L" 2>&1
[ -n "${PRIOR:-}" ] && [ -f "$PRIOR" ] && cp "$PRIOR" "$OUT/e2e_x4.jsonl"
echo "== e2e $(date +%T)" >> "$L"
timeout $((E2E_BUDGET_S + 60)) torchrun --standalone --nproc-per-node 4 -m piep measure \
    --grid calibration/h200/e2e/design_x4.jsonl --out "$OUT/e2e_x4.jsonl" \
    --budget-s "$E2E_BUDGET_S" >> "$L" 2>&1; echo "e2e rc=$?" >> "$L"
echo "== collectives $(date +%T)" >> "$L"
timeout 150 torchrun --standalone --nproc-per-node 4 -m piep calibrate collectives \
    --out "$OUT/collectives_x4.jsonl" --min-window-s 0.5 >> "$L" 2>&1
echo "collectives rc=$?" >> "$L"
echo "== waits $(date +%T)" >> "$L"
timeout 90 torchrun --standalone --nproc-per-node 4 -m piep calibrate waits \
    --out "$OUT/waits_x4.jsonl" --models llama-3-8b llama-2-13b >> "$L" 2>&1
echo "waits rc=$?" >> "$L"
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl >> "$L"; tail -n 5 "$L"
