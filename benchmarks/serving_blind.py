"""Blind test of `piep serve`: traces predicted before they were replayed on the GPU.

    python benchmarks/serving_blind.py --write 1|2|3|4|5   # predict (before the device call)
    python benchmarks/serving_blind.py                # score the predictions on the replays

`--write 1` predicted every (shape, trace) of device calls 19-20 with the hf-cb profile
then shipped (fitted on llama-3-8b only, device call 18) into `predictions_blind.jsonl`;
`--write 2` those of device call 21 (three shapes and three trace files no replay had)
with the profile fitted on calls 18-20, into `predictions_blind2.jsonl`; `--write 3` those
of device call 49 (three more trace files, chat, rag and flood, on multi-head attention,
12 query heads per K/V head and a 24B; no replay had any of them) with the profile fitted
on calls 18-21, into `predictions_blind3.jsonl`; `--write 4` those of device call 53 (code,
tiny and sparse on a Qwen2-type shape at head dim 64, head dim 112 and qwen2.5-32b) with
the profile fitted per host on calls 18-51, into `predictions_blind4.jsonl`, at the
calibration machines' typical host and at a grid of host launch probes (the replay's own
probe, measured during the run, picks its prediction by interpolation); `--write 5` those
of planned device call 78 (tiny and code on three shapes in no public list: GQA with two
K/V heads at head dim 96, MHA at head dim 64, deep and narrow) with the profile whose
packed attention is priced in closed form (session 34), into
`calibration/h200/serving_new/predictions_blind2.jsonl`, on the same grid; `--write 6`
those of device call 99 on an H100 (tiny and code on llama-3-8b and qwen2.5-14b), a GPU
without calibration, priced from its spec sheet (`--allow-uncalibrated`) with the H200's
hf-cb profile, into `calibration/h100/serving/predictions_blind_cb6.jsonl`, on the same
grid; its replays stay in `calibration/h100/serving/` (no fit reads them). Each file names
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

from piep.core.artifacts import read_jsonl, write_text  # noqa: E402

CB = ROOT / "calibration" / "h200" / "engines" / "hf-cb"
OUT = CB / "predictions_blind.jsonl"
OUT2 = CB / "predictions_blind2.jsonl"
OUT3 = CB / "predictions_blind3.jsonl"
OUT4 = CB / "predictions_blind4.jsonl"
NEW = ROOT / "calibration" / "h200" / "serving_new"
H100 = ROOT / "calibration" / "h100" / "serving"
OUT5 = NEW / "predictions_blind2.jsonl"
SETS = {  # file, shapes, trace files
    "1": (OUT, ("llama-2-7b", "qwen2.5-7b", "configs/piep-unlisted-9b.json", "llama-3-8b",
                "llama-2-13b"), ("low", "mid", "saturated", "surge")),
    "2": (OUT2, ("mistral-7b", "qwen2.5-14b", "configs/piep-unlisted-hd64.json"),
          ("trickle", "steady", "spike")),
    "3": (OUT3, ("configs/piep-unlisted-mha5b.json", "configs/piep-unlisted-kv2.json",
                 "mistral-small-24b"), ("chat", "rag", "flood")),
    "4": (OUT4, ("configs/piep-unlisted-qwenhd64.json", "configs/piep-unlisted-hd112.json",
                 "qwen2.5-32b"), ("code", "tiny", "sparse")),
    "5": (OUT5, tuple(f"{NEW.relative_to(ROOT)}/configs/piep-serve-{s}.json"
                      for s in ("gqa2-hd96", "mha-hd64", "deep-narrow")), ("tiny", "code")),
    "6": (H100 / "predictions_blind_cb6.jsonl", ("llama-3-8b", "qwen2.5-14b"),
          ("tiny", "code")),
}
GPUS = {"6": "h100"}  # the sets priced for another GPU than the H200 (by its spec sheet)
# sets from 4 on are also predicted at these host launch probes (us)
PROBED_FROM = "4"
PROBE_GRID_US = (6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0)
# a predictions file's keys, and the names the rows of a blind test give them (those of
# `piep.fit.serving.case_row`)
FILE_KEYS = ("energy_j", "time_s", "tpot_p50_s", "e2e_p50_s")
KEYS = ("energy_j", "time_s", "tpot_s", "e2e_s")


def model_arg(shape: str) -> str:
    """A shipped name, a config under hf-cb's folder, or one under the repository's."""
    if not shape.endswith(".json"):
        return shape
    return str(CB / shape) if (CB / shape).exists() else str(ROOT / shape)


def served(shape: str, trace: Path, probe_us: float | None = None, gpu: str = "h200") -> dict:
    """`piep serve --json` of one shape on one trace (at the typical host, or `probe_us`)
    for `gpu` (another than the H200: by its spec sheet)."""
    extra = [] if probe_us is None else ["--host-probe-us", str(probe_us)]
    extra += [] if gpu == "h200" else ["--gpu", gpu, "--allow-uncalibrated"]
    out = subprocess.run([sys.executable, "-m", "piep", "serve", "--model", model_arg(shape),
                          "--engine", "hf-cb", "--trace", str(trace), "--json", *extra],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def at_probe(by_probe: dict[str, dict], probe_us: float, key: str) -> float:
    """`key` of predictions made at a grid of host probes, linear in the probe between the
    grid's points (held at its ends)."""
    grid = sorted((float(u), p[key]) for u, p in by_probe.items())
    x = min(max(probe_us, grid[0][0]), grid[-1][0])
    for (x0, y0), (x1, y1) in zip(grid, grid[1:]):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return grid[-1][1]


