"""`piep serve`: the energy of a request stream under continuous batching.

The window runs from the first arrival to the last token of the last request, on every
GPU of the deployment, idle gaps included. Each scheduler iteration's energy is
attributed to the requests in it by the tokens each contributed; the GPUs' energy while
no request is in flight goes to `idle`. Energy per output token counts generated tokens
only. TTFT, TPOT (mean time between a request's tokens after the first) and end-to-end
latency with p50/p90/p99.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from piep.core.errors import ConfigError
from piep.predict.flags import IDLE_DOMINATED, explain
from piep.core.engines import names
from piep.predict.power import SUSTAINED_S
from piep.predict.pricing import flags as pricing_flags
from piep.predict.resolve import Resolved, resolve
from piep.core.results import Prediction, ServingResult, Summary
from piep.core.scenario import Scenario
from piep.serving.costs import IterationCosts, IterationGrid
from piep.serving.policy import UserPolicy
from piep.serving.simulate import SchedulerPolicy, Simulation, simulate
from piep.core.trace import Trace, make_trace

GIB = 1024 ** 3


def kv_blocks(scn: Scenario, block_size: int, memory_share: float) -> int:
    """KV blocks the engine allocates: a share of the memory left after the weights."""
    m, dep = scn.model, scn.deployment
    weights_gib = dep.memory_items_gib()["all" if scn.parallel.pp == 1 else "first_stage"]
    free_gib = scn.gpu.memory_gib - weights_gib["weights"] - weights_gib["cuda_context"]
    block_gib = block_size * m.num_layers / scn.parallel.pp * m.kv_per_token(scn.parallel.tp) \
        * 2 / GIB
    return max(1, int(memory_share * free_gib / block_gib))


def paged_cache(scn: Scenario, *, block_size: int, memory_percent: float,
                reserved_gib: float, max_batch_tokens: int | None = None) -> tuple[int, int]:
    """(KV blocks, token budget) of transformers' paged cache (its memory handler, 5.17):
    `memory_percent` of the memory left after the weights and `reserved_gib`, shared by
    the K/V pages, an index per page, and per batch token the inputs, outputs and the
    packed attention mask (budget x (pages + budget)); the peak activations of the LM head
    (fp32 logits) and of attention (the gathered old K/V) bound it. Without a given budget
    each batch may fill a tenth of the cache, capped at 8192 tokens."""
    m, dep = scn.model, scn.deployment
    weights = dep.memory_items_gib()["all" if scn.parallel.pp == 1 else "first_stage"]
    avail = memory_percent * (scn.gpu.memory_gib - weights["weights"] - reserved_gib) * GIB
    page = m.kv_per_token(scn.parallel.tp) / 2           # K or V of one token, one layer
    layers = m.num_layers // scn.parallel.pp
    masks = 2 if getattr(m, "sliding_window", None) else 1
    io_m = 7 * 4 + 4 + 8 + 8                              # int32 inputs/outputs, int64 indices
    peaks = ((2 * m.hidden_size + 4 * m.vocab_size, 0),   # LM head: hidden + fp32 logits
             (2 * (m.hidden_size + m.num_heads * m.head_dim // scn.parallel.tp + 2 * page),
              2 * page * 2))                              # attention: new and old K/V
    coeffs = [(dm + io_m, dn + 2 * layers * page * 2 + 8, 2 * masks, 2 * masks)
              for dm, dn in peaks]                        # (per M, per N, per M.N, per M^2)
    if max_batch_tokens is None:  # each batch fills at most a tenth of the cache
        f = 0.1
        bound = min(int((-(cn + cm * f) + math.sqrt((cn + cm * f) ** 2
                                                    + 4 * (cmn * f + cmm * f * f) * avail))
                        / (2 * (cmn * f + cmm * f * f)) * f) for cm, cn, cmn, cmm in coeffs)
        max_batch_tokens = max(256, min(8192, bound))
    M = max_batch_tokens
    pages = min((avail - cm * M - cmm * M * M) / (cn + cmn * M) for cm, cn, cmn, cmm in coeffs)
    return max(1, int(pages) // block_size), M


def policy_of(scn: Scenario, profile, override: dict[str, float] | None = None
              ) -> SchedulerPolicy:
    """The engine profile's scheduler settings, with a user policy's `override` on top."""
    meta = dict((profile.meta.scheduler or {}) if profile is not None else {})
    if override and ("num_blocks" in override or "kv_memory_share" in override):
        meta.pop("kv_memory_share", None)
        meta.pop("memory_percent", None)
    meta.update(override or {})
    block = int(meta.get("block_size", 256))
    budget = int(meta["max_batch_tokens"]) if "max_batch_tokens" in meta else None
    if "num_blocks" in meta:
        blocks = int(meta["num_blocks"])
    elif "memory_percent" in meta:  # the engine's own memory handler
        blocks, budget = paged_cache(scn, block_size=block, max_batch_tokens=budget,
                                     memory_percent=float(meta["memory_percent"]),
                                     reserved_gib=float(meta.get("reserved_gib", 1.3)))
    else:
        blocks = kv_blocks(scn, block, float(meta.get("kv_memory_share", 0.76)))
    return SchedulerPolicy(block_size=block, num_blocks=blocks,
                           max_batch_tokens=budget or 8192,
                           max_requests_per_batch=int(meta.get("max_requests_per_batch", 1024)),
                           safety_margin=float(meta.get("safety_margin", 0.15)),
                           pickup_s=float(meta.get("pickup_s", 0.0)))


def serving_scenario(model, trace: Trace, **kwargs: Any) -> Scenario:
    """The scenario of `trace` served on a model (a name, a config path or a spec): its
    layout and engine (default: the first serving engine) as keyword fields."""
    kwargs.setdefault("engine", names(kind="stream")[0])
    return Scenario.build(model, trace=trace, **kwargs)


def iteration_grid(scn: Scenario, policy: SchedulerPolicy) -> IterationGrid:
    """The iterations `policy` can schedule on `scn`'s deployment, to be priced."""
    return IterationGrid.build(scn.deployment, max_tokens=policy.max_batch_tokens,
                               max_requests=policy.max_requests_per_batch,
                               max_keys=policy.num_blocks * policy.block_size)


