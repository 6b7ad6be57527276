"""Blind test of `piep serve`: traces predicted before they were replayed on the GPU.

    python benchmarks/serving_blind.py --write   # predict (before the device calls)
    python benchmarks/serving_blind.py           # score the predictions on the replays

`--write` predicts every (shape, trace) of device calls 19-20 with the hf-cb profile then
shipped (fitted on llama-3-8b only, device call 18) and writes
`calibration/h200/engines/hf-cb/predictions_blind.jsonl` with the commit it ran at; that
file is committed before the replays exist. Scoring reads the replays in
`calibration/h200/engines/hf-cb/raw/` and prints each trace and the MAPE per shape.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.artifacts import read_jsonl, write_text  # noqa: E402

CB = ROOT / "calibration" / "h200" / "engines" / "hf-cb"
OUT = CB / "predictions_blind.jsonl"
LOADS = ("low", "mid", "saturated", "surge")
SHAPES = ("llama-2-7b", "qwen2.5-7b", "configs/piep-unlisted-9b.json", "llama-3-8b",
          "llama-2-13b")
KEYS = ("energy_j", "time_s", "tpot_p50_s", "e2e_p50_s")


def model_arg(shape: str) -> str:
    return str(CB / shape) if shape.endswith(".json") else shape


def write() -> int:
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    rows = []
    for shape in SHAPES:
        for load in LOADS:
            trace = CB / "traces" / f"{load}.jsonl"
            out = subprocess.run([sys.executable, "-m", "piep", "serve", "--model",
                                  model_arg(shape), "--engine", "hf-cb", "--trace", str(trace),
                                  "--json"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout
            doc = json.loads(out)
            rows.append({"model": Path(shape).stem if shape.endswith(".json") else shape,
                         "trace": f"{load}.jsonl", "energy_j": doc["energy_j"],
                         "time_s": doc["time_s"], "tpot_p50_s": doc["tpot_s"]["p50"],
                         "e2e_p50_s": doc["e2e_s"]["p50"],
                         "interval_energy_j": doc.get("interval", {}).get("energy_j"),
                         "flags": doc.get("flags", []), "commit": commit})
            print(rows[-1])
    write_text(OUT, "".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {OUT.relative_to(ROOT)} ({len(rows)} predictions at {commit})")
    return 0


def measured() -> dict[tuple[str, str], dict]:
    """(model, trace file name) -> the measured quantities of the replay."""
    from piep.serving.fit import observed
    out = {}
    for f in sorted((CB / "raw").glob("*.jsonl")):
        for rec in read_jsonl(f):
            e, tpot, e2e = observed(rec)
            out[(rec["model"], Path(rec["trace"]).name)] = {
                "energy_j": e, "time_s": rec["time_s"], "tpot_p50_s": tpot, "e2e_p50_s": e2e}
    return out


def score() -> int:
    if not OUT.exists():
        print(f"no predictions: run with --write first ({OUT.relative_to(ROOT)})")
        return 1
    meas = measured()
    errs: dict[str, dict[str, list[float]]] = {}
    print("model trace: " + ", ".join(f"{k} pred/meas" for k in KEYS))
    for p in read_jsonl(OUT):
        m = meas.get((p["model"], p["trace"]))
        if m is None:
            continue
        e = {k: p[k] / m[k] - 1 for k in KEYS}
        for k in KEYS:
            errs.setdefault(p["model"], {}).setdefault(k, []).append(e[k])
            errs.setdefault("all", {}).setdefault(k, []).append(e[k])
        print(f"{p['model']} {p['trace']}: " + ", ".join(
            f"{p[k]:.4g}/{m[k]:.4g} ({100 * e[k]:+.1f} %)" for k in KEYS))
    if not errs:
        print("no replay of a predicted trace yet")
        return 1
    for model, by in errs.items():
        print(f"{model} ({len(by['energy_j'])} traces): " + ", ".join(
            f"{k} MAPE {100 * statistics.mean(map(abs, v)):.1f} %" for k, v in by.items()))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="predict and write the file")
    raise SystemExit(write() if ap.parse_args().write else score())
