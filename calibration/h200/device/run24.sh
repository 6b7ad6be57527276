#!/usr/bin/env bash
# Device call 24 (nvidia-h200), session 6: (1) kv_expand module samples again with the
# graph-mode decode call compiled (sampler op 2: hf-static compiles its decode step and
# inductor's copy kernel runs ~3x faster than the eager strided copy call 23 sampled;
# seed 6, 45 shapes); (2) hf-static on two more shapes at larger batches and caches
# (design_tp1b.jsonl: qwen2.5-14b, piep-unlisted-3b), training runs. Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run24.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout ${MOD_LIMIT_S:-190} python3 -m piep calibrate modules --kinds kv_expand --seed 6 \
    --per-kind 45 --out "$OUT/modules_kv_expand_v2.jsonl" --budget-s ${MOD_S:-150} >> "$L" 2>&1
echo "modules rc=$? $(date +%T)" >> "$L"
timeout $((${STATIC_S:-330} + 50)) python3 -m piep measure --engine hf-static \
    --grid $E/hf-static/design_tp1b.jsonl --out "$OUT/static_tp1b.jsonl" \
    --budget-s ${STATIC_S:-330} >> "$L" 2>&1
echo "hf-static rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=" "$L" | tail -n 20