def run(scn: Scenario, trace: Trace, model, policy: SchedulerPolicy,
        grid: IterationGrid | None = None, costs: IterationCosts | None = None
        ) -> tuple[Simulation, Any]:
    """Simulate the trace; the iteration costs come from `model` (grid reused if given;
    `costs`: that grid already priced by `model`)."""
    costs = costs or (grid or iteration_grid(scn, policy)).costs(model)
    return simulate(trace, costs, policy), costs


def serve(scn: "Scenario | Resolved", *, predictor: str = "auto",
          user_policy: UserPolicy | None = None, hosts: bool = True) -> dict[str, Any]:
    """The serving document of a scenario's requests (its stream, or its batch arriving at
    once) on its deployment and engine; `user_policy` (another engine's scheduler and host
    time) replaces parts of the profile, flagged; with `hosts`, how far the answer moves
    between the fastest and slowest hosts of the engine's calibration."""
    return serve_simulated(scn, predictor=predictor, user_policy=user_policy, hosts=hosts)[0]


def _priced(res: Resolved, user_policy: UserPolicy | None):
    """The cost model, scheduler policy and iteration costs of a resolved serving
    deployment: what every trace on it shares; computed once per model, layout and host
    among a resolution's variants (a sweep's workloads: no part of them reads the
    workload)."""
    if user_policy is not None:
        return _priced_now(res, user_policy)
    scn = res.scenario
    key = (scn.model, scn.parallel, scn.deployment.host_probe_s)
    known = res.shared.setdefault("serving_costs", {})
    if key not in known:
        known[key] = _priced_now(res, None)
    return known[key]


def _priced_now(res: Resolved, user_policy: UserPolicy | None):
    scn, model = res.scenario, res.cost_model
    if res.steady is not None:  # its iterations priced as its steady profile prices them
        from piep.serving.paged import priced, server_of
        return priced(res, server_of(res, user_policy))
    policy = policy_of(scn, res.profile, user_policy.scheduler if user_policy else None)
    if user_policy and user_policy.host:
        if not _has_host(model):
            raise ConfigError(f"--policy host terms: the {model.name} predictor has no host "
                              f"terms to replace; use --predictor learned (or a policy "
                              f"without `host`)")
        model = with_host(model, **user_policy.host)
    return model, policy, iteration_grid(scn, policy).costs(model)


def _for_trace(res: Resolved, policy, trace):
    """The scheduler policy for these requests: a steady-priced engine's cache sized for
    them (`piep.serving.paged.for_trace`: sliding layers' windows); others' as priced."""
    if res.steady is None:
        return policy
    from piep.serving.paged import for_trace
    return for_trace(policy, res.scenario.deployment, trace)


