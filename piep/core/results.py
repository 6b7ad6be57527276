"""The quantities every answer names, one name each, and the summary that a batch
prediction and a served stream share (`Summary`, written by one serializer).

Output tokens are the tokens the model generates, the first one (which the prefill
produces) included; prompt tokens are not counted. A per-token figure divides by output
tokens. TTFT is a request's time from its arrival to its first token, TPOT the mean time
between its later tokens, e2e its time from arrival to its last token; each is given as
p50/p90/p99 over the requests (every request of a static batch has the same).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from piep.core.errors import ConfigError

# name: (label in tables, meaning), the words `piep predict`, `serve`, `compare`, `sweep`,
# `report` and `optimize` use for them
QUANTITIES: dict[str, tuple[str, str]] = {
    "energy_j": ("energy (J)", "all GPU boards of the deployment over the window"),
    "time_s": ("time (s)", "the window: first arrival to the last output token"),
    "requests": ("requests", "prompts answered (a batch's size)"),
    "output_tokens": ("output tokens", "tokens generated, the prefill's first token included"),
    "j_per_output_token": ("J per output token", "energy / output tokens (prompt tokens not "
                                                 "counted)"),
    "j_per_request": ("J per request", "energy / requests"),
    "output_tokens_per_s": ("output tokens per s", "output tokens / time"),
    "ttft_s": ("TTFT (s)", "time to first token: a request's arrival to its first token"),
    "tpot_s": ("TPOT (s)", "time per output token after the first, per request"),
    "e2e_s": ("e2e (s)", "a request's arrival to its last token"),
    # per input and per total token, as serving dashboards report them beside the output
    # token's: the same window's energy over the prompts' tokens, or over prompts and
    # outputs together (docs/integrations.md)
    "input_tokens": ("input tokens", "the requests' prompt tokens"),
    "j_per_input_token": ("J per input token", "energy / input tokens (the whole window's)"),
    "j_per_total_token": ("J per total token", "energy / (input + output tokens)"),
    # generation only, as MLPerf's draft energy schema counts energy per token (the prefill
    # left out), and active, as a meter that stops between requests sees it
    "j_per_output_token_generation": ("J per output token, generation",
                                      "(energy - prefill - no request in flight) / output "
                                      "tokens"),
    "j_per_output_token_active": ("J per output token, active",
                                  "(energy - no request in flight) / output tokens"),
}
# the scalar a flat row (compare, sweep CSV) gives of a latency: its median over requests
MEDIAN = {"ttft_s": "ttft_p50_s", "tpot_s": "tpot_p50_s", "e2e_s": "e2e_p50_s"}


def label(name: str) -> str:
    """The words a table heads a quantity with."""
    return QUANTITIES[name][0]


def percentiles(values, alike: bool = False) -> dict[str, float | None]:
    """p50/p90/p99 of the finite values; None (JSON null) where there are none (TPOT of
    requests that generate one token only). `alike`: every value is the same (a static
    batch's requests), read from the first."""
    if alike and len(values):
        x = float(values[0])
        return dict.fromkeys(("p50", "p90", "p99"), x if math.isfinite(x) else None)
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if not len(v):
        return {"p50": None, "p90": None, "p99": None}
    if v.min() == v.max():  # a batch: every request alike (and numpy's interpolation exact)
        return dict.fromkeys(("p50", "p90", "p99"), float(v[0]))
    return {f"p{q}": float(x) for q, x in zip((50, 90, 99), np.percentile(v, (50, 90, 99)))}


@dataclass(frozen=True)
class Summary:
    """What every answer about a workload states, request by request: energy and time of
    the window, output tokens, and each request's TTFT, TPOT (NaN: one output token only)
    and e2e."""
    energy_j: float
    time_s: float
    output_tokens: int
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    # the requests above are one replica's of this many alike (a batch over dp replicas)
    replicas: int = 1
    # every request has the same latencies (a static batch)
    alike: bool = False
    # the requests' prompt tokens (every replica's)
    input_tokens: int = 0
    # of energy_j: the prefill's (the document's prefill phase) and the boards' while no
    # request is in flight
    prefill_j: float = 0.0
    no_request_j: float = 0.0

    @classmethod
    def batch(cls, energy_j: float, time_s: float, *, requests: int, gen_len: int,
              prefill_s: float, prompt_len: int = 0, prefill_j: float = 0.0) -> "Summary":
        """A static batch: every request arrives at 0, has its first token when the
        prefill ends and its last when the batch does."""
        steps = max(gen_len - 1, 0)
        tpot = (time_s - prefill_s) / steps if steps else float("nan")
        return cls(energy_j, time_s, requests * gen_len, np.full(requests, prefill_s),
                   np.full(requests, tpot), np.full(requests, time_s), alike=True,
                   input_tokens=requests * prompt_len, prefill_j=prefill_j)

    @property
    def requests(self) -> int:
        """How many requests the summary is of (every replica's)."""
        return len(self.e2e_s) * self.replicas

    def to_json(self) -> dict[str, object]:
        """The summary's fields, named as `QUANTITIES` names them."""
        e, n, tokens = self.energy_j, self.requests, self.output_tokens
        return {"requests": n, "output_tokens": tokens, "energy_j": e, "time_s": self.time_s,
                "j_per_output_token": e / tokens if tokens else 0.0,
                "j_per_request": e / n if n else 0.0,
                "output_tokens_per_s": tokens / self.time_s if self.time_s else 0.0,
                "ttft_s": percentiles(self.ttft_s, self.alike),
                "tpot_s": percentiles(self.tpot_s, self.alike),
                "e2e_s": percentiles(self.e2e_s, self.alike),
                "input_tokens": self.input_tokens,
                "j_per_input_token": e / self.input_tokens if self.input_tokens else 0.0,
                "j_per_total_token": e / (self.input_tokens + tokens)
                if self.input_tokens + tokens else 0.0,
                "j_per_output_token_generation":
                    (e - self.prefill_j - self.no_request_j) / tokens if tokens else 0.0,
                "j_per_output_token_active": (e - self.no_request_j) / tokens if tokens
                else 0.0}

    def row(self) -> dict[str, object]:
        """The summary as a flat row (latencies by their medians)."""
        return flat(self.to_json())


def batch_rows(energy_j: np.ndarray, time_s: np.ndarray, *, requests: np.ndarray,
               gen_len: np.ndarray, prefill_s: np.ndarray,
               prompt_len: np.ndarray | None = None,
               prefill_j: np.ndarray | None = None) -> list[dict[str, object]]:
    """The flat rows of many static batches (arrays, an entry per batch) at once: each the
    row `Summary.batch(...).row()` gives, the same numbers in the same order of keys
    (tests/test_consistency.py holds them equal), without a summary object per batch."""
    requests, gen_len = np.asarray(requests, np.int64), np.asarray(gen_len, np.int64)
    tokens = requests * gen_len
    inputs = requests * np.asarray(0 if prompt_len is None else prompt_len, np.int64)
    steps = np.maximum(gen_len - 1, 0)

    def ratio(a, b, none=0.0) -> list:
        out = np.full(len(a), none, dtype=float)
        np.divide(a, b, out=out, where=b != 0)
        return out.tolist()
    tpot = ratio(np.asarray(time_s) - prefill_s, steps, math.nan)
    columns = {"energy_j": np.asarray(energy_j, float).tolist(),
               "time_s": np.asarray(time_s, float).tolist(), "requests": requests.tolist(),
               "output_tokens": tokens.tolist(), "j_per_output_token": ratio(energy_j, tokens),
               "j_per_request": ratio(energy_j, requests),
               "output_tokens_per_s": ratio(tokens, time_s),
               "ttft_p50_s": np.asarray(prefill_s, float).tolist(),
               "tpot_p50_s": [x if math.isfinite(x) else None for x in tpot],
               "e2e_p50_s": np.asarray(time_s, float).tolist(),
               "input_tokens": np.broadcast_to(inputs, tokens.shape).tolist(),
               "j_per_input_token": ratio(energy_j, np.broadcast_to(inputs, tokens.shape)),
               "j_per_total_token": ratio(energy_j, inputs + tokens),
               "j_per_output_token_generation": ratio(
                   np.asarray(energy_j, float) - (0.0 if prefill_j is None else prefill_j),
                   tokens),
               "j_per_output_token_active": ratio(energy_j, tokens)}
    return [dict(zip(columns, values)) for values in zip(*columns.values())]


def flat(doc: dict[str, object]) -> dict[str, object]:
    """A document's summary fields as a flat row: each latency by its median
    (`ttft_p50_s`, ...), the rest as they are."""
    out = {}
    for key in QUANTITIES:
        if key in MEDIAN:
            out[MEDIAN[key]] = doc[key]["p50"]
        elif key in doc:
            out[key] = doc[key]
    return out


def pct_below(value: float, base: float) -> float:
    """How far `value` lies below `base`, in per cent of `base`: the one convention of
    every "X % below Y" piep prints (a 3x gap is 66.7 % below, never 200 %); a signed
    change names its base ("... vs now")."""
    return 100 * (1 - value / base) if base else 0.0


def clear_best(options: list[tuple[str, float, "list[float] | None"]], *, what: str,
               unit: str = "") -> dict[str, object]:
    """The option with the lowest value when it is lower than every other beyond the
    uncertainty of their difference, else no winner, with why. `options`: (label, value,
    90 % interval or None: exact). The difference of two predictions is taken in log;
    its uncertainty is their 90 % half-widths on the facing sides added in quadrature
    (the lower option's upper half, the other's lower half), as if their errors were
    independent: predictions of one predictor share part of their error, so this is the
    cautious side. `difference_pct` and `uncertainty_pct` are in per cent of the other
    option (`difference_base`): the best is that much below it (`pct_below`)."""
    ranked = sorted(options, key=lambda o: o[1])
    best, rest = ranked[0], ranked[1:]
    if not rest:
        return {"best": best[0], "why": f"the only candidate ({what})"}

    def half(o, upper: bool) -> float:
        band = o[2]
        if not band or o[1] <= 0:
            return 0.0
        return math.log(band[1] / o[1]) if upper else math.log(o[1] / band[0])

    def below(log_ratio: float) -> float:  # a log ratio other/best as "% below other"
        return 100 * -math.expm1(-log_ratio)
    close = []
    for o in rest:
        d = math.log(o[1] / best[1]) if best[1] > 0 else math.inf
        q = math.hypot(half(best, True), half(o, False))
        if d <= q:
            close.append((o, d, q))
    if not close:
        other = rest[0]
        gap = pct_below(best[1], other[1])
        u = below(math.hypot(half(best, True), half(other, False)))
        return {"best": best[0], "difference_pct": gap, "uncertainty_pct": u,
                "difference_base": other[0],
                "why": f"{best[0]} is lowest in {what}, {gap:.1f} % below {other[0]} "
                       f"(beyond the {u:.1f} % uncertainty of the difference)"}
    o, d, q = close[0]
    if d == 0:
        why = (f"no clear winner: {best[0]} and {o[0]} tie in {what} "
               f"({best[1]:.4g}{unit} each)")
    else:
        why = (f"no clear winner in {what}: {best[0]} is {below(d):.1f} % below "
               f"{o[0]}, within the {below(q):.1f} % uncertainty of the "
               f"difference (both 90 % intervals, errors taken as independent)")
    return {"best": None, "within": [best[0]] + [c[0][0] for c in close],
            "difference_pct": below(d), "uncertainty_pct": below(q),
            "difference_base": o[0], "why": why}


# how an answer apportions its energy (the `attribution` field of its document)
ATTRIBUTION = {
    "modules": "each leaf of the model tree: the energy priced for its kernels, launch gaps "
               "and waits (modules_raw_sum_j: their sum before the combiner's weights)",
    "modules_of_a_stream": "the batch tree's attribution of each leaf, scaled to the "
                           "stream's energy",
    "batch_requests": "equal shares: a static batch's requests run together",
    "stream_requests": "each scheduler iteration's energy shared by the tokens each request "
                       "put in it (prompt tokens and generated ones); the boards' energy "
                       "while no request is in flight goes to no request",
}

# 2: one name per quantity (QUANTITIES), latencies per request
PREDICTION_SCHEMA, PREDICTION_VERSION = "piep.prediction", 2


@dataclass(frozen=True)
class Prediction:
    """A batch priced: what `piep predict` answers (schema piep.prediction), built once
    (`piep.api.prediction`) and written by one serializer (`to_json`). Its requests,
    energy, time and latencies are `outcome`'s; `phases` splits the window (prefill,
    decode, no request); `flag_notes` explain `flags` (piep.predict.flags)."""
    predictor: str
    engine: str                         # the engine in words
    deployment: dict[str, Any]          # model, gpu, layout, workload
    outcome: Summary
    phases: dict[str, dict[str, float]]  # prefill, decode, no_request: energy_j, time_s
    per_gpu: list[dict[str, Any]]
    interval: dict[str, Any]
    breakdown_j: dict[str, float]       # compute, communication, wait, idle
    modules: list[dict[str, Any]]
    modules_raw_sum_j: float
    flags: tuple[str, ...]
    out_of_range_kinds: tuple[str, ...]
    scheduler: dict[str, Any] | None = None   # a serving engine's batch: its scheduler
    priced_as: str | None = None              # ... and how it was priced
    scenario: dict[str, Any] | None = None    # the request, as --scenario FILE.json reads
    host_dependence: dict[str, Any] | None = None
    engine_ref: dict[str, Any] | None = None  # the engine, its version, its host
    transfer: dict[str, Any] | None = None    # a spec-sheet GPU's transfer
    flag_notes: list[dict[str, str]] | None = None

    def to_json(self) -> dict[str, Any]:
        """The prediction document (`piep predict --json`)."""
        doc: dict[str, Any] = {
            "schema": PREDICTION_SCHEMA, "schema_version": PREDICTION_VERSION,
            "predictor": self.predictor, "boundary": "gpu_board", "engine": self.engine,
            **self.deployment, **self.outcome.to_json(),
            **{k: dict(v) for k, v in self.phases.items()},
            "per_gpu": [dict(g) for g in self.per_gpu], "interval": self.interval,
            "breakdown_j": dict(self.breakdown_j), "modules": list(self.modules),
            "modules_raw_sum_j": self.modules_raw_sum_j, "flags": list(self.flags),
            "out_of_range_kinds": list(self.out_of_range_kinds),
            "attribution": {
                "modules": ATTRIBUTION["modules" if self.priced_as is None
                                       else "modules_of_a_stream"],
                "requests": ATTRIBUTION["batch_requests" if self.priced_as is None
                                        else "stream_requests"]}}
        optional = {"scheduler": self.scheduler, "priced_as": self.priced_as,
                    "scenario": self.scenario, "host_dependence": self.host_dependence,
                    "engine_ref": self.engine_ref, "transfer": self.transfer,
                    "flag_notes": self.flag_notes}
        doc.update({k: v for k, v in optional.items() if v is not None})
        return doc


SERVING_SCHEMA, SERVING_VERSION = "piep.serving", 2


@dataclass(frozen=True)
class ServingResult:
    """A stream of requests served: what `piep serve` answers (schema piep.serving),
    built once (`piep.serving.serve`) and written by one serializer (`to_json`). Its
    quantities are named as a prediction's (`outcome`, `phases`, `breakdown_j`)."""
    deployment: dict[str, Any]          # model, gpu, layout, engine (its name)
    outcome: Summary
    breakdown_j: dict[str, float]
    phases: dict[str, dict[str, float]]
    iterations: int
    mean_requests_per_iteration: float
    scheduler: dict[str, Any]
    per_request: list[dict[str, Any]]
    flags: tuple[str, ...]
    predictor: str | None = None
    engine_ref: dict[str, Any] | None = None
    transfer: dict[str, Any] | None = None
    interval: dict[str, Any] | None = None
    scenario: dict[str, Any] | None = None
    host_dependence: dict[str, Any] | None = None
    flag_notes: list[dict[str, str]] | None = None
    load: dict[str, Any] | None = None  # arrival rate, the rate the engine sustains
    steady_window: dict[str, Any] | None = None  # where it ran at its peak concurrency
    out_of_range_kinds: tuple[str, ...] | None = None  # where flagged out_of_range

    def to_json(self) -> dict[str, Any]:
        """The serving document (`piep serve --json`)."""
        doc: dict[str, Any] = {
            "schema": SERVING_SCHEMA, "schema_version": SERVING_VERSION,
            "boundary": "gpu_board", **self.deployment, **self.outcome.to_json(),
            "breakdown_j": dict(self.breakdown_j),
            **{k: dict(v) for k, v in self.phases.items()},
            "iterations": self.iterations,
            "mean_requests_per_iteration": self.mean_requests_per_iteration,
            "scheduler": dict(self.scheduler), "per_request": list(self.per_request),
            "attribution": {"requests": ATTRIBUTION["stream_requests"]},
            "flags": list(self.flags)}
        optional = {"predictor": self.predictor, "engine_ref": self.engine_ref,
                    "transfer": self.transfer, "interval": self.interval,
                    "scenario": self.scenario, "host_dependence": self.host_dependence,
                    "flag_notes": self.flag_notes, "load": self.load,
                    "steady_window": self.steady_window,
                    "out_of_range_kinds": None if self.out_of_range_kinds is None
                    else list(self.out_of_range_kinds)}
        doc.update({k: v for k, v in optional.items() if v is not None})
        return doc


# --- from the boards to the building --------------------------------------------------
# From the boards to the building: facility energy, carbon and cost of an answer.
#
# piep's energy is the GPU boards' (`boundary: gpu_board`). A facility draws more: its power
# usage effectiveness (PUE: facility energy over IT energy, >= 1) is a stated multiplier, as
# CodeCarbon and EcoLogits apply it, not a measurement; carbon is the facility's kWh times
# the grid's intensity (gCO2eq per kWh), cost its kWh times a price. The boards' 90 %
# interval is carried through each (the factors are exact: given, not estimated).
J_PER_KWH = 3.6e6


@dataclass(frozen=True, kw_only=True)
class Facility:
    """What turns board joules into facility kWh, carbon and cost."""
    pue: float = 1.0
    carbon_g_per_kwh: float | None = None
    price_per_kwh: float | None = None

    def __post_init__(self) -> None:
        for name, value, low in (("--pue", self.pue, 1.0),
                                 ("--carbon-intensity", self.carbon_g_per_kwh, 0.0),
                                 ("--price-per-kwh", self.price_per_kwh, 0.0)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < low:
                why = ("a facility draws at least its IT load: PUE >= 1 (typical 1.1-1.6)"
                       if name == "--pue" else "give a number >= 0")
                raise ConfigError(f"{name}={value!r}: {why}")

    def of(self, energy_j: float, interval_j: Sequence[float] | None = None
           ) -> dict[str, Any]:
        """The facility's kWh (boards x PUE), kgCO2eq and cost of `energy_j` board joules,
        each with its interval where the boards' is given."""
        def scaled(factor: float) -> tuple[float, list[float] | None]:
            kwh = self.pue / J_PER_KWH * factor
            return energy_j * kwh, [v * kwh for v in interval_j] if interval_j else None
        kwh, kwh_iv = scaled(1.0)
        out: dict[str, Any] = {"boundary": "facility (boards x PUE)", "pue": self.pue,
                               "energy_kwh": kwh, "energy_kwh_interval": kwh_iv}
        if self.carbon_g_per_kwh is not None:
            co2, co2_iv = scaled(self.carbon_g_per_kwh / 1000.0)
            out.update({"carbon_g_per_kwh": self.carbon_g_per_kwh, "kg_co2eq": co2,
                        "kg_co2eq_interval": co2_iv})
        if self.price_per_kwh is not None:
            cost, cost_iv = scaled(self.price_per_kwh)
            out.update({"price_per_kwh": self.price_per_kwh, "cost": cost,
                        "cost_interval": cost_iv})
        return out

    def line(self, f: dict[str, Any]) -> str:
        """A document's facility block in one line."""
        words = [f"facility {f['energy_kwh']:.6g} kWh (board energy x PUE {f['pue']:g})"]
        if "kg_co2eq" in f:
            words.append(f"{f['kg_co2eq']:.6g} kg CO2eq at {f['carbon_g_per_kwh']:g} g/kWh")
        if "cost" in f:
            words.append(f"cost {f['cost']:.6g} at {f['price_per_kwh']:g} per kWh")
        return ", ".join(words)


def with_facility(doc: dict[str, Any], facility: Facility | None) -> dict[str, Any]:
    """`doc` with its facility figures (`Facility.of`): an answer's (its `energy_j` and
    interval), each compared candidate's, each sweep row's (as flat columns), an
    optimization's reference and chosen point."""
    if facility is None:
        return doc
    kind = doc.get("schema")
    if kind == "piep.comparison":
        for c in doc["candidates"]:
            c["facility"] = facility.of(c["energy_j"], c.get("interval_energy_j"))
    elif kind == "piep.sweep":  # (CSV columns)
        for r in doc["rows"]:
            if r.get("energy_j") is not None:
                f = facility.of(r["energy_j"])
                r.update({"facility_energy_kwh": f["energy_kwh"],
                          **({"kg_co2eq": f["kg_co2eq"]} if "kg_co2eq" in f else {}),
                          **({"cost": f["cost"]} if "cost" in f else {})})
    elif kind == "piep.optimize":
        for key in ("reference", "chosen"):
            doc[key]["facility"] = facility.of(doc[key]["energy_j"])
    elif doc.get("energy_j") is not None:
        doc["facility"] = facility.of(doc["energy_j"],
                                      (doc.get("interval") or {}).get("energy_j"))
    return doc
