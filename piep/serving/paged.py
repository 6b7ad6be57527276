"""A vLLM stream iteration by iteration: what each scheduler iteration costs, and the
scheduler's settings, for `piep serve --engine vllm` (and a batch of it, which is a stream
arriving at once).

An iteration's parts are the steady state's (`piep.serving.steady`), priced by the same
reference pricing and scaled by the same profile, at what the iteration holds instead of
a steady state's means: the body at its T tokens (a CUDA-graph step of T one-token rows)
and its collectives, the head at its R requests, decode attention of its D decoding
requests over the K keys they hold (paged attention reads each request's own blocks), and
its prompt chunks' causal attention by their query-key pairs (one prompt of as many
pairs). Each part is priced once on a log2 grid of its variables and interpolated, so the
simulator (`piep.serving.simulate`, with vLLM's recompute preemption) asks for any
iteration in microseconds. On a model with sliding layers the cache is sized for the
stream's mean held context (`for_trace`): vLLM frees a sliding layer's blocks past its
window, the simulator counts a request's blocks by its tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar, Mapping

import numpy as np

from piep.core.layout import GIB, Deployment
from piep.serving.costs import STEP, _cell, _grid, _line, _log2, held_share
from piep.serving.simulate import SchedulerPolicy
from piep.serving.steady import PagedServer, SteadyProfile, kv_bytes_per_token, \
    kv_memory_gib, request_kv_bytes, row_groups, work

FIELDS = ("time_s", "kernel_j", "gap_j", "comm_j", "wait_j")


def policy(dep: Deployment, server: PagedServer) -> SchedulerPolicy:
    """vLLM's scheduler on `dep`: the KV blocks its memory budget leaves
    (`kv_memory_gib`), its token budget and running requests, no blocks held back, and
    preemption by recompute."""
    kv = kv_memory_gib(dep, server)["kv_cache"] * GIB
    blocks = int(kv // (kv_bytes_per_token(dep) * server.block_size))
    return SchedulerPolicy(block_size=server.block_size, num_blocks=max(1, blocks),
                           max_batch_tokens=server.max_num_batched_tokens,
                           max_requests_per_batch=server.max_num_seqs, safety_margin=0.0,
                           preempt=True)


def window_factor(dep: Deployment, context: float, block_size: int) -> float:
    """How many more requests of `context` tokens the cache holds than its tokens say: a
    sliding layer keeps its window (and a block) alone, as vLLM's hybrid allocator frees
    the blocks past it (`request_kv_bytes`); 1 without sliding layers."""
    m = dep.model
    if not (m.sliding_window and any(sliding for (sliding, *_), _ in m.layer_kinds())):
        return 1.0
    return kv_bytes_per_token(dep) * (context + block_size / 2) \
        / request_kv_bytes(dep, context, block_size)


def for_trace(pol: SchedulerPolicy, dep: Deployment, trace) -> SchedulerPolicy:
    """The policy for these requests: on a model with sliding layers, the simulator (which
    counts a request's blocks by its tokens, every layer's) gets the blocks a request of
    the trace's mean held context (its prompt and half its output) leaves free
    (`window_factor`; exact at that context); unchanged otherwise."""
    held = float(np.mean(trace.prompt_len + trace.gen_len / 2)) if len(trace) else 1.0
    factor = window_factor(dep, held, pol.block_size)
    return pol if factor == 1.0 else replace(pol, num_blocks=int(pol.num_blocks * factor))


@dataclass(frozen=True)
class PagedCosts:
    """Iterations of a vLLM server priced: each part's fields (`FIELDS`, rows) on its log2
    grid, the profile that scales them, the GPUs' idle power and power limit."""
    body: np.ndarray       # (fields, T) body rows at T tokens, collectives apart
    body_comm: np.ndarray  # (fields, T) the body's collectives
    head: np.ndarray       # (fields, R) the head at R requests, collectives apart
    head_comm: np.ndarray  # (fields, R)
    decode: np.ndarray     # (fields, D, K) attention of D decoding requests over K keys
    prefill: np.ndarray    # (fields, P) causal attention of one prompt of P tokens
    profile: SteadyProfile
    idle_power_w: float
    limit_w: float
    out_of_range_kinds: tuple[str, ...] = ()
    # per grid point priced with rows far from the module samples: its part (0 body and
    # head by tokens or requests, 1 decode attention, 2 prompt attention), its indices on
    # the part's axes and the far row's kind
    far: tuple[np.ndarray, ...] = ()
    # the simulator tells these costs each iteration's decoding requests and prompt chunks
    reads_prefill: ClassVar[bool] = True

    @property
    def out_of_range(self) -> bool:
        return bool(self.out_of_range_kinds)

    def __post_init__(self) -> None:
        s = self.profile.time_scale
        logs = {k: np.log2(np.maximum(getattr(self, k)[:3], 1e-30)).tolist()
                for k in ("body", "body_comm", "head", "head_comm", "prefill")}
        object.__setattr__(self, "_logs", logs)
        object.__setattr__(self, "_decode_logs",
                           np.log2(np.maximum(self.decode[:3], 1e-30)))
        fixed = self.body[:3, 0] + self.head[:3, 0] + self.decode[:3, 0, 0]
        object.__setattr__(self, "_scales", (s["fixed"], s["tokens"], s["keys"], s["comm"]))
        object.__setattr__(self, "_fixed", fixed.tolist())

    def within(self, sim, longest: float,
               allowance: Mapping[str, float] | None = None) -> "PagedCosts":
        """These costs naming as out of range only the kinds of the grid points a
        simulation read (iterations up to its most tokens, requests and keys; prompts up
        to `longest` tokens of context). `allowance`: unused (a steady profile is sized
        on steady states, not on replays priced by rows)."""
        if not len(self.far):
            return self
        part, i, j, kinds = self.far
        top = [_cell(v, 10 ** 9)[0] + 1 for v in (
            max(sim.it_prefill_tokens.max() + sim.it_decode_tokens.max(),
                sim.it_requests.max()), sim.it_decode_tokens.max(), sim.it_keys.max(),
            math.sqrt(2.0 * sim.it_prefill_tokens.max() * longest))]
        read = ((part == 0) & (i <= top[0])) | ((part == 1) & (i <= top[1]) & (j <= top[2])) \
            | ((part == 2) & (i <= top[3]))
        from piep.predict.table import KIND_NAMES
        return replace(self, out_of_range_kinds=tuple(sorted(set(KIND_NAMES[kinds[read]]))))

    def cost_one(self, tokens: float, requests: float, keys: float,
                 decoding: float | None = None, prefill_keys: float = 0.0,
                 pairs: float = 0.0) -> tuple[float, float, float]:
        """(time s, kernel energy J, launch-gap and host energy J) of one iteration of
        `tokens` tokens of `requests` requests reading `keys` keys, of which `decoding`
        requests decode (None: all) and prompt chunks read `prefill_keys` keys in `pairs`
        query-key pairs."""
        d = requests if decoding is None else decoding
        lg = self._logs
        body, comm = _at1(lg["body"], tokens), _at1(lg["body_comm"], tokens)
        head, head_comm = _at1(lg["head"], requests), _at1(lg["head_comm"], requests)
        att = self._decode_at(d, keys - prefill_keys) if d > 0 else None
        pre = _at1(lg["prefill"], math.sqrt(2.0 * pairs)) if pairs > 0 else None
        s_f, s_t, s_k, s_c = self._scales
        out = []
        for i in range(3):
            tok = max(body[i] - self.body[i, 0], 0.0) + max(head[i] - self.head[i, 0], 0.0)
            key = (max(att[i] - self.decode[i, 0, 0], 0.0) if att else 0.0) \
                + (pre[i] if pre else 0.0)
            out.append(s_f * self._fixed[i] + s_t * tok + s_k * key
                       + s_c * (comm[i] + head_comm[i]))
        p = self.profile
        time_s = out[0] + p.step_host_s
        kernel_j = out[1] * p.power_scale
        gap_j = out[2] * p.power_scale + p.step_host_s * self.idle_power_w
        if kernel_j + gap_j > self.limit_w * time_s:
            keep = float(held_share(time_s, kernel_j, gap_j, self.limit_w))
            kernel_j, gap_j = kernel_j * keep, gap_j * keep
        return time_s, kernel_j, gap_j

    def _decode_at(self, d: float, k: float) -> list[float]:
        """The decode attention's three fields at d requests over k keys (bilinear in
        log2, clamped to the grid; at least a key a request)."""
        v = self._decode_logs
        i, wi = _cell(d, v.shape[1])
        j, wj = _cell(max(k, d), v.shape[2])
        i1, j1 = min(i + 1, v.shape[1] - 1), min(j + 1, v.shape[2] - 1)
        lo = v[:, i, j] * (1 - wj) + v[:, i, j1] * wj
        hi = v[:, i1, j] * (1 - wj) + v[:, i1, j1] * wj
        return np.exp2(lo * (1 - wi) + hi * wi).tolist()

    def cost(self, tokens, requests, keys):
        """(time s, kernel J, launch-gap J) of iterations (arrays), all decoding."""
        rows = [self.cost_one(t, r, k) for t, r, k in zip(np.asarray(tokens).tolist(),
                                                           np.asarray(requests).tolist(),
                                                           np.asarray(keys).tolist())]
        a = np.array(rows, float).reshape(-1, 3)
        return a[:, 0], a[:, 1], a[:, 2]

    def partition(self, tokens, requests, keys) -> tuple[np.ndarray, np.ndarray]:
        """(collective transfer J, busy-waiting J) of iterations: the body's and head's
        collectives at their tokens and requests, scaled as the profile scales them."""
        lt, lr = (np.log2(np.maximum(np.asarray(v, float), 1.0)) for v in (tokens, requests))
        scale = self.profile.time_scale["comm"] * self.profile.power_scale
        out = []
        for f in (FIELDS.index("comm_j"), FIELDS.index("wait_j")):
            v = sum(_interp(c[f], x) if np.any(c[f]) else np.zeros_like(x)
                    for c, x in ((self.body_comm, lt), (self.head_comm, lr)))
            out.append(v * scale)
        return out[0], out[1]


