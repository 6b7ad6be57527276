#!/usr/bin/env bash
# PLANNED in session 30, not yet run (issue 52, expert parallelism): transformers
# generate(), eager, with the experts sharded whole over the tensor-parallel ranks
# (DistributedConfig(tp_plan="auto", enable_expert_parallel=True), piep.sampling.hf) beside
# the same layouts with each expert split by width (ep = 1), on the Qwen3-30B-A3B and
# Mixtral 8x7B shapes, tp = ep = 2, 4, 8, batch 8 and 32 (design_eager_ep.jsonl, 24 rows;
# made by this snippet, run from the repository root:
#   python - <<'EOF'
#   import json
#   rows = []
#   for model in ("qwen3-30b-a3b-shape", "mixtral-8x7b-shape"):
#       cfg = json.load(open(f"calibration/h200/moe/configs/{model}.json"))
#       for tp in (2, 4, 8):
#           for ep in (1, tp):
#               for b, p in ((8, 512), (32, 1024)):
#                   rows.append({"batch": b, "config": cfg, "dp": 1, "engine": "hf-eager",
#                                "ep": ep, "gen_len": 32, "mode": "eager", "model": model,
#                                "pp": 1, "prompt_len": p, "tp": tp})
#   open("calibration/h200/moe/design_eager_ep.jsonl", "w").write(
#       "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
#   EOF
# ). N GPUs run the rows of tp = N:
#   run(kind="nvidia-h200-x2", command="bash calibration/h200/moe/planned_ep.sh 2")
#   run(kind="nvidia-h200-x4", command="bash calibration/h200/moe/planned_ep.sh 4")
#   run(kind="nvidia-h200-x8", command="bash calibration/h200/moe/planned_ep.sh 8")
# with PIEP_GIT_COMMIT set; move it to calibration/h200/device/runNN.sh first. Predicted
# before any run: predictions_blind_ep.jsonl (`python benchmarks/heldout_accuracy.py moe
# --predict design_eager_ep.jsonl`, commit in the file), by a tree that split the
# attention over the ranks at ep = tp; since session 44 (read in transformers 5.17's
# `base_model_ep_plan`, no run) the ep = tp rows are priced with the attention, dense MLPs
# and LM head whole on every rank (predictions_blind_ep_s44.jsonl, `... --predict
# design_eager_ep.jsonl --again s44`), and the report scores both files. After it: copy moe_ep_xN.jsonl to
# raw/ and `python benchmarks/heldout_accuracy.py moe --write`. Read-only on the GPUs.
set -uo pipefail
N=${1:?give the number of GPUs: 2, 4 or 8}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PIEP_GIT_COMMIT=${PIEP_GIT_COMMIT:-unknown}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
L="$OUT/moe_ep_x$N.log"
B=${TOTAL_S:-520}
echo "== start $(date +%T) commit $PIEP_GIT_COMMIT" >> "$L"
timeout $((B + 60)) torchrun --standalone --nproc-per-node "$N" -m piep measure \
    --grid calibration/h200/moe/design_eager_ep.jsonl --out "$OUT/moe_ep_x$N.jsonl" \
    --budget-s "$B" >> "$L" 2>&1
echo "ep rc=$? == done $(date +%T)" >> "$L"
wc -l "$OUT"/*.jsonl; grep -E " J, |failed|Error|rc=|^piep:" "$L" | tail -n 30
