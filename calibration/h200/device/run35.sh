#!/usr/bin/env bash
# Device call 35 (nvidia-h200), session 9: what a decode step past a sliding window costs
# under hf-eager. (1) The kernel census with kernel durations (python -m piep.sampling.census)
# of mistral-7b at batch 8, below its 4096-key window (prompt 3000) and past it (4200);
# (2) module samples of the two copies an eager decode step makes past the window, never
# sampled before: repeat_kv uncompiled (kv_expand, eager) and the sliding cache's
# concatenation of a strided slice (kv_slide); (3) hf-eager runs at one batch below and
# past the window on this host (design_window3.jsonl). Read-only on the GPU.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run35.log"
E=calibration/h200/engines
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
for p in 4200 3000; do
  timeout ${CENSUS_S:-60} python3 -m piep.sampling.census --models mistral-7b --batch 8 \
      --prompt-len $p --gen-len 9 --out "$OUT/census_window.jsonl" >> "$L" 2>&1
  echo "census prompt $p rc=$? $(date +%T)" >> "$L"
done
timeout ${MOD_LIMIT_S:-200} python3 -m piep calibrate modules --kinds kv_expand kv_slide \
    --modes eager --seed 35 --per-kind 40 --out "$OUT/modules_eager_copies_s35.jsonl" \
    --budget-s ${MOD_S:-170} >> "$L" 2>&1
echo "modules rc=$? $(date +%T)" >> "$L"
timeout $((${WIN_S:-170} + 40)) python3 -m piep measure --engine hf-eager \
    --grid $E/hf-eager/design_window3.jsonl --out "$OUT/call35_window3.jsonl" \
    --budget-s ${WIN_S:-170} >> "$L" 2>&1
echo "window3 rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|us/layer" "$L" | tail -n 20
