"""Blind test: the predictor of commit f9b6957 (trained before these shapes were measured)
on the end-to-end runs of the two unlisted shapes of device call 12.

    python benchmarks/blind_unlisted.py [PREDICTOR_FOLDER]

PREDICTOR_FOLDER defaults to the committed `calibration/h200/predictor_blind/`, a copy of
the predictor as it was shipped before device call 12 (so the test stays reproducible
after retraining). Prints per-run errors and MAPE by mode.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.artifacts import read_jsonl  # noqa: E402
from piep.gpus import load_gpu  # noqa: E402
from piep.predict.engine import evaluate  # noqa: E402
from piep.predict.learned import LearnedModel  # noqa: E402
from piep.predict.train import deployment_of  # noqa: E402

RUNS = sorted((ROOT / "calibration" / "h200" / "e2e" / "raw").glob("e2e_s3_unl_*.jsonl"))


BLIND = ROOT / "calibration" / "h200" / "predictor_blind"


def predict_runs(folder: Path = BLIND):
    """(measured record, prediction document) of every run of device call 12."""
    gpu = load_gpu("h200")
    model = LearnedModel.load(folder, gpu)
    for f in RUNS:
        for r in read_jsonl(f):
            if r.get("schema") == "piep.measurement":
                yield r, evaluate(deployment_of(r, gpu), model)


def main() -> int:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else BLIND
    rows = [(r, doc["energy_j"] / r["energy_j"] - 1, doc["time_s"] / r["time_s"] - 1)
            for r, doc in predict_runs(folder)]
    model = LearnedModel.load(folder, load_gpu("h200"))
    print(f"predictor {folder} (trained on {model.meta.get('e2e_train')} e2e runs)")
    for r, e, t in sorted(rows, key=lambda x: (x[0]["model"], x[0]["mode"], x[0]["tp"], x[0]["pp"])):
        print(f"{r['model']:17s} tp{r['tp']} pp{r['pp']} {r['mode']:5s} batch {r['batch']:3d} "
              f"prompt {r['prompt_len']:4d} gen {r['gen_len']:3d}: energy {100 * e:+5.1f} %, "
              f"time {100 * t:+5.1f} %")
    for mode in ("graph", "eager"):
        sel = [(e, t) for r, e, t in rows if r["mode"] == mode]
        if sel:
            print(f"{mode}: {len(sel)} runs, energy MAPE {100 * statistics.mean(abs(e) for e, _ in sel):.1f} %, "
                  f"time MAPE {100 * statistics.mean(abs(t) for _, t in sel):.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