def _resolved(scn: "Scenario | Resolved", predictor: str) -> Resolved:
    res = scn if isinstance(scn, Resolved) else resolve(scn, predictor)
    if res.scenario.engine.record.kind != "stream":
        serving = names(kind="stream")
        raise ConfigError(f"--engine {res.scenario.engine.name}: piep serve predicts "
                          f"continuous batching ({', '.join(serving)}); give --engine "
                          f"{serving[0]}")
    return res


def serve_simulated(scn: "Scenario | Resolved", *, predictor: str = "auto",
                    user_policy: UserPolicy | None = None,
                    hosts: bool = True) -> tuple[dict[str, Any], Simulation]:
    """`serve`'s document and the simulation it summarizes (every iteration); its flags
    and interval mean what a batch prediction's do (one resolution, one interval policy)."""
    result, sim = served(scn, predictor=predictor, user_policy=user_policy, hosts=hosts)
    return result.to_json(), sim


def served(scn: "Scenario | Resolved", *, predictor: str = "auto",
           user_policy: UserPolicy | None = None,
           hosts: bool = True) -> tuple[ServingResult, Simulation]:
    """The serving result of a scenario's requests, built here once, and its simulation."""
    res = _resolved(scn, predictor)
    result, sim = _simulated(res, user_policy)
    # (a steady-priced engine's policy sets its server only: its profile still prices it)
    unvalidated = user_policy is not None and res.steady is None
    flags = res.merged_flags(result.flags) + (["unvalidated_engine"] if unvalidated else [])
    dependence = None
    if user_policy is None and hosts and len(sim.it_time_s) <= HOST_RANGE_ITERATIONS:
        def answer(r):
            o = _simulated(r)[0].outcome
            return o.energy_j, o.time_s
        dependence = res.host_dependence(answer)
    return replace(result, engine_ref=res.engine_ref, flags=tuple(flags),
                   transfer=None if res.transfer is None else dict(res.transfer),
                   scenario=res.scenario.to_json(), host_dependence=dependence,
                   flag_notes=explain(flags)), sim


def _simulated(res: Resolved, user_policy: UserPolicy | None = None
               ) -> tuple[ServingResult, Simulation]:
    """The scenario's requests through its engine's scheduler: the result before the
    resolution completes it, and the simulation."""
    scn = res.scenario
    model, policy, costs = _priced(res, user_policy)
    trace = scn.requests()
    policy = _for_trace(res, policy, trace)
    sim = simulate(trace, costs, policy)
    # out of range: the kinds of the rows this stream read, farther from the module
    # samples than the replays the engine's band was sized on read
    far_read = res.profile.meta.far_read if res.profile is not None else None
    costs = costs.within(sim, float(np.max(trace.prompt_len + trace.gen_len)),
                         allowance=far_read)
    result = serving_result(scn, trace, sim, costs, policy)
    result = replace(result, predictor=model.name + (f" + policy {user_policy.name!r}"
                                                     if user_policy else ""))
    if user_policy:
        result = replace(result, scheduler={**result.scheduler, "policy": {
                             "name": user_policy.name, "source": user_policy.source,
                             "host": user_policy.host}})
    if res.steady is not None:
        result = replace(result, interval=steady_interval(
            res.steady[0], result.outcome.energy_j, result.outcome.time_s, res.flags))
    elif user_policy:  # another engine's scheduler: nothing piep measured bounds it
        pass
    elif hasattr(model, "interval"):
        result = replace(result, interval=model.interval(
            scn.deployment, result.outcome.energy_j, result.outcome.time_s,
            far=costs.out_of_range))
    return result, sim


def steady_interval(profile, energy_j: float, time_s: float,
                    flags: Sequence[str] = ()) -> dict[str, Any] | None:
    """The 90 % interval of a steady-priced engine's answer: its profile's bands of J and
    time per output token, sized on held-out measured runs (None where it has none),
    widened by the answer's flags (`piep.serving.steady.widened`)."""
    from piep.serving.steady import widened
    if profile.interval is None:
        return None
    eb, words = widened(profile.interval, flags)
    tb, _ = widened(profile.time_interval or profile.interval, flags)
    return {"energy_j": [energy_j * eb[0], energy_j * eb[1]],
            "time_s": [time_s * tb[0], time_s * tb[1]],
            "level": f"90 % of held-out runs' ratios (leave one model out) of the {profile.name} "
                     f"profile on {profile.gpu}" + ("" if profile.time_interval else
                                                    "; time: the energy band") + words}


