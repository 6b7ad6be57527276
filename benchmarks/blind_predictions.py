"""Blind predictions of a design, written before any of its runs.

    python benchmarks/blind_predictions.py x4x8    # issue 17: 4 and 8 GPUs
    python benchmarks/blind_predictions.py mha     # issue 33: MHA models at small batches

Prices every configuration of a set's designs with the predictor frozen for it (a
committed copy of the shipped predictor of the day) and writes the set's predictions, one
line per configuration with its key. Committed before the runs, these are the blind test:
once the runs exist, `python benchmarks/blind_unlisted.py` scores the same frozen
predictor on them.

* x4x8: `e2e/design_x4.jsonl`, `design_x8.jsonl` by `predictor_blind_x4x8/` (collectives
  measured at n = 2 and scaled beyond: flagged `extrapolated`) -> `e2e/predictions_x4x8.jsonl`.
* mha: `e2e/design_mha.jsonl` (llama-2-7b, llama-2-13b, vicuna-33b at small batches, piep's
  default workload first) by `predictor_blind_mha/`, the predictor of commit 511eb80, whose
  attention had no sample of 32 query and 32 KV heads near batch 1 -> `e2e/predictions_mha.jsonl`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.core.artifacts import write_text  # noqa: E402
from piep.core.gpus import load_gpu  # noqa: E402
from piep.predict.pricing import price  # noqa: E402
from piep.predict.store import load  # noqa: E402
from piep.core.layout import validate  # noqa: E402
from piep.sampling.grid import config_key, load_design, parallel_workload, spec_of  # noqa: E402

CAL = ROOT / "calibration" / "h200"
SETS = {  # name -> (designs, frozen predictor folder, predictions file)
    "x4x8": (("design_x4.jsonl", "design_x8.jsonl"), "predictor_blind_x4x8",
             "predictions_x4x8.jsonl"),
    "mha": (("design_mha.jsonl",), "predictor_blind_mha", "predictions_mha.jsonl"),
}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in SETS:
        print(f"usage: python benchmarks/blind_predictions.py {{{','.join(SETS)}}}",
              file=sys.stderr)
        return 2
    designs, folder, out = SETS[argv[0]]
    if (CAL / "e2e" / out).exists():  # blind predictions are written once, before the runs
        print(f"e2e/{out} exists: the set's blind predictions are committed; delete it to "
              "predict again (it is then no longer blind)", file=sys.stderr)
        return 1
    gpu = load_gpu("h200")
    model = load(CAL / folder, gpu)
    rows = [cfg for name in designs for cfg in load_design(CAL / "e2e" / name)]
    priced = price([validate(spec_of(cfg), *parallel_workload(cfg), gpu) for cfg in rows],
                   model, detail=True)
    lines = []
    for i, cfg in enumerate(rows):
        doc = priced.document(i)
        lines.append(json.dumps({
            "key": config_key(cfg), "layout": cfg["layout"], "energy_j": doc["energy_j"],
            "time_s": doc["time_s"], "interval": doc["interval"], "flags": doc["flags"],
            "predictor": f"calibration/h200/{folder}"}))
    write_text(CAL / "e2e" / out, "\n".join(lines) + "\n")
    by_layout: dict[str, int] = {}
    for cfg in rows:
        by_layout[cfg["layout"]] = by_layout.get(cfg["layout"], 0) + 1
    print(f"{len(rows)} configurations predicted into e2e/{out}: "
          + ", ".join(f"{k} {v}" for k, v in sorted(by_layout.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
