"""Fitting a continuous-batching engine's profile on replayed request traces.

Three steps, each on what measures it best:

1. The scheduler: the engine's memory handler is modelled (`serve.paged_cache`); what it
   reserves beyond the weights is read off the blocks each replay reports, and how long
   the idle engine takes to form its first batch off the iteration logs (`pickup_s`).
2. Time: the time scale of the packed attention (an SDPA under a float mask, priced by
   `piep.predict.module_models.PackedKernel` until it is sampled) and that of the K/V
   gather and expansion (every other kernel is priced by the module models as
   generate()'s are), the host time per kernel launch, per iteration and per request of
   an iteration, fitted on the duration of every recorded iteration (each trace weighing
   the same, its iterations by their time) given the Σq, Σkv and requests the engine
   logged; where no replay has an iteration log (an engine's benchmark), together with
   the power in host gaps on the median TPOT, median end-to-end latency and window energy
   of each, in rounds: the replays simulated at the terms so far, the terms fitted on
   those schedules re-timed.
3. Energy: the board power while the GPU waits for the host (`launch_gap_w`), fitted on
   the window energy of every replay as simulated with the time terms of step 2 (energy
   is linear in it).
"""

from __future__ import annotations

import logging
import math
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from piep.core.engines import ENGINES, names
from piep.core.errors import ArtifactError
from piep.predict.engines import EngineProfile, ProfileMeta
from piep.fit.engines import engine_version, profile_hosts
from piep.fit.workers import Pace
from piep.fit.workers import fold_map
from piep.core.records import ServingReplay
from piep.serving.costs import IterationCosts, IterationGrid, IterationTimes, grid_sizes
from piep.serving.serve import (SchedulerPolicy, document, iteration_grid, paged_cache,
                                policy_of, run, window_parts_j, with_host)
from piep.serving.simulate import repriced
from piep.core.trace import Trace, make_trace

log = logging.getLogger("piep.train")
SERVING = names(kind="stream")[0]  # the serving engine piep replays: continuous batching
FITTED = ENGINES[SERVING].fitted_terms
TIME_TERMS = FITTED[:-1]  # the last, the power in host gaps, is fitted on energy
START = {"time_scale.kind:attention": 1.0, "time_scale.kind:kv_gather": 1.0,
         "host_launch_s": 1e-5, "step_host_s": 0.03, "request_host_s": 5e-4,
         "key_host_s": 5e-8}
# the kinds each fitted time scale covers: the attention kernels, and the copies of the
# paged cache's blocks into one K and V (and their expansion to every head), two kernels
# of their own whose in-situ time departs from their samples' by as much again
SCALED = {"time_scale.kind:attention": ("attention", "sdpa_masked", "sdpa_paged"),
          "time_scale.kind:kv_gather": ("kv_gather", "kv_expand")}
RESTARTS = 6  # Nelder-Mead searches at most, each from where the last stopped
SESSION_GAP_S = 600.0  # replays this close on one host CPU ran on one machine (one lease)
SCHEDULER = {"block_size": 256, "max_requests_per_batch": 1024, "safety_margin": 0.15,
             "memory_percent": 0.9}  # transformers 5.17's defaults (greedy: no processors)


def record_trace(rep: ServingReplay) -> Trace:
    """The trace a replay ran (its requests)."""
    rows = rep.requests
    return make_trace([r.arrival_s for r in rows], [r.prompt_len for r in rows],
                      [r.gen_len for r in rows], [r.id for r in rows],
                      where=f"record of {rep.trace or 'a trace'}")


def observed(rep: ServingReplay) -> tuple[float, float, float]:
    """(window energy, median TPOT, median end-to-end latency) of a measured replay."""
    pr = rep.requests
    return (rep.energy_j, statistics.median(r.tpot_s for r in pr if r.gen_len > 1),
            statistics.median(r.e2e_s for r in pr))


def predicted(case: "_Case", sim, costs) -> tuple[float, float, float]:
    """(window energy, median TPOT, median end-to-end latency) as `piep serve` reports them."""
    doc = document(case.scn, case.trace, sim, costs, case.policy)
    return doc["energy_j"], doc["tpot_s"]["p50"], doc["e2e_s"]["p50"]


