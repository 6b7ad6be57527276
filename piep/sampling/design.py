"""The measurement campaigns: space-filling designs of end-to-end runs, engine designs and
listed runs, serving traces. The campaigns themselves are data, in
`calibration/h200/designs/` (shapes.json, engines.json, serving.json, e2e.json); this module
holds the functions that draw and write them.

Latin-hypercube draws of log(batch), log(prompt), log(gen) per (model, layout, mode),
kept when the layout fits in memory with a margin and the roofline says the run is short
enough to measure inside the device budget. Writes one JSON config per line.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from functools import lru_cache
from typing import Any

from piep.core.config import ModelSpec, Parallel, Workload
from piep.core.errors import PiepError
from piep.core.gpus import DEFAULT_GPU, load_gpu
from piep.core.layout import validate
from piep.predict.pricing import prediction
from piep.predict.roofline import RooflineModel

# the campaigns are data (calibration/h200/designs/): the shapes in no public list, the
# engine designs and listed runs, the serving traces, the reference runner's designs;
# this module keeps the functions that draw and write them


def campaign(name: str) -> dict[str, Any]:
    """One campaign file of calibration/h200/designs/ (shapes, engines, serving, e2e)."""
    return _campaign(name)


@lru_cache(maxsize=8)
def _campaign(name: str) -> dict[str, Any]:
    from piep.core.artifacts import calibration_dir, load_json
    return load_json(calibration_dir(DEFAULT_GPU) / "designs" / f"{name}.json")


def shapes(set_name: str | None = None) -> dict[str, dict[str, Any]]:
    """The shapes in no public list the campaigns ran (name -> config.json body), or those
    of one set (e.g. UNLISTED_HEAD_DIM)."""
    return {name: entry["config"] for name, entry in campaign("shapes")["shapes"].items()
            if set_name is None or entry["set"] == set_name}


def _e2e(key: str):
    return campaign("e2e")[key]


def named_spec(name: str) -> tuple[ModelSpec, dict[str, Any] | None]:
    """A shipped model or one of the designs' shapes in no public list (with its
    config.json body)."""
    inline = shapes().get(name)
    if inline:
        return ModelSpec.from_hf_config(inline, name=name), inline
    from piep.core.models import load_model
    return load_model(name), None


def _lhs(rng: random.Random, n: int, lo: float, hi: float) -> list[float]:
    """One Latin-hypercube column on a log scale."""
    cells = [(i + rng.random()) / n for i in range(n)]
    rng.shuffle(cells)
    return [math.exp(math.log(lo) + c * (math.log(hi) - math.log(lo))) for c in cells]


def _fitting(spec: ModelSpec, parallel: Parallel, wl: Workload, gpu, margin: float):
    """The deployment, or None where it is refused or fills more than `margin` of memory."""
    try:
        dep = validate(spec, parallel, wl, gpu)
    except PiepError:
        return None
    return dep if dep.peak_memory_gib() <= margin * gpu.memory_gib else None


def estimate_wall_s(pred: dict[str, Any], *, repeats: int = 3, min_window_s: float = 0.5) -> float:
    """Seconds the runner spends on a configuration (build, warm-up, windows, ticks)."""
    pre, dec = pred["prefill"]["time_s"], pred["decode"]["time_s"]
    windows = repeats * (max(min_window_s, pre) + max(min_window_s, dec) + 0.2)
    return 2.5 + pre + 8 * pred["tpot_s"]["p50"] + windows + pre + dec + 0.2


def build_design(*, seed: int = 0, draws: int = 8, max_time_s: float = 3.0, block: int = 24,
                 eager_share: float = 0.25, memory_margin: float = 0.85,
                 layouts: tuple[str, ...] | None = None,
                 models: tuple[str, ...] | None = None,
                 runs: tuple[dict[str, Any], ...] = (), gpu=None) -> list[dict[str, Any]]:
    """Configurations drawn per (model, layout): batch, prompt and generation lengths by
    Latin hypercube, a share in eager mode, those that fit the GPU and run for at most
    `max_time_s`; `runs` (model, layout, batch, prompt_len, gen_len, mode) come first, as
    listed; `gpu`: the GPU whose memory they must fit (default the shipped one)."""
    rng = random.Random(seed)
    gpu = gpu or load_gpu(DEFAULT_GPU)
    roof = RooflineModel()
    layouts = tuple(layouts or _e2e("layouts"))
    if models:
        plan = [(m, lay) for m in models for lay in layouts]
    else:
        plan = [(m, "tp1") for m in _e2e("one_gpu_models")]
        plan += [(m, lay) for lay, ms in _e2e("two_gpu").items() for m in ms]
    plan = [(m, lay) for m, lay in plan if lay in layouts]
    listed = []
    for r in runs:
        spec, inline = named_spec(r["model"])
        tp, pp, dp = _e2e("layouts")[r["layout"]]
        dep = validate(spec, Parallel(tp=tp, pp=pp, dp=dp), Workload(
            batch=r["batch"], prompt_len=r["prompt_len"], gen_len=r["gen_len"],
            mode=r["mode"]), gpu)
        listed.append(_design_row(r["model"], r["layout"], dep, roof, inline)[0])
    out = []
    for name, lay in plan:
        spec, inline = named_spec(name)
        tp, pp, dp = _e2e("layouts")[lay]
        batches = _lhs(rng, draws, 1, 64)
        prompts = _lhs(rng, draws, 128, 2048)
        gens = _lhs(rng, draws, 32, 512)
        for b, p, g in zip(batches, prompts, gens):
            batch = max(dp, int(round(b / dp)) * dp)
            mode = "eager" if rng.random() < eager_share else "graph"
            wl = Workload(batch=batch, prompt_len=int(round(p)), gen_len=int(round(g)), mode=mode)
            dep = _fitting(spec, Parallel(tp=tp, pp=pp, dp=dp), wl, gpu, memory_margin)
            if dep is None:
                continue
            cfg, time_s = _design_row(name, lay, dep, roof, inline)
            if time_s > max_time_s:
                continue
            out.append(cfg)
    # random order (SPEC §3); graph first, then eager, within blocks of `block` so that a
    # budget cut still leaves some eager points
    rng.shuffle(out)
    order = sorted(range(len(out)), key=lambda i: (i // block, out[i]["mode"] != "graph", i))
    return listed + [out[i] for i in order]


def _design_row(name: str, lay: str, dep, roof, inline: dict | None
                ) -> tuple[dict[str, Any], float]:
    """One configuration of a design (the run of `dep`, its estimated wall time and
    roofline time) and its roofline time unrounded."""
    pred = prediction(dep, roof)
    p, wl = dep.parallel, dep.workload
    cfg = {"model": name, "tp": p.tp, "pp": p.pp, "dp": p.dp, "batch": wl.batch,
           "prompt_len": wl.prompt_len, "gen_len": wl.gen_len, "mode": wl.mode,
           "layout": lay, "estimated_s": round(estimate_wall_s(pred), 2),
           "roofline_time_s": round(pred["time_s"], 4)}
    if inline:
        cfg["config"] = inline
    return cfg, pred["time_s"]


def write_design(path: Path, **kwargs) -> int:
    rows = build_design(**kwargs)
    from piep.core.artifacts import write_text
    write_text(path, "".join(json.dumps(r) + "\n" for r in rows))
    return len(rows)


# host time per layer of a decode step, for the wall-time estimate of transformers' engines
# only (eager: ~30 kernel launches per layer; compiled: one CUDA-graph replay)
HF_LAYER_STEP_S = {"hf-eager": 4e-4, "hf-static": 5e-5}
HF_COMPILE_S = 40.0  # first call of a model under hf-static (21-80 s measured)


def _engine_row(name: str, engine: str, dep, roof, inline: dict | None) -> dict[str, Any]:
    """A design row of a transformers engine, with its wall-time estimate (seven calls:
    warm-ups, windows, the prefill windows; 10 s of setup)."""
    spec, wl = dep.model, dep.workload
    pred = prediction(dep, roof)
    step = max(pred["tpot_s"]["p50"], HF_LAYER_STEP_S[engine] * spec.num_layers)
    t_gen = pred["prefill"]["time_s"] + step * max(wl.gen_len - 1, 0)
    return {"model": name, "engine": engine, "tp": dep.parallel.tp, "pp": 1, "dp": 1,
            "batch": wl.batch, "prompt_len": wl.prompt_len, "gen_len": wl.gen_len,
            "mode": "graph" if engine == "hf-static" else "eager",
            "estimated_s": round(10 + 7 * max(t_gen, 0.6), 1),
            **({"config": inline} if inline else {})}


def build_engine_design(engine: str, models: tuple[str, ...], *, tp: int = 1, seed: int = 0,
                        draws: int = 6, batches: tuple[int, int] = (1, 64),
                        prompts: tuple[int, int] = (64, 2048), gens: tuple[int, int] = (16, 256),
                        memory_margin: float = 0.8, by_model: bool = False) -> list[dict]:
    """Latin-hypercube (batch, prompt, gen) draws per model for a transformers engine.
    `by_model` keeps each model's configurations together (hf-static compiles its decode
    step once per model object); otherwise models alternate, so that a budget cut still
    leaves every model some runs."""
    rng = random.Random(seed)
    gpu = load_gpu(DEFAULT_GPU)
    roof = RooflineModel()
    per_model: list[list[dict[str, Any]]] = []
    for name in models:
        spec, inline = named_spec(name)
        rows = []
        for b, p, g in zip(_lhs(rng, draws, *batches), _lhs(rng, draws, *prompts),
                           _lhs(rng, draws, *gens)):
            wl = Workload(batch=int(round(b)), prompt_len=int(round(p)), gen_len=int(round(g)))
            dep = _fitting(spec, Parallel(tp=tp), wl, gpu, memory_margin)
            if dep is not None:
                rows.append(_engine_row(name, engine, dep, roof, inline))
        if rows and engine == "hf-static":
            rows[0]["estimated_s"] += HF_COMPILE_S
        per_model.append(rows)
    if by_model:
        return [r for rows in per_model for r in rows]
    out = []
    for i in range(max(map(len, per_model), default=0)):
        out += [rows[i] for rows in per_model if i < len(rows)]
    return out


def engine_designs() -> dict[str, dict[str, Any]]:
    """The drawn engine designs: design file -> build_engine_design's arguments."""
    return {name: {k: tuple(v) if isinstance(v, list) else v for k, v in entry.items()
                   if k != "why"} for name, entry in campaign("engines")["drawn"].items()}


