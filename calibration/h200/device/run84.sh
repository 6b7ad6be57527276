#!/usr/bin/env bash
# Device call 84 (nvidia-h200), session 36, on the H200 that calls 77, 78 and 73 held
# (issue 52): transformers generate(), eager, at workloads in no earlier MoE design
# (calibration/h200/moe/design_eager4.jsonl: held out; no blind prediction was committed
# before it ran, and no fit reads these runs) -> moe_s84_eager.jsonl, copied to
# calibration/h200/moe/raw/. Run as `PIEP_GIT_COMMIT=<commit> bash calibration/h200/device/run84.sh`.
# (It ran as this command given inline, at commit 9e6a46225350, before this file was written.)
# Read-only on the GPU: nothing here sets a clock or a limit.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
timeout 230 python3 -m piep measure --grid calibration/h200/moe/design_eager4.jsonl \
    --out "$OUT/moe_s84_eager.jsonl" --budget-s 200 2>&1 | tee "$OUT/run84.log" \
    | grep -E " J, |rror|failed"
