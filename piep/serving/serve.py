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
from typing import Any

import numpy as np

from piep.config import ModelSpec
from piep.errors import ConfigError
from piep.engines import names
from piep.predict.pricing import flags as pricing_flags
from piep.resolve import Resolved, resolve
from piep.scenario import Scenario
from piep.serving.costs import IterationGrid
from piep.serving.policy import UserPolicy
from piep.serving.simulate import SchedulerPolicy, Simulation, percentiles, simulate
from piep.serving.trace import Trace, make_trace

SCHEMA = "piep.serving"
SCHEMA_VERSION = 1
GIB = 1024 ** 3
# flagged idle_dominated: more than this share of the window's energy is the boards idling
# with no request in flight
IDLE_DOMINATED = 0.5


def kv_blocks(scn: Scenario, block_size: int, memory_share: float) -> int:
    """KV blocks the engine allocates: a share of the memory left after the weights."""
    m, dep = scn.model, scn.deployment
    weights_gib = dep.memory_items_gib()["all" if scn.parallel.pp == 1 else "first_stage"]
    free_gib = scn.gpu.memory_gib - weights_gib["weights"] - weights_gib["cuda_context"]
    block_gib = block_size * m.num_layers / scn.parallel.pp * 2 * dep.kv_heads_per_rank \
        * m.head_dim * 2 / GIB
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
    page = m.head_dim * dep.kv_heads_per_rank            # K or V of one token, one layer
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
    meta = dict(profile.meta.get("scheduler", {}) if profile is not None else {})
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
                           safety_margin=float(meta.get("safety_margin", 0.15)))


def serving_scenario(model, trace: Trace, **kwargs: Any) -> Scenario:
    """The scenario of a served model: its layout and engine, the longest request."""
    serving = names(serves=True)
    engine = kwargs.pop("engine", serving[0])
    if engine not in serving:
        raise ConfigError(f"--engine {engine}: piep serve predicts continuous batching "
                          f"({', '.join(serving)})")
    if not isinstance(model, ModelSpec):
        from piep.models import load_model
        model = load_model(model)
    total = trace.prompt_len + trace.gen_len
    i = int(np.argmax(total))
    if total[i] > model.max_position:
        raise ConfigError(f"request {trace.ids[i]}: prompt_len + gen_len = {int(total[i])} "
                          f"exceeds max_position_embeddings={model.max_position} of "
                          f"{model.name}")
    return Scenario.build(model, engine=engine, batch=1, prompt_len=int(trace.prompt_len[i]),
                          gen_len=int(trace.gen_len[i]), **kwargs)


def iteration_grid(scn: Scenario, policy: SchedulerPolicy) -> IterationGrid:
    """The iterations `policy` can schedule on `scn`'s deployment, to be priced."""
    return IterationGrid.build(scn.deployment, max_tokens=policy.max_batch_tokens,
                               max_requests=policy.max_requests_per_batch,
                               max_keys=policy.num_blocks * policy.block_size)


def run(scn: Scenario, trace: Trace, model, policy: SchedulerPolicy,
        grid: IterationGrid | None = None) -> tuple[Simulation, Any]:
    """Simulate the trace; the iteration costs come from `model` (grid reused if given)."""
    costs = (grid or iteration_grid(scn, policy)).costs(model)
    return simulate(trace, costs, policy), costs


def serve(scn: Scenario, trace: Trace, *, predictor: str = "auto",
          user_policy: UserPolicy | None = None) -> dict[str, Any]:
    """The serving document of `trace` on `scn`'s deployment and engine; `user_policy`
    (another engine's scheduler and host time) replaces parts of the profile, flagged."""
    return serve_simulated(scn, trace, predictor=predictor, user_policy=user_policy)[0]


def _priced(scn: Scenario, predictor: str, user_policy: UserPolicy | None,
            res: Resolved | None = None):
    """The resolution (`res`, else resolved here), cost model, scheduler policy and
    iteration costs of a serving deployment: what every trace on it shares."""
    res = res or resolve(scn, predictor)
    model = res.cost_model
    policy = policy_of(scn, res.profile, user_policy.scheduler if user_policy else None)
    if user_policy and user_policy.host:
        if not hasattr(model, "host"):
            raise ConfigError("--policy host terms need the learned predictor "
                              "(--predictor learned)")
        model = with_host(model, **user_policy.host)
    return res, model, policy, iteration_grid(scn, policy).costs(model)