class _Case:
    def __init__(self, rep: ServingReplay, scn, policy, grid):
        self.rep, self.scn, self.policy, self.grid = rep, scn, policy, grid
        self.trace = record_trace(rep)
        self.meas = observed(rep)
        it = rep.iterations
        if it is not None:
            q = np.asarray(it.q_tokens, float)
            self.iterations = (q, np.asarray(it.requests, float),
                               np.asarray(it.kv_tokens, float) + q,  # keys incl. the new
                               np.asarray(it.t_end_s) - np.asarray(it.t_start_s))
        else:
            self.iterations = None


def shipped_replays(gpu: str, engine: str = SERVING) -> list[ServingReplay]:
    """The shipped replays of a serving engine, each on its session's host (as its fit
    reads them: `pooled_host_probes`)."""
    from piep.fit.engines import engine_records
    return pooled_host_probes(engine_records(gpu, engine))


def pooled_host_probes(records: list[ServingReplay]) -> list[ServingReplay]:
    """The replays with each one's host probe the median of every probe of its session:
    the replays of one host CPU each begun within `SESSION_GAP_S` of the one before. One
    probe reads the host at one moment; beside replays that ran as fast, one device
    call's probes read 6.0 to 9.5 us (`reports/serving.md`). A replay without a time or a
    probe keeps its own."""
    from datetime import datetime

    from piep.core.records import HOST_PROBE

    def began(r: ServingReplay) -> float | None:
        stamp = (r.doc.get("provenance") or {}).get("time")
        try:
            return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z").timestamp()
        except (TypeError, ValueError):
            return None

    def probes(r: ServingReplay) -> list[float]:
        each = [p.get(HOST_PROBE) for p in r.doc.get("host_probes") or []
                if isinstance(p, dict)]
        each = [v for v in each if isinstance(v, (int, float)) and v > 0]
        return each or [r.host_probe_s]

    timed = sorted((t, i) for i, r in enumerate(records)
                   if r.host_probe_s and (t := began(r)) is not None)
    sessions: list[list[int]] = []
    last: dict[str, tuple[float, list[int]]] = {}  # per host CPU: its last start, session
    for t, i in timed:
        cpu = str(records[i].doc.get("host_cpu"))
        if cpu in last and t - last[cpu][0] <= SESSION_GAP_S:
            members = last[cpu][1]
        else:
            members = []
            sessions.append(members)
        members.append(i)
        last[cpu] = (t, members)
    out = list(records)
    for members in sessions:
        host = statistics.median(v for i in members for v in probes(records[i]))
        for i in members:
            out[i] = replace(records[i], host_probe_s=host)
    return out


def _spec(rep: ServingReplay):
    """The replayed model: the shipped config of that name where the record's config hash
    is its (the record's shape lacks a sliding window), else the record's shape."""
    from piep.core.errors import ConfigError
    from piep.core.models import load_model
    try:
        shipped = load_model(rep.model)
    except ConfigError:
        return rep.spec
    return shipped if shipped.config_hash() == rep.config_hash else rep.spec


def _scenario(rep: ServingReplay, base, on_its_host: bool = False):
    """The replay's scenario; `on_its_host`: with the host probe it recorded."""
    from piep.serving.serve import serving_scenario
    probe = rep.host_probe_s if on_its_host else None
    return serving_scenario(_spec(rep), record_trace(rep), gpu=base.gpu, check_memory=False,
                            host_probe_us=None if probe is None else 1e6 * probe)


def _policy(scn, reserved_gib: float, pickup_s: float = 0.0) -> SchedulerPolicy:
    """The scheduler as `piep serve` builds it from a profile with these settings."""
    return policy_of(scn, None, {**SCHEDULER, "reserved_gib": reserved_gib,
                                 "pickup_s": pickup_s})


def pickup_s(records: list[ServingReplay]) -> float:
    """How long the idle engine takes to start its first iteration after the first
    arrival (the median over the replays with an iteration log; 0: none has one)."""
    waits = [min(rec.iterations.t_start_s) - min(r.arrival_s for r in rec.requests)
             for rec in records if rec.iterations is not None and rec.requests]
    return max(statistics.median(waits), 0.0) if waits else 0.0