def listed_runs() -> dict[str, tuple[str, tuple]]:
    """Every design of listed runs (not drawn: replicates, runs past a window, layer
    counts, blind sets 10-16): design file -> (engine, runs of (model, batch, prompt,
    gen))."""
    return {name: (entry["engine"], tuple(tuple(r) for r in entry["runs"]))
            for name, entry in campaign("engines")["listed"].items()}


def build_replicates(engine: str, runs) -> list[dict]:
    """Design rows that measure the listed runs (model, batch, prompt, gen) of `engine`."""
    gpu, roof = load_gpu(DEFAULT_GPU), RooflineModel()
    rows = []
    for name, b, p, g in runs:
        spec, inline = named_spec(name)
        dep = _fitting(spec, Parallel(), Workload(batch=b, prompt_len=p, gen_len=g), gpu, 1.0)
        rows.append(_engine_row(name, engine, dep, roof, inline))
    return rows


def write_engine_design(name: str) -> int:
    from piep.core.artifacts import write_text
    listed = listed_runs()
    rows = build_replicates(*listed[name]) if name in listed else \
        build_engine_design(**engine_designs()[name])
    path = Path("calibration/h200/engines") / name
    write_text(path, "".join(json.dumps(r) + "\n" for r in rows))
    return len(rows)


