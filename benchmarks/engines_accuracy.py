"""Accuracy of piep on transformers' generate() (hf-eager, hf-static) on the committed H200 runs.

    python benchmarks/engines_accuracy.py        # prints, and writes reports/engines.md

For each engine: piep as it was before engine profiles (the reference runner's closest
mode predicting the engine's runs), and the engine profile leave-one-model-out (host
terms fitted on the other models' runs of that engine; the module models are the shipped
ones, fitted on isolated samples). Energy and time MAPE, range, prefill and decode.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.gpus import load_gpu  # noqa: E402
from piep.predict.engines import (ENGINE_FITS, engine_records, profile_lomo,  # noqa: E402
                                  profile_rows)
from piep.predict.learned import load_learned  # noqa: E402
from piep.predict.pricing import price  # noqa: E402
from piep.predict.train import deployment_of  # noqa: E402
from piep.scenario import ENGINE_MODES, SERVING_ENGINES  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from engines_blind import blind_summary  # noqa: E402

REPORT = ROOT / "reports" / "engines.md"


def _err(pred: float, meas: float) -> float:
    return pred / meas - 1


def summarize(errs: list[float]) -> str:
    return (f"{100 * statistics.mean(map(abs, errs)):.1f} % "
            f"({100 * min(errs):+.0f}..{100 * max(errs):+.0f} %)")


def baseline(records, engine: str, base) -> list[tuple[float, float]]:
    """piep before engine profiles: the reference runner of the same decode mode."""
    gpu = load_gpu("h200")
    deps = [deployment_of({**r, "mode": ENGINE_MODES[engine]}, gpu) for r in records]
    priced = price(deps, base)
    return [(_err(priced.energy_j[i], r["energy_j"]), _err(priced.time_s[i], r["time_s"]))
            for i, r in enumerate(records)]


def cross_conformal(rows, level: float = 0.9) -> float:
    """Share of runs inside a 90 % interval built from the other models' runs alone (the
    held-out model's residuals never set its own interval)."""
    import math
    logs = [(r["model"], abs(math.log(r["pred_energy_j"] / r["energy_j"]))) for r in rows]
    inside = 0
    for model, x in logs:
        others = sorted(v for m, v in logs if m != model)
        q = others[min(len(others) - 1, math.ceil(level * (len(others) + 1)) - 1)]
        inside += x <= q
    return inside / len(logs)


def cost(records) -> dict[str, float]:
    """What calibrating the engine took, from the committed records: measured windows
    (every repeat of the whole call and of the prefill call), first calls (load of the
    compiled graph or the first kernels), and the wall time of every configuration."""
    windows = sum(r["time_s"] * r["repeats"] * r.get("reps_per_window", 1)
                  + r["prefill"]["time_s"] * r["repeats"] * r["prefill"].get("reps_per_window", 1)
                  for r in records)
    return {"runs": len(records), "windows_min": windows / 60,
            "first_call_min": sum(r.get("first_call_s", 0.0) for r in records) / 60,
            "wall_min": sum(r["wall_s"] for r in records) / 60,
            "spread": statistics.median(r["spread"] for r in records if "spread" in r)}


def host_rows(engine: str, rows, hosted) -> list[str]:
    """Per device call (raw file): runs, the host probe's medians and the mean
    leave-one-model-out time error of its runs, without and with their host probe."""
    from piep.artifacts import read_records
    from piep.predict.engines import shipped_profile_dir
    def errors(rs):
        return {(r["model"], r["batch"], r["prompt_len"], r["gen_len"]):
                _err(r["pred_time_s"], r["time_s"]) for r in rs}
    err, err_host = errors(rows), errors(hosted)
    out = []
    for f in sorted((shipped_profile_dir("h200", engine) / "raw").glob("call*.jsonl")):
        recs = [r for r in read_records(f, "piep.measurement") if r.get("host_probe")]
        keys = [k for r in recs
                if (k := (r["model"], r["batch"], r["prompt_len"], r["gen_len"])) in err]
        errs = [err[k] for k in keys]
        if not errs:
            continue
        probes = [r["host_probe"] for r in recs]
        out.append(f"| {engine} | {f.stem.split('_')[0][4:]} | {len(errs)} | "
                   f"{1e3 * statistics.median(p['python_loop_200k_s'] for p in probes):.1f} | "
                   f"{1e6 * statistics.median(p['launch_add_s'] for p in probes):.1f} | "
                   f"{100 * statistics.mean(errs):+.1f} % | "
                   f"{100 * statistics.mean(err_host[k] for k in keys):+.1f} % |")
    return out