class Shared:
    """What the fits of one set of replays share (a profile and its held-out folds): each
    replay's reserved memory, and the iteration grids with their module outputs (a grid
    is its shape's at the sizes of its axes: folds of slightly different cache sizes
    share it)."""

    def __init__(self):
        self.reserved: dict[ServingReplay, float | None] = {}  # replay -> its value
        self.grids: dict[tuple, Any] = {}


def _cases(base, records: list[ServingReplay], reserved_gib: float,
           on_their_hosts: bool = True, shared: Shared | None = None,
           pickup: float = 0.0) -> list[_Case]:
    out, grids = [], (shared or Shared()).grids
    for rec in records:
        scn = _scenario(rec, base, on_their_hosts)
        policy = _policy(scn, reserved_gib, pickup)
        key = (scn.model, grid_sizes(max_tokens=policy.max_batch_tokens,
                                     max_requests=policy.max_requests_per_batch,
                                     max_keys=policy.num_blocks * policy.block_size))
        if key not in grids:
            grids[key] = iteration_grid(scn, policy)
        out.append(_Case(rec, scn, policy, grids[key].on_host(scn.deployment.host_probe_s)))
    return out


def reserved_gib(records: list[ServingReplay], base, shared: Shared | None = None) -> float:
    """The memory the engine holds beyond the weights before sizing its cache (median
    over the replays of the value that reproduces the blocks each reported)."""
    known = (shared or Shared()).reserved
    for rec in records:
        if rec not in known:
            known[rec] = _reserved_of(rec, base)
    found = [known[r] for r in records if known[r] is not None]
    return statistics.median(found) if found else 1.3


def _reserved_of(rec: ServingReplay, base) -> float | None:
    """The reserved memory that reproduces the blocks a replay reported (None: none)."""
    if not rec.cache_blocks:
        return None
    grid = np.arange(0.0, 8.0, 0.02)
    scn = _scenario(rec, base)
    got = [abs(paged_cache(scn, block_size=SCHEDULER["block_size"], reserved_gib=r,
                           memory_percent=SCHEDULER["memory_percent"])[0] - rec.cache_blocks)
           for r in grid]
    return float(grid[int(np.argmin(got))])


def _with_terms(model, values: dict[str, float]):
    """`model` with the host terms `values` (dotted names reach into time_scale; a scale
    of `SCALED` covers its kinds)."""
    model = with_host(model)
    model.host.time_scale = dict(model.host.time_scale)
    for name, v in values.items():
        for kind in SCALED.get(name, ()):
            model.host.time_scale[f"kind:{kind}"] = v
        if name not in SCALED:
            model.host.set_term(name, v)
    return model


class _Logged:
    """The logged iterations of replays, priced together (`IterationTimes`)."""

    def __init__(self, cases: list[_Case]):
        self.cases = cases
        self.times = IterationTimes([(c.grid, *c.iterations[:3]) for c in cases])


def _time_error(model, logged: _Logged) -> float:
    """Mean over traces of the time-weighted squared log error of every logged iteration."""
    errs = []
    for c, pt in zip(logged.cases, logged.times.times(model)):
        dt = c.iterations[3]
        errs.append(float((dt * np.log(pt / dt) ** 2).sum() / dt.sum()))
    return float(np.mean(errs))


def _search(base, start: dict[str, float], error, cases, maxiter: int, *,
            xatol: float = 0.005, fatol: float = 1e-7):
    """`base` with the terms of `start` that minimize `error` over `cases`: Nelder-Mead in
    the logs of the terms, first steps of 35 %, until the simplex spans at most `xatol`
    in each log and `fatol` in the error; restarted from where it stopped, with a fresh
    simplex, while that lowers the error (a simplex collapses in a narrow valley: on
    replays simulated with known terms one search stopped at 5e-5 where the terms give 0)."""
    from scipy.optimize import minimize
    names_ = tuple(start)
    x = np.array([math.log(v) for v in start.values()])

    def model_of(theta):
        return _with_terms(base, {k: float(math.exp(v)) for k, v in zip(names_, theta)})
    best = math.inf
    for _ in range(RESTARTS):
        simplex = np.vstack([x, x + 0.3 * np.eye(len(x))])
        res = minimize(lambda th: error(model_of(th), cases), x, method="Nelder-Mead",
                       options={"xatol": xatol, "fatol": fatol, "maxiter": maxiter,
                                "initial_simplex": simplex})
        if res.fun >= best - fatol:
            break
        x, best = res.x, res.fun
    return model_of(x)


