#!/usr/bin/env bash
# Device call 64 (nvidia-h200), session 19 (issue 32): one measurement protocol. The six
# hand-written CUDA-graph captures and the event timings of the samplers became
# piep/sampling/protocol.py (capture, seconds). A/B on one board, in ABBA order, the code
# before the change (git archive of its parent into ab/old, not committed) against the
# code after:
# (1) the reference runner on design_boards.jsonl (9 graph-mode configurations: the
#     decode step's capture) -> e2e_s64_{old,new}.jsonl;
# (2) the repeat-check module shapes, 75 s each (the module sampler's capture and
#     timing) -> repeat_s64_{old,new}.jsonl;
# (3) AllReduce in isolation on one rank, 16 MiB-1 GiB, graph and eager (the collective
#     sampler's capture) -> collectives_s64_{old,new}.jsonl;
# (4) the device probe on one rank (GEMM and copy timing, graph-pool capture).
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run64.log"
NEW=$PWD
OLD=$PWD/ab/old
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >> "$L" 2>&1
e2e() {  # $1 old|new
    local P=$OLD; [ "$1" = new ] && P=$NEW
    PYTHONPATH=$P timeout 150 python3 -m piep measure \
        --grid calibration/h200/e2e/design_boards.jsonl --out "$OUT/e2e_s64_$1.jsonl" \
        --budget-s 110 >> "$L" 2>&1
    echo "e2e $1 rc=$? $(date +%T)" >> "$L"
}
rep() {
    local P=$OLD; [ "$1" = new ] && P=$NEW
    PYTHONPATH=$P timeout 100 python3 -m piep calibrate repeat --min-window-s 1.0 \
        --out "$OUT/repeat_s64_$1.jsonl" --budget-s 75 >> "$L" 2>&1
    echo "repeat $1 rc=$? $(date +%T)" >> "$L"
}
coll() {
    local P=$OLD; [ "$1" = new ] && P=$NEW
    PYTHONPATH=$P timeout 60 torchrun --standalone --nproc-per-node 1 -m piep calibrate \
        collectives --kinds allreduce --sizes-from 16777216 --min-window-s 0.3 \
        --out "$OUT/collectives_s64_$1.jsonl" >> "$L" 2>&1
    echo "collectives $1 rc=$? $(date +%T)" >> "$L"
    PYTHONPATH=$P timeout 60 torchrun --standalone --nproc-per-node 1 -m piep.sampling.probe \
        main --seconds 2 --out "$OUT/probe_s64_$1.json" >> "$L" 2>&1
    echo "probe $1 rc=$? $(date +%T)" >> "$L"
}
e2e old; e2e new
rep new; rep old
coll old; coll new
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl >> "$L"; grep -vE "^\[" "$L" | grep -E "J, |rc=|Error|rror:" | tail -n 40