# serve prices a stream again on the fastest and slowest calibration hosts up to this many
# scheduler iterations (beyond it the document says only which host it is for)
HOST_RANGE_ITERATIONS = 20_000


def batch_as_stream(res: Resolved, batch: Prediction | None = None) -> Prediction:
    """The prediction of a serving engine's batch (`piep predict --engine hf-cb`):
    continuous batching has no static batch, so its B prompts arrive at once and its
    scheduler runs them, each of dp replicas serving its share; `piep serve` of the same
    requests gives the same energy, time, latencies and partition. The prefill is the
    iterations until every prompt has its first token (serve splits each iteration by
    its tokens instead); per-module energies and times are the batch tree's attribution
    scaled to the stream's (a model attribution, as always); `batch`: that tree's own
    prediction where it was priced among many (a sweep's)."""
    from piep.predict.pricing import price
    scn = res.scenario
    p = scn.parallel
    result, sim = _simulated(res)
    stream = result.to_json()
    if batch is None:
        batch = price([scn.deployment], res.cost_model, detail=True).prediction(0)
    energy, time_s = stream["energy_j"], stream["time_s"]
    ttft = float(np.max(sim.first_token_s))
    # the prefill: the iterations until every prompt has its first token (a wall-clock
    # phase, as a static batch's: its energy and time are of the same iterations)
    before = sim.it_start_s + sim.it_time_s <= ttft
    prefill_j = float((sim.it_kernel_j + sim.it_gap_j)[before].sum())
    e_scale, t_scale = energy / batch.outcome.energy_j, time_s / batch.outcome.time_s
    one = outcome(scn.requests(), sim, energy, prefill_j=prefill_j,  # one replica's requests
                  no_request_j=stream["no_request"]["energy_j"])
    return replace(
        batch, predictor=stream["predictor"],
        outcome=replace(one, output_tokens=batch.outcome.output_tokens, replicas=p.dp),
        phases={"prefill": {"energy_j": prefill_j, "time_s": ttft},
                "decode": {"energy_j": energy - prefill_j - stream["no_request"]["energy_j"],
                           "time_s": time_s - ttft},
                "no_request": dict(stream["no_request"])},
        per_gpu=[{**g, "power_w_mean": energy / p.world_size / time_s} for g in batch.per_gpu],
        interval=stream["interval"], breakdown_j=stream["breakdown_j"],
        modules=[{**m, "energy_j": m["energy_j"] * e_scale, "time_s": m["time_s"] * t_scale}
                 for m in batch.modules],
        flags=tuple(stream["flags"]), scheduler=stream["scheduler"],
        priced_as="a request stream: the batch's requests arrive at once and the engine's "
                  "scheduler runs them (piep serve prices the same)")


def load_curve(scn: "Scenario | Resolved", factors=(0.25, 0.5, 1.0, 2.0, 4.0), *,
               predictor: str = "auto", user_policy: UserPolicy | None = None
               ) -> list[dict[str, float]]:
    """The same requests arriving `factor` times as fast: J per output token, median
    TPOT and requests per iteration at each load (empty for a burst: no rate to scale)."""
    res = _resolved(scn, predictor)
    trace = res.scenario.requests()
    span = float(trace.arrival_s.max() - trace.arrival_s.min()) if len(trace) else 0.0
    if span <= 0:
        return []
    _, policy, costs = _priced(res, user_policy)  # the same for every load
    policy = _for_trace(res, policy, trace)  # (the same requests: the same cache)
    out = []
    for f in factors:
        t = make_trace(trace.arrival_s / f, trace.prompt_len, trace.gen_len, ids=trace.ids)
        doc = document(res.scenario, t, simulate(t, costs, policy), costs, policy)
        out.append({"factor": f, "rate_per_s": (len(t) - 1) / (span / f),
                    "j_per_output_token": doc["j_per_output_token"],
                    "tpot_p50_s": doc["tpot_s"]["p50"],
                    "requests_per_iteration": doc["mean_requests_per_iteration"]})
    return out


