"""Blind predictions of the 4- and 8-GPU design (issue 17), written before any run.

    python benchmarks/x4x8_predictions.py

Prices every configuration of `calibration/h200/e2e/design_x4.jsonl` and `design_x8.jsonl`
with the predictor frozen in `calibration/h200/predictor_blind_x4x8/` (a copy of the shipped
predictor, whose collectives are measured at n = 2 and scaled beyond: flagged
`extrapolated`) and writes `calibration/h200/e2e/predictions_x4x8.jsonl`, one line per
configuration with its key. Committed before the runs, these are the blind test: once the
runs exist, `python benchmarks/blind_unlisted.py` scores the same frozen predictor on them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.artifacts import write_text  # noqa: E402
from piep.gpus import load_gpu  # noqa: E402
from piep.predict.pricing import price  # noqa: E402
from piep.predict.store import load  # noqa: E402
from piep.layout import validate  # noqa: E402
from piep.sampling.grid import config_key, load_design, parallel_workload, spec_of  # noqa: E402

CAL = ROOT / "calibration" / "h200"
DESIGNS = ("design_x4.jsonl", "design_x8.jsonl")


def main() -> int:
    gpu = load_gpu("h200")
    model = load(CAL / "predictor_blind_x4x8", gpu)
    rows = [cfg for name in DESIGNS for cfg in load_design(CAL / "e2e" / name)]
    priced = price([validate(spec_of(cfg), *parallel_workload(cfg), gpu) for cfg in rows],
                   model, detail=True)
    lines = []
    for i, cfg in enumerate(rows):
        doc = priced.document(i)
        lines.append(json.dumps({
            "key": config_key(cfg), "layout": cfg["layout"], "energy_j": doc["energy_j"],
            "time_s": doc["time_s"], "interval": doc["interval"], "flags": doc["flags"],
            "predictor": "calibration/h200/predictor_blind_x4x8"}))
    write_text(CAL / "e2e" / "predictions_x4x8.jsonl", "\n".join(lines) + "\n")
    by_layout: dict[str, int] = {}
    for cfg in rows:
        by_layout[cfg["layout"]] = by_layout.get(cfg["layout"], 0) + 1
    print(f"{len(rows)} configurations predicted: "
          + ", ".join(f"{k} {v}" for k, v in sorted(by_layout.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
