"""Fit an engine's steady-state profile (`piep.serving.steady.SteadyProfile`) on measured
steady states of a server held full: its throughput and energy per output token.

Each case's iterations are priced once (`piep.serving.steady.parts`); the profile's terms
(a log time scale per kernel group, host seconds per iteration, a log power scale) are
then found by least squares on the log ratios of predicted to measured throughput and
energy per token, weighted alike. The scales are bounded to x1/8..x8 and the host time to
0..50 ms: a fit that runs into a bound says so in its `at_bounds`.

Held out: `held_out` refits without each group of cases (a model, by default) and prices
that group with the refit; `interval` sizes a 90 % band of energy from such held-out
ratios (their 5th and 95th percentiles), not from the fitted cases.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from piep.core.errors import FitError
from piep.serving.steady import GROUPS, Parts, SteadyProfile

SCALE_BOUND = 8.0
HOST_BOUND_S = 0.05
# how far a scale may move from the reference pricing before it costs as much as a case's
# log error of this size: a prior on each log scale (piep's own pricing of the same
# kernels is the prior; the cases move it where they agree). The collectives' is weaker:
# vLLM all-reduces small messages with its own kernel over NVLink, not NCCL's that piep
# sampled
PRIOR_LOG_SD = 0.25
PRIOR_LOG_SD_COMM = 1.0


@dataclass(frozen=True)
class SteadyCase:
    """A measured steady state: its priced parts, what was measured (output tokens per
    second, J per output token, of all the GPUs), and labels (model, slice)."""
    parts: Parts
    tokens_per_s: float
    j_per_token: float
    labels: dict[str, Any]


def _profile(theta: np.ndarray, name: str, gpu: str, source: str) -> SteadyProfile:
    n = len(GROUPS)
    return SteadyProfile(name, gpu, {g: float(np.exp(theta[i])) for i, g in enumerate(GROUPS)},
                         float(theta[n]), float(np.exp(theta[n + 1])), source)


def residuals(profile: SteadyProfile, cases: Sequence[SteadyCase]) -> np.ndarray:
    """log(predicted / measured) of throughput, then of energy per token, per case."""
    out = [c.parts.outcome(profile) for c in cases]
    thr = [np.log(o["output_tokens_per_s"] / c.tokens_per_s) for o, c in zip(out, cases)]
    eng = [np.log(o["j_per_output_token"] / c.j_per_token) for o, c in zip(out, cases)]
    return np.array(thr + eng)


def fit(cases: Sequence[SteadyCase], *, name: str, gpu: str, source: str = "",
        prior_log_sd: float | None = PRIOR_LOG_SD) -> tuple[SteadyProfile, dict[str, Any]]:
    """The profile that best fits `cases`, and how the fit went (rms of the log ratios,
    the terms at a bound). `prior_log_sd`: the prior on each log scale (None: none)."""
    from scipy.optimize import least_squares
    if len(cases) < len(GROUPS) + 2:
        raise FitError(f"{len(cases)} measured steady states; a profile has "
                       f"{len(GROUPS) + 2} terms: give at least that many")
    n = len(GROUPS)
    lo = np.r_[np.full(n, -np.log(SCALE_BOUND)), 0.0, -np.log(SCALE_BOUND)]
    hi = np.r_[np.full(n, np.log(SCALE_BOUND)), HOST_BOUND_S, np.log(SCALE_BOUND)]
    start = np.r_[np.zeros(n), 1e-3, 0.0]
    weight = np.zeros(n + 1) if prior_log_sd is None else np.full(n + 1, 1.0 / prior_log_sd)
    if prior_log_sd is not None:
        weight[GROUPS.index("comm")] = 1.0 / PRIOR_LOG_SD_COMM
    scales = np.r_[np.arange(n), n + 1]

    def objective(th):
        return np.r_[residuals(_profile(th, name, gpu, source), cases), th[scales] * weight]
    sol = least_squares(objective, start,
                        bounds=(lo, hi), x_scale=np.r_[np.ones(n), 1e-3, 1.0])
    names = [f"time_scale.{g}" for g in GROUPS] + ["step_host_s", "power_scale"]
    near = np.isclose(sol.x, lo, atol=1e-6) | np.isclose(sol.x, hi, atol=1e-6)
    return _profile(sol.x, name, gpu, source), {
        "cases": len(cases), "rms_log": float(np.sqrt(np.mean(sol.fun[:2 * len(cases)] ** 2))),
        "at_bounds": [k for k, b in zip(names, near) if b]}


def held_out(cases: Sequence[SteadyCase], group: Callable[[SteadyCase], str], *, name: str,
             gpu: str) -> list[dict[str, float]]:
    """Per case, in order: its outcome under a profile fitted without its group."""
    out: list[dict[str, float] | None] = [None] * len(cases)
    for key in sorted({group(c) for c in cases}):
        train = [c for c in cases if group(c) != key]
        profile, _ = fit(train, name=name, gpu=gpu)
        for i, c in enumerate(cases):
            if group(c) == key:
                out[i] = c.parts.outcome(profile)
    return out  # type: ignore[return-value]


def energy_ratios(cases: Sequence[SteadyCase], outcomes: Sequence[dict[str, float]]
                  ) -> np.ndarray:
    return np.array([o["j_per_output_token"] / c.j_per_token for c, o in zip(cases, outcomes)])


def time_ratios(cases: Sequence[SteadyCase], outcomes: Sequence[dict[str, float]]
                ) -> np.ndarray:
    """Predicted / measured time per output token (measured / predicted throughput)."""
    return np.array([c.tokens_per_s / o["output_tokens_per_s"]
                     for c, o in zip(cases, outcomes)])


def interval(ratios: np.ndarray, coverage: float = 0.9) -> tuple[float, float]:
    """A band of ratios (measured / predicted multiplies a prediction) holding `coverage`
    of held-out predicted / measured ratios: their central percentiles, inverted."""
    tail = (1.0 - coverage) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return float(1.0 / hi), float(1.0 / lo)


def with_interval(profile: SteadyProfile, band: tuple[float, float],
                  time_band: tuple[float, float] | None = None) -> SteadyProfile:
    return replace(profile, interval=band, time_interval=time_band)


# --- measured steady states as records (piep.steady_measurement) ------------------------

RECORD_SCHEMA = "piep.steady_measurement"


def lengths_of(workload: dict[str, Any], where: str):
    """A record's workload as `Lengths`: a prompt mean and the output lengths as a
    histogram (`output_len_bins`, `output_len_counts`) or their mean and mean square."""
    from piep.core.errors import ConfigError
    from piep.serving.steady import Lengths
    prompt = workload.get("prompt_len")
    if workload.get("output_len_bins") is not None:
        return Lengths.histogram(prompt, workload["output_len_bins"],
                                 workload["output_len_counts"])
    if workload.get("output_len_mean") is not None:
        mean = workload["output_len_mean"]
        return Lengths(prompt, mean, workload.get("output_len_sq_mean") or mean ** 2)
    raise ConfigError(f"{where}: workload needs prompt_len and output_len_bins + "
                      f"output_len_counts, or output_len_mean (+ output_len_sq_mean)")


def cases_from_records(records: Sequence[dict[str, Any]], *, predictor: str = "auto",
                       window: bool = False, prompt_scale: float = 1.0) -> list[SteadyCase]:
    """Each record's steady state priced by its engine's tree (vLLM's) on its GPU and
    layout (one resolution per model, GPU, layout and engine, whose flags its labels
    carry), its concurrency predicted from its server settings (vLLM's defaults where
    absent). `window`: the ML.ENERGY Benchmark's finite window over the record's
    `requests` instead of an endless steady state; `prompt_scale`: its prompts scaled (a
    sensitivity)."""
    from piep.api import resolve, scenario
    from piep.core.engines import names
    from piep.serving import steady as st
    steady = names(profile="steady")
    resolved: dict[tuple, Any] = {}
    out = []
    for i, rec in enumerate(records):
        where = f"{rec.get('source', 'record')} #{i + 1}"
        engine = (rec.get("engine") or {}).get("name")  # (the tree of the engine it ran)
        engine = engine if engine in steady else steady[0]
        key = (rec["model"], rec["gpu"], rec["tp"], rec.get("ep", 1), engine)
        if key not in resolved:
            resolved[key] = resolve(scenario(rec["model"], gpu=rec["gpu"], tp=rec["tp"],
                                             ep=rec.get("ep", 1), engine=engine, batch=1,
                                             prompt_len=16, gen_len=2,
                                             allow_uncalibrated=True), predictor)
        res = resolved[key]
        dep = res.scenario.deployment
        server = st.PagedServer.defaults(dep.gpu.name, dep.gpu.memory_gib,
                                         **(rec.get("server") or {}))
        lengths = lengths_of(rec["workload"], where)
        if prompt_scale != 1.0:
            lengths = replace(lengths, prompt_len=lengths.prompt_len * prompt_scale)
        running = st.concurrency(dep, server, lengths)["running"]
        occ = st.window_occupancy(lengths, round(running), int(rec["requests"])) if window \
            else st.steady_occupancy(lengths, running)
        out.append(SteadyCase(st.parts(dep, res.cost_model, server, lengths.prompt_len, occ),
                              rec["output_tokens_per_s"], rec["j_per_output_token"],
                              {"model": res.scenario.model.name, "slice": rec.get("slice", ""),
                               "measured_running": rec.get("running_requests"),
                               "max_num_seqs": server.max_num_seqs,
                               "power_w": rec.get("power_w"),
                               "flags": res.flags}))
    return out


def by_model(case: SteadyCase) -> str:
    return case.labels["model"]


def fit_records(records: Sequence[dict[str, Any]], *, engine: str, gpu: str,
                source: str = "") -> tuple[SteadyProfile, dict[str, Any]]:
    """The profile of `engine` on `gpu` fitted on every record of that GPU, with its 90 %
    band of energy from leave-one-model-out ratios (needs two models or more)."""
    mine = [r for r in records if str(r["gpu"]).lower() == gpu.lower()]
    if not mine:
        raise FitError(f"no record of {engine} on {gpu} among {len(records)} "
                       f"(their GPUs: {', '.join(sorted({str(r['gpu']) for r in records}))})")
    cases = cases_from_records(mine)
    profile, info = fit(cases, name=engine, gpu=gpu.lower(), source=source)
    from piep.core.models import load_model
    profile = replace(profile, families=tuple(sorted({load_model(r["model"]).model_type
                                                      for r in mine})))
    if len({by_model(c) for c in cases}) < 2:
        return profile, {**info, "interval": "none: one model (a band needs models held out)"}
    lomo = held_out(cases, by_model, name=engine, gpu=gpu.lower())
    return with_interval(profile, interval(energy_ratios(cases, lomo)),
                         interval(time_ratios(cases, lomo))), info
