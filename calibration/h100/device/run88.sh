#!/usr/bin/env bash
# Device call 88 (nvidia-h100-x1), session 38 (issue 52): a diagnosis on an H100 while no
# H200 came (eight starts failed). Nothing here enters a calibration. The two leaves of
# session 37 run on a CUDA card for the first time, before call 85 samples them on an H200:
# (1) `sinks_attention` (gpt-oss's eager attention with sinks, whole) at the shapes of call
#     87's census (gpt-oss-20b's shape, hf-eager, batch 8, prompt 512: its prefill and a
#     decode step), beside the census's kernels on the same card -> sinks_census_s88.jsonl;
# (2) a short draw of each new leaf through `piep calibrate modules`, the path call 85
#     takes (sinks_attention seed 98, experts_bmm seed 96) -> modules_smoke_s88.jsonl.
# Run as `PIEP_GIT_COMMIT=<commit> bash calibration/h100/device/run88.sh`. Read-only.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
L="$OUT/run88.log"
M=calibration/h200/moe/configs
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
nvidia-smi --query-gpu=name,uuid,power.limit --format=csv,noheader >> "$L"
timeout 100 python3 - "$M/gpt-oss-20b-shape.json" "$OUT/sinks_census_s88.jsonl" >> "$L" 2>&1 <<'PY'
import json, sys
from piep import api
from piep.core.writer import append_record
from piep.sampling.calibrate import _gpu_meter, stamped
from piep.sampling.modules import sample_shape
from piep.tree import build_tree
from piep.tree.builder import shape_key
dep = api.deployment(sys.argv[1], engine="hf-eager", batch=8, prompt_len=512, gen_len=9)
shapes = {repr(sorted(shape_key(n).items())): shape_key(n)
          for _, _, n in build_tree(dep).walk() if n.kind == "sinks_attention"}
device, nvml, meter, idle_w = _gpu_meter()
for s in shapes.values():
    row = sample_shape({**s, "mode": "graph"}, "graph", meter=meter, idle_w=idle_w,
                       device=device, nvml=nvml)
    append_record(sys.argv[2], stamped({**row, "census_shape": "gpt-oss-20b b8 p512"}, s,
                                       repeat=0, uuid=nvml.uuid, idle_w=idle_w))
    print(s, f"{1e6 * row['time_s']:.1f} us", f"{row['power_w']:.0f} W", flush=True)
PY
echo "census shapes rc=$? $(date +%T)" >> "$L"
timeout 60 python3 -m piep calibrate modules --kinds sinks_attention --modes graph \
    --models $M/gpt-oss-20b-shape.json --seed 98 --per-kind 4 --repeat-every 1000 \
    --out "$OUT/modules_smoke_s88.jsonl" --budget-s 45 >> "$L" 2>&1
echo "sinks rc=$? $(date +%T)" >> "$L"
timeout 60 python3 -m piep calibrate modules --kinds experts_bmm --modes graph \
    --models $M/piep-llama4-scout-20l.json --seed 96 --per-kind 4 --repeat-every 1000 \
    --out "$OUT/modules_smoke_s88.jsonl" --budget-s 45 >> "$L" 2>&1
echo "bmm rc=$? $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E "us |failed|Error|rc=|samples|^piep:" "$L" | tail -n 30
