"""A server held full: the steady state of a paged, continuously batching engine (vLLM).

A benchmark that sends more requests than the server runs at once (`vllm bench serve` at
an infinite rate, the ML.ENERGY Benchmark) holds it at its concurrency for most of the
run: every running request decodes one token per scheduler iteration, and each one that
finishes is replaced by a waiting one, whose prompt is prefilled in the same iteration
(chunked prefill within `max_num_batched_tokens`). What the steady state costs:

* **Concurrency**: `max_num_seqs`, unless the paged KV cache holds fewer requests. vLLM
  gives the cache what `gpu_memory_utilization` of the board leaves after the weights,
  the activations of one `max_num_batched_tokens` forward and the runtime's own buffers;
  a request holds its prompt and the tokens generated so far, in `block_size` blocks.
* **Context**: a running request is, on average, part way through its output. With
  output lengths L, a slot spends time in proportion to L on a request of length L, so
  the mean position of a running request is E[L^2] / (2 E[L]) (not E[L] / 2: long
  outputs hold slots longer), after its prompt.
* **Iterations**: B decoding requests read the weights once and their own keys (paged
  attention reads only each request's blocks); k new prompts join an iteration, k
  Poisson-distributed with mean B / E[L] (a request finishes every E[L] / B iterations
  per slot). An iteration of T = B + k * prompt tokens costs the model's body (GEMMs,
  norms, collectives) at T tokens, decode attention at B requests of the mean context,
  the new prompts' causal attention, and the head (LM head, sampling) at B rows.

Each part is priced by piep's one pricing path (the reference runner's tree, on the GPU
or by spec-sheet transfer), then scaled by an engine profile's terms per kernel group
(`SteadyProfile`: GEMMs, attention, pointwise kernels, collectives; a host time per
iteration; a power scale), fitted on measured steady states (`piep.fit.steady`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from piep.core.config import BF16_BYTES, Workload
from piep.core.errors import ConfigError, FitError
from piep.core.layout import GIB, Deployment
from piep.tree.nodes import COMM_KINDS
from piep.serving.costs import held_share
from piep.predict.steady import (GROUPS, PROFILE_SCHEMA, SteadyProfile,  # noqa: F401
                                 load_profile, profile_path, shipped_profiles)

# what a profile scales: an iteration's cost before its work (one request of one token:
# the weights read, every kernel's launch), what its tokens add (GEMM rows, pointwise
# work, the head's rows), what its keys add (attention over the cached keys, the new
# prompts' causal attention), its collectives
ATTENTION = ("attention", "sdpa_masked", "kv_expand", "kv_gather", "kv_append", "kv_slide")
HEAD = ("final_norm", "lm_head", "allgather", "sampling")
POISSON_TAIL = 1e-4  # new prompts per iteration: the Poisson terms up to this tail


@dataclass(frozen=True, kw_only=True)
class PagedServer:
    """A vLLM server's settings (vLLM's names). `defaults` gives what vLLM's OpenAI server
    uses when they are not set."""
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float = 0.9
    block_size: int = 16

    def __post_init__(self) -> None:
        for key in ("max_num_seqs", "max_num_batched_tokens", "block_size"):
            if int(getattr(self, key)) < 1:
                raise ConfigError(f"{key}={getattr(self, key)!r} must be >= 1")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ConfigError(f"gpu_memory_utilization={self.gpu_memory_utilization!r} must be "
                              f"in (0, 1]")

    @classmethod
    def defaults(cls, gpu_name: str, memory_gib: float, **given: Any) -> "PagedServer":
        """vLLM's server defaults (vllm/engine/arg_utils.py, `get_batch_defaults`): on a
        board of >= 70 GiB that is not an A100, 8,192 batched tokens and 1,024 sequences;
        else 2,048 and 256. `given` (None values ignored) overrides them."""
        big = memory_gib >= 70 and "a100" not in gpu_name.lower()
        base = {"max_num_batched_tokens": 8192 if big else 2048,
                "max_num_seqs": 1024 if big else 256}
        return cls(**{**base, **{k: v for k, v in given.items() if v is not None}})


@dataclass(frozen=True)
class Lengths:
    """A workload's prompt tokens (mean) and output tokens (mean and mean square; `sample`:
    output lengths as quantiles of their distribution, for a finite benchmark)."""
    prompt_len: float
    output_mean: float
    output_sq_mean: float
    sample: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not (self.prompt_len >= 1 and self.output_mean >= 1):
            raise ConfigError(f"prompt and output lengths must be >= 1 token (got "
                              f"{self.prompt_len:g}, {self.output_mean:g})")
        if self.output_sq_mean < self.output_mean ** 2 * (1 - 1e-9):
            raise ConfigError("the mean square output length is below the squared mean")

    @classmethod
    def fixed(cls, prompt_len: float, output_len: float) -> "Lengths":
        return cls(prompt_len, output_len, output_len ** 2, (float(output_len),))

    @classmethod
    def drawn(cls, prompt_lens: Sequence[float], output_lens: Sequence[float]) -> "Lengths":
        """Lengths from draws of each (the prompts' mean; the outputs' moments and
        quantiles)."""
        x = np.sort(np.asarray(output_lens, float))
        return cls(float(np.mean(prompt_lens)), float(x.mean()), float((x * x).mean()),
                   tuple(x.tolist()))

    @classmethod
    def histogram(cls, prompt_len: float, edges: Sequence[float],
                  counts: Sequence[float]) -> "Lengths":
        """Output lengths given as a histogram (bin edges, counts): each bin uniform."""
        e, c = np.asarray(edges, float), np.asarray(counts, float)
        if len(e) != len(c) + 1 or c.sum() <= 0 or np.any(np.diff(e) < 0) or np.any(c < 0):
            raise ConfigError("an output-length histogram needs n+1 ascending edges and n "
                              "counts >= 0, not all zero")
        lo, hi = e[:-1], e[1:]
        mean = float((c * (lo + hi) / 2).sum() / c.sum())
        sq = float((c * (lo * lo + lo * hi + hi * hi) / 3).sum() / c.sum())
        n = int(round(c.sum()))
        cdf = np.r_[0.0, np.cumsum(c)] / c.sum()
        quantiles = np.interp((np.arange(n) + 0.5) / n, cdf, e)
        return cls(prompt_len, mean, sq, tuple(np.maximum(quantiles, 1.0).tolist()))

    @property
    def position_mean(self) -> float:
        """The mean output position of a running request in a steady state (length-biased:
        a slot holds a request of length L for L iterations)."""
        return self.output_sq_mean / (2 * self.output_mean)

    @property
    def context_mean(self) -> float:
        """The mean tokens a running request holds in a steady state: prompt and output so
        far."""
        return self.prompt_len + self.position_mean


@dataclass(frozen=True)
class Occupancy:
    """The running requests of a measured window: how many (mean), the tokens each holds
    (mean), and how many new ones join an iteration (mean)."""
    running: float
    context_mean: float
    new_per_iteration: float


def steady_occupancy(lengths: Lengths, running: float) -> Occupancy:
    """An endless stream: every slot replaced as it ends (module doc)."""
    return Occupancy(running, lengths.context_mean, running / lengths.output_mean)


def window_occupancy(lengths: Lengths, slots: int, requests: int, *,
                     seed: int = 0) -> Occupancy:
    """A benchmark that sends `requests` requests at once to a server running `slots`
    at a time, measured (as the ML.ENERGY Benchmark measures its steady state) from when
    the first `slots` requests have started to when all but `slots` + 1 have finished;
    output lengths drawn from `lengths.sample` (in a seeded random order). Every running
    request makes a token per iteration, so the window is counted in iterations."""
    import heapq
    if requests <= slots + 1:
        raise ConfigError(f"{requests} requests to {slots} running at once leave no steady "
                          f"window (it needs more than {slots + 1})")
    sample = np.asarray(lengths.sample or (lengths.output_mean,), float)
    rng = np.random.default_rng(seed)
    out = rng.permutation(np.resize(sample, requests))
    free = [0.0] * slots
    start, end = np.zeros(requests), np.zeros(requests)
    for i, n in enumerate(out):
        start[i] = heapq.heappop(free)
        end[i] = start[i] + n
        heapq.heappush(free, end[i])
    w1 = np.sort(end)[requests - slots - 2]
    a, b = start, np.minimum(end, w1)
    held = np.maximum(b - a, 0.0)
    # the integral of the position over each request's part of the window
    pos = (b - a) ** 2 / 2 * (held > 0)
    joined = np.count_nonzero((start > 0) & (start <= w1))
    return Occupancy(float(held.sum() / w1), lengths.prompt_len + float(pos.sum() / held.sum()),
                     float(joined / w1))


def kv_memory_gib(dep: Deployment, server: PagedServer) -> dict[str, float]:
    """vLLM's memory budget on one GPU (GiB): what `gpu_memory_utilization` of the board
    leaves the KV cache after the weights, the peak activations of a profiling forward of
    `max_num_batched_tokens` tokens (and the sampler's logits of `max_num_seqs` rows) and
    the runtime's buffers. Raises FitError when the weights alone do not fit."""
    m, g, p = dep.model, dep.gpu, dep.parallel
    probe = replace(dep, workload=Workload(batch=p.dp, prompt_len=server.max_num_batched_tokens,
                                           gen_len=1, mode="eager"))
    items = max(probe.memory_items_gib().values(), key=lambda i: i["total"])
    logits_gib = server.max_num_seqs * m.vocab_size * 4 / GIB
    budget = server.gpu_memory_utilization * g.memory_gib
    used = {"weights": items["weights"], "activations": items["activations"] + logits_gib,
            "runtime": items["cuda_context"] + items["cublas_workspace"]
            + items["nccl_workspace"]}
    kv = budget - sum(used.values())
    if kv <= 0:
        share = sum(used.values()) / g.memory_gib
        fix = (f"raise gpu_memory_utilization above {share:.2f}, or use a larger tp"
               if share < 1 else "use a larger tp")
        raise FitError(f"{m.name} does not fit vLLM on {p.tp}x {g.name}: weights "
                       f"{used['weights']:.1f} GiB, activations {used['activations']:.1f} GiB, "
                       f"runtime {used['runtime']:.1f} GiB leave no KV cache in "
                       f"{server.gpu_memory_utilization:g} x {g.memory_gib:.1f} GiB; {fix}")
    return {**used, "kv_cache": kv, "budget": budget}


def kv_bytes_per_token(dep: Deployment) -> float:
    """KV-cache bytes of one token on one GPU (keys and values of the first stage's
    layers, bf16)."""
    m = dep.model
    return dep.stage_layers()[0] * m.kv_per_token(dep.parallel.tp) * BF16_BYTES


def request_kv_bytes(dep: Deployment, context: float, block_size: int) -> float:
    """KV-cache bytes a request of `context` tokens holds on one GPU: every layer its
    context, a sliding layer at most its window and a block (vLLM's hybrid allocator frees
    the blocks that fall out of the window); half a block lost on average."""
    m = dep.model
    per_layer = kv_bytes_per_token(dep) / dep.stage_layers()[0]
    held = 0.0
    for (sliding, *_), count in m.layer_kinds(range(dep.stage_layers()[0])):
        tokens = min(context, m.sliding_window + block_size) if sliding and \
            m.sliding_window else context
        held += count * (tokens + block_size / 2)
    return held * per_layer


def concurrency(dep: Deployment, server: PagedServer, lengths: Lengths) -> dict[str, float]:
    """The requests running at once: `max_num_seqs`, or what the KV cache holds of
    requests of the mean context (`request_kv_bytes`)."""
    mem = kv_memory_gib(dep, server)
    kv_bytes = mem["kv_cache"] * GIB
    tokens = kv_bytes / kv_bytes_per_token(dep)  # (tokens of every layer)
    longest = lengths.prompt_len + lengths.output_mean
    if kv_bytes < request_kv_bytes(dep, longest, server.block_size):
        raise FitError(f"{dep.model.name}: vLLM's KV cache on {dep.parallel.tp}x "
                       f"{dep.gpu.name} holds {tokens:,.0f} tokens, less than one request of "
                       f"{longest:,.0f}; use a larger tp")
    held = request_kv_bytes(dep, lengths.context_mean, server.block_size)
    running = min(float(server.max_num_seqs), kv_bytes / held)
    return {"running": running, "kv_tokens": tokens,
            "held_tokens": held / kv_bytes_per_token(dep),
            "kv_limited": running < server.max_num_seqs, "memory_gib": mem}


@dataclass(frozen=True)
class Parts:
    """A steady state's priced parts, per iteration kind k (new prompts in it): time s
    and energy J per kernel group (arrays (K, groups)), the Poisson weight of each k, the
    running requests, and the GPUs' idle power."""
    time_s: np.ndarray
    energy_j: np.ndarray
    weight: np.ndarray
    running: float
    idle_w: float
    out_of_range_kinds: tuple[str, ...]
    limit_w: float = math.inf  # the power limit of all the layout's boards together

    def iteration(self, profile: SteadyProfile) -> tuple[float, float]:
        """(mean time s, mean energy J) of an iteration under a profile, each kind held
        under the boards' power limit (as a stream's iterations are: `held_share`)."""
        scale = np.array([profile.time_scale[g] for g in GROUPS])
        t = self.time_s @ scale + profile.step_host_s
        e = (self.energy_j @ scale) * profile.power_scale + profile.step_host_s * self.idle_w
        e = e * held_share(t, e, 0.0, self.limit_w)
        return float(self.weight @ t), float(self.weight @ e)

    def outcome(self, profile: SteadyProfile) -> dict[str, float]:
        t, e = self.iteration(profile)
        return {"running": self.running, "iteration_s": t,
                "output_tokens_per_s": self.running / t, "j_per_output_token": e / self.running,
                "power_w": e / t}


def new_prompt_weights(rate: float) -> np.ndarray:
    """Poisson probabilities of 0, 1, ... new prompts in an iteration, to POISSON_TAIL
    (the last term takes the tail)."""
    out, k, p = [], 0, math.exp(-rate)
    while True:
        out.append(p)
        if 1.0 - sum(out) < POISSON_TAIL:
            break
        k += 1
        p *= rate / k
    out[-1] += 1.0 - sum(out)
    return np.array(out)


def parts(dep: Deployment, cost_model, server: PagedServer, prompt_len: float,
          occ: Occupancy) -> Parts:
    """Price the iterations of a window of occupancy `occ` (module doc) on `dep`'s model,
    GPU and layout with `cost_model` (the reference runner's tree)."""
    from piep.predict.pricing import price
    b = max(1, round(occ.running))
    prompt = max(1, round(prompt_len))
    weights = new_prompt_weights(occ.new_per_iteration)
    ks = np.arange(len(weights))
    body_tokens = np.minimum(b + ks * prompt, max(server.max_num_batched_tokens, b))

    # (the body as a graph-replayed decode step of T one-token requests: vLLM replays
    # CUDA graphs for mixed batches up to its capture size, and a step's GEMMs at T rows
    # are the body's)
    deps = ([work(dep, int(t), 1, 2) for t in body_tokens]
            + [work(dep, max(int(k), 1), prompt, 1) for k in ks]
            + [work(dep, b, max(1, round(occ.context_mean)), 2), work(dep, 1, 1, 2)])
    priced = price(deps, cost_model)
    t = priced.table
    g = row_groups(priced)
    comm, head, attention = g["comm"], g["head"], g["attention"]
    row_t = t.count * (priced.prices.time_s + priced.prices.gap_s + priced.prices.wait_s)
    n, nk = len(deps), len(ks)

    def per_dep(select, values) -> np.ndarray:
        return np.bincount(t.cfg[select], weights=values[select], minlength=n)

    def split(values) -> np.ndarray:
        """(fixed, tokens, keys, comm) of each iteration kind: (K, 4); a TP run's
        timeline time is one GPU's, its energies all GPUs'."""
        decode = t.phase == 1
        body = per_dep(decode & ~comm & ~attention & ~head, values)
        heads = per_dep(decode & ~comm & head, values)
        att = per_dep(decode & attention, values)
        prompt_att = per_dep((t.phase == 0) & attention, values)[nk:2 * nk] * (ks > 0)
        links = per_dep(decode & comm & ~head, values)[:nk] + per_dep(decode & comm & head,
                                                                       values)[-2]
        one = -1  # one request of one token: what an iteration costs before its work
        fixed = body[one] + heads[one] + att[one]
        tokens = np.maximum(body[:nk] - body[one], 0.0) + max(heads[-2] - heads[one], 0.0)
        keys = max(att[-2] - att[one], 0.0) + prompt_att
        return np.column_stack([np.full(nk, fixed), tokens, keys, links])
    return Parts(split(row_t), split(priced.row_energy_j), weights, float(occ.running),
                 priced.prices.idle_w * dep.parallel.world_size,
                 tuple(sorted({k for i in range(n) for k in priced.out_of_range_kinds(i)})),
                 dep.gpu.max_power_w * dep.parallel.world_size)


def work(dep: Deployment, batch: int, prompt_len: int, gen_len: int) -> Deployment:
    """`dep` running `batch` requests (a replica) of `prompt_len` tokens and `gen_len`
    generated, decoding as a CUDA-graph replay: what each part of an iteration is priced
    as, by the tree of the engine a steady profile prices (its record: vLLM's fused MoE
    kernel where a model has experts)."""
    from piep.core.engines import names
    return replace(dep, engine=dep.engine or names(profile="steady")[0],
                   workload=Workload(batch=batch * dep.parallel.dp,
                                     prompt_len=int(prompt_len), gen_len=gen_len,
                                     mode="graph"))


def row_groups(priced) -> dict[str, np.ndarray]:
    """Which rows of a priced table are decode rows, collectives, the head's and
    attention's (over the cache or the prompt)."""
    from piep.predict.table import KIND_NAMES
    t = priced.table
    names = KIND_NAMES[t.kind_id]
    return {"decode": t.phase == 1, "comm": np.isin(names, COMM_KINDS),
            "head": np.isin(names, HEAD), "attention": np.isin(names, ATTENTION)}


# flags whose answers' bands widen as the learned predictor's do (its log half-widths x1.5:
# `piep.predict.learned.OUT_OF_RANGE_WIDENING`): what no run of the profile had, experts
# sharded over the GPUs and MXFP4 experts (set after their public rows were priced blind,
# whose errors the profile's band held 26 of 51 and 49 of 65 times: reports/public.md)
WIDENED_BY = ("unmeasured_expert_parallel", "mxfp4_unsampled")


def widened(band: tuple[float, float], flags: Sequence[str]
            ) -> tuple[tuple[float, float], str]:
    """A band (ratios to an answer's point) widened in log for each flag of WIDENED_BY the
    answer carries, and the words that say so ("" where none)."""
    from piep.predict.learned import OUT_OF_RANGE_WIDENING as W
    words = ""
    for flag in WIDENED_BY:
        if flag in flags:
            band, words = (band[0] ** W, band[1] ** W), f"{words}; widened x{W} (log): {flag}"
    return band, words


def answer_band(profile: SteadyProfile, flags: Sequence[str]
                ) -> tuple[tuple[float, float] | None, str]:
    """The 90 % band of an answer's energy (ratios to its point) and what it stands on: the
    profile's band, `widened` by the answer's flags."""
    if profile.interval is None:
        return None, "held-out public rows"
    band, words = widened(profile.interval, flags)
    return band, "held-out public rows" + words


@dataclass(frozen=True)
class SteadyAnswer:
    """What a server held full costs: the settings and workload priced, the concurrency
    and its memory, and the outcome under the profile (with its 90 % band of energy)."""
    engine: str
    gpu: str
    server: PagedServer
    lengths: Lengths
    memory: dict[str, Any]
    outcome: dict[str, float]
    profile: SteadyProfile
    flags: tuple[str, ...]
    out_of_range_kinds: tuple[str, ...] = ()

    def document(self) -> dict[str, Any]:
        o = self.outcome
        band, basis = answer_band(self.profile, self.flags)
        doc = {"schema": "piep.steady_state", "schema_version": 1, "engine": self.engine,
               "gpu": self.gpu,
               "server": {"max_num_seqs": self.server.max_num_seqs,
                          "max_num_batched_tokens": self.server.max_num_batched_tokens,
                          "gpu_memory_utilization": self.server.gpu_memory_utilization,
                          "block_size": self.server.block_size},
               "workload": {"prompt_len": self.lengths.prompt_len,
                            "output_len_mean": self.lengths.output_mean,
                            "output_len_sq_mean": self.lengths.output_sq_mean},
               "running_requests": o["running"],
               "kv_limited": bool(self.memory["kv_limited"]),
               "kv_cache_tokens": self.memory["kv_tokens"],
               "memory_gib_per_gpu": {k: round(v, 3)
                                      for k, v in self.memory["memory_gib"].items()},
               "output_tokens_per_s": o["output_tokens_per_s"],
               "j_per_output_token": o["j_per_output_token"],
               "j_per_request": o["j_per_output_token"] * self.lengths.output_mean,
               "power_w": o["power_w"], "iteration_s": o["iteration_s"],
               "interval": ({"j_per_output_token": [o["j_per_output_token"] * band[0],
                                                    o["j_per_output_token"] * band[1]],
                             "coverage": 0.9, "from": basis}
                            if band else None),
               "profile": self.profile.to_json(), "flags": list(self.flags),
               "out_of_range_kinds": list(self.out_of_range_kinds)}
        return doc


def answer(dep: Deployment, cost_model, server: PagedServer, lengths: Lengths, *,
           engine: str, loaded: tuple[SteadyProfile, tuple[str, ...]],
           flags: Sequence[str] = ()) -> SteadyAnswer:
    """The steady state of `engine` serving `lengths` with `server`'s settings, under its
    profile as `load_profile` gave it for `dep`'s GPU (`loaded`: the profile, its flags)."""
    profile, own = loaded
    mem = concurrency(dep, server, lengths)
    p = parts(dep, cost_model, server, lengths.prompt_len,
              steady_occupancy(lengths, mem["running"]))
    extra = ("out_of_range",) if p.out_of_range_kinds else ()
    # the profile's band replaces a spec-sheet transfer's fixed one where it was fitted on
    # this GPU's runs, and its runs measured the model's family where they had it (`flags`
    # come from resolving the reference runner's tree, which knows no engine's runs)
    other_gpu = "steady_profile_other_gpu" in own
    kept = [f for f in flags if not (f == "uncalibrated_gpu" and not other_gpu)
            and not (f == "unmeasured_family" and dep.model.model_type in profile.families)]
    return SteadyAnswer(engine, dep.gpu.name, server, lengths, mem, p.outcome(profile),
                        profile, tuple(dict.fromkeys((*kept, *own, *extra))),
                        p.out_of_range_kinds)