def _at1(logs: list[list[float]], value: float) -> list[float]:
    """The three fields of a one-variable part at `value` (linear in log2, as the hf-cb
    costs read theirs)."""
    return _line(logs, *_cell(value, len(logs[0])))[2]


def _interp(values: np.ndarray, log_x: np.ndarray) -> np.ndarray:
    axis = np.arange(len(values)) * STEP
    return np.exp2(np.interp(log_x, axis, _log2(values)))


def build(dep: Deployment, cost_model, server: PagedServer, profile: SteadyProfile, *,
          max_keys: int) -> PagedCosts:
    """Price every part of `dep`'s iterations on its grid (tokens to the token budget,
    requests to `max_num_seqs`, keys to `max_keys`, prompts to the longest chunk over the
    longest context) with `cost_model` (the reference runner's pricing)."""
    from piep.predict.pricing import price
    t_grid = _grid(server.max_num_batched_tokens)
    r_grid = _grid(server.max_num_seqs)
    k_grid = _grid(max_keys)
    p_grid = _grid(math.sqrt(2.0 * server.max_num_batched_tokens * max(
        dep.model.max_position, server.max_num_batched_tokens)))

    def rounded(grid):
        return [int(round(x)) for x in grid]
    pairs = [(d, max(1, int(round(k / d)))) for d in rounded(r_grid) for k in rounded(k_grid)]
    at: dict[tuple[int, int], tuple[int, int]] = {}  # a pair's first grid point
    for n, pc in enumerate(pairs):
        at.setdefault(pc, divmod(n, len(k_grid)))
    deps = ([work(dep, t, 1, 2) for t in rounded(t_grid)]
            + [work(dep, r, 1, 2) for r in rounded(r_grid)]
            + [work(dep, d, c, 2) for d, c in sorted(set(pairs))]
            + [work(dep, 1, p, 1) for p in rounded(p_grid)])
    priced = price(deps, cost_model)
    g = row_groups(priced)
    fields = _fields(priced)

    def per_dep(select) -> np.ndarray:  # (fields, deps)
        return np.stack([np.bincount(priced.table.cfg[select], weights=f[select],
                                     minlength=len(deps)) for f in fields])
    nt, nr = len(t_grid), len(r_grid)
    decode = g["decode"]
    body = per_dep(decode & ~g["comm"] & ~g["attention"] & ~g["head"])[:, :nt]
    body_comm = per_dep(decode & g["comm"] & ~g["head"])[:, :nt]
    head = per_dep(decode & ~g["comm"] & g["head"])[:, nt:nt + nr]
    head_comm = per_dep(decode & g["comm"] & g["head"])[:, nt:nt + nr]
    att_at = per_dep(decode & g["attention"])
    index = {pc: nt + nr + i for i, pc in enumerate(sorted(set(pairs)))}
    att = att_at[:, [index[pc] for pc in pairs]].reshape(len(FIELDS), nr, len(k_grid))
    prefill = per_dep((priced.table.phase == 0) & g["attention"])[:, nt + nr + len(index):]
    # each deployment's place on the grids: (part, index, index)
    places = np.array([(0, i, 0) for i in range(nt)] + [(0, i, 0) for i in range(nr)]
                      + [(1, *at[pc]) for pc in sorted(index)]
                      + [(2, i, 0) for i in range(len(p_grid))], int)
    t = priced.table
    rows = np.flatnonzero(priced.prices.out_of_range & (t.count > 0))
    at_rows = places[t.cfg[rows]]
    far = (at_rows[:, 0], at_rows[:, 1], at_rows[:, 2], t.kind_id[rows])
    from piep.predict.table import KIND_NAMES
    return PagedCosts(body, body_comm, head, head_comm, att, prefill, profile,
                      priced.prices.idle_w * dep.parallel.world_size,
                      dep.gpu.max_power_w * dep.parallel.world_size,
                      tuple(sorted(set(KIND_NAMES[far[3]]))), far)