def serve_simulated(scn: Scenario, trace: Trace, *, predictor: str = "auto",
                    user_policy: UserPolicy | None = None) -> tuple[dict[str, Any], Simulation]:
    """`serve`'s document and the simulation it summarizes (every iteration); its flags
    and interval mean what a batch prediction's do (one resolution, one interval policy)."""
    res, model, policy, costs = _priced(scn, predictor, user_policy)
    sim = simulate(trace, costs, policy)
    doc = document(scn, trace, sim, costs, policy)
    doc["predictor"] = model.name + (f" + policy {user_policy.name!r}" if user_policy else "")
    res.annotate(doc)
    if user_policy:  # another engine's scheduler: nothing piep measured bounds it
        doc["scheduler"]["policy"] = {"name": user_policy.name, "source": user_policy.source,
                                      "host": user_policy.host}
        doc["flags"].append("unvalidated_engine")
    elif hasattr(model, "interval"):
        doc["interval"] = model.interval(scn.deployment, doc["energy_j"], doc["time_s"],
                                         far=costs.out_of_range)
    return doc, sim


def batch_as_stream(res: Resolved) -> dict[str, Any]:
    """The prediction document of a serving engine's batch (`piep predict --engine hf-cb`):
    continuous batching has no static batch, so its B prompts arrive at once and its
    scheduler runs them, each of dp replicas serving its share; `piep serve` of the same
    requests gives the same energy, time, TTFT and partition. TTFT is the time every
    prompt has its first token; per-module energies and times are the batch tree's
    attribution scaled to the stream's (a model attribution, as always)."""
    from piep.predict.pricing import price
    scn = res.scenario
    w, p = scn.workload, scn.parallel
    n = w.batch // p.dp  # one replica's requests; the iteration costs count every replica
    trace = make_trace(np.zeros(n), np.full(n, w.prompt_len), np.full(n, w.gen_len),
                       where="the batch")
    _, model, policy, costs = _priced(scn, res.predictor, None, res)
    sim = simulate(trace, costs, policy)
    stream = document(scn, trace, sim, costs, policy)
    batch = price([scn.deployment], res.cost_model, detail=True).document(0)
    energy, time_s = stream["energy_j"], stream["time_s"]
    ttft = float(np.max(sim.first_token_s))
    steps = max(w.gen_len - 1, 0)
    e_scale, t_scale = energy / batch["energy_j"], time_s / batch["time_s"]
    return {**batch, "predictor": model.name, "energy_j": energy, "time_s": time_s,
            "prefill": {"energy_j": stream["phase_j"]["prefill"], "time_s": ttft},
            "decode": {"energy_j": stream["phase_j"]["decode"], "time_s": time_s - ttft,
                       "tpot_s": (time_s - ttft) / steps if steps else 0.0},
            "j_per_token": energy / (w.batch * w.gen_len),
            "tokens_per_s": w.batch * w.gen_len / time_s,
            "per_gpu": [{**g, "power_w_mean": energy / p.world_size / time_s}
                        for g in batch["per_gpu"]],
            "interval": model.interval(scn.deployment, energy, time_s, far=costs.out_of_range),
            "breakdown_j": stream["breakdown_j"],
            "modules": [{**m, "energy_j": m["energy_j"] * e_scale,
                         "time_s": m["time_s"] * t_scale} for m in batch["modules"]],
            "flags": stream["flags"], "scheduler": stream["scheduler"],
            "priced_as": "a request stream: the batch's requests arrive at once and the "
                         "engine's scheduler runs them (piep serve prices the same)"}