def outcome(trace: Trace, sim: Simulation, energy_j: float, *, prefill_j: float = 0.0,
            no_request_j: float = 0.0) -> Summary:
    """The stream's energy (of it: the prefill's and the boards' with no request in
    flight), window and latencies, request by request."""
    steps = trace.gen_len - 1
    first, last = sim.first_token_s, sim.last_token_s
    tpot = np.where(steps > 0, (last - first) / np.maximum(steps, 1), np.nan)
    return Summary(energy_j, sim.end_s, trace.gen_tokens, first - trace.arrival_s, tpot,
                   last - trace.arrival_s, input_tokens=int(np.sum(trace.prompt_len)),
                   prefill_j=prefill_j, no_request_j=no_request_j)


def document(scn: Scenario, trace: Trace, sim: Simulation, costs, policy) -> dict[str, Any]:
    """The serving document of a simulated stream, before a resolution completes it."""
    return serving_result(scn, trace, sim, costs, policy).to_json()


def window_parts_j(it_kernel_j: np.ndarray, it_gap_j: np.ndarray, idle_s: float,
                   idle_power_w: float) -> tuple[float, float, float]:
    """(kernels, launch gaps, idle) energy of a window: its iterations', and the GPUs'
    while no request is in flight."""
    return float(it_kernel_j.sum()), float(it_gap_j.sum()), idle_s * idle_power_w


def serving_result(scn: Scenario, trace: Trace, sim: Simulation, costs,
                   policy) -> ServingResult:
    """What a simulated stream comes to: its outcome, partition, scheduler, requests."""
    kernel_j, gap_j, idle_j = window_parts_j(sim.it_kernel_j, sim.it_gap_j, sim.idle_s,
                                             costs.idle_power_w)
    energy = kernel_j + gap_j + idle_j
    tokens = sim.it_prefill_tokens + sim.it_decode_tokens
    comm_j, wait_j = (float(v.sum()) for v in costs.partition(tokens, sim.it_requests,
                                                               sim.it_keys))
    it_e = sim.it_kernel_j + sim.it_gap_j
    share = sim.it_prefill_tokens / tokens  # each iteration's prefill by its tokens
    prefill_j, prefill_s = float((it_e * share).sum()), float((sim.it_time_s * share).sum())
    out = outcome(trace, sim, energy, prefill_j=prefill_j, no_request_j=idle_j)
    flags = ([] if trace.was_sorted else ["unsorted_trace"]) \
        + pricing_flags(scn.deployment, costs.out_of_range)
    held = sim.it_kernel_j + sim.it_gap_j >= costs.limit_w * sim.it_time_s * (1 - 1e-9)
    if sim.it_time_s[held].sum() >= SUSTAINED_S:  # iterations held at the boards' limit
        flags.append("power_capped")
    if sim.queued_on_memory:
        flags.append("queueing_on_kv_memory")
    load = stream_load(trace, out.ttft_s)
    if load.get("sustainable_rate_per_s") is not None:
        flags.append("overloaded")
    if idle_j > IDLE_DOMINATED * energy:  # the answer is mostly the boards between requests
        flags.append("idle_dominated")
    per_request = [{"id": rid, "energy_j": float(e), "ttft_s": float(a), "tpot_s": float(b),
                    "e2e_s": float(c)}
                   for rid, e, a, b, c in zip(trace.ids, sim.request_j, out.ttft_s,
                                              np.nan_to_num(out.tpot_s), out.e2e_s)]
    p = scn.parallel
    return ServingResult(
        deployment={"model": scn.model.name, "gpu": scn.gpu.name,
                    "layout": {"tp": p.tp, "pp": p.pp, "dp": p.dp, "gpus": p.world_size,
                               **({"ep": p.ep} if p.ep > 1 else {})},
                    "engine": scn.engine.name, "dtypes": scn.deployment.dtypes},
        outcome=out,
        breakdown_j={"compute": kernel_j - comm_j - wait_j, "communication": comm_j,
                     "wait": wait_j, "idle": gap_j + idle_j},
        # the window by what the GPUs serve: prompts (by their share of each iteration's
        # tokens), generated tokens, or no request at all
        phases={"prefill": {"energy_j": prefill_j, "time_s": prefill_s},
                "decode": {"energy_j": float(it_e.sum()) - prefill_j,
                           "time_s": float(sim.it_time_s.sum()) - prefill_s},
                "no_request": {"energy_j": idle_j, "time_s": sim.idle_s}},
        iterations=int(len(sim.it_time_s)),
        mean_requests_per_iteration=float(sim.it_requests.mean()) if len(sim.it_requests)
        else 0.0,
        scheduler={"block_size": policy.block_size, "num_blocks": policy.num_blocks,
                   "max_batch_tokens": policy.max_batch_tokens,
                   "safety_margin": policy.safety_margin},
        per_request=per_request, flags=tuple(flags), load=load,
        steady_window=steady_window(sim, costs.idle_power_w),
        out_of_range_kinds=costs.out_of_range_kinds or None)


