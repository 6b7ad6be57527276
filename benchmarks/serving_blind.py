"""Blind test of `piep serve`: traces predicted before they were replayed on the GPU.

    python benchmarks/serving_blind.py --write 1|2|3   # predict (before the device call)
    python benchmarks/serving_blind.py                # score the predictions on the replays

`--write 1` predicted every (shape, trace) of device calls 19-20 with the hf-cb profile
then shipped (fitted on llama-3-8b only, device call 18) into `predictions_blind.jsonl`;
`--write 2` those of device call 21 (three shapes and three trace files no replay had)
with the profile fitted on calls 18-20, into `predictions_blind2.jsonl`; `--write 3` those
of device call 49 (three more trace files, chat, rag and flood, on multi-head attention,
12 query heads per K/V head and a 24B; no replay had any of them) with the profile fitted
on calls 18-21, into `predictions_blind3.jsonl`. Each file names
the commit it ran at and was committed before its replays existed. Scoring reads the
replays in `calibration/h200/engines/hf-cb/raw/` and prints each trace and the MAPE per
shape.
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
OUT2 = CB / "predictions_blind2.jsonl"
OUT3 = CB / "predictions_blind3.jsonl"
SETS = {  # file, shapes, trace files
    "1": (OUT, ("llama-2-7b", "qwen2.5-7b", "configs/piep-unlisted-9b.json", "llama-3-8b",
                "llama-2-13b"), ("low", "mid", "saturated", "surge")),
    "2": (OUT2, ("mistral-7b", "qwen2.5-14b", "configs/piep-unlisted-hd64.json"),
          ("trickle", "steady", "spike")),
    "3": (OUT3, ("configs/piep-unlisted-mha5b.json", "configs/piep-unlisted-kv2.json",
                 "mistral-small-24b"), ("chat", "rag", "flood")),
}
# a predictions file's keys, and the names the rows of a blind test give them (those of
# `piep.serving.fit.case_row`)
FILE_KEYS = ("energy_j", "time_s", "tpot_p50_s", "e2e_p50_s")
KEYS = ("energy_j", "time_s", "tpot_s", "e2e_s")


def model_arg(shape: str) -> str:
    return str(CB / shape) if shape.endswith(".json") else shape


def write(which: str) -> int:
    out_file, shapes, loads = SETS[which]
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    rows = []
    for shape in shapes:
        for load in loads:
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
    write_text(out_file, "".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {out_file.relative_to(ROOT)} ({len(rows)} predictions at {commit})")
    return 0


def measured() -> dict[tuple[str, str], dict]:
    """(model, trace file name) -> the measured quantities of the replay."""
    from piep.serving.fit import observed
    out = {}
    for f in sorted((CB / "raw").glob("*.jsonl")):
        for rec in read_jsonl(f):
            e, tpot, e2e = observed(rec)
            out[(rec["model"], Path(rec["trace"]).name)] = {
                "energy_j": e, "time_s": rec["time_s"], "tpot_s": tpot, "e2e_s": e2e}
    return out


def blind_rows(path: Path = OUT) -> list[dict]:
    """Every prediction of `path` whose trace has been replayed, beside the replay."""
    meas = measured()
    rows = []
    for p in read_jsonl(path) if path.exists() else []:
        m = meas.get((p["model"], p["trace"]))
        if m is not None:
            rows.append({"model": p["model"], "trace": p["trace"], "commit": p["commit"],
                         **{f"pred_{k}": p[f] for f, k in zip(FILE_KEYS, KEYS)}, **m})
    return rows


def score() -> int:
    rows = [r for f, _, _ in SETS.values() for r in blind_rows(f)]
    if not rows:
        print("no replay of a predicted trace yet")
        return 1
    print("model trace: " + ", ".join(f"{k} pred/meas" for k in KEYS))
    errs: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        e = {k: r[f"pred_{k}"] / r[k] - 1 for k in KEYS}
        for group in (r["model"], "all"):
            for k in KEYS:
                errs.setdefault(group, {}).setdefault(k, []).append(e[k])
        print(f"{r['model']} {r['trace']}: " + ", ".join(
            f"{r[f'pred_{k}']:.4g}/{r[k]:.4g} ({100 * e[k]:+.1f} %)" for k in KEYS))
    for model, by in errs.items():
        print(f"{model} ({len(by['energy_j'])} traces): " + ", ".join(
            f"{k} MAPE {100 * statistics.mean(map(abs, v)):.1f} %" for k, v in by.items()))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", choices=tuple(SETS), help="predict and write that set's file")
    args = ap.parse_args()
    raise SystemExit(write(args.write) if args.write else score())
