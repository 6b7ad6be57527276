"""Blind tests: predictors trained before a set of shapes was measured, on those runs.

    python benchmarks/blind_unlisted.py

* device call 12 (`raw/e2e_s3_unl_*.jsonl`: piep-unlisted-6b, -9b; tp1 / tp2 / pp2), with
  the predictor of commit f9b6957 (`calibration/h200/predictor_blind/`);
* device call 13 (`raw/e2e_s3_hd.jsonl`: head dims 64 and 96, which no training run or
  module sample had), with the predictor of commit 6e0a191
  (`calibration/h200/predictor_blind_hd/`);
* the 4- and 8-GPU design (`raw/e2e_x4*.jsonl`, `raw/e2e_x8*.jsonl`, issue 17; not yet
  measured), with the predictor frozen in `calibration/h200/predictor_blind_x4x8/` whose
  predictions were committed first (`e2e/predictions_x4x8.jsonl`);
* device call 57 (`raw/e2e_s57_mha.jsonl`: llama-2-7b, llama-2-13b, vicuna-33b at small
  batches, the default workload first), with the predictor of commit 511eb80
  (`calibration/h200/predictor_blind_mha/`), predictions committed first
  (`e2e/predictions_mha.jsonl`).

The predictors are kept as committed copies, so the tests stay reproducible after
retraining. Prints every run and the MAPE by mode.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.core.artifacts import read_jsonl  # noqa: E402
from piep.core.gpus import load_gpu  # noqa: E402
from piep.predict.pricing import price  # noqa: E402
from piep.predict.store import load  # noqa: E402
from piep.core.records import Measurement  # noqa: E402

CAL = ROOT / "calibration" / "h200"
TESTS = {  # name -> (measured runs, predictor trained before them)
    "call 12: unlisted 6b, 9b": ("e2e_s3_unl_*.jsonl", "predictor_blind"),
    "call 13: head dims 64, 96": ("e2e_s3_hd.jsonl", "predictor_blind_hd"),
    # issue 17: 4 and 8 GPUs, predicted before the runs (e2e/predictions_x4x8.jsonl)
    "4 and 8 GPUs": ("e2e_x[48]*.jsonl", "predictor_blind_x4x8"),
    # issue 33: MHA models at small batches, piep's default workload first (device call 57;
    # predicted before the runs: e2e/predictions_mha.jsonl)
    "call 57: MHA at small batches": ("e2e_s57_mha.jsonl", "predictor_blind_mha"),
}


def predict_runs(name: str):
    """(measured record, prediction document) of every run of one blind test."""
    pattern, folder = TESTS[name]
    gpu = load_gpu("h200")
    model = load(CAL / folder, gpu)
    recs = [r for f in sorted((CAL / "e2e" / "raw").glob(pattern)) for r in read_jsonl(f)
            if r.get("schema") == "piep.measurement"]
    if not recs:
        return
    priced = price([Measurement.from_json(r).deployment(gpu) for r in recs], model,
                   detail=True)
    for i, r in enumerate(recs):
        yield r, priced.document(i)


def main() -> int:
    for name, (_, folder) in TESTS.items():
        rows = [(r, doc["energy_j"] / r["energy_j"] - 1, doc["time_s"] / r["time_s"] - 1,
                 doc["flags"]) for r, doc in predict_runs(name)]
        print(f"== {name} (predictor {folder})")
        if not rows:
            print("no runs measured yet")
            continue
        for r, e, t, flags in sorted(rows, key=lambda x: (x[0]["model"], x[0]["mode"],
                                                          x[0]["tp"], x[0]["pp"])):
            print(f"{r['model']:19s} tp{r['tp']} pp{r['pp']} {r['mode']:5s} batch {r['batch']:3d} "
                  f"prompt {r['prompt_len']:4d} gen {r['gen_len']:3d}: energy {100 * e:+5.1f} %, "
                  f"time {100 * t:+5.1f} % {' '.join(flags)}")
        for mode in ("graph", "eager"):
            sel = [(e, t) for r, e, t, _ in rows if r["mode"] == mode]
            if sel:
                print(f"{mode}: {len(sel)} runs, energy MAPE "
                      f"{100 * statistics.mean(abs(e) for e, _ in sel):.1f} %, time MAPE "
                      f"{100 * statistics.mean(abs(t) for _, t in sel):.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
