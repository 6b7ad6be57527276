"""Blind tests of the engine profiles: runs of models and shapes the profiles' runs did not
have, predicted before they were measured.

    python benchmarks/engines_blind.py --predict --set 2   # before the device call
    python benchmarks/engines_blind.py                     # after it: predicted vs measured

Set 1: `design_blind.jsonl` (device calls 17 and 22), predicted at commit 22f52b1; set 2:
`design_blind2.jsonl` (device calls 25-26), predicted by the profiles refitted on the
engines' kernel samples; set 3: `design_blind3.jsonl` and hf-eager's
`design_replicates.jsonl` (earlier runs measured again on another host; device calls
27-28), predicted by the per-host profiles of session 6; set 4: `design_blind4.jsonl`
(device call 29), predicted by the profiles refitted after set 3 with hf-eager's host
queueing ahead of the GPU (hf-static's two 20B runs measured by call 32); set 5:
`design_blind5.jsonl` (small shapes with tied embeddings, a Qwen2 with biases, a Mistral
shape with a 1024-key sliding window) and hf-eager's `design_window.jsonl` (runs past a
sliding window, mistral-7b's among them; device calls 31-32), predicted by the profiles
with transformers' sliding window in the tree (hf-eager's cut window runs measured by
call 32); set 6: hf-static's `design_window.jsonl` (its sliding cache; device call 33);
set 7: hf-eager's `design_window2.jsonl` (mistral-7b past its window; device call 34),
predicted by the profiles refitted on calls 31-33; set 8: `design_window4.jsonl` (a
2048-key window at head dim 96 in no public list under both engines, mistral-7b and the
1024-key shape past the window at larger batches; device call 36, its last run call 37),
predicted after the eager copies past a window were sampled (call 35); set 9:
`design_layers.jsonl` (8 and 64 layers under both engines, qwen2.5-32b's 64 under
hf-static; device call 40), predicted after hf-static's compiled step was given fused
pointwise kernels, and by a candidate profile without them (`--candidate unfused`, its
profile given as a user's: `PIEP_DATA_DIR`); set 10: `design_blind10.jsonl` (shapes
each engine's runs never had; device call 42), predicted by the profiles that refit their
combiners on their own runs; set 11: `design_blind11.jsonl` (device call 43), predicted
by the profiles refitted on set 10 (its hf-static mistral-small-24b row measured by call
44); set 12: `design_blind12.jsonl` (prefills near the board's power limit; device call
44), predicted by the predictor that holds each phase under the limit, and by the code
before it (`--candidate unheld`, run from a checkout of that commit); set 13:
`design_blind13.jsonl` (batches of 96-128, generations of 1000-1200 tokens, a grouped-
query ratio of 12 in no public list; device call 45), predicted by the profiles refitted
on call 44; set 14: `design_blind14.jsonl` (device call 50); set 15: `design_blind15.jsonl`
(an 11B and a small Qwen2-type shape in no public list; device call 54), predicted at the
typical host and at a grid of host probes; set 16: `design_blind16.jsonl` (device call 56),
predicted by profiles that priced energy per board (its file names the board the profile's
energies were for: scored also with energy scaled by each run's board probe over it; the
trial was undone after this set). A predictions file
(`calibration/h200/engines/blind_predictions*.jsonl`) is written by the code of the commit
it names and committed before the runs are measured. A static cache
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
from piep.core.artifacts import git_hash, read_jsonl, write_text  # noqa: E402
from piep.core.records import Measurement  # noqa: E402
from piep.sampling.grid import config_key, spec_of  # noqa: E402
from serving_blind import PROBE_GRID_US, at_probe  # noqa: E402

ENGINES = ROOT / "calibration" / "h200" / "engines"
# set -> (design files of each engine, predictions file, measured files of each engine);
# in set 1, call 17 measured the design within its budget, call 22 the rest (hf-static);
# set 3 adds runs measured again on another host (design_replicates.jsonl)
SETS = {1: (("design_blind.jsonl",), "blind_predictions.jsonl",
            ("raw/call17_blind.jsonl", "raw/call22_blind.jsonl")),
        2: (("design_blind2.jsonl",), "blind_predictions2.jsonl", ("raw/call25_blind2.jsonl",)),
        3: (("design_blind3.jsonl", "design_replicates.jsonl"), "blind_predictions3.jsonl",
            ("raw/call27_blind3.jsonl", "raw/call27_replicates.jsonl",
             "raw/call28_blind3.jsonl")),
        4: (("design_blind4.jsonl",), "blind_predictions4.jsonl",
            ("raw/call29_blind4.jsonl", "raw/call32_blind4.jsonl")),
        5: (("design_blind5.jsonl", "design_window.jsonl"), "blind_predictions5.jsonl",
            ("raw/call31_blind5.jsonl", "raw/call31_window.jsonl", "raw/call32_window.jsonl",
             "raw/call32_blind5.jsonl")),
        6: (("design_window.jsonl",), "blind_predictions6.jsonl", ("raw/call33_window.jsonl",)),
        7: (("design_window2.jsonl",), "blind_predictions7.jsonl", ("raw/call34_window2.jsonl",)),
        8: (("design_window4.jsonl",), "blind_predictions8.jsonl",
            ("raw/call36_window4.jsonl", "raw/call37_window4.jsonl")),
        9: (("design_layers.jsonl",), "blind_predictions9.jsonl",
            ("raw/call40_layers.jsonl", "raw/call41_layers.jsonl")),
        10: (("design_blind10.jsonl",), "blind_predictions10.jsonl", ("raw/call42_blind10.jsonl",)),
        11: (("design_blind11.jsonl",), "blind_predictions11.jsonl",
             ("raw/call43_blind11.jsonl", "raw/call44_blind11.jsonl")),
        12: (("design_blind12.jsonl",), "blind_predictions12.jsonl", ("raw/call44_blind12.jsonl",)),
        13: (("design_blind13.jsonl",), "blind_predictions13.jsonl",
             ("raw/call45_blind13.jsonl", "raw/call46_blind13.jsonl")),
        14: (("design_blind14.jsonl",), "blind_predictions14.jsonl",
             ("raw/call50_blind14.jsonl",)),
        15: (("design_blind15.jsonl",), "blind_predictions15.jsonl",
             ("raw/call54_blind15.jsonl",)),
        16: (("design_blind16.jsonl",), "blind_predictions16.jsonl",
             ("raw/call56_blind16.jsonl",))}
# sets from 15 on are also predicted at these host launch probes (us): the run's own probe,
# measured during the run, picks its prediction by interpolation
PROBED_FROM = 15


def device_calls(*folders: Path) -> str:
    """The device calls the measured files of `folders` name (`callNN_*.jsonl`), as
    ranges: "15-17, 22, 24-29"."""
    calls = sorted({int(f.name.split("_")[0].removeprefix("call")) for d in folders
                    for f in d.glob("call*_*.jsonl")})
    spans: list[list[int]] = []
    for c in calls:
        if spans and c == spans[-1][1] + 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in spans)


def design_rows(engine: str, blind_set: int = 1) -> list[dict]:
    rows = [r for f in SETS[blind_set][0] if (ENGINES / engine / f).exists()
            for r in read_jsonl(ENGINES / engine / f)]
    largest: dict[str, int] = {}
    for r in rows:  # the static cache of a model object grows to the largest call so far
        cache = max(largest.get(r["model"], 0), r["prompt_len"] + r["gen_len"])
        largest[r["model"]] = cache
        r["cache_len"] = cache if engine == "hf-static" else None
    return rows


def predict_row(r: dict, host_probe_us: float | None = None) -> dict:
    cache = r["cache_len"] if r["cache_len"] and r["cache_len"] > r["prompt_len"] + \
        r["gen_len"] else None
    doc = api.predict(spec_of(r), engine=r["engine"], tp=r["tp"], batch=r["batch"],
                      prompt_len=r["prompt_len"], gen_len=r["gen_len"], cache_len=cache,
                      host_probe_us=host_probe_us)
    return {"key": config_key(r), "engine": r["engine"], "cache_len": cache,
            "energy_j": doc["energy_j"], "time_s": doc["time_s"],
            "prefill_energy_j": doc["prefill"]["energy_j"], "flags": doc["flags"],
            "engine_ref": doc["engine_ref"]}


def main() -> int:
    engines = ("hf-static", "hf-eager")
    blind_set = int(sys.argv[sys.argv.index("--set") + 1]) if "--set" in sys.argv else None
    if "--predict" in sys.argv:
        blind_set = blind_set or max(SETS)
        preds = [{**predict_row(r), "commit": git_hash()} for e in engines
                 for r in design_rows(e, blind_set)]
        if blind_set >= PROBED_FROM:
            rows = [r for e in engines for r in design_rows(e, blind_set)]
            for p, r in zip(preds, rows):
                p["by_probe_us"] = {str(u): {k: d[k] for k in ("energy_j", "time_s")}
                                    for u in PROBE_GRID_US
                                    for d in [predict_row(r, host_probe_us=u)]}
        path = ENGINES / SETS[blind_set][1]
        if "--candidate" in sys.argv:  # another profile's predictions, scored beside
            name = sys.argv[sys.argv.index("--candidate") + 1]
            path = path.with_name(f"{path.stem}_{name}.jsonl")
        write_text(path, "".join(json.dumps(p) + "\n" for p in preds))
        print(f"wrote {len(preds)} predictions to {path}")
        return 0
    for k in ([blind_set] if blind_set else SETS):
        for line in blind_summary(engines, verbose=True, blind_set=k):
            print(f"set {k}: {line}")
    return 0


def _mape(errs: list[tuple[float, float]]) -> str:
    """Runs, energy MAPE (range) and time MAPE of (energy, time) relative errors."""
    return (f"{len(errs)} runs, energy MAPE {100 * statistics.mean(abs(e) for e, _ in errs):.1f} % "
            f"({100 * min(e for e, _ in errs):+.0f}..{100 * max(e for e, _ in errs):+.0f} %), "
            f"time MAPE {100 * statistics.mean(abs(t) for _, t in errs):.1f} %")


def blind_summary(engines=("hf-static", "hf-eager"), verbose: bool = False,
                  blind_set: int = 1) -> list[str]:
    """Per engine: MAPE of the committed predictions against the measured blind runs, and
    of today's code (with each run's measured cache length)."""
    out = []
    _, predictions, measured_files = SETS[blind_set]
    if not (ENGINES / predictions).exists():
        return out
    preds = {p["key"]: p for p in read_jsonl(ENGINES / predictions)}
    # candidate profiles' predictions of the same runs (`--candidate NAME`)
    candidates = {f.stem.removeprefix(Path(predictions).stem + "_"):
                  {p["key"]: p for p in read_jsonl(f)}
                  for f in sorted(ENGINES.glob(f"{Path(predictions).stem}_*.jsonl"))}
    designs = SETS[blind_set][0]
    for engine in engines:
        measured = [r for f in measured_files if (ENGINES / engine / f).exists()
                    for r in read_jsonl(ENGINES / engine / f)
                    if r.get("schema") == "piep.measurement" and r.get("energy_j")]
        rows = {config_key(r): r for r in design_rows(engine, blind_set)}
        # the candidates whose predictions of this engine's runs differ from the committed
        differ = {c for c, cp in candidates.items()
                  if any(cp[k]["energy_j"] != preds[k]["energy_j"] for k in rows)}
        errs: dict[str, dict[str, list]] = {}  # design file -> kind -> (energy, time) errors
        for m in measured:
            p = preds[m["key"]]
            row = {**rows[m["key"]], "cache_len": (m.get("static_cache_len") or 0) + 1
                   if engine == "hf-static" else None}
            now = predict_row(row)
            probe = predict_row(row, host_probe_us=1e6 * m["host_probe"]["launch_add_s"])
            mine = errs.setdefault(m.get("design", ""), {"blind": [], "today": [], "hosted": []})
            given = [] if "by_probe_us" not in p else [("blind hosted", {
                k: at_probe(p["by_probe_us"], 1e6 * m["host_probe"]["launch_add_s"], k)
                for k in ("energy_j", "time_s")})]
            board = Measurement.from_json(m).board_probe_w
            if given and p.get("board_probe_ref_w") and board:  # and on the run's board
                given.append(("blind boarded", {
                    "energy_j": given[0][1]["energy_j"] * board / p["board_probe_ref_w"],
                    "time_s": given[0][1]["time_s"]}))
            docs = [("blind", p), ("today", now), ("hosted", probe)] + given + \
                [(f"candidate {c}", cp[m["key"]]) for c, cp in candidates.items()
                 if c in differ]
            for kind, doc in docs:
                mine.setdefault(kind, [])
                mine[kind].append((doc["energy_j"] / m["energy_j"] - 1,
                                   doc["time_s"] / m["time_s"] - 1))
            if verbose:
                e, t = mine["blind"][-1]
                out.append(f"{engine} {m['model']:18s} b{m['batch']:3d} p{m['prompt_len']:5d} "
                           f"g{m['gen_len']:4d} cache {m.get('static_cache_len')}: blind "
                           f"energy {100 * e:+6.1f} %, time {100 * t:+6.1f} %")
        for design, kinds in sorted(errs.items()):
            # a set of several designs (new shapes; runs measured again) is scored apart
            label = f"{engine} ({design})" if len(designs) > 1 else engine
            for kind, name in (("blind", "blind (committed predictions)"),
                               ("today", "today's profiles, trained on these runs too "
                                         "(in-sample)"),
                               ("hosted", "today's profiles with each run's host probe "
                                          "(in-sample)")):
                out.append(f"{label} {name}: {_mape(kinds[kind])}")
            if kinds.get("blind hosted"):
                out.append(f"{label} blind at each run's host probe (committed predictions "
                           f"at a grid of probes): {_mape(kinds['blind hosted'])}")
            if kinds.get("blind boarded"):
                out.append(f"{label} blind at each run's host probe and on its board (the "
                           f"committed profile's board): {_mape(kinds['blind boarded'])}")
            for kind in sorted(k for k in kinds if k.startswith("candidate ")):
                out.append(f"{label} blind, {kind} (committed predictions): "
                           f"{_mape(kinds[kind])}")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
