#!/usr/bin/env bash
# Device call 99 (nvidia-h100-x1), session 49: continuous batching (hf-cb) replays on an H100,
# a GPU piep has no calibration of: does `piep serve` carry to another GPU and host? The
# tiny and code traces (calibration/h200/engines/hf-cb/traces) on llama-3-8b and
# qwen2.5-14b, predicted before from the H100's spec sheet and the H200's hf-cb profile
# (`python benchmarks/serving_blind.py --write 6` -> calibration/h100/serving/
# predictions_blind_cb6.jsonl, at the typical host and a grid of host probes)
# -> cb_s99_<model>.jsonl; scored by `python benchmarks/serving_blind.py`. No fit reads
# them. Run as `PIEP_GIT_COMMIT=<commit> bash calibration/h100/device/run99.sh`;
# read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run99.log"
T=calibration/h200/engines/hf-cb/traces
END=$(( $(date +%s) + ${TOTAL_S:-420} ))
left() { echo $(( END - $(date +%s) )); }
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
for m in llama-3-8b qwen2.5-14b; do  # (each about two minutes: a load, the two windows)
    B=$(( $(left) - 10 ))
    [ "$B" -gt 120 ] || break
    timeout $B python3 -m piep measure --engine hf-cb --model $m \
        --trace $T/tiny.jsonl $T/code.jsonl --out "$OUT/cb_s99_$m.jsonl" >> "$L" 2>&1
    echo "cb $m rc=$? $(date +%T) left $(left) s" >> "$L"
done
echo "== done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E "^piep:|GPU boards|rc=|Error" "$L" | tail -n 20