def write_cb_traces() -> int:
    from piep.core.artifacts import write_text
    from piep.core.trace import poisson_trace
    root = Path("calibration/h200/engines/hf-cb")
    serving = campaign("serving")
    traces = {name: {k: v for k, v in entry.items() if k not in ("set", "why")}
              for name, entry in serving["traces"].items()}
    for name, kw in traces.items():
        write_text(root / "traces" / name, poisson_trace(**kw).to_jsonl())
    configs = shapes()
    for name in serving["unlisted_shapes"]:
        write_text(root / "configs" / f"{name}.json",
                   json.dumps(configs[name], indent=1) + "\n")
    return len(traces)


def e2e_designs() -> dict[str, dict[str, Any]]:
    """The reference runner's designs: design file -> build_design's arguments (a design's
    `why` is for its readers)."""
    return {name: {k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()
                   if k != "why"}
            for name, kw in _e2e("designs").items()}


if __name__ == "__main__":
    import sys
    name = sys.argv[1] if len(sys.argv) > 1 else "design.jsonl"
    if name == "traces":
        n = write_cb_traces()
    elif name in engine_designs() or name in listed_runs():
        n = write_engine_design(name)
    else:
        n = write_design(Path("calibration/h200/e2e") / name, **e2e_designs()[name])
    print(f"{n} configurations")
