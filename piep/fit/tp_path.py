"""transformers' tensor-parallel path, fitted on runs of another harness.

What is structure (the model tree, counted by `piep.sampling.tp_census`): the modules
`tp_plan="auto"` shards (q/k/v/gate/up colwise, o/down rowwise, lm_head with its logits
gathered), the all-reduce after each rowwise projection and the logits' all-gather, each
priced by piep's collective models. What is fitted, because a CPU cannot measure it:

* `tp_call_host_s`: host time per sharded module call in eager code (the layout
  conversions and collectives its hooks add), shared by both engines (hf-static's
  prefill runs eagerly), fitted on hf-eager's runs;
* `tp_step_host_s`: host time per compiled decode step at tp > 1 (hf-static);
* `tp_gap_w`: the board power while the GPUs wait on that host time, on every run.

The runs come from another harness, whose host and timing differ from piep's records:
each tp=2 run is fitted as its increment over the tp=1 run of the same engine and batch
measured by the same harness (measured tp2/tp1 against predicted tp2/tp1, in log energy
and log time), so the offset between the harnesses cancels. Predictions are made at the
launch probe that puts piep's tp=1 predictions closest to that harness's tp=1 runs
(`harness_probe_us`): the host the fitted host times are for.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from piep.core.foreign import ForeignRun
from piep.core.engines import ENGINES
from piep.core.errors import ConfigError

TERMS = ("tp_call_host_s", "tp_step_host_s", "tp_gap_w")
PROBE_RANGE_US = (3.0, 20.0)


@dataclass(frozen=True)
class TPFit:
    """The fitted terms, the probe they were fitted at, and the runs."""
    terms: dict[str, float]
    harness_probe_us: float
    runs: tuple[str, ...]


class Pricer:
    """piep's (energy_j, time_s) of a run on the harness's host: the learned predictor of
    `gpu` running each engine through its profile (`profiles`: those given, else the
    current one of the engine)."""

    def __init__(self, gpu: str = "h200", profiles: dict[str, Any] | None = None):
        from piep.predict.resolve import cost_model
        self.gpu, self.base = gpu, cost_model(gpu, "learned")
        self.profiles = dict(profiles or {})
        # (run, probe) -> the run, the module models, its leaf table and their outputs: a
        # fit changes host terms only, which change neither (other module models: redone)
        self._tables: dict[tuple, tuple] = {}

    def model(self, engine: str):
        """The cost model of `engine`."""
        if engine not in self.profiles:
            from piep.predict.resolve import engine_profile
            self.profiles[engine] = engine_profile(self.gpu, engine)
        return self.profiles[engine].apply(self.base)

    def __call__(self, run: ForeignRun, probe_us: float,
                 terms: dict[str, float] | None = None) -> tuple[float, float]:
        from piep.predict.pricing import price
        from piep.predict.table import TableBuilder
        from piep.core.scenario import Scenario
        model = self.model(run.engine)
        key = (run, probe_us)
        if key not in self._tables or self._tables[key][1] is not model.modules:
            scn = Scenario.build(run.model, gpu=self.gpu, engine=run.engine, tp=run.tp,
                                 batch=run.batch, prompt_len=run.prompt_len,
                                 gen_len=run.gen_len, host_probe_us=probe_us)
            table = TableBuilder().table([scn.deployment])
            self._tables[key] = (run, model.modules, table,
                                 model.modules.predict(table, model.gpu))
        _, _, table, modules = self._tables[key]
        if terms:
            host = copy.deepcopy(model.host)
            for k, v in terms.items():
                setattr(host, k, v)
            model = replace(model, host=host)
        priced = price(table.deps, model, table=table, prices=model.price(table, modules))
        return float(priced.energy_j[0]), float(priced.time_s[0])


def twins(runs: Sequence[ForeignRun]) -> list[tuple[ForeignRun, ForeignRun]]:
    """(tp>1 run, the tp=1 run of the same engine, model and workload) pairs."""
    ones = {(r.engine, r.model, r.batch, r.prompt_len, r.gen_len): r for r in runs
            if r.tp == 1}
    out = []
    for r in runs:
        if r.tp > 1:
            one = ones.get((r.engine, r.model, r.batch, r.prompt_len, r.gen_len))
            if one is None:
                raise ConfigError(f"{r.source}: no tp=1 run of {r.engine}, {r.model}, batch "
                                  f"{r.batch} in the same file: a tp>1 run is fitted as its "
                                  f"increment over the same harness's tp=1 run")
            out.append((r, one))
    if not out:
        raise ConfigError("no run at tp > 1 to fit the tensor-parallel path on")
    return out


def harness_probe_us(runs: Sequence[ForeignRun], priced: Pricer) -> float:
    """The launch probe at which piep's time of the tp=1 runs of engines fitted per host
    is closest to theirs (least squares in log time; golden-section search)."""
    ones = [r for r in runs if r.tp == 1]
    if not ones:
        raise ConfigError("no tp=1 run: the harness's host is anchored on its tp=1 runs")

    def loss(log_probe: float) -> float:
        return sum(math.log(priced(r, math.exp(log_probe))[1] / r.time_s) ** 2
                   for r in ones)
    return math.exp(_golden(loss, *map(math.log, PROBE_RANGE_US)))


def _golden(f, lo: float, hi: float, tol: float = 1e-3) -> float:
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    while b - a > tol:
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2


def increments(pairs, probe_us: float, terms: dict[str, float], priced: Pricer):
    """Per pair: (predicted, measured) tp>1 / tp=1 ratios of energy and of time."""
    out = []
    for run, one in pairs:
        e1, t1 = priced(one, probe_us)
        e2, t2 = priced(run, probe_us, terms)
        out.append(((e2 / e1, t2 / t1), (run.energy_j / one.energy_j, run.time_s / one.time_s)))
    return out


def fit(runs: Sequence[ForeignRun], priced: Pricer, probe_us: float | None = None,
        start: dict[str, float] | None = None) -> TPFit:
    """Fit the terms on the runs' increments (Nelder-Mead in log host times and gap
    power); a term without a run that informs it stays at `start` (else 0)."""
    from scipy.optimize import minimize
    pairs = twins(runs)
    probe = probe_us if probe_us is not None else harness_probe_us(runs, priced)
    engines = {r.engine for r, _ in pairs}
    start = {"tp_call_host_s": 50e-6, "tp_step_host_s": 1e-3, "tp_gap_w": 150.0,
             **(start or {})}
    # the compiled step's term needs a compiled engine's runs; the call's an eager one's
    informed = {"tp_step_host_s": any(ENGINES[e].compiled_decode for e in engines),
                "tp_call_host_s": any(ENGINES[e].decode == "eager" for e in engines),
                "tp_gap_w": True}
    free = [k for k in TERMS if informed[k]]
    fixed = {k: start[k] for k in TERMS if k not in free}

    def terms_of(x: np.ndarray) -> dict[str, float]:
        return {**fixed, **{k: float(math.exp(v)) for k, v in zip(free, x)}}

    def loss(x: np.ndarray) -> float:
        return sum(math.log(pe / me) ** 2 + math.log(pt / mt) ** 2
                   for (pe, pt), (me, mt) in increments(pairs, probe, terms_of(x), priced))
    x0 = np.log([start[k] for k in free])
    res = minimize(loss, x0, method="Nelder-Mead",
                   options={"xatol": 1e-3, "fatol": 1e-6, "maxiter": 400})
    return TPFit(terms_of(res.x), probe, tuple(r.label for r, _ in pairs))


def leave_one_out(runs: Sequence[ForeignRun], priced: Pricer, probe_us: float | None = None,
                  everything: TPFit | None = None) -> list[dict[str, Any]]:
    """Each tp>1 run predicted by terms fitted without it (its tp=1 twin kept), each fit
    started from the fit on every run (`everything`, fitted here if not given): its
    energy and time, through its increment and absolute at the harness's probe."""
    probe = probe_us if probe_us is not None else harness_probe_us(runs, priced)
    everything = everything or fit(runs, priced, probe)
    rows = []
    for run, one in twins(runs):
        rest = [r for r in runs if r is not run]
        held = fit(rest, priced, probe, start=everything.terms).terms
        (pe, pt), (me, mt) = increments([(run, one)], probe, held, priced)[0]
        e2, t2 = priced(run, probe, held)
        rows.append({"run": run.label, "engine": run.engine, "energy_j": run.energy_j, "time_s": run.time_s,
                     "via_tp1_energy_j": one.energy_j * pe, "via_tp1_time_s": one.time_s * pt,
                     "pred_energy_j": e2, "pred_time_s": t2, "terms": held,
                     "energy_spread": run.spread("energy_j"),
                     "time_spread": run.spread("time_s")})
    return rows


