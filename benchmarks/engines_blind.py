"""Blind test of the engine profiles: runs of models and shapes no engine run had, predicted
before they were measured.

    python benchmarks/engines_blind.py --predict   # before the device call: predictions
    python benchmarks/engines_blind.py             # after it: predicted vs measured

The predictions file (`calibration/h200/engines/blind_predictions.jsonl`) is written by the
code of the commit it names and committed before the runs are measured. A static cache
keeps the largest earlier call's length on the same model object, so each hf-static row
is predicted with the cache length its place in the design gives it.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep import api  # noqa: E402
from piep.artifacts import git_hash, read_jsonl, write_text  # noqa: E402
from piep.sampling.grid import config_key, spec_of  # noqa: E402

ENGINES = ROOT / "calibration" / "h200" / "engines"
PREDICTIONS = ENGINES / "blind_predictions.jsonl"
# call 17 measured the design within its budget; call 22 the rest (hf-static)
MEASURED = ("raw/call17_blind.jsonl", "raw/call22_blind.jsonl")


def design_rows(engine: str) -> list[dict]:
    rows = read_jsonl(ENGINES / engine / "design_blind.jsonl")
    largest: dict[str, int] = {}
    for r in rows:  # the static cache of a model object grows to the largest call so far
        cache = max(largest.get(r["model"], 0), r["prompt_len"] + r["gen_len"])
        largest[r["model"]] = cache
        r["cache_len"] = cache if engine == "hf-static" else None
    return rows


def predict_row(r: dict) -> dict:
    cache = r["cache_len"] if r["cache_len"] and r["cache_len"] > r["prompt_len"] + \
        r["gen_len"] else None
    doc = api.predict(spec_of(r), engine=r["engine"], tp=r["tp"], batch=r["batch"],
                      prompt_len=r["prompt_len"], gen_len=r["gen_len"], cache_len=cache)
    return {"key": config_key(r), "engine": r["engine"], "cache_len": cache,
            "energy_j": doc["energy_j"], "time_s": doc["time_s"],
            "prefill_energy_j": doc["prefill"]["energy_j"], "flags": doc["flags"],
            "engine_ref": doc["engine_ref"]}


def main() -> int:
    engines = ("hf-static", "hf-eager")
    if "--predict" in sys.argv:
        preds = [{**predict_row(r), "commit": git_hash()} for e in engines
                 for r in design_rows(e)]
        write_text(PREDICTIONS, "".join(json.dumps(p) + "\n" for p in preds))
        print(f"wrote {len(preds)} predictions to {PREDICTIONS}")
        return 0
    for line in blind_summary(engines, verbose=True):
        print(line)
    return 0


def blind_summary(engines=("hf-static", "hf-eager"), verbose: bool = False) -> list[str]:
    """Per engine: MAPE of the committed predictions against the measured blind runs, and
    of today's code (with each run's measured cache length)."""
    out = []
    preds = {p["key"]: p for p in read_jsonl(PREDICTIONS)}
    for engine in engines:
        measured = [r for f in MEASURED if (ENGINES / engine / f).exists()
                    for r in read_jsonl(ENGINES / engine / f)
                    if r.get("schema") == "piep.measurement" and r.get("energy_j")]
        rows = {config_key(r): r for r in design_rows(engine)}
        blind, today = [], []
        for m in measured:
            p = preds[m["key"]]
            now = predict_row({**rows[m["key"]], "cache_len": (m.get("static_cache_len") or 0)
                               + 1 if engine == "hf-static" else None})
            blind.append((p["energy_j"] / m["energy_j"] - 1, p["time_s"] / m["time_s"] - 1))
            today.append((now["energy_j"] / m["energy_j"] - 1, now["time_s"] / m["time_s"] - 1))
            if verbose:
                out.append(f"{engine} {m['model']:18s} b{m['batch']:3d} p{m['prompt_len']:5d} "
                           f"g{m['gen_len']:4d} cache {m.get('static_cache_len')}: blind "
                           f"energy {100 * blind[-1][0]:+6.1f} %, time {100 * blind[-1][1]:+6.1f} %")
        for name, errs in (("blind (committed predictions)", blind),
                           ("today's profiles, trained on these runs too (in-sample)", today)):
            if errs:
                out.append(f"{engine} {name}: {len(errs)} runs, energy MAPE "
                           f"{100 * statistics.mean(abs(e) for e, _ in errs):.1f} % "
                           f"({100 * min(e for e, _ in errs):+.0f}..{100 * max(e for e, _ in errs):+.0f} %), "
                           f"time MAPE {100 * statistics.mean(abs(t) for _, t in errs):.1f} %")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