def _fit_time(base, cases: list[_Case], maxiter: int):
    """The time terms on the replays' iteration logs."""
    return _search(base, {k: START[k] for k in TIME_TERMS}, _time_error, _Logged(cases),
                   maxiter)


class _Frozen:
    """The replays' schedules as simulated at some terms, re-timed and re-priced at others:
    each iteration keeps its tokens, requests and keys, each request the iterations of
    its first and last tokens; the iterations' times and energies change, and so when
    each runs (back to back, an iteration not before the requests it prefills arrive)."""

    def __init__(self, cases: list[_Case], model):
        self.cases = cases
        self.simulated = _simulated(cases, model)  # (simulation, costs) of each replay
        sims = [sim for sim, _ in self.simulated]
        self.costs = IterationTimes([(c.grid, s.it_prefill_tokens + s.it_decode_tokens,
                                      s.it_requests, s.it_keys) for c, s in zip(cases, sims)])
        # every replay's iterations in a row of their own, padded at the end (a row's
        # running sums read none of its padding); per request, its first and last token's
        # iteration there
        width = max(len(s.it_start_s) for s in sims)
        self.ready = np.zeros((len(cases), width))  # the arrival each iteration waits for
        first, last = [], []
        for i, (c, sim) in enumerate(zip(cases, sims)):
            end = sim.it_start_s + sim.it_time_s
            row = self.ready[i, :len(end)]
            row[:] = np.where(sim.it_start_s > np.concatenate([[0.0], end[:-1]]),
                              sim.it_start_s, 0.0)  # the iterations after an idle GPU
            at = np.searchsorted(end, sim.first_token_s)
            np.maximum.at(row, at, c.trace.arrival_s)
            first.append(i * width + at)
            last.append(i * width + np.searchsorted(end, sim.last_token_s))
        self.first, self.last = np.concatenate(first), np.concatenate(last)
        spans = self.costs.spans
        self.pad = np.concatenate([i * width + np.arange(b - a) for i, (a, b) in
                                   enumerate(spans)])
        self.window = [i * width + b - a - 1 for i, (a, b) in enumerate(spans)]  # last ends
        self.arrival = np.concatenate([c.trace.arrival_s for c in cases])
        self.steps = np.concatenate([c.trace.gen_len - 1 for c in cases])
        self.by_case = np.repeat(np.arange(len(cases)), [len(c.trace.arrival_s) for c in cases])

    def error(self, model) -> float:
        """Mean over replays of the squared log errors of median TPOT, median end-to-end
        latency and window energy, of these schedules priced by `model`."""
        parts = self.costs.all_costs(model)  # times, kernel J, gap J
        padded = np.zeros(self.ready.size)
        padded[self.pad] = parts[0]
        end = back_to_back(padded.reshape(self.ready.shape), self.ready).reshape(-1)
        n, steps, tail = len(self.cases), self.steps, end[self.last]
        tpot = row_medians(((tail - end[self.first]) / np.maximum(steps, 1))[steps > 0],
                           self.by_case[steps > 0], n)
        e2e = row_medians(tail - self.arrival, self.by_case, n)  # (`percentiles`' p50)
        errs = []
        for c, (a, b), window_s, tpot_s, e2e_s in zip(self.cases, self.costs.spans,
                                                      end[self.window].tolist(), tpot.tolist(),
                                                      e2e.tolist()):
            busy_s, kernel_j, gap_j = parts[:, a:b].sum(axis=1).tolist()
            # a window's parts as `serve.window_parts_j` adds them: kernels, gaps, and every
            # GPU at the gap power while none runs (as `IterationGrid.costs` prices idle)
            energy = kernel_j + gap_j + (window_s - busy_s) * (model.host.launch_gap_w
                                                              * c.scn.parallel.world_size)
            errs.append((math.log(tpot_s / c.meas[1]) ** 2 + math.log(e2e_s / c.meas[2]) ** 2
                         + math.log(energy / c.meas[0]) ** 2) / 3)
        return float(np.mean(errs))