def shipped_runs(gpu: str) -> list[ForeignRun]:
    """The tensor-parallel runs shipped for `gpu` (`calibration/<gpu>/engines/tp2/`)."""
    from piep.core.artifacts import calibration_dir
    from piep.core.foreign import load_foreign
    folder = calibration_dir(gpu) / "engines" / "tp2"
    return [r for path in sorted(folder.glob("*.jsonl")) for r in load_foreign(path)]


def with_tp_path(profile, runs: Sequence[ForeignRun], priced: Pricer, source: str):
    """`profile` (an EngineProfile of hf-eager or hf-static) with the tensor-parallel
    path fitted on `runs` (every engine's: the host time per sharded call is shared): its
    terms, the tp degrees of its own engine's runs added to the measured ones, its
    leave-one-run-out errors, and the interval of its tp group no narrower than those
    errors (nor than its tp=1 interval)."""
    from piep.core.config import Parallel
    from piep.predict.engines import ProfileMeta
    from piep.stats.conformal import mape
    from piep.predict.learned import interval_group
    priced.profiles[profile.name] = profile
    probe = harness_probe_us(runs, priced)
    fitted = fit(runs, priced, probe)
    rows = leave_one_out(runs, priced, probe, fitted)
    host = copy.deepcopy(profile.host)
    for k, v in fitted.terms.items():
        setattr(host, k, v)
    own = [r for r in rows if r["engine"] == profile.name]
    tps = {r.tp for r in runs if r.engine == profile.name}
    meta = {**profile.meta.to_json(), "tp_measured": sorted(set(profile.measured_tp) | tps)}
    meta["tp_path"] = {
        "source": source, "harness_probe_us": probe, "terms": fitted.terms,
        "fitted_on": list(fitted.runs),
        "leave_one_run_out": [{k: v for k, v in r.items() if k != "terms"} for r in own],
        **({"energy_mape": mape(own, "energy_j"), "time_mape": mape(own, "time_s")}
           if own else {})}
    energy_log, time_log = dict(profile.intervals), dict(profile.time_intervals)
    if own:
        group = interval_group(ENGINES[profile.name].decode, Parallel(tp=max(tps)))
        worst_e = max(abs(math.log(r["pred_energy_j"] / r["energy_j"])) for r in own)
        worst_t = max(abs(math.log(r["pred_time_s"] / r["time_s"])) for r in own)
        energy_log[group] = max(worst_e, energy_log.get("all", 0.0))
        time_log[group] = max(worst_t, time_log.get("all", 0.0))
        meta["interval_basis"] = {
            **meta.get("interval_basis", {}),
            group: f"band of the larger of its tp=1 band and the largest of {len(own)} "
                   f"leave-one-run-out errors at tp={max(tps)} (too few to size a 90 % band; "
                   f"in sample: no held-out coverage)"}
    return replace(profile, host=host, meta=ProfileMeta.from_json(meta), intervals=energy_log,
                   time_intervals=time_log)