def strict_lomo(records, engine: str, with_host: bool = False) -> list[dict]:
    """Leave one shape out of every training set: for each model of the engine's runs, a
    predictor refitted without that model's reference-runner runs and without the module
    samples of kernel shapes only it has (`exclusive_filter`), then the engine's profile
    fitted on the other models' engine runs over it."""
    from piep.predict.dataset import load_calibration
    from piep.predict.train import cases, exclusive_filter, fit, spec_of_record
    gpu = load_gpu("h200")
    cal = load_calibration("h200")
    ref_cases = cases(cal, gpu)
    out = []
    for name in sorted({r["model"] for r in records}):
        held = [r for r in records if r["model"] == name]
        base = fit(cal, gpu, [c for c in ref_cases if c.rec["model"] != name],
                   module_filter=exclusive_filter(spec_of_record(held[0]), gpu))
        out += profile_rows(base, [r for r in records if r["model"] != name], held, engine,
                            with_host=with_host)
    return out


def calibration_curve(base, records, engine: str, sizes=(5, 10, 20, 30), draws: int = 5):
    """Energy MAPE on the runs left out when the profile is fitted on `n` runs drawn at
    random (`draws` draws per size, seeded): how many runs a new engine needs."""
    import random
    out = {}
    for n in sizes:
        if n > len(records) - 5:
            continue
        errs = []
        for d in range(draws):
            idx = set(random.Random(1000 * n + d).sample(range(len(records)), n))
            rows = profile_rows(base, [r for i, r in enumerate(records) if i in idx],
                                [r for i, r in enumerate(records) if i not in idx], engine,
                                with_host=False)
            errs += [abs(_err(r["pred_energy_j"], r["energy_j"])) for r in rows]
        out[n] = 100 * statistics.mean(errs)
    return out