def row_medians(values: np.ndarray, row: np.ndarray, rows: int) -> np.ndarray:
    """Per row, numpy's median of the values in it (`row`: each value's, ascending), to
    the bit: the middle value, or the mean of the middle two; NaN for a row without
    values or with a NaN. The rows are sorted at once, padded at the end with +inf."""
    counts = np.bincount(row, minlength=rows)
    width = max(int(counts.max(initial=0)), 1)
    table = np.full((rows, width), np.inf)
    table[row, np.arange(len(row)) - (np.cumsum(counts) - counts)[row]] = values
    nan = np.isnan(table).any(axis=1)
    table.sort(axis=1)
    every, half = np.arange(rows), counts // 2
    upper = table[every, np.minimum(half, width - 1)]
    lower = table[every, np.maximum(half - 1, 0)]
    return np.where(nan | (counts == 0), np.nan,
                    np.where(counts % 2 == 1, upper, (lower + upper) / 2))


def _simulated(cases: list[_Case], model) -> list[tuple[Any, IterationCosts]]:
    """Each replay simulated at `model`, as `piep serve` simulates it (`run`); the replays
    on one grid (of one shape) share its costs, priced once."""
    costs: dict[IterationGrid, IterationCosts] = {}  # a grid (by identity) -> its costs
    for c in cases:
        if c.grid not in costs:
            costs[c.grid] = c.grid.costs(model)
    return [run(c.scn, c.trace, model, c.policy, costs=costs[c.grid]) for c in cases]


def back_to_back(dt: np.ndarray, ready: np.ndarray) -> np.ndarray:
    """When each iteration ends, each starting when the one before ends or at its ready
    time, whichever is later (from 0): end_k = max(end_k-1, ready_k) + dt_k, for all k at
    once (end_k = S_k + max(0, max over j <= k of ready_j - S_j-1), S the running sum);
    along the last axis (a row per replay)."""
    done = np.cumsum(dt, axis=-1)
    return done + np.maximum.accumulate(np.maximum(ready - (done - dt), 0.0), axis=-1)


FROZEN_ROUNDS = 8     # at most: simulate, fit on the schedules, again
FROZEN_GAIN = 0.002   # until the replays' error falls by less than this share
FROZEN_XATOL = 0.02   # a round's search: each term to 2 % (their logs to 0.02)


def _fit_time_and_energy(base, cases: list[_Case], maxiter: int) -> tuple[Any, list]:
    """Time terms and the power in host gaps together: without an iteration log, latency
    alone does not split a replay's time into kernels (at their power) and host gaps (at
    the gap power); its window energy does. Each round simulates every replay at the
    terms so far, which gives their error (`_Frozen.error` at those terms), and fits the
    terms on those schedules re-timed (`_Frozen`: a step prices a few thousand grid
    points, not dozens of simulations); the terms of the least error once it stops
    falling, and the replays simulated at them."""
    names_ = (*TIME_TERMS, "launch_gap_w")
    model = _with_terms(base, {**{k: START[k] for k in TIME_TERMS},
                               "launch_gap_w": base.host.launch_gap_w})
    best = (math.inf, model, None)
    for i in range(FROZEN_ROUNDS):
        frozen = _Frozen(cases, model)
        error = frozen.error(model)  # on their own schedules: the simulated replays' error
        log.info("fitting on %d replays' latencies and energy: round %d, error %.4f",
                 len(cases), i + 1, error)
        if error < best[0]:
            best, last = (error, model, frozen.simulated), best[0]
            if last - error < FROZEN_GAIN * error:
                break
        else:
            break
        # each search resolves the error to a quarter of the gain the rounds stop on
        model = _search(base, {k: model.host.term(k) for k in names_},
                        lambda m, f: f.error(m), frozen, maxiter, xatol=FROZEN_XATOL,
                        fatol=FROZEN_GAIN * error / 4)
    return best[1], best[2]


