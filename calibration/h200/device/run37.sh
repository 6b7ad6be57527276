#!/usr/bin/env bash
# Device call 37 (nvidia-h200), session 9: (1) blind set 8's run that call 36's budget cut
# (piep-unlisted-swa5b, batch 24, under hf-eager; resumed: call 36's runs are skipped and
# stripped from the committed file); (2) the kernel census with durations of the 1B shape
# at batch 12 under hf-static and hf-eager (piep over-predicts its energy by 10-30 %: which
# kernels, inside the layers or outside, run shorter than the module models say).
# Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run37.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
cp $E/hf-eager/raw/call36_window4.jsonl "$OUT/call37_window4.jsonl"
timeout ${EAGER_S:-120} python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_window4.jsonl --out "$OUT/call37_window4.jsonl" \
    --budget-s 90 >> "$L" 2>&1
echo "hf-eager rc=$? $(date +%T)" >> "$L"
timeout ${CENSUS_S:-330} python3 -m piep.sampling.census --models piep-unlisted-1b \
    --engines hf-eager hf-static --batch 12 --prompt-len 215 --gen-len 9 \
    --out "$OUT/census_1b.jsonl" >> "$L" 2>&1
echo "census rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|us/layer" "$L" | tail -n 20
