"""Accuracy of piep on transformers' generate() (hf-eager, hf-static) on the committed H200 runs.

    python benchmarks/engines_accuracy.py        # prints, and writes reports/engines.md

For each engine: piep as it was before engine profiles (the reference runner's closest
mode predicting the engine's runs), and the engine profile leave-one-model-out (host
terms fitted on the other models' runs of that engine; the module models are the shipped
ones, fitted on isolated samples). Energy and time MAPE, range, prefill and decode.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.core.gpus import load_gpu  # noqa: E402
from piep.core.layout import Deployment  # noqa: E402
from piep.fit.engines import (engine_records, profile_lomo, profile_rows,  # noqa: E402
                              typical_host_s)
from piep.predict.engines import load_profile  # noqa: E402
from piep.predict.store import load_learned  # noqa: E402
from piep.predict.pricing import price  # noqa: E402
from piep.core.artifacts import read_jsonl  # noqa: E402
from piep.core.samples import KernelCensus  # noqa: E402
from piep.core.records import read_runs  # noqa: E402
from piep.core.engines import ENGINES as REGISTRY, names  # noqa: E402
from piep.stats.conformal import cross_coverage  # noqa: E402
from piep.tree.builder import ELEMENTWISE  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from engines_blind import ENGINES, SETS, blind_summary, device_calls  # noqa: E402

REPORT = ROOT / "reports" / "engines.md"


def _err(pred: float, meas: float) -> float:
    return pred / meas - 1


def summarize(errs: list[float]) -> str:
    return (f"{100 * statistics.mean(map(abs, errs)):.1f} % "
            f"({100 * min(errs):+.0f}..{100 * max(errs):+.0f} %)")


def baseline(records, engine: str, base) -> list[tuple[float, float]]:
    """piep before engine profiles: the reference runner of the same decode mode."""
    gpu = load_gpu("h200")
    deps = [dataclasses.replace(r, mode=REGISTRY[engine].decode).deployment(gpu)
            for r in records]
    priced = price(deps, base)
    return [(_err(priced.energy_j[i], r.energy_j), _err(priced.time_s[i], r.time_s))
            for i, r in enumerate(records)]


def cost(records) -> dict[str, float]:
    """What calibrating the engine took, from the committed records: measured windows
    (every repeat of the whole call and of the prefill call), first calls (load of the
    compiled graph or the first kernels), and the wall time of every configuration."""
    records = [r.doc for r in records]  # what the sampler logged of each run
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
    from piep.core.artifacts import read_records
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
        out.append(f"| {engine} | {f.stem[4:].replace('_', ' ')} | {len(errs)} | "
                   f"{1e3 * statistics.median(p['python_loop_200k_s'] for p in probes):.1f} | "
                   f"{1e6 * statistics.median(p['launch_add_s'] for p in probes):.1f} | "
                   f"{100 * statistics.mean(errs):+.1f} % | "
                   f"{100 * statistics.mean(err_host[k] for k in keys):+.1f} % |")
    return out


def implied_host_factor(model, dep, time_s: float, lo: float = 0.2, hi: float = 5.0) -> float:
    """The host factor (probe over the profile's reference) at which `model` predicts
    `dep`'s measured time (bisection in log; predicted time grows with the factor)."""
    import math
    ref = model.host.host_probe_ref_s
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if price([replace_probe(dep, mid * ref)], model).time_s[0] < time_s:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def probe_rows(base, engine: str = "hf-eager") -> list[str]:
    """Which host probe tracks an eager engine's host: for every run that carries each
    probe, the host factor that makes the shipped profile match its measured time (the
    implied factor), against each probe scaled to the implied factors' median over those
    runs: Pearson r of the logs, and the time error left with that factor (one factor
    for every run: no probe)."""
    import math
    gpu = load_gpu("h200")
    model = load_profile("h200", engine).apply(base)
    ref = model.host.host_probe_ref_s
    probes = ("launch_add_s", "tiny_decode_step_s", "python_loop_200k_s")
    recs = [r for r in engine_records("h200", engine)
            if all((r.doc.get("host_probe") or {}).get(p) for p in probes)]
    if len(recs) < 3:
        return []
    deps = [r.deployment(gpu, engine=engine) for r in recs]
    implied = [math.log(implied_host_factor(model, d, r.time_s)) for d, r in zip(deps, recs)]
    level = statistics.median(implied)

    def left(factors):  # time MAPE with these log host factors
        priced = price([replace_probe(d, math.exp(f) * ref) for d, f in zip(deps, factors)],
                       model).time_s
        return 100 * statistics.mean(abs(p / r.time_s - 1) for p, r in zip(priced, recs))
    out = [f"| none | {len(recs)} | - | {left([level] * len(recs)):.1f} % |"]
    for name in probes:
        logs = [math.log(r.doc["host_probe"][name]) for r in recs]
        x = [v - statistics.median(logs) + level for v in logs]
        out.append(f"| {name} | {len(recs)} | {statistics.correlation(x, implied):.2f} | "
                   f"{left(x):.1f} % |")
    return out


def board_rows(engine: str = "hf-static") -> tuple[list[str], dict[str, list[float]]]:
    """The runs measured on more than one board (the same configuration on other device
    calls' GPUs): per board its decode power (decode energy over decode time), decode time,
    prefill energy, idle power and, where the record has it, the GPU probe; with each run's
    spread over its boards (max / min - 1) of decode power, decode energy, decode time and
    prefill energy."""
    by_key: dict[str, list[dict]] = {}
    for r in engine_records("h200", engine):
        by_key.setdefault(r.key, []).append(r.doc)
    rows, spread = [], {"power": [], "energy": [], "time": [], "prefill": []}
    for recs in by_key.values():
        boards = {r["per_gpu"][0]["uuid"] for r in recs}
        if len(boards) < 2:
            continue
        energy = [r["energy_j"] - r["prefill"]["energy_j"] for r in recs]
        power = [e / r["decode"]["time_s"] for e, r in zip(energy, recs)]
        for what, v in (("power", power), ("energy", energy),
                        ("time", [r["decode"]["time_s"] for r in recs]),
                        ("prefill", [r["prefill"]["energy_j"] for r in recs])):
            spread[what].append(max(v) / min(v) - 1)
        r0 = recs[0]
        for r, p in zip(recs, power):
            probe = r["per_gpu"][0].get("gpu_probe")
            rows.append(f"| {r0['model']} | {r0['batch']} | {r0['prompt_len']} | "
                        f"{r0['gen_len']} | {r['per_gpu'][0]['uuid'][4:12]} | {p:.0f} | "
                        f"{r['decode']['time_s']:.3f} | {r['prefill']['energy_j']:.0f} | "
                        f"{r['per_gpu'][0]['idle_power_w']:.0f} | "
                        + (f"{probe['decode_gemm_power_w']:.0f} | {probe['copy_power_w']:.0f}"
                           if probe else "- | -") + " |")
    return rows, spread


def board_text() -> list[str]:
    """The report's Boards section from `board_rows` (empty without such runs)."""
    rows, spread = board_rows()
    if not rows:
        return []

    def med(what):
        return (f"{100 * statistics.median(spread[what]):.1f} % (largest "
                f"{100 * max(spread[what]):.1f} %)")
    return ["## Boards", "",
            "hf-static runs measured again on other boards (device calls 47-48, "
            "`design_replicates2.jsonl`, `design_replicates3.jsonl`: runs whose decode energy "
            "was mispredicted by 10-21 % on the board of one call): the same configuration "
            "draws another decode power on another H200, while its prefill (compute-bound, "
            f"held near the power limit) barely moves. Over {len(spread['power'])} runs, the "
            f"median spread over their boards (max / min - 1) of decode power is "
            f"{med('power')}, of decode energy {med('energy')}, of decode time "
            f"{med('time')}, of prefill energy {med('prefill')}. piep predicts one board "
            "(the module samples' boards, many, without a probe); a profile's training runs "
            "merge a configuration's boards by the median. Since call 47 every record "
            "carries a GPU probe (`piep.sampling.hf.gpu_probe`: the board power of a metered "
            "decode-like GEMM, 8 x 4096 x 14336, and of a 1 GiB HBM copy); too few boards "
            "carry it yet to scale a prediction by it.", "",
            "| model | batch | prompt | gen | board | decode power, W | decode s | prefill J | "
            "idle W | probe: GEMM W | probe: copy W |", "|---|---|---|---|---|---|---|---|---|---|---|",
            *rows, ""]


def replace_probe(dep, probe_s: float):
    """`dep` on a host of this probe."""
    from dataclasses import replace
    return replace(dep, host_probe_s=probe_s)


def probe_spread(records) -> float:
    """The largest ratio of a run's slowest to its fastest launch probe (runs probed
    beside every window)."""
    return max(max(p) / min(p) for r in records
               if len(p := [x["launch_add_s"] for x in r.doc.get("host_probes", [])]) >= 3)


def replicate_rows(base, engine: str = "hf-eager") -> list[str]:
    """Runs measured on several device calls (`design_replicates.jsonl`): each later
    measurement's change of time against the first, beside the change of the host's launch
    probe and the change the shipped profile predicts from the two probes."""
    from piep.predict.engines import shipped_profile_dir
    from piep.sampling.grid import config_key
    folder = shipped_profile_dir("h200", engine)
    keys = {config_key(r) for r in read_jsonl(folder / "design_replicates.jsonl")}
    seen: dict[str, list[tuple[str, object]]] = {}
    for f in sorted((folder / "raw").glob("call*.jsonl")):  # in call order
        for r in read_runs(f, "piep.measurement"):
            if r.key in keys:
                seen.setdefault(r.key, []).append((f.stem[4:6], r))
    model = load_profile("h200", engine).apply(base)
    gpu = load_gpu("h200")
    out = []
    for key, runs in sorted(seen.items(), key=lambda kv: kv[1][0][1].model):
        (call0, old), later = runs[0], runs[1:]
        for call, new in later:
            pred = price([r.deployment(gpu, engine=engine, on_its_host=True)
                          for r in (old, new)], model).time_s
            out.append(f"| {old.model} | {old.batch} | {old.prompt_len} | "
                       f"{old.gen_len} | {call0} -> {call} | {old.time_s:.3f} | "
                       f"{new.time_s:.3f} | {new.time_s / old.time_s:.2f} | "
                       f"{1e6 * old.host_probe_s:.1f} -> {1e6 * new.host_probe_s:.1f} | "
                       f"{new.host_probe_s / old.host_probe_s:.2f} | "
                       f"{pred[1] / pred[0]:.2f} |")
    return out


def window_rows(base) -> list[str]:
    """Runs past a sliding window, each on its own host: the shipped profile with the
    window in the tree (as transformers applies it) against the same profile with the
    window ignored (every key kept, attention unmasked)."""
    from dataclasses import replace
    gpu = load_gpu("h200")
    out = []
    for engine in sorted(names(reference=False, kind="batch")):
        model = load_profile("h200", engine).apply(base)
        runs = [(r, d) for r in engine_records("h200", engine)
                if (d := r.deployment(gpu, engine=engine, on_its_host=True)).past_window]
        if not runs:
            continue
        kept = price([d for _, d in runs], model)
        full = price([replace(d, model=replace(d.model, sliding_window=None))
                      for _, d in runs], model)
        errs = []
        for i, (r, d) in enumerate(runs):
            e = [_err(p.energy_j[i], r.energy_j) for p in (kept, full)]
            t = [_err(p.time_s[i], r.time_s) for p in (kept, full)]
            pe = [_err(p.phase_energy_j[i, 0], r.prefill.energy_j) for p in (kept, full)]
            errs.append((e, t))
            out.append(f"| {engine} | {r.model} | {r.batch} | {r.prompt_len} | "
                       f"{r.gen_len} | {d.model.sliding_window} | "
                       + " | ".join(f"{100 * a:+.1f} % / {100 * b:+.1f} %" for a, b in (e, t, pe))
                       + " |")
        mape = [[100 * statistics.mean(abs(x[k][j]) for x in errs) for j in (0, 1)]
                for k in (0, 1)]
        out.append(f"| {engine} | MAPE, {len(runs)} runs | | | | | {mape[0][0]:.1f} % / "
                   f"{mape[0][1]:.1f} % | {mape[1][0]:.1f} % / {mape[1][1]:.1f} % | |")
    return out


def census_records(name: str) -> list[tuple[KernelCensus, Deployment]]:
    """The records of a census file, each with the deployment it measured."""
    from piep.fit import census
    from piep.sampling.design import named_spec
    gpu = load_gpu("h200")
    return [(c, census.census_deployment(c, named_spec(c.model)[0], gpu))
            for c in census.census_records("h200", name)]


def census_rows() -> list[str]:
    """The kernel census of transformers' eager decode step (device call 27) beside the
    launches the model tree gives hf-eager per layer and outside the layers."""
    from piep.predict.table import TableBuilder
    out = []
    for c, dep in census_records("call27_hf_eager.jsonl"):
        spec = dep.model
        t = TableBuilder().table([dep], detail=True)
        steps = c.gen_len - 1
        layer = sum(t.count[i] * t.launches[i] for i in range(len(t))
                    if t.decode[i] and "/layer/" in t.path[i]) / steps / spec.num_layers
        rest = sum(t.count[i] * t.launches[i] for i in range(len(t))
                   if t.decode[i] and "/layer/" not in t.path[i]) / steps
        sdpa = ["cuDNN flash" if "cudnn" in k and "flash" in k else k[:40]
                for k in c.decode_step["per_layer_by_name"]
                if "sdpa" in k or "attention" in k.lower() or "flash" in k]
        out.append(f"| {c.model} | {c.doc['head_dim']} | {c.doc['heads']}/{c.doc['kv_heads']} | "
                   f"{c.decode_step['per_layer']:.0f} | {layer:.0f} | "
                   f"{c.decode_step['outside']:.0f} | {rest:.0f} | "
                   f"{c.prefill['per_layer']:.0f} | {', '.join(sdpa) or '-'} |")
    return out


POINTWISE = tuple(ELEMENTWISE)  # the kinds a compiled step fuses (the tree's pointwise leaves)
CENSUS_TIMED = ("call35_window.jsonl", "call37_1b.jsonl", "call38_static.jsonl",
                "call39_g33.jsonl", "call41_deep64.jsonl")


def census_time_rows() -> tuple[list[str], dict[str, tuple[float, float]]]:
    """The kernel time of a decode step the census measured (device calls 35, 37-39, 41) beside
    the isolated kernel time the shipped profile's leaves give the same step: per layer
    (and of it, piep's pointwise leaves: norms, rope, residual adds, activation), outside
    the layers. The census's per-layer time counts the kernels a decode step launches
    (per-layer count >= 0.5): the subtraction of the prefill call leaves the prefill's own
    kernels behind, with noise of either sign. Also, over hf-static's rows, the range of
    piep's excess a layer and of its shortfall outside the layers."""
    import numpy as np
    base = load_learned("h200")
    out, excess, short = [], [], []
    for name in CENSUS_TIMED:
        for c, dep in census_records(name):
            spec = dep.model
            priced = price([dep], load_profile("h200", c.engine).apply(base), detail=True)
            t, steps = priced.table, c.gen_len - 1
            inside = np.array(["/layer/" in x for x in t.path]) & t.decode
            busy = priced.prices.time_s * t.count / steps * 1e6
            point = inside & np.isin(t.kind, POINTWISE)
            step = c.decode_step
            launched = sum(us for k, us in step["per_layer_us_by_name"].items()
                           if step["per_layer_by_name"].get(k, 0) >= 0.5)
            if c.engine == "hf-static":
                excess.append(busy[inside].sum() / spec.num_layers - launched)
                short.append(step["outside_us"] - busy[t.decode & ~inside].sum())
            out.append(f"| {c.engine} | {c.model} | {c.batch} | {c.prompt_len} | "
                       f"{launched:.0f} | {busy[inside].sum() / spec.num_layers:.0f} | "
                       f"{busy[point].sum() / spec.num_layers:.0f} | {step['outside_us']:.0f} "
                       f"| {busy[t.decode & ~inside].sum():.0f} | {name} |")
    return out, {"excess": (min(excess), max(excess)), "short": (min(short), max(short))}


def census_time_text(rows: list[str], ranges: dict[str, tuple[float, float]]) -> list[str]:
    """The report's section on the census's kernel time against piep's leaves."""
    (e0, e1), (s0, s1) = ranges["excess"], ranges["short"]
    return ["What a decode step's kernels take (device calls 35, 37-39 and 41, the census with "
            "kernel durations): the kernel time of one decode step per layer and outside the "
            "layers, measured and as the shipped profiles' leaves price it (isolated kernel "
            "time; of it, the pointwise leaves: norms, rope, residual adds, activation). Past "
            "mistral-7b's window (prompt 4200) the step's copies dominate (the census by "
            "kernel name in `call35_window.jsonl`: repeat_kv's eager copy and the sliding "
            "cache's strided concatenation), which piep prices from call 35's module samples "
            "of both. Under hf-static the compiled step fuses each pointwise chain into one "
            "triton kernel: piep's tree holds them as fused leaves, one kernel each, at the "
            "in-situ time the census measured (`fused_kernel_s`, `piep.fit.census`: the "
            "compiler's kernels of a layer other than the K/V expansion, less their bytes at "
            "HBM bandwidth, per fused leaf; priced as eager's before, 28-75 us a layer too "
            f"much). Over hf-static's rows piep now prices {e0:+.0f}..{e1:+.0f} us a layer "
            f"against the census, and outside the layers {s0:.0f}-{s1:.0f} us less than it "
            "measures (the generation loop's kernels, which run while the host launches "
            "them: the profile's time per generated token; and prefill GEMMs the "
            "subtraction leaves behind: calls 35-38 census 9 generated tokens, call 39 33, "
            "which shares the prefill's noise among more steps).", "",
            "| engine | model | batch | prompt | census, us a layer | piep | of it "
            "pointwise | census, us outside | piep | census file |",
            "|---|---|---|---|---|---|---|---|---|---|", *rows]


# the structural choices of each profile, each undone: the same runs fitted without it
# undone: every phase above the limit stretched to it, its energy kept (BoardLimit's
# defaults), in the profile only: the reference runner's terms stay fitted with it held
UNHELD = ("phases held under the board's power limit (`piep.predict.power`; undone in the "
          "profile only)")
UNHELD_FORM = {"burst_power_ratio": 1.0, "power_stretch_exponent": 1.0}
TYPICAL = ("its predictions for the calibration machines' typical host (`typical_host_s`: "
           "the median launch probe of every shipped run; the runs' own median host instead)",
           {"default_host_s": None})
ABLATIONS = {
    "hf-eager": (TYPICAL, ("its host queueing kernels ahead of the GPU (`queue_ahead`)",
                  {"host_form": {}}),
                 ("its own combiner (the reference runner's instead)",
                  {"refit_combiner": False}),
                 (UNHELD, {"host_form": {"queue_ahead": True, **UNHELD_FORM}})),
    "hf-static": (TYPICAL, ("its host time per `generate()` call (`call_host_s`)",
                   {"terms": tuple(t for t in REGISTRY["hf-static"].fitted_terms if t != "call_host_s")}),
                  ("its fused pointwise kernels (`fused_kernel_s`: priced as eager's)",
                   {"host_form": {"fused_kernel_s": 0.0}}),
                  ("its own combiner (the reference runner's instead)",
                   {"refit_combiner": False}),
                  (UNHELD, {"host_form": UNHELD_FORM})),
}
LAST_BLIND = "design_blind4.jsonl"  # the blind set the forms kept were chosen before


def ablation(base, records, engine: str, rows, hosted, what: str, undone: dict) -> str:
    """Leave-one-model-out (without and with each run's probe) and the last blind set
    (fitted on the runs before it) of the profile as shipped and with its choice `what`
    undone (`undone`: the keywords of `fit_profile` that undo it)."""
    before = [r for r in records if r.doc.get("design") != LAST_BLIND]
    after = [r for r in records if r.doc.get("design") == LAST_BLIND]

    def mape(rs, key):
        return 100 * statistics.mean(abs(_err(r[f"pred_{key}"], r[key])) for r in rs)

    def figures(kept_rows, kept_hosted, fit):
        both = None if kept_rows else profile_lomo(base, records, engine, **fit)
        lomo = kept_rows or both[False]
        host = kept_hosted or both[True]
        blind = profile_rows(base, before, after, engine, with_host=False, **fit) \
            if after else []
        return (lomo, host, blind)
    kept, gone = figures(rows, hosted, {}), figures(None, None, undone)
    out = (f"{engine}, without {what} -> as shipped: leave-one-model-out energy "
           f"{mape(gone[0], 'energy_j'):.1f} -> {mape(kept[0], 'energy_j'):.1f} %, time "
           f"{mape(gone[0], 'time_s'):.1f} -> {mape(kept[0], 'time_s'):.1f} %; with each run's "
           f"probe energy {mape(gone[1], 'energy_j'):.1f} -> {mape(kept[1], 'energy_j'):.1f} %, "
           f"time {mape(gone[1], 'time_s'):.1f} -> {mape(kept[1], 'time_s'):.1f} %")
    if after:
        out += (f"; the {len(after)} runs of blind set 4, fitted on the {len(before)} "
                f"others: energy {mape(gone[2], 'energy_j'):.1f} -> "
                f"{mape(kept[2], 'energy_j'):.1f} %, time {mape(gone[2], 'time_s'):.1f} -> "
                f"{mape(kept[2], 'time_s'):.1f} %")
    return out


def board_effect(records, engine: str, hosted) -> str | None:
    """Leave-one-model-out on each run's host, over the runs measured on one board with a
    board probe: as priced (every board alike), and with energy scaled by the run's
    decode-GEMM probe power over a reference board fitted on the other boards' runs (the
    median of probe x predicted / measured; leave one board out)."""
    from collections import defaultdict
    boards = defaultdict(set)
    for r in records:
        if r.board_probe_w:
            boards[r.key].add((r.doc["per_gpu"][0].get("uuid"), r.board_probe_w))
    rows = [(r, *next(iter(boards[r["key"]]))) for r in hosted if len(boards[r["key"]]) == 1]
    if not rows:
        return None
    scaled = []
    for r, uuid, probe in rows:
        others = [p * o["pred_energy_j"] / o["energy_j"] for o, u, p in rows if u != uuid]
        if others:
            scaled.append(r["pred_energy_j"] * probe / statistics.median(others) / r["energy_j"])
    plain = [r["pred_energy_j"] / r["energy_j"] for r, _, _ in rows]

    def fig(ratios):
        errs = [abs(x - 1) for x in ratios]
        return f"{100 * statistics.mean(errs):.1f} % (worst {100 * max(errs):.1f} %)"
    return (f"{engine}, each run on its host, the {len(rows)} runs measured on one board "
            f"with a board probe ({len({u for _, u, _ in rows})} boards): energy MAPE as "
            f"priced {fig(plain)}; scaled by the board's decode-GEMM probe power over a "
            f"reference fitted on the other boards {fig(scaled)}")


def strict_lomo(records, engine: str, with_host: bool = False) -> list[dict]:
    """Leave one shape out of every training set: for each model of the engine's runs, a
    predictor refitted without that model's reference-runner runs and without the module
    samples of kernel shapes only it has (`exclusive_filter`), then the engine's profile
    fitted on the other models' engine runs over it."""
    from piep.core.dataset import load_calibration
    from piep.fit.predictor import cases, exclusive_filter, fit
    gpu = load_gpu("h200")
    cal = load_calibration("h200")
    ref_cases = cases(cal, gpu)
    out = []
    for name in sorted({r.model for r in records}):
        held = [r for r in records if r.model == name]
        base = fit(cal, gpu, [c for c in ref_cases if c.run.model != name],
                   module_filter=exclusive_filter(held[0].spec, gpu))
        out += profile_rows(base, [r for r in records if r.model != name], held, engine,
                            with_host=with_host)
    return out


def calibration_curve(base, records, engine: str, sizes=(5, 10, 20, 30, 40), draws: int = 5):
    """Per size `n`: the energy MAPE on the runs left out when the profile is fitted on `n`
    runs drawn at random (`draws` draws per size, seeded), and what measuring the drawn
    runs took (`cost`, mean over the draws): how many runs a new engine needs."""
    import random
    out = {}
    for n in sizes:
        if n > len(records) - 5:
            continue
        errs, costs = [], []
        for d in range(draws):
            idx = set(random.Random(1000 * n + d).sample(range(len(records)), n))
            drawn = [r for i, r in enumerate(records) if i in idx]
            rows = profile_rows(base, drawn, [r for i, r in enumerate(records) if i not in idx],
                                engine, with_host=False)
            errs += [abs(_err(r["pred_energy_j"], r["energy_j"])) for r in rows]
            costs.append(cost(drawn))
        out[n] = {"mape": 100 * statistics.mean(errs),
                  **{k: statistics.mean(c[k] for c in costs)
                     for k in ("windows_min", "first_call_min")}}
    return out


def probe_range(blind_set: int) -> str:
    """The host launch probes of a blind set's measured runs, as 'a-b us'."""
    _, _, files = SETS[blind_set]
    probes = [1e6 * r.host_probe_s for e in ("hf-eager", "hf-static") for f in files
              if (ENGINES / e / f).exists() for r in read_runs(ENGINES / e / f,
                                                                "piep.measurement")
              if r.energy_j and r.host_probe_s is not None]
    return f"launch probes of {min(probes):.1f}-{max(probes):.1f} us" if probes else "no probe"


def main() -> int:
    base = load_learned("h200")
    lines = ["# piep on transformers generate() (H200)", "",
             "Generated by `python benchmarks/engines_accuracy.py` from the runs in "
             "`calibration/h200/engines/<engine>/raw/` (device calls "
             f"{device_calls(*(ENGINES / e / 'raw' for e in ('hf-eager', 'hf-static')))}; "
             "scripts and logs in `calibration/h200/device/`). Energy: GPU boards, one whole "
             "`generate()` call; prefill: `generate(max_new_tokens=1)`.", "",
             "| engine | runs | models | piep before (reference mode): energy | time | "
             "profile, leave-one-model-out: energy | time | prefill energy | decode energy | "
             "with each run's host probe: energy | time | strict (the shape out of every "
             "training set): energy | time |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    detail, extra, curves, hosts, oor, ablations = [], [], [], [], [], []
    records_of = [r for e in names(reference=False, kind="batch")
                  for r in engine_records("h200", e)]
    for engine in sorted(names(reference=False, kind="batch")):  # serving: its own report
        records = engine_records("h200", engine)
        if not records:
            continue
        before = baseline(records, engine, base)
        both = profile_lomo(base, records, engine)
        rows, hosted = both[False], both[True]
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
        print(f"  before (piep-{REGISTRY[engine].decode}): energy {summarize([x for x, _ in before])},"
              f" time {summarize([y for _, y in before])}")
        print(f"  profile LOMO: energy {summarize(e)}, time {summarize(t)}; prefill energy "
              f"{summarize(pe)}, decode energy {summarize(de)}; with each run's host probe: "
              f"energy {summarize(he)}, time {summarize(ht)}; strict: energy {summarize(se)}, "
              f"time {summarize(st)}")
        lines.append(f"| {engine} | {len(rows)} | {len(models)} | "
                     f"{summarize([x for x, _ in before])} | {summarize([y for _, y in before])} "
                     f"| {summarize(e)} | {summarize(t)} | {summarize(pe)} | {summarize(de)} "
                     f"| {summarize(he)} | {summarize(ht)} | {summarize(se)} | {summarize(st)} |")
        c = cost(records)
        cov, cov_t = (cross_coverage(rows, k) for k in ("energy_j", "time_s"))
        far = [abs(_err(r["pred_energy_j"], r["energy_j"])) for r in rows
               if "out_of_range" in r["flags"]]
        near = [abs(_err(r["pred_energy_j"], r["energy_j"])) for r in rows
                if "out_of_range" not in r["flags"]]
        oor.append(f"| {engine} | {len(far)} | "
                   + (f"{100 * statistics.mean(far):.1f} %" if far else "-")
                   + f" | {len(near)} | {100 * statistics.mean(near):.1f} % |")
        worst = max(rows, key=lambda r: abs(_err(r["pred_energy_j"], r["energy_j"])))
        extra.append(f"| {engine} | {100 * cov:.0f} % | {100 * cov_t:.0f} % | "
                     f"{100 * _err(worst['pred_energy_j'], worst['energy_j']):+.1f} % "
                     f"({worst['model']}, batch {worst['batch']}) | "
                     f"{100 * max(abs(x) for x in t):.1f} % | {100 * c['spread']:.1f} % | "
                     f"{c['runs']} | {c['windows_min']:.1f} | {c['first_call_min']:.1f} | "
                     f"{c['wall_min']:.1f} |")
        print(f"  cross-conformal 90 % coverage: energy {100 * cov:.0f} %, time "
              f"{100 * cov_t:.0f} %; calibration: {c['runs']} runs, "
              f"{c['windows_min']:.1f} min of windows, {c['wall_min']:.1f} min wall")
        curve = calibration_curve(base, records, engine)
        sizes = (5, 10, 20, 30, 40)
        curves.append(f"| {engine} | " + " | ".join(
            f"{curve[n]['mape']:.1f} %" if n in curve else "-" for n in sizes)
            + f" | {summarize(e)} ({len(rows)} runs, leave-one-model-out) |")
        curves.append(f"| {engine}: measured windows (first calls), min | " + " | ".join(
            f"{curve[n]['windows_min']:.1f} ({curve[n]['first_call_min']:.1f})" if n in curve
            else "-" for n in sizes)
            + f" | {c['windows_min']:.1f} ({c['first_call_min']:.1f}) ({c['runs']} runs) |")
        print("  energy MAPE on the other runs, profile fitted on n random runs: "
              + ", ".join(f"n={n}: {v['mape']:.1f} % ({v['windows_min']:.1f} min of windows)"
                          for n, v in curve.items()))
        hosts += host_rows(engine, rows, hosted)
        for what, undone in ABLATIONS[engine]:
            ablations.append(ablation(base, records, engine, rows, hosted, what, undone))
            print("  " + ablations[-1])
        if (line := board_effect(records, engine, hosted)) is not None:
            ablations.append(line)
            print("  " + line)
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
              "| engine | energy coverage of a 90 % interval (cross-conformal) | time "
              "coverage | worst run, energy | worst run, time | median repeat spread | runs | "
              "measured windows, min | first calls, min | wall, min |",
              "|---|---|---|---|---|---|---|---|---|---|",
              *extra, "",
              "Coverage: each run against a 90 % band from the other models' leave-one-model-"
              "out residuals only. Repeat spread: (max - min) / median of a run's repeated "
              "windows. Cost, from the committed records: the measured windows (each repeat "
              "of the whole call and of the prefill call), the first calls (the compile of "
              "hf-static; model loads are not in the records) and the wall time of every "
              "configuration. Targets the runs miss: no run worse than 15 % (see the worst "
              "runs) and tp=2 (not measured: no 2-GPU machine has been lent).", "",
              "Runs the module models flag `out_of_range` (a leaf far from every isolated "
              "sample of its kind; their intervals are widened x1.5 in log) against the others, "
              "leave-one-model-out energy error:", "",
              "| engine | flagged runs | energy MAPE | other runs | energy MAPE |",
              "|---|---|---|---|---|", *oor]
    lines += ["", "## Calibration runs needed", "",
              "Energy MAPE on the runs left out when the profile is fitted on n runs drawn at "
              "random (5 draws each; the left-out runs may share a model with the drawn ones), "
              "beside the full leave-one-model-out figure (each fold fitted on the runs of the "
              "other models), and what measuring the drawn runs took, from their records "
              "(mean over the draws): the minutes of measured windows, and in brackets of "
              "first calls (hf-static's compile; model loads are not recorded). The target "
              "of a new engine's calibration: at most 40 runs and 15 minutes of windows.", "",
              "| engine | n = 5 | n = 10 | n = 20 | n = 30 | n = 40 | all runs |",
              "|---|---|---|---|---|---|---|", *curves]
    lines += ["", "## Host speed", "",
              "An eager engine waits on its host. Every record carries a host probe (a "
              "200k-iteration Python loop, a launch of `x.add_(1)`), measured before its "
              "runs and, since call 27, beside every measured window (the record's probe is "
              "their median; records measured after session 7 add a tiny Llama's eager decode "
              "step, `tiny_decode_step_s`, a probe closer to an eager engine's host path, "
              "compared with the others below); the lent machines' hosts differ from call to "
              "call and within a "
              f"call (one run's probes spread up to {probe_spread(records_of):.2f}x). A "
              "profile of an engine "
              "fitted per host (hf-eager, hf-static, hf-cb) scales its host terms (launch "
              "gaps, time per generated token or iteration) by each run's launch probe over "
              "the median of its runs' (the profile's reference host), and `predict "
              "--host-probe-us` predicts for a host whose probe is known (`piep env "
              "--host-probe` on it); without it, for the typical host of the calibration "
              f"machines (the median launch probe of every shipped run, "
              f"{1e6 * typical_host_s('h200'):.2f} us: the hosts drift, hf-cb's replays of "
              "calls 18-21 ran on hosts of ~6.4 us, later calls on 6.6-11 us; one host for "
              "every engine keeps them comparable). Mean time error of the "
              "leave-one-model-out predictions per device call, without and with each "
              "run's probe:", "",
              "| engine | device call | runs | Python loop, ms (median) | launch, us "
              "(median) | mean time error | with the run's probe |",
              "|---|---|---|---|---|---|---|", *hosts, "",
              "Runs measured again on other calls' hosts (device calls 27 and 33, "
              "`design_replicates.jsonl`: runs of the fastest and the slowest hosts with the "
              "worst time errors): the measured change of their time against the first "
              "measurement beside the change of the host's launch probe and the change the "
              "shipped profile predicts from the two probes (it scales the host's share of the "
              "time only):", "",
              "| model | batch | prompt | gen | calls | time s | again | ratio | "
              "launch probe, us | probe ratio | predicted ratio |",
              "|---|---|---|---|---|---|---|---|---|---|---|", *replicate_rows(base), "",
              "Which probe tracks the host: the runs that carry all three probes (device "
              "calls 31-34), each with the host factor at which the shipped profile matches "
              "its measured time (the implied factor), against each probe scaled to the "
              "implied factors' median over the same runs (a level fitted on them, for every "
              "probe alike); none: one factor for every run. The profiles keep the launch "
              "probe: the runs before call 31 carry no tiny-decoder probe.", "",
              "| engine | probe | runs | r (log probe, log implied factor) | time MAPE left |",
              "|---|---|---|---|---|",
              *[f"| {e} {row}" for e in ("hf-eager", "hf-static") for row in probe_rows(base, e)],
              "", *board_text(),
              "## Sliding window", "",
              "transformers applies a model's sliding window in its cache "
              "(`DynamicSlidingWindowLayer`, `StaticSlidingWindowLayer`: the records' "
              "`cache_layers`): the cache keeps the last window of keys, and once a call's "
              "keys reach the window the causal mask is no longer dropped, so SDPA runs masked "
              "with K/V expanded to every query head. piep's tree has both forms of a "
              "windowed engine's attention, each weighted by its share of the phase (a "
              "prefill of at least the window's length runs masked over the prompt; a decode "
              "step once prompt + step reach the window, over the window). The runs past a "
              "window (device calls 31-37; blind sets 5-8 below), each on its own host "
              "(its launch probe), predicted by the shipped profiles with the window / with "
              "the window ignored (trained on these runs too; the blind figures are in the "
              "blind sets):", "",
              "| engine | model | batch | prompt | gen | window | energy, with / without the "
              "window | time, with / without | prefill energy, with / without |",
              "|---|---|---|---|---|---|---|---|---|", *window_rows(base), "",
              "## What an eager decode step launches", "",
              "Kernel census of transformers' eager `generate()` (device call 27, `python -m "
              "piep.sampling.census`, `calibration/h200/engines/census/`): CUDA kernels per "
              "decode step, per layer (from 2 and 4 layers) and outside the layers, against "
              "the launches the model tree gives hf-eager (batch 4, prompt 128). Per layer the "
              "tree's 41 are the census's 41-47 (cuBLAS adds a split-K reduce kernel to some "
              "projections, by shape); outside the layers the generation loop launches ~70 "
              "(logits processors, stop check, input update) where the tree has 11: that host "
              "time is the profile's time per generated token. SDPA runs cuDNN's flash kernel "
              "at every head dim measured (64-128): no fallback with many small kernels.", "",
              "| model | head dim | heads / KV | per layer | tree | outside | tree | prefill "
              "per layer | SDPA kernel |", "|---|---|---|---|---|---|---|---|---|",
              *census_rows(), "",
              *census_time_text(*census_time_rows())]
    lines += ["", "What a profile is: the KV-cache handling of the engine is structure in the "
              "model tree (DynamicCache copies the whole cache every decode step; a static-"
              "cache decode step attends the whole cache under a mask, K/V expanded to every "
              "query head where the model has more than one KV head and fewer than query "
              "heads; its prefill is causal over the prompt), priced by module samples of "
              "transformers' own kernels (`calibration/h200/modules/modules_engines_s0.jsonl`, "
              "`modules_kv_expand_v2.jsonl`: masked SDPA, repeat_kv compiled, the DynamicCache "
              "concatenation, the paged gather; device calls 23-24, and `modules_engines_s7."
              "jsonl`, call 28; past a sliding window hf-eager's eager repeat_kv and the "
              "sliding cache's strided concatenation, `kv_slide`, `modules_eager_copies_s35."
              "jsonl`, call 35, each with its own module models; eager copies outside a "
              "decode step were measured too but made the serving fit worse, so hf-cb's "
              "stay at the copy rate); "
              "the profile's fitted terms are host time per launch (prefill, decode), per "
              "graph-replayed kernel and per generated token. hf-eager's host queues kernels "
              "ahead of the GPU (`queue_ahead`): within a phase the GPU idles only by the "
              "host's issue time beyond its kernels' time, not after every kernel whose launch "
              "outlasts it, and the steps past a sliding window (the GPU the busier) apart "
              "from the steps before it (the host the busier). hf-static's profile also fits "
              "host time once per `generate()` "
              f"call ({1e3 * load_profile('h200', 'hf-static').host.call_host_s:.0f} ms: the "
              "static cache's reset, the compiled step's guards; for hf-eager it gained "
              "nothing and is not fitted). hf-static's compiled decode step fuses each "
              "pointwise chain (a norm, rope, a residual add, the activation) into one "
              "kernel: the tree holds them as fused leaves of one launch each, at the in-situ "
              "time the kernel census measured "
              f"({1e6 * load_profile('h200', 'hf-static').host.fused_kernel_s:.2f} us a "
              "kernel beyond its bytes at HBM bandwidth; see the census section). Both "
              "profiles refit the combiner on their own runs, after their host terms (each "
              "choice against the same runs fitted without it below). All runs are tp=1 on "
              "one GPU: "
              "predictions for tp>1 with these engines are flagged `unmeasured_engine_layout`, "
              "their 90 % band widened x1.5 (log).",
              "", "Each choice against the same runs fitted without it:", "",
              *[f"* {line}" for line in ablations],
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
              *[f"* {line}" for line in blind_summary(blind_set=2)], "",
              "Set 3 (device calls 27-28: `call27_blind3.jsonl`, `call27_replicates.jsonl`, "
              "`call28_blind3.jsonl`; multi-head attention and head dim 80 in no public list "
              "and vicuna-33b under hf-eager, llama-2-13b and head dim 80 under hf-static, and "
              "hf-eager's six replicates above): the per-host profiles of session 6, commit "
              "b1adaf6 (`blind_predictions3.jsonl`).", "",
              *[f"* {line}" for line in blind_summary(blind_set=3)], "",
              "Set 4 (device call 29: `call29_blind4.jsonl`; head dim 112 and a 20B shape in "
              "no public list, new draws of llama-3-8b and mistral-7b under hf-eager; head dim "
              "112 under hf-static, whose 20B runs the call's limit cut): the profiles refitted "
              "after set 3 with hf-eager's queue_ahead, commit 60fb9fc "
              "(`blind_predictions4.jsonl`). Call 29's host was slow (its median probes in the "
              "Host speed table): every hf-eager run was under-predicted, most of it the "
              "host.", "",
              *[f"* {line}" for line in blind_summary(blind_set=4)], "",
              "Set 5 (device calls 31-32: `call31_blind5.jsonl`, `call31_window.jsonl`, "
              "`call32_window.jsonl`, hf-static's `call32_blind5.jsonl`; small shapes with tied "
              "embeddings (a 1B at head dim 64, a Qwen2 with biases and a 152k vocabulary) and "
              "a Mistral shape with a 1024-key window in no public list under hf-eager, the "
              "1B under hf-static, and hf-eager's runs past a sliding window, mistral-7b's "
              "4096 among them): the profiles of session 7 with the sliding window in the tree, "
              "commit 922862c (`blind_predictions5.jsonl`). Call 31's host was slow (its median "
              "probes in the Host speed table): every hf-eager run was under-predicted in "
              "time.", "",
              *[f"* {line}" for line in blind_summary(blind_set=5)], "",
              "Set 6 (device call 33: hf-static's `call33_window.jsonl`; its sliding cache, "
              "crossed in the decode, then reached in the prefill), commit 7f9753e "
              "(`blind_predictions6.jsonl`).", "",
              *[f"* {line}" for line in blind_summary(blind_set=6)], "",
              "Set 7 (device call 34: `call34_window2.jsonl`; mistral-7b past its 4096-key "
              "window under hf-eager, on another host): the profiles refitted on calls 31-33, "
              "commit dfd3a66 (`blind_predictions7.jsonl`).", "",
              *[f"* {line}" for line in blind_summary(blind_set=7)], "",
              "Set 8 (device call 36, its last hf-eager run call 37: `call36_window4.jsonl`, "
              "`call37_window4.jsonl`; a 2048-key window at head dim 96 in no public list under "
              "both engines, reached in the prefill, during the decode and never; mistral-7b "
              "and the 1024-key shape past the window at batches 16 and 24 under hf-eager): the "
              "profiles refitted on call 35 (the eager copies past a window sampled, the steps "
              "past it queued apart), commit d7641a8 (`blind_predictions8.jsonl`, committed in 717f1ee).", "",
              *[f"* {line}" for line in blind_summary(blind_set=8)], "",
              "Set 9 (device call 40, hf-static's last run call 41: `call40_layers.jsonl`, "
              "`call41_layers.jsonl`; 8 layers at a 7B's width and 64 narrow layers in no "
              "public list under both engines, qwen2.5-32b's 64 under hf-static: every "
              "hf-static run before had 16-48 layers; call 40's host was slow, its launch "
              "probe 10.7-12.0 us): the profiles after hf-static's compiled step was given "
              "fused pointwise kernels, commit cf2f229 (`blind_predictions9.jsonl`), and the "
              "candidate without them, hf-static's profile as shipped before "
              "(`blind_predictions9_unfused.jsonl`). The combiners were refitted after these "
              "runs were measured.", "",
              *[f"* {line}" for line in blind_summary(blind_set=9)], "",
              "Set 10 (device call 42: `call42_blind10.jsonl`; shapes each engine's runs "
              "never had: under hf-static a Qwen2 with biases and a 152k vocabulary and a "
              "30-layer shape in no public list, llama-2-13b at another point; under hf-eager "
              "the 20-layer head dim 64 shape at batch 16, the 64-layer shape at batch 12, "
              "llama-3-8b with a 2000-token prompt, the 8-layer shape at batch 32): the "
              "profiles with their own combiners, refitted on calls 40-41, commit 1d0b028 "
              "(`blind_predictions10.jsonl`, committed in ccd7336).", "",
              *[f"* {line}" for line in blind_summary(blind_set=10)], "",
              "Set 11 (device call 43: `call43_blind11.jsonl`; multi-head attention in no "
              "public list under hf-static, and mistral-small-24b, which call 43's device time "
              "cut and call 44 measured (`call44_blind11.jsonl`); under hf-eager the Qwen2 "
              "shape with biases at batch 12 and mistral-small-24b at a 3000-token prompt): "
              "the profiles refitted on set 10, commit 8ae6528 (`blind_predictions11.jsonl`, "
              "committed in 9826416).", "",
              *[f"* {line}" for line in blind_summary(blind_set=11)], "",
              "Set 12 (device call 44: `call44_blind12.jsonl`; prefills of 0.3-3 s whose "
              "kernels add up to more than the 700 W limit: under hf-eager a 10B shape in no "
              "public list at two points, llama-3-8b, qwen2.5-14b, mistral-small-24b, the 9B "
              "unlisted shape and llama-2-7b at batch 64; under hf-static the 10B shape): the "
              "predictor that holds each phase under the board's power limit, commit 2e7219c "
              "(`blind_predictions12.jsonl`, committed in 29163a9), and the candidate "
              "before it (`blind_predictions12_unheld.jsonl`, the code of commit 877587d: "
              "only a phase of 1 s or more stretched, its energy kept).", "",
              *[f"* {line}" for line in blind_summary(blind_set=12)], "",
              "Set 13 (device calls 45-46: `call45_blind13.jsonl`, `call46_blind13.jsonl`; "
              "where users go and no run had gone: batches of 96 and 128 (llama-3-8b, "
              "qwen2.5-7b) under both engines, 1000-1200 generated tokens (the 8-layer shape "
              "under hf-eager, and under hf-static a shape in no public list with 24 query "
              "heads over 2 K/V heads, which hf-eager ran at batch 32): the profiles refitted "
              "on call 44, commit 0a19b9f, predicted at aa59ba9 (`blind_predictions13.jsonl`, "
              "committed in dfa26d4).", "",
              *[f"* {line}" for line in blind_summary(blind_set=13)], "",
              "Set 14 (device call 50: `call50_blind14.jsonl`; a Qwen2-type shape in no "
              "public list, head dim 64 with 16 query heads per K/V head and a 152k "
              "vocabulary over a 2B body, under both engines; qwen2.5-32b at batch 16, "
              "llama-3-8b at a 7000-token prompt and multi-head attention at batch 48 under "
              "hf-eager; llama-2-13b at batch 32 over 256 steps under hf-static): the "
              "profiles fitted on calls 15-48, predicted at c8e15ce "
              "(`blind_predictions14.jsonl`, committed in 9f3e207). The worst run, the new "
              "shape under hf-eager (-29 % energy, -35 % time), measured again on another "
              "host (device call 51, `call51_replicates4.jsonl`) drew the same energy (746.5 "
              "against 746.3 J); its kernel census (call 52, "
              "`census/call52_census.jsonl`) counts 42 kernels a layer taking 140 us, as the "
              "other head-dim-64 shape does: its decode step of 36 ms is the host's, 28-29 us "
              "a kernel, as every hf-eager run's on a host of its launch probe (9.5-10.2 us "
              "on both calls) does; the profile scales host time linearly in the probe, "
              "which prices such a host at 23 us a kernel.", "",
              *[f"* {line}" for line in blind_summary(blind_set=14)], "",
              "Set 15 (device call 54: `call54_blind15.jsonl`; an 11B at a 5120 width and a "
              "small Qwen2-type shape with 7 query heads per K/V head, both in no public "
              "list, under both engines; llama-2-7b at batch 6 over 300 steps and "
              "qwen2.5-14b at batch 64 under hf-eager): the profiles fitted on calls 15-51, "
              "predicted at 72ae802 (`blind_predictions15.jsonl`, committed in d24e2b8) at "
              "the calibration machines' typical host and at a grid of host launch probes; "
              f"the call's host measured {probe_range(15)}, faster than the typical one, "
              "so the line at each run's probe is the blind prediction a user who gives "
              "`--host-probe-us` gets.", "",
              *[f"* {line}" for line in blind_summary(blind_set=15)], "",
              "Set 16 (device call 56: `call56_blind16.jsonl`; mistral-7b at batch 32, the "
              "shape with 12 query heads per K/V head at a 1500-token prompt, qwen2.5-14b at "
              "a 2500-token prompt and the 11B at batch 48 under hf-eager; llama-3-8b at "
              "batch 24 and the small Qwen2-type shape at batch 16 under hf-static): the "
              "profiles fitted on calls 15-55, which also priced energy per board by its "
              "decode-GEMM probe power (since undone), predicted at cbd474a "
              "(`blind_predictions16.jsonl`, committed in ed27cdd; the file names each "
              f"profile's board); the call's host measured {probe_range(16)}, its board "
              "529-531 W on the probe.", "",
              *[f"* {line}" for line in blind_summary(blind_set=16)],
              *detail]
    REPORT.write_text("\n".join(lines) + "\n")
    print(f"wrote {REPORT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