def _fit_gap_power(model, cases: list[_Case], simulated: list):
    """The power in host gaps (and idle) that best reproduces the window energies: the
    energy of each replay is evaluated at two powers and the log error minimized on the
    line between (energy is linear in that power above the kernels' floor); `simulated`:
    the replays simulated at `model` (`_simulated`)."""
    p0 = model.host.launch_gap_w
    lo, hi = [], []
    higher = _with_terms(model, {"launch_gap_w": p0 + 50.0})
    for c, (sim, costs) in zip(cases, simulated):
        lo.append(predicted(c, sim, costs)[0])
        # the same schedule (the power changes no time), priced where it reads the grid
        tokens = sim.it_prefill_tokens + sim.it_decode_tokens
        costs = c.grid.costs(higher, points=c.grid.read_points(tokens, sim.it_requests,
                                                               sim.it_keys))
        hi.append(sum(window_parts_j(*repriced(sim, costs), sim.idle_s, costs.idle_power_w)))
    lo, hi = np.array(lo), np.array(hi)
    meas = np.array([c.meas[0] for c in cases])
    ps = np.linspace(40.0, 400.0, 721)
    errs = [float(np.mean(np.log((lo + (hi - lo) * (p - p0) / 50.0) / meas) ** 2)) for p in ps]
    return _with_terms(model, {"launch_gap_w": float(ps[int(np.argmin(errs))])})


def fit_cb_profile(base, records: list[ServingReplay], *, maxiter: int = 400,
                   default_host_s: float | str | None = "typical", name: str = SERVING,
                   like: str | None = None, shared: Shared | None = None) -> EngineProfile:
    """The serving engine's profile fitted on replays (each on its host: the host terms
    scale with its launch probe over the replays' median); `default_host_s` as in
    `fit_profile`; `name` and `like`: an engine of the user's own (vLLM, SGLang), fitted
    on its benchmark's replays and priced as continuous batching; `shared`: what other
    fits on these replays computed."""
    given = len(records)
    records = [r for r in records if r.energy_j]
    version = engine_version(records, name)  # before any fitting
    if len(records) < 2:
        raise ArtifactError(f"fitting {name} needs at least 2 replayed traces with energy, "
                            f"found {len(records)} (of {given} replays given"
                            f"{'' if given == len(records) else '; the others have no energy_j'})")
    shared = shared or Shared()
    reserved = reserved_gib(records, base, shared)
    ref, default = profile_hosts(records, base.gpu.name, default_host_s)
    base = with_host(base, host_probe_ref_s=ref, host_probe_default_s=default)
    pickup = pickup_s(records)
    cases = _cases(base, records, reserved, shared=shared, pickup=pickup)
    logged = [c for c in cases if c.iterations is not None]
    timed, simulated = (_fit_time(base, logged, maxiter), None) if logged else \
        _fit_time_and_energy(base, cases, maxiter)
    simulated = simulated or _simulated(cases, timed)  # (the power changes no schedule)
    fitted = _fit_gap_power(timed, cases, simulated)
    return EngineProfile(name, version, base.gpu.name, fitted.host, None,
                         meta=ProfileMeta(
                             runs=len(records), traces=[r.trace for r in records],
                             models=sorted({r.model for r in records}),
                             iteration_logs=sum(c.iterations is not None for c in cases),
                             tp_measured=[1], fitted_terms=list(FITTED), combiner="reference",
                             scheduler={**SCHEDULER, "reserved_gib": reserved,
                                        "pickup_s": pickup},
                             far_read=farthest_read(simulated)),
                         like=like)


def farthest_read(simulated: list[tuple[Any, IterationCosts]]) -> dict[str, float]:
    """Per kind, the farthest from the module samples a row the replays read lies (over
    the out-of-range threshold, rounded up at 3 decimals): a stream reading no farther is
    not out of range for the profile's band, sized on these replays."""
    out: dict[str, float] = {}
    for sim, costs in simulated:
        for kind, reach in costs.farthest_read(sim).items():
            out[kind] = max(out.get(kind, 0.0), math.ceil(reach * 1000.0) / 1000.0)
    return dict(sorted(out.items()))


