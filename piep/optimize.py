"""`piep optimize`: batch size x power limit x SM clock (the third seed, for inference).

Offline: predict every combination with the predictor + frequency model; pick the best by
the objective; show the Pareto front (energy per token vs time per token).
Online: a linear search around the offline optimum that measures real runs and moves
along one axis at a time while the measured objective improves.

Per generated token: energy E_tok = energy / (batch * gen_len) (J); time T_tok =
time / gen_len (s): what one request waits per generated token (TTFT amortized + TPOT).
Objectives (lower is better):
* eds:     w * E_tok / E_ref + (1 - w) * T_tok / T_ref, reference = the default
           configuration (the user's batch, the default power limit, default clocks);
* zeus:    eta * E_tok + (1 - eta) * P_max * T_tok (P_max: the GPUs' maximum power);
* latency: E_tok, subject to the request latency TTFT + (G - 1) * TPOT <= bound.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from piep.core.errors import ConfigError, PiepError
from piep.core.scenario import Scenario

log = logging.getLogger("piep.optimize")

OBJECTIVES = ("eds", "zeus", "latency")
DEFAULT_POWER_LIMITS = (700.0, 600.0, 500.0, 400.0, 300.0)


@dataclass(frozen=True)
class Objective:
    kind: str = "eds"
    weight: float = 0.5            # eds: w; zeus: eta
    latency_bound_s: float | None = None
    p_max_w: float = 700.0

    def __post_init__(self):
        if self.kind not in OBJECTIVES:
            raise ConfigError(f"objective {self.kind!r} is not one of {', '.join(OBJECTIVES)}")
        if not 0 <= self.weight <= 1:
            raise ConfigError(f"objective weight {self.weight} must be in [0, 1]")
        if self.kind == "latency" and not self.latency_bound_s:
            raise ConfigError("objective latency needs --latency-bound SECONDS")
        if self.latency_bound_s is not None and self.kind != "latency":
            raise ConfigError(f"--latency-bound bounds the latency objective: add --objective "
                              f"latency (the {self.kind} objective has no bound)")
        if self.latency_bound_s is not None and not (math.isfinite(self.latency_bound_s)
                                                     and self.latency_bound_s > 0):
            raise ConfigError(f"--latency-bound={self.latency_bound_s} must be a number of "
                              f"seconds > 0")

    def value(self, point: dict[str, Any], ref: dict[str, Any]) -> float:
        e, t = point["j_per_output_token"], point["s_per_output_token"]
        if self.kind == "eds":
            return self.weight * e / ref["j_per_output_token"] \
                + (1 - self.weight) * t / ref["s_per_output_token"]
        if self.kind == "zeus":
            return self.weight * e + (1 - self.weight) * self.p_max_w * t
        return e if point["e2e_p50_s"] <= self.latency_bound_s * (1 + 1e-9) else math.inf


def _point(batch: int, limit: float, clock: float | None, energy: float, time: float,
           ttft: float, gen_len: int, **extra: Any) -> dict[str, Any]:
    energy, time, ttft = float(energy), float(time), float(ttft)
    return {"batch": batch, "power_limit_w": float(limit),
            "sm_mhz": None if clock is None else float(clock), "energy_j": energy,
            "time_s": time, "ttft_p50_s": ttft, "e2e_p50_s": time,
            "j_per_output_token": energy / (batch * gen_len),
            "s_per_output_token": time / gen_len, **extra}


def pareto(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Points not dominated in (j_per_output_token, s_per_output_token), by energy."""
    pts = sorted(points, key=lambda p: (p["j_per_output_token"], p["s_per_output_token"]))
    front, best_t = [], math.inf
    for p in pts:
        if p["s_per_output_token"] < best_t - 1e-15:
            front.append(p)
            best_t = p["s_per_output_token"]
    return front