def _fields(priced) -> list[np.ndarray]:
    """Per row (`FIELDS`): the time its calls hold the GPU, and its energy on every GPU
    that runs it (as the pricing weighs it) running, in launch gaps, of which collective
    transfers, busy-waiting."""
    from piep.predict.pricing import row_energies
    t, p = priced.table, priced.prices
    e_run, e_gap, e_wait = row_energies(t, p)
    own = e_run + e_gap + e_wait
    w = np.divide(priced.row_energy_j, own, out=np.zeros_like(own), where=own > 0)
    return [t.count * (p.time_s + p.gap_s + p.wait_s), w * (e_run + e_wait), w * e_gap,
            w * np.where(t.is_comm, e_run, 0.0), w * e_wait]


# a policy file's scheduler keys, as vLLM's settings
POLICY_KEYS = {"max_batch_tokens": "max_num_batched_tokens",
               "max_requests_per_batch": "max_num_seqs", "block_size": "block_size"}


def server_of(res, user_policy=None) -> PagedServer:
    """The vLLM server of a resolved scenario: vLLM's defaults for its GPU, with a policy
    file's scheduler settings (`--policy`: max_batch_tokens, max_requests_per_batch,
    block_size) on top; host terms and hf-cb's memory keys are refused in one line (the
    profile prices the host; vLLM's memory is its own budget)."""
    from piep.core.errors import ConfigError
    dep = res.scenario.deployment
    given = {}
    if user_policy is not None:
        other = sorted(set(user_policy.scheduler) - set(POLICY_KEYS)) \
            + ["host"] * bool(user_policy.host)
        if other:
            raise ConfigError(f"--policy {user_policy.source}: {', '.join(other)} "
                              f"belong(s) to hf-cb; for {res.scenario.engine.name} give "
                              f"{', '.join(POLICY_KEYS)} only (its host is its profile's)")
        given = {POLICY_KEYS[k]: int(v) for k, v in user_policy.scheduler.items()}
    return PagedServer.defaults(dep.gpu.name, dep.gpu.memory_gib, **given)


def priced(res, server: PagedServer | None = None):
    """(cost model, scheduler policy, iteration costs) of a resolved vLLM scenario: vLLM's
    defaults for its GPU unless `server` is given."""
    dep = res.scenario.deployment
    server = server or PagedServer.defaults(dep.gpu.name, dep.gpu.memory_gib)
    pol = policy(dep, server)
    most = window_factor(dep, dep.model.max_position, pol.block_size)  # (the grid's reach)
    costs = build(dep, res.cost_model, server, res.steady[0],
                  max_keys=int(pol.num_blocks * pol.block_size * most))
    return res.cost_model, pol, costs