def held_out(base, records: list[ServingReplay], *, by: str = "model", maxiter: int = 400,
             with_host: bool = True, default_host_s: float | str | None = "typical"
             ) -> list[dict[str, Any]]:
    """Each replay predicted by a profile fitted without its group: `by="model"` leaves
    one shape out (every trace of it), `by="load"` one load level (a trace file, on every
    shape), `by="trace"` one replay; each on its host (`with_host`: its probe), else on
    the profile's default host (a prediction without a probe)."""
    return held_out_on_hosts(base, records, by=by, maxiter=maxiter, hosts=(with_host,),
                             default_host_s=default_host_s)[with_host]


def held_out_on_hosts(base, records: list[ServingReplay], *, by: str = "model",
                      maxiter: int = 400, hosts: tuple[bool, ...] = (False, True),
                      default_host_s: float | str | None = "typical",
                      shared: Shared | None = None, name: str = SERVING,
                      fitted_on: list[ServingReplay] | None = None
                      ) -> dict[bool, list[dict[str, Any]]]:
    """`held_out` for each of `hosts` (True: each replay on its host; False: on the
    profile's default host) from the same held-out fits (one fit per group); `shared`:
    what other fits on these replays computed; `name`: the engine fitted (progress);
    `fitted_on`: the replays as the fits read them, one for each of `records` (another
    reading of their hosts, say), each predicted as `records` has it."""
    pairs = [(r, f) for r, f in zip(records, fitted_on or records) if r.energy_j]
    records, fitted_on = [r for r, _ in pairs], [f for _, f in pairs]
    # each replay's group; by itself: named by its model, its trace and its place
    label = {"model": lambda i, r: r.model, "load": lambda i, r: Path(r.trace or "").name,
             "trace": lambda i, r: f"{r.model} {Path(r.trace or 'trace').name} #{i}"}[by]
    labels = [label(i, r) for i, r in enumerate(records, 1)]
    groups = list(dict.fromkeys(labels))
    out: dict[bool, list[dict[str, Any]]] = {h: [] for h in hosts}
    shared = shared or Shared()

    def fold(group) -> dict[bool, list[dict[str, Any]]]:
        profile = fit_cb_profile(base, [r for r, g in zip(fitted_on, labels) if g != group],
                                 maxiter=maxiter, default_host_s=default_host_s,
                                 shared=shared)
        model = profile.apply(base)
        test = [r for r, g in zip(records, labels) if g == group]
        return {h: [case_row(c, model, profile.meta.far_read) for c in
                    _cases(base, test, profile.meta.scheduler["reserved_gib"], h, shared,
                           profile.meta.scheduler.get("pickup_s", 0.0))]
                for h in hosts}
    pace = Pace(f"{name} leave-one-{'replay' if by == 'trace' else by}-out")
    for i, (group, rows) in enumerate(zip(groups, fold_map(fold, groups))):
        for h in hosts:
            out[h] += rows[h]
        pace(i + 1, len(groups), group)
    return out


def case_row(case: _Case, model, far_read: dict[str, float] | None = None) -> dict[str, Any]:
    """A replay beside its prediction by `model` (window energy and time, energy above the
    measured idle power, p50 TTFT, TPOT and end-to-end latency), and whether `piep serve`
    would flag it out of range for a profile whose replays read as far as `far_read`."""
    sim, costs = run(case.scn, case.trace, model, case.policy, case.grid)
    far = costs.within(sim, allowance=far_read).out_of_range_kinds
    doc = document(case.scn, case.trace, sim, costs, case.policy)
    rep = case.rep
    idle_w = rep.idle_power_w or 0.0
    return {"model": rep.model, "trace": rep.trace, "requests": len(case.trace),
            "energy_j": rep.energy_j, "pred_energy_j": doc["energy_j"],
            "time_s": rep.time_s, "pred_time_s": doc["time_s"],
            "active_j": rep.energy_j - idle_w * rep.time_s,
            "pred_active_j": doc["energy_j"] - idle_w * doc["time_s"],
            "ttft_s": statistics.median(r.ttft_s for r in rep.requests),
            "pred_ttft_s": doc["ttft_s"]["p50"],
            "tpot_s": case.meas[1], "pred_tpot_s": doc["tpot_s"]["p50"],
            "e2e_s": case.meas[2], "pred_e2e_s": doc["e2e_s"]["p50"],
            "queued_on_memory": sim.queued_on_memory, "out_of_range_kinds": list(far)}
