#!/usr/bin/env bash
# Device call 65 (nvidia-h200), session 19 (issue 32): the collective sampler's capture
# under the shared protocol, which call 64 could not reach (at a world of one, piep's Dist
# starts no process group, so `calibrate collectives` under torchrun --nproc-per-node 1
# failed, before and after alike). Here a one-rank NCCL group is started first, then
# run_collectives measures AllReduce (SUM, the settle() path) and AllGather, 16-128 MiB,
# graph and eager, with the code before the change (ab/old) and after, twice in ABBA
# order -> collectives_s65_{old,new}{1,2}.jsonl. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run65.log"
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
one() {  # $1 old|new, $2 pass
    local P=$PWD/ab/old; [ "$1" = new ] && P=$PWD
    PYTHONPATH=$P timeout 120 python3 -c "
import torch, torch.distributed as dist
from pathlib import Path
dist.init_process_group('nccl', init_method='tcp://127.0.0.1:29517', rank=0, world_size=1,
                        device_id=torch.device('cuda', 0))
from piep.sampling.calibrate import run_collectives
run_collectives(Path('$OUT/collectives_s65_$1$2.jsonl'), sizes=tuple(2 ** k for k in range(24, 28)),
                kinds=('allreduce', 'allgather'), min_window_s=0.3)
import os; os._exit(0)
" >> "$L" 2>&1
    echo "collectives $1 $2 rc=$? $(date +%T)" >> "$L"
}
one old 1; one new 1; one new 2; one old 2
echo "== done $(date +%T)" >> "$L"
grep -E "rc=|rror" "$L" | tail -n 12