# a steady window: the iterations that run at least this share of the stream's peak
# requests, from the first to the last of them, when there are at least STEADY_MIN of them
STEADY_SHARE = 0.95
STEADY_MIN = 10


def steady_window(sim: Simulation, idle_power_w: float) -> dict[str, Any] | None:
    """The window where a stream ran at its peak concurrency (ML.ENERGY's steady state: a
    server held full, its ramp-up and drain left out): from the first iteration with at
    least STEADY_SHARE of the peak requests to the end of the last; its energy (iterations,
    and the boards idle inside it), output tokens (decoded, and first tokens made in it) and
    the quantities per token. None where fewer than STEADY_MIN iterations reach it."""
    if not len(sim.it_requests):
        return None
    at = np.flatnonzero(sim.it_requests >= STEADY_SHARE * sim.it_requests.max())
    if len(at) < STEADY_MIN:
        return None
    a, b = at[0], at[-1]
    start, end = float(sim.it_start_s[a]), float(sim.it_start_s[b] + sim.it_time_s[b])
    inside = slice(a, b + 1)
    busy = float(sim.it_time_s[inside].sum())
    energy = float((sim.it_kernel_j + sim.it_gap_j)[inside].sum()) \
        + max(end - start - busy, 0.0) * idle_power_w
    firsts = int(np.count_nonzero((sim.first_token_s > start) & (sim.first_token_s <= end)))
    tokens = int(sim.it_decode_tokens[inside].sum()) + firsts
    return {"start_s": start, "end_s": end, "energy_j": energy, "output_tokens": tokens,
            "j_per_output_token": energy / tokens if tokens else None,
            "output_tokens_per_s": tokens / (end - start) if end > start else None,
            "mean_requests_per_iteration": float(sim.it_requests[inside].mean()),
            "definition": f"iterations at >= {STEADY_SHARE:.0%} of the peak requests "
                          f"({int(sim.it_requests.max())}), first to last"}


# a stream is overloaded when its requests' wait for their first token grows by at least
# this share of the time they arrive over, and by at least OVERLOAD_S over the trace
OVERLOAD_SLOPE = 0.05
OVERLOAD_S = 1.0


def stream_load(trace: Trace, ttft_s: np.ndarray) -> dict[str, float | None]:
    """The arrival rate of a stream and whether the engine kept up with it. Where arrivals
    outpace service, requests queue and each waits longer than the one before: their
    TTFT grows along the trace at a slope s (least squares on arrival time), so the
    engine takes them in at the arrival rate / (1 + s), the most it sustains at this mix
    of requests (`sustainable_rate_per_s`; None where the wait does not grow)."""
    arrival = trace.arrival_s
    span = float(arrival.max() - arrival.min()) if len(arrival) else 0.0
    if len(arrival) < 8 or span <= 0:  # a burst (all at once) has no rate
        return {"arrival_rate_per_s": None, "sustainable_rate_per_s": None}
    rate = (len(arrival) - 1) / span
    x = arrival - arrival.mean()
    slope = float((x * (ttft_s - ttft_s.mean())).sum() / (x * x).sum())
    q = len(arrival) // 4
    early, late = np.median(ttft_s[:q]), np.median(ttft_s[-q:])
    grows = slope >= OVERLOAD_SLOPE and slope * span >= OVERLOAD_S and late > 2 * early \
        and late - early >= OVERLOAD_S
    return {"arrival_rate_per_s": rate,
            "sustainable_rate_per_s": rate / (1 + slope) if grows else None,
            "ttft_growth_per_s": slope}


def _has_host(model) -> bool:
    """Whether `model` prices a host (the learned predictor, also under a spec-sheet
    transfer to an uncalibrated GPU; not the roofline)."""
    return hasattr(model, "host") or hasattr(getattr(model, "base", None), "host")


def with_host(model, **terms: float):
    """`model` with some host terms replaced (the fit of a serving profile; a spec-sheet
    transfer's: its base's)."""
    import copy
    if not hasattr(model, "host"):
        return replace(model, base=with_host(model.base, **terms))
    host = copy.deepcopy(model.host)
    for k, v in terms.items():
        setattr(host, k, v)
    return replace(model, host=host)