def default_batches(batch: int) -> list[int]:
    return sorted({max(1, batch * 2 ** k) if k >= 0 else max(1, batch // 2 ** -k)
                   for k in range(-3, 7)})


@dataclass
class OfflineResult:
    reference: dict[str, Any]
    chosen: dict[str, Any]
    points: list[dict[str, Any]]
    front: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def gain(self) -> dict[str, float]:
        r, c = self.reference, self.chosen
        return {"energy_per_token": c["j_per_output_token"] / r["j_per_output_token"] - 1,
                "time_per_token": c["s_per_output_token"] / r["s_per_output_token"] - 1}


def offline(scn: Scenario, objective: Objective, *, batches: list[int] | None = None,
            power_limits: list[float] | None = None, clock_stride: int = 6,
            predictor: str = "auto") -> OfflineResult:
    """Predict every (batch, power limit, SM clock) point of the scenario's deployment;
    the clock is one lock for the whole run (None = default boost)."""
    from piep import api
    from piep.plan.freq import load_freq_model
    from piep.plan.planner import leaves, peak_phase_power_w, phase_curves, under_limit
    fm = load_freq_model(scn.gpu.name)
    cm = api.resolve(scn, predictor).cost_model
    batch, gen_len = scn.workload.batch, scn.workload.gen_len
    tp, pp, dp = scn.parallel.tp, scn.parallel.pp, scn.parallel.dp
    limits = sorted(set(power_limits or DEFAULT_POWER_LIMITS), reverse=True)
    scn.gpu.check_power_limits(limits, "power limit")
    grid = fm.clocks()
    keep = np.unique(np.concatenate([np.arange(len(grid) - 1, -1, -clock_stride), [0]]))
    points, notes, skipped = [], [], []
    for b in sorted(set(batches or default_batches(batch))):
        if b % dp:
            continue
        try:
            dep = scn.replace(batch=b).deployment
        except PiepError as exc:
            skipped.append(f"batch {b}: {exc}")
            continue
        lv = leaves(dep, cm)
        default = phase_curves(fm, lv)
        peak = peak_phase_power_w(default, lv)
        for limit in limits:
            cv = under_limit(default, lv, fm, limit)
            binds = peak > limit
            if limit < fm.power_limit_w and not binds:
                notes.append(f"batch {b}: a {limit:.0f} W limit cannot bind (predicted peak "
                             f"phase power {peak:.0f} W per GPU); same as no limit")
            for j in keep:
                is_default = j == len(grid) - 1
                points.append(_point(b, limit, None if is_default else float(grid[j]),
                                     cv.energy_j[:, j].sum(), cv.time_s[:, j].sum(),
                                     cv.time_s[0, j], gen_len, limit_binds=bool(binds)))
    if not points:
        raise ConfigError("no batch in the grid fits: " + "; ".join(skipped))
    ref = next((p for p in points if p["batch"] == batch and p["sm_mhz"] is None
                and p["power_limit_w"] == limits[0]), None)
    if ref is None:
        raise ConfigError(f"the default configuration (batch {batch}) does not fit: "
                          + "; ".join(skipped))
    obj = Objective(objective.kind, objective.weight, objective.latency_bound_s,
                    fm.power_limit_w * tp * pp * dp)
    for p in points:
        p["objective"] = float(obj.value(p, ref))
    feasible = [p for p in points if math.isfinite(p["objective"])]
    if not feasible:
        raise ConfigError(f"no point meets the latency bound {objective.latency_bound_s} s; "
                          f"the fastest predicted is {min(p['e2e_p50_s'] for p in points):.3f} s")
    chosen = min(feasible, key=_rank)
    notes += skipped
    if chosen is not ref:
        clear, why = _clear_gain(scn, cm, fm, obj, chosen, ref, grid, predictor)
        if not clear:  # inside the uncertainty: the default stays
            notes.append(f"no clear gain: {why}; the default configuration is kept")
            chosen = ref
    return OfflineResult(ref, chosen, points, pareto(points), _dedupe(notes))


def _clear_gain(scn: Scenario, cm, fm, obj: Objective, chosen: dict[str, Any],
                ref: dict[str, Any], grid: np.ndarray, predictor: str) -> tuple[bool, str]:
    """Whether `chosen` beats the reference beyond the uncertainty: under every corner of
    the frequency model's bands (a clock or power-limit gain is model-based), and, where
    the batch changes, with an energy per output token lower beyond the predictor's
    intervals (`piep.core.results.clear_best`)."""
    from piep.plan.planner import leaves, phase_curves, under_limit
    from piep.core.results import clear_best
    gen_len = scn.workload.gen_len
    lvs = {b: leaves(scn.replace(batch=b).deployment, cm)
           for b in {chosen["batch"], ref["batch"]}}

    def at(model, p):
        lv = lvs[p["batch"]]
        cv = under_limit(phase_curves(model, lv), lv, model, p["power_limit_w"])
        j = len(grid) - 1 if p["sm_mhz"] is None else int(np.argmin(abs(grid - p["sm_mhz"])))
        return _point(p["batch"], p["power_limit_w"], p["sm_mhz"], cv.energy_j[:, j].sum(),
                      cv.time_s[:, j].sum(), cv.time_s[0, j], gen_len)
    for corner in fm.corners():
        c_ref = at(corner, ref)
        if not obj.value(at(corner, chosen), c_ref) < obj.value(c_ref, c_ref):
            return False, ("at an end of the frequency model's bands the chosen point "
                           "does not beat the default")
    if chosen["batch"] != ref["batch"]:
        from piep import api
        docs = [api.predict(scn.replace(batch=p["batch"]), predictor=predictor, hosts=False)
                for p in (chosen, ref)]
        best = clear_best([(name, d["j_per_output_token"],
                            [e / d["output_tokens"] for e in d["interval"]["energy_j"]])
                           for name, d in zip(("chosen", "default"), docs)],
                          what="energy per output token")
        if best["best"] != "chosen":
            return False, best["why"].replace("chosen", f"batch {chosen['batch']}") \
                .replace("default", f"batch {ref['batch']}")
    return True, "beyond the uncertainty"


def _rank(p: dict[str, Any]) -> tuple:
    """Best objective; on a tie the least intrusive point (highest limit, default clock)."""
    return (round(float(p["objective"]), 12), -p["power_limit_w"],
            p["sm_mhz"] is not None, p["j_per_output_token"])


def restricted_optimum(result: OfflineResult, axes: list[str]) -> dict[str, Any]:
    """The offline optimum when only `axes` may move (the rest stay at the default)."""
    ref = result.reference
    fixed = {"batch": "batch", "power": "power_limit_w", "clock": "sm_mhz"}
    keep = [fixed[a] for a in fixed if a not in axes]
    pts = [p for p in result.points if all(p[k] == ref[k] for k in keep)
           and math.isfinite(p["objective"])]
    return min(pts, key=_rank)


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


# --- online search ---------------------------------------------------------------------
Measure = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class OnlineStep:
    point: dict[str, Any]
    measured: dict[str, Any]
    objective: float
    accepted: bool
    axis: str


def online_search(start: dict[str, Any], reference: dict[str, Any], measure: Measure,
                  objective: Objective, axes: dict[str, list[Any]], *,
                  max_steps: int = 12, log: Callable[[OnlineStep], None] | None = None
                  ) -> dict[str, Any]:
    """Linear search from `start` (batch, power_limit_w, sm_mhz) along each axis in turn:
    step to the neighbouring value while the measured objective improves, first upwards,
    then downwards. `axes` maps an axis name to its ordered values. `reference` is the
    default configuration, measured first (the objective is relative to it)."""
    steps: list[OnlineStep] = []
    cache: dict[tuple, dict[str, Any]] = {}

    def run(p: dict[str, Any], axis: str) -> dict[str, Any]:
        key = (p["batch"], p["power_limit_w"], p["sm_mhz"])
        if key not in cache:
            if len(cache) >= max_steps:
                raise _Budget()
            cache[key] = measure(dict(p))
        return cache[key]

    ref_m = run(reference, "reference")
    ref_m = {**ref_m, **_per_token(ref_m)}

    def score(m):
        return objective.value({**m, **_per_token(m)}, ref_m)
    best, best_m = dict(start), run(start, "start")
    best_s = score(best_m)
    _record(steps, log, reference, ref_m, score(ref_m), True, "reference")
    _record(steps, log, best, best_m, best_s, True, "start")
    if score(ref_m) < best_s:  # the offline optimum measured worse than the default
        best, best_m, best_s = dict(reference), ref_m, score(ref_m)
    try:
        for axis, values in axes.items():
            if len(values) < 2:
                continue
            for direction in (1, -1):
                moved = False
                while True:
                    i = values.index(best[axis]) if best[axis] in values else None
                    j = None if i is None else i + direction
                    if j is None or not 0 <= j < len(values):
                        break
                    cand = {**best, axis: values[j]}
                    m = run(cand, axis)
                    s = score(m)
                    ok = s < best_s
                    _record(steps, log, cand, m, s, ok, axis)
                    if not ok:
                        break
                    best, best_m, best_s, moved = cand, m, s, True
                if moved:
                    break  # improved upwards: no need to look downwards
    except _Budget:
        pass
    return {"best": best, "best_measured": {**best_m, **_per_token(best_m)},
            "best_objective": best_s, "reference_measured": ref_m,
            "measured_gain": {"energy_per_token": _per_token(best_m)["j_per_output_token"]
                              / ref_m["j_per_output_token"] - 1,
                              "time_per_token": _per_token(best_m)["s_per_output_token"]
                              / ref_m["s_per_output_token"] - 1},
            "steps": [s.__dict__ for s in steps], "measurements": len(cache)}


class _Budget(Exception):
    pass


def _per_token(m: dict[str, Any]) -> dict[str, float]:
    return {"j_per_output_token": m["energy_j"] / (m["batch"] * m["gen_len"]),
            "s_per_output_token": m["time_s"] / m["gen_len"], "e2e_p50_s": m["time_s"]}


def _record(steps, log, point, measured, value, accepted, axis) -> None:
    step = OnlineStep(dict(point), dict(measured), value, accepted, axis)
    steps.append(step)
    if log:
        log(step)


class ReplayMeasure:
    """Answers measurements from a recorded log (JSONL rows with batch, power_limit_w,
    sm_mhz, energy_j, time_s, gen_len), for tests and for re-running a committed search."""

    def __init__(self, rows: list[dict[str, Any]]):
        self.rows = {(r["batch"], r.get("power_limit_w"), r.get("sm_mhz")): r for r in rows}
        self.calls: list[tuple] = []

    def __call__(self, p: dict[str, Any]) -> dict[str, Any]:
        key = (p["batch"], p["power_limit_w"], p["sm_mhz"])
        self.calls.append(key)
        if key not in self.rows:
            raise ConfigError(f"replay log has no measurement for {key}")
        return dict(self.rows[key])


class DeviceSteps:
    """Moves the clock and power-limit axes on devices (real, or fake in tests) before each
    measurement of `inner`; `close()` restores default clocks and limits."""

    def __init__(self, inner: Measure, devices: list, runtime, default_limit_w: float):
        self.inner = inner
        self.devices = devices
        self.runtime = runtime
        self.default_limit_w = default_limit_w
        self._limit: float | None = None
        runtime.start()

    def __call__(self, p: dict[str, Any]) -> dict[str, Any]:
        self.runtime.apply(None if p["sm_mhz"] is None else int(p["sm_mhz"]), label="optimize")
        limit = p["power_limit_w"]
        if limit != (self._limit or self.default_limit_w):
            for d in self.devices:
                if limit >= self.default_limit_w:
                    d.reset_power_limit()
                else:
                    d.set_power_limit_w(limit)
            self._limit = limit
        return self.inner(p)

    def close(self) -> None:
        try:
            self.runtime.stop()
        finally:
            if self._limit is not None and self._limit != self.default_limit_w:
                for d in self.devices:
                    d.reset_power_limit()
            self._limit = None


# --- the online search, wired to measurements -------------------------------------------
@dataclass(frozen=True, kw_only=True)
class OnlineOptions:
    axes: tuple[str, ...] = ("batch",)   # what the search may move: batch, clock, power
    max_steps: int = 8                   # measurements it may make
    replay: str | None = None            # answer from a recorded log instead of a GPU
    log: str | None = None               # append every step here (JSONL)
    repeats: int = 3                     # repeats per measured point


def online(scn: Scenario, res: OfflineResult, objective: Objective, opts: OnlineOptions, *,
           clocks: Callable[[], Any]) -> dict[str, Any]:
    """Search around the offline optimum with real measurements (or a replayed log).
    `clocks()` gives the clock devices to use when the clock or power axes move."""
    start = restricted_optimum(res, list(opts.axes))
    pts = res.points
    values: dict[str, list] = {}
    if "batch" in opts.axes:
        values["batch"] = sorted({p["batch"] for p in pts})
    if "clock" in opts.axes:
        locked = sorted({p["sm_mhz"] for p in pts if p["sm_mhz"] is not None})
        values["sm_mhz"] = locked + [None]  # None: default boost, above every lock
    if "power" in opts.axes:
        values["power_limit_w"] = sorted({p["power_limit_w"] for p in pts})
    keys = ("batch", "power_limit_w", "sm_mhz")
    point = {k: start[k] for k in keys}
    reference = {k: res.reference[k] for k in keys}
    measure, close = _measurer(scn, opts, clocks)

    def log_step(step):
        log.info("online %s: batch %s, %s W, %s MHz -> objective %.4f%s", step.axis,
                 step.point["batch"], step.point["power_limit_w"], step.point["sm_mhz"],
                 step.objective, " (accepted)" if step.accepted else "")
        if opts.log:
            from piep.core.artifacts import append_jsonl
            append_jsonl(opts.log, {"axis": step.axis, "point": step.point,
                                    "measured": step.measured, "objective": step.objective,
                                    "accepted": step.accepted})
    try:
        out = online_search(point, reference, measure, objective, values,
                            max_steps=opts.max_steps, log=log_step)
    finally:
        close()
    best_pred = next((p for p in pts if all(p[k] == out["best"][k] for k in point)), None)
    out.update({"axes": list(opts.axes), "start": point, "start_predicted": start,
                "best_predicted": best_pred, "source": "replay" if opts.replay else "measured"})
    return out


def _measurer(scn: Scenario, opts: OnlineOptions, clocks: Callable[[], Any]):
    """(measure, close): replayed, or the reference runner with device steps."""
    if opts.replay:
        from piep.core.artifacts import read_input_jsonl
        rows = [r["measured"] for r in read_input_jsonl(opts.replay)
                if isinstance(r, dict) and isinstance(r.get("measured"), dict)]
        if not rows:
            raise ConfigError(f"--replay {opts.replay}: no online steps in it (lines with "
                              f"'measured', as --log writes them)")
        return ReplayMeasure(rows), lambda: None
    if scn.parallel.world_size != 1:
        raise ConfigError("the online search runs one GPU (tp=pp=dp=1)")
    try:
        from piep.sampling.online import runner_measure
        from piep.sampling.runner import Hygiene
    except ImportError:
        raise ConfigError("`piep optimize --online` measures real runs: pip install "
                          "'piep[gpu]' on a GPU machine (or --replay LOG)") from None
    inner = runner_measure(scn.model, prompt_len=scn.workload.prompt_len,
                           gen_len=scn.workload.gen_len, mode=scn.mode,
                           hygiene=Hygiene(repeats=opts.repeats))
    if list(opts.axes) == ["batch"]:
        return inner, lambda: None
    from piep.clocks import ClockRuntime, default_state_dir
    access = clocks()
    if not access.permission():
        raise ConfigError("moving the clock or power axes sets GPU clocks/limits: it needs "
                          "root or CAP_SYS_ADMIN; use --online-axes batch")
    devices = access.devices("0")
    runtime = ClockRuntime(devices, default_state_dir(), dry_run=False,
                           permission_check=access.permission, min_dwell_s=0.0)
    steps = DeviceSteps(inner, devices, runtime, 700.0)
    return steps, steps.close