def write(which: str) -> int:
    out_file, shapes, loads = SETS[which]
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    rows = []
    for shape in shapes:
        for load in loads:
            trace = CB / "traces" / f"{load}.jsonl"
            gpu = GPUS.get(which, "h200")
            doc = served(shape, trace, gpu=gpu)
            rows.append({"model": Path(shape).stem if shape.endswith(".json") else shape,
                         "trace": f"{load}.jsonl", "energy_j": doc["energy_j"],
                         "time_s": doc["time_s"], "tpot_p50_s": doc["tpot_s"]["p50"],
                         "e2e_p50_s": doc["e2e_s"]["p50"],
                         "interval_energy_j": doc.get("interval", {}).get("energy_j"),
                         "flags": doc.get("flags", []), "commit": commit, "gpu": gpu})
            if int(which) >= int(PROBED_FROM):
                rows[-1]["host_probe_us"] = doc["engine_ref"]["host_probe_us"]
                rows[-1]["by_probe_us"] = {}
                for u in PROBE_GRID_US:
                    d = served(shape, trace, u, gpu)
                    rows[-1]["by_probe_us"][str(u)] = {
                        "energy_j": d["energy_j"], "time_s": d["time_s"],
                        "tpot_p50_s": d["tpot_s"]["p50"], "e2e_p50_s": d["e2e_s"]["p50"]}
            print({k: v for k, v in rows[-1].items() if k != "by_probe_us"})
    write_text(out_file, "".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {out_file.relative_to(ROOT)} ({len(rows)} predictions at {commit})")
    return 0


def measured(gpu: str = "h200") -> dict[tuple[str, str], dict]:
    """(model, trace file name) -> the measured quantities of the replay (its host probe
    its session's, as the fit reads it): the H200's shipped replays, or another GPU's
    kept beside its predictions."""
    from piep.fit.serving import observed, pooled_host_probes, shipped_replays
    if gpu == "h200":
        replays = shipped_replays(gpu)
    else:
        from piep.core.records import read_runs
        replays = pooled_host_probes([r for f in sorted(H100.glob("cb_s*.jsonl"))
                                      for r in read_runs(f, "piep.serving_measurement")])
    out = {}
    for rec in replays:
        e, tpot, e2e = observed(rec)
        probe = rec.host_probe_s
        out[(rec.model, Path(rec.trace).name)] = {
            "energy_j": e, "time_s": rec.time_s, "tpot_s": tpot, "e2e_s": e2e,
            "probe_us": None if probe is None else 1e6 * probe}
    return out


def blind_rows(path: Path = OUT, on_host: bool = False, gpu: str = "h200") -> list[dict]:
    """Every prediction of `path` whose trace has been replayed on `gpu`, beside the replay;
    with `on_host`, the predictions at the replay's own host probe (files with a probe
    grid)."""
    meas = measured(gpu)
    rows = []
    for p in read_jsonl(path) if path.exists() else []:
        m = meas.get((p["model"], p["trace"]))
        if m is None or (on_host and (not p.get("by_probe_us") or m["probe_us"] is None)):
            continue
        pred = {f"pred_{k}": at_probe(p["by_probe_us"], m["probe_us"], f) if on_host else p[f]
                for f, k in zip(FILE_KEYS, KEYS)}
        rows.append({"model": p["model"], "trace": p["trace"], "commit": p["commit"],
                     **pred, **m})
    return rows


def score() -> int:
    def named(which: str, row: dict) -> dict:  # (another GPU's replays say which)
        gpu = GPUS.get(which)
        return {**row, "model": f"{row['model']} on the {gpu.upper()}"} if gpu else row

    rows = [named(w, r) for w, (f, _, _) in SETS.items()
            for r in blind_rows(f, gpu=GPUS.get(w, "h200"))]
    hosted = [named(w, {**r, "model": f"{r['model']} at its host", "trace":
                        f"{r['trace']} (probe {r['probe_us']:.1f} us)"})
              for w, (f, _, _) in SETS.items()
              for r in blind_rows(f, on_host=True, gpu=GPUS.get(w, "h200"))]
    if not rows:
        print("no replay of a predicted trace yet")
        return 1
    print("model trace: " + ", ".join(f"{k} pred/meas" for k in KEYS))
    errs: dict[str, dict[str, list[float]]] = {}
    for r in rows + hosted:
        e = {k: r[f"pred_{k}"] / r[k] - 1 for k in KEYS}
        for group in (r["model"], "all" if r in rows else "all, at each replay's host probe"):
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