def load_curve(scn: Scenario, trace: Trace, factors=(0.25, 0.5, 1.0, 2.0, 4.0), *,
               predictor: str = "auto", user_policy: UserPolicy | None = None
               ) -> list[dict[str, float]]:
    """The same requests arriving `factor` times as fast: J per generated token, median
    TPOT and requests per iteration at each load (empty for a burst: no rate to scale)."""
    span = float(trace.arrival_s.max() - trace.arrival_s.min()) if len(trace) else 0.0
    if span <= 0:
        return []
    _, _, policy, costs = _priced(scn, predictor, user_policy)  # the same for every load
    out = []
    for f in factors:
        t = make_trace(trace.arrival_s / f, trace.prompt_len, trace.gen_len, ids=trace.ids)
        doc = document(scn, t, simulate(t, costs, policy), costs, policy)
        out.append({"factor": f, "rate_per_s": (len(t) - 1) / (span / f),
                    "j_per_gen_token": doc["j_per_gen_token"],
                    "tpot_p50_s": doc["tpot_s"]["p50"],
                    "requests_per_iteration": doc["mean_requests_per_iteration"]})
    return out


def document(scn: Scenario, trace: Trace, sim: Simulation, costs, policy) -> dict[str, Any]:
    n = len(trace)
    kernel_j = float(sim.it_kernel_j.sum())
    gap_j = float(sim.it_gap_j.sum())
    idle_j = sim.idle_s * costs.idle_power_w
    energy = kernel_j + gap_j + idle_j
    gen = trace.gen_tokens
    tokens = sim.it_prefill_tokens + sim.it_decode_tokens
    comm_j, wait_j = (float(v.sum()) for v in costs.partition(tokens, sim.it_requests,
                                                               sim.it_keys))
    it_e = sim.it_kernel_j + sim.it_gap_j
    prefill_j = float((it_e * sim.it_prefill_tokens / tokens).sum())
    first, last = sim.first_token_s, sim.last_token_s
    ttft = first - trace.arrival_s
    steps = np.maximum(trace.gen_len - 1, 0)
    tpot = np.where(steps > 0, (last - first) / np.maximum(steps, 1), 0.0)
    e2e = last - trace.arrival_s
    flags = ([] if trace.was_sorted else ["unsorted_trace"]) \
        + pricing_flags(scn.deployment, costs.out_of_range)
    if sim.queued_on_memory:
        flags.append("queueing_on_kv_memory")
    if idle_j > IDLE_DOMINATED * energy:  # the answer is mostly the boards between requests
        flags.append("idle_dominated")
    per_request = [{"id": rid, "energy_j": float(e), "ttft_s": float(a), "tpot_s": float(b),
                    "e2e_s": float(c)}
                   for rid, e, a, b, c in zip(trace.ids, sim.request_j, ttft, tpot, e2e)]
    p = scn.parallel
    return {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "boundary": "gpu_board",
        "model": scn.model.name, "gpu": scn.gpu.name,
        "layout": {"tp": p.tp, "pp": p.pp, "dp": p.dp, "gpus": p.world_size},
        "engine": scn.engine.name,
        "requests": n, "gen_tokens": gen,
        "energy_j": energy, "time_s": sim.end_s,
        "j_per_gen_token": energy / gen, "tokens_per_j": gen / energy if energy else 0.0,
        "ttft_s": percentiles(ttft), "tpot_s": percentiles(tpot[steps > 0]),
        "e2e_s": percentiles(e2e),
        "breakdown_j": {"compute": kernel_j - comm_j - wait_j, "communication": comm_j,
                        "wait": wait_j, "idle": gap_j + idle_j},
        # the window by what the GPUs serve: prompts, generated tokens, or no request at all
        "phase_j": {"prefill": prefill_j, "decode": float(it_e.sum()) - prefill_j,
                    "no_request": idle_j},
        "iterations": int(len(sim.it_time_s)),
        "mean_requests_per_iteration": float(sim.it_requests.mean()) if len(sim.it_requests)
        else 0.0,
        "no_request_s": sim.idle_s,
        "scheduler": {"block_size": policy.block_size, "num_blocks": policy.num_blocks,
                      "max_batch_tokens": policy.max_batch_tokens,
                      "safety_margin": policy.safety_margin},
        "per_request": per_request,
        "flags": flags,
    }


def with_host(model, **terms: float):
    """`model` with some host terms replaced (the fit of a serving profile)."""
    import copy
    host = copy.deepcopy(model.host)
    for k, v in terms.items():
        setattr(host, k, v)
    return replace(model, host=host)