def main() -> int:
    base = load_learned("h200")
    lines = ["# piep on transformers generate() (H200)", "",
             "Generated by `python benchmarks/engines_accuracy.py` from the runs in "
             "`calibration/h200/engines/<engine>/raw/` (device calls 15-17, 22 and 24-26; scripts "
             "and logs in `calibration/h200/device/`). Energy: GPU boards, one whole `generate()` call; "
             "prefill: `generate(max_new_tokens=1)`.", "",
             "| engine | runs | models | piep before (reference mode): energy | time | "
             "profile, leave-one-model-out: energy | time | prefill energy | decode energy | "
             "with each run's host probe: energy | time | strict (the shape out of every "
             "training set): energy | time |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    detail, extra, curves, hosts = [], [], [], []
    for engine in sorted(set(ENGINE_FITS) - set(SERVING_ENGINES)):  # serving: its own report
        records = engine_records("h200", engine)
        if not records:
            continue
        before = baseline(records, engine, base)
        rows = profile_lomo(base, records, engine, with_host=False)
        hosted = profile_lomo(base, records, engine)
        strict = strict_lomo(records, engine)
        se = [_err(r["pred_energy_j"], r["energy_j"]) for r in strict]
        st = [_err(r["pred_time_s"], r["time_s"]) for r in strict]
        he = [_err(r["pred_energy_j"], r["energy_j"]) for r in hosted]
        ht = [_err(r["pred_time_s"], r["time_s"]) for r in hosted]
        e = [_err(r["pred_energy_j"], r["energy_j"]) for r in rows]
        t = [_err(r["pred_time_s"], r["time_s"]) for r in rows]
        pe = [_err(r["pred_prefill_j"], r["prefill_j"]) for r in rows]
        de = [_err(r["pred_decode_j"], r["decode_j"]) for r in rows]
        models = sorted({r["model"] for r in rows})
        print(f"{engine}: {len(rows)} runs, {len(models)} models")
        print(f"  before (piep-{ENGINE_MODES[engine]}): energy {summarize([x for x, _ in before])},"
              f" time {summarize([y for _, y in before])}")
        print(f"  profile LOMO: energy {summarize(e)}, time {summarize(t)}; prefill energy "
              f"{summarize(pe)}, decode energy {summarize(de)}; with each run's host probe: "
              f"energy {summarize(he)}, time {summarize(ht)}; strict: energy {summarize(se)}, "
              f"time {summarize(st)}")
        lines.append(f"| {engine} | {len(rows)} | {len(models)} | "
                     f"{summarize([x for x, _ in before])} | {summarize([y for _, y in before])} "
                     f"| {summarize(e)} | {summarize(t)} | {summarize(pe)} | {summarize(de)} "
                     f"| {summarize(he)} | {summarize(ht)} | {summarize(se)} | {summarize(st)} |")
        c, cov = cost(records), cross_conformal(rows)
        worst = max(rows, key=lambda r: abs(_err(r["pred_energy_j"], r["energy_j"])))
        extra.append(f"| {engine} | {100 * cov:.0f} % | "
                     f"{100 * _err(worst['pred_energy_j'], worst['energy_j']):+.1f} % "
                     f"({worst['model']}, batch {worst['batch']}) | "
                     f"{100 * max(abs(x) for x in t):.1f} % | {100 * c['spread']:.1f} % | "
                     f"{c['runs']} | {c['windows_min']:.1f} | {c['first_call_min']:.1f} | "
                     f"{c['wall_min']:.1f} |")
        print(f"  cross-conformal 90 % coverage {100 * cov:.0f} %; calibration: {c['runs']} runs, "
              f"{c['windows_min']:.1f} min of windows, {c['wall_min']:.1f} min wall")
        curve = calibration_curve(base, records, engine)
        curves.append(f"| {engine} | " + " | ".join(
            f"{curve[n]:.1f} %" if n in curve else "-" for n in (5, 10, 20, 30))
            + f" | {summarize(e)} ({len(rows)} runs, leave-one-model-out) |")
        print("  energy MAPE on the other runs, profile fitted on n random runs: "
              + ", ".join(f"n={n}: {v:.1f} %" for n, v in curve.items()))
        hosts += host_rows(engine, rows, hosted)
        detail += ["", f"## {engine}: every run (leave-one-model-out)", "",
                   "| model | batch | prompt | gen | energy J | predicted | error | time s | "
                   "predicted | error |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(rows, key=lambda r: (r["model"], r["batch"])):
            detail.append(f"| {r['model']} | {r['batch']} | {r['prompt_len']} | {r['gen_len']} "
                          f"| {r['energy_j']:.1f} | {r['pred_energy_j']:.1f} | "
                          f"{100 * _err(r['pred_energy_j'], r['energy_j']):+.1f} % | "
                          f"{r['time_s']:.3f} | {r['pred_time_s']:.3f} | "
                          f"{100 * _err(r['pred_time_s'], r['time_s']):+.1f} % |")
    lines += ["", "Leave-one-model-out: the profile fitted on the other models' runs of the "
              "engine, over the shipped module models (predictions without a host probe, "
              "as `piep predict` gives them by default); with each run's host probe: the same "
              "runs predicted for their own host (`--host-probe-us`); strict: the shape is "
              "also out of the predictor under the profile (refitted without its reference-"
              "runner runs and the module samples of kernel shapes only it has).", "",
              "| engine | energy coverage of a 90 % interval (cross-conformal) | worst run, "
              "energy | worst run, time | median repeat spread | runs | measured windows, min "
              "| first calls, min | wall, min |", "|---|---|---|---|---|---|---|---|---|",
              *extra, "",
              "Coverage: each run against a 90 % band from the other models' leave-one-model-"
              "out residuals only. Repeat spread: (max - min) / median of a run's repeated "
              "windows. Cost, from the committed records: the measured windows (each repeat "
              "of the whole call and of the prefill call), the first calls (the compile of "
              "hf-static; model loads are not in the records) and the wall time of every "
              "configuration. Targets the runs miss: no run worse than 15 % (see the worst "
              "runs) and tp=2 (not measured: no 2-GPU machine has been lent)."]
    lines += ["", "## Calibration runs needed", "",
              "Energy MAPE on the runs left out when the profile is fitted on n runs drawn at "
              "random (5 draws each; the left-out runs may share a model with the drawn ones), "
              "beside the full leave-one-model-out figure (each fold fitted on the runs of the "
              "other models: 30-38 of hf-eager's 40).", "",
              "| engine | n = 5 | n = 10 | n = 20 | n = 30 | all runs |",
              "|---|---|---|---|---|---|", *curves]
    lines += ["", "## Host speed", "",
              "An eager engine waits on its host. Every record carries a host probe (a "
              "200k-iteration Python loop, a launch of `x.add_(1)`), measured before its "
              "runs; the lent machines' hosts differ from call to call. A profile of an engine "
              "fitted per host (hf-eager, hf-static) scales its host terms (launch gaps, "
              "time per generated token) by each run's launch probe over the median of its "
              "runs' (the profile's reference host), and `predict --host-probe-us` predicts "
              "for a host whose probe is known (`piep env --host-probe` on it); without it, "
              "the reference host. Mean time error of the leave-one-model-out predictions "
              "per device call, without and with each run's probe:", "",
              "| engine | device call | runs | Python loop, ms (median) | launch, us "
              "(median) | mean time error | with the run's probe |",
              "|---|---|---|---|---|---|---|", *hosts]
    lines += ["", "What a profile is: the KV-cache handling of the engine is structure in the "
              "model tree (DynamicCache copies the whole cache every decode step; a static-"
              "cache decode step attends the whole cache under a mask, K/V expanded to every "
              "query head where the model has more than one KV head and fewer than query "
              "heads; its prefill is causal over the prompt), priced by module samples of "
              "transformers' own kernels (`calibration/h200/modules/modules_engines_s0.jsonl`, "
              "`modules_kv_expand_v2.jsonl`: masked SDPA, repeat_kv compiled, the DynamicCache "
              "concatenation, the paged gather; device calls 23-24; eager copies outside a "
              "decode step were measured too but made the serving fit worse, so hf-cb's "
              "stay at the copy rate); "
              "the profile's fitted terms are host time per launch (prefill, decode), per "
              "graph-replayed kernel and per generated token. All runs are tp=1 on one GPU: "
              "predictions for tp>1 with these engines are flagged `unmeasured_engine_layout`.",
              "", "## Blind tests", "",
              "Runs of models and shapes the profiles' runs did not have, predicted before "
              "they were measured (`python benchmarks/engines_blind.py`); they are in the "
              "profiles' training data since. Set 1 (device calls 17, 22): the profiles of "
              "commit 22f52b1 (`calibration/h200/engines/blind_predictions.jsonl`):", "",
              *[f"* {line}" for line in blind_summary(blind_set=1)], "",
              "Set 2 (device calls 25-26, one file: `call25_blind2.jsonl`; head dim 96 and "
              "qwen2.5-32b under hf-eager, head "
              "dim 96 and mistral-small-24b under hf-static): the profiles refitted on the "
              "engine kernel samples, commit 445ade2 (`blind_predictions2.jsonl`). The host "
              "of call 25 ran the Python probe 2.1x slower than calls 15-16 (see Host "
              "speed): hf-eager's times were under-predicted accordingly.", "",
              *[f"* {line}" for line in blind_summary(blind_set=2)],
              *detail]
    REPORT.write_text("\n".join(lines) + "\n")
    print(f"wrote {REPORT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
