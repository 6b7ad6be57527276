"""An iteration-level simulator of a continuous-batching scheduler.

The policy is transformers' FIFO scheduler (`hf-cb`), parameterized: each iteration
first gives every decoding request one token, then prefills (the partly prefilled first,
then the waiting in arrival order) within a token budget, splitting a prompt that does
not fit across iterations; a request needs KV blocks for what it holds, and no new
prefill starts while the free blocks are below a safety margin (the first scheduled one
excepted). Iterations run back to back while requests are in flight; the GPUs idle
between the last token in flight and the next arrival. Time advances by each
iteration's priced cost (`piep.serving.costs`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from piep.errors import ConfigError
from piep.serving.costs import IterationCosts
from piep.trace import Trace


@dataclass(frozen=True, kw_only=True)
class SchedulerPolicy:
    """A continuous-batching policy (transformers' defaults for hf-cb)."""
    block_size: int = 256
    num_blocks: int = 3051               # KV blocks (measured on H200 for llama-3-8b)
    max_batch_tokens: int = 8192         # token budget of one iteration
    max_requests_per_batch: int = 1024
    safety_margin: float = 0.15          # share of blocks kept free from new prefills

    def __post_init__(self) -> None:
        for key in ("block_size", "num_blocks", "max_batch_tokens", "max_requests_per_batch"):
            if int(getattr(self, key)) < 1:
                raise ConfigError(f"scheduler {key}={getattr(self, key)!r} must be >= 1")


@dataclass(frozen=True)
class Simulation:
    """Every iteration (start, duration, tokens of prefill and decode, requests, keys,
    energies) and every request (first and last token times, attributed energy)."""
    it_start_s: np.ndarray
    it_time_s: np.ndarray
    it_prefill_tokens: np.ndarray
    it_decode_tokens: np.ndarray
    it_requests: np.ndarray
    it_keys: np.ndarray
    it_kernel_j: np.ndarray
    it_gap_j: np.ndarray
    first_token_s: np.ndarray   # per request, from the first arrival
    last_token_s: np.ndarray
    request_j: np.ndarray       # energy of the iterations, shared by tokens
    end_s: float                # the last token of the last request
    idle_s: float               # no request in flight, inside the window
    queued_on_memory: int       # iterations where KV blocks held a prefill back


def simulate(trace: Trace, costs: IterationCosts, policy: SchedulerPolicy) -> Simulation:
    n = len(trace)
    arrival = trace.arrival_s
    prompt = trace.prompt_len.astype(np.int64)
    gen = trace.gen_len.astype(np.int64)
    bs = policy.block_size
    need_blocks = -(-(prompt + gen) // bs)
    if need_blocks.max() > policy.num_blocks:
        i = int(np.argmax(need_blocks))
        raise ConfigError(f"request {trace.ids[i]} needs {need_blocks[i]} KV blocks of {bs} "
                          f"tokens; the cache holds {policy.num_blocks}")
    # scalar reads go to Python lists (a numpy element costs several times more)
    arrival_l, prompt_l, gen_l = arrival.tolist(), prompt.tolist(), gen.tolist()
    done_prefill = [0] * n                 # prompt tokens in the cache
    # the position of each request's next token to feed (prompt + generated - 1), and the
    # position at which it has generated all (prompt + gen - 1)
    nxtpos = prompt - 1
    stop = prompt + gen - 1
    blocks = np.zeros(n, np.int64)
    first = np.full(n, np.nan)
    last = np.full(n, np.nan)
    energy = np.zeros(n)
    free = policy.num_blocks
    margin = policy.safety_margin * policy.num_blocks
    decoding = np.zeros(0, np.int64)       # request indices, in scheduling order
    prefilling: deque[int] = deque()       # partly prefilled
    waiting: deque[int] = deque()
    nxt = 0
    t = 0.0
    idle = 0.0
    held = 0
    its: list[tuple] = []
    cost = costs.cost_one
    while True:
        while nxt < n and arrival_l[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        if not len(decoding) and not prefilling and not waiting:
            if nxt >= n:
                break
            idle += arrival_l[nxt] - t
            t = arrival_l[nxt]
            continue
        # decoding requests: one token each (their next position may open a block)
        budget = policy.max_batch_tokens
        req_budget = policy.max_requests_per_batch
        dec = decoding[:min(len(decoding), budget, req_budget)]
        prefix = True  # dec is the head of `decoding`
        pos = nxtpos[dec]
        opens = pos >= blocks[dec] * bs  # the position opens a block (it is never past one)
        n_open = int(np.count_nonzero(opens))
        if n_open > free:  # no block for some: they wait this iteration
            ok = np.cumsum(opens) <= free
            dec, opens, pos = dec[ok], opens[ok], pos[ok]
            n_open = int(np.count_nonzero(opens))
            prefix = False
        if n_open:
            blocks[dec[opens]] += 1
            free -= n_open
        budget -= len(dec)
        req_budget -= len(dec)
        keys = int(np.add.reduce(pos)) + len(dec)  # (the cheapest exact sum of a few)
        chunks: list[tuple[int, int]] = []
        n_pre = 0  # their tokens
        for queue in (prefilling, waiting):
            while queue and budget > 0 and req_budget > 0:
                if free < margin and (len(dec) or chunks):
                    held += 1
                    break
                r = queue[0]
                take = min(prompt_l[r] - done_prefill[r], budget)
                want = -(-(done_prefill[r] + take) // bs) - blocks[r]
                if want > free:
                    held += 1
                    break
                queue.popleft()
                blocks[r] += want
                free -= want
                chunks.append((r, take))
                n_pre += take
                budget -= take
                req_budget -= 1
                keys += done_prefill[r] + take
            if budget <= 0 or req_budget <= 0:
                break
        tokens = len(dec) + n_pre
        if tokens == 0:  # nothing fits: memory holds everything back (cannot progress)
            raise ConfigError("the KV cache cannot hold the next request's prompt: raise "
                              "the cache's blocks or shorten the prompts")
        requests = len(dec) + len(chunks)
        dt, e_k, e_g = cost(tokens, requests, keys)
        t_end = t + dt
        share = (e_k + e_g) / tokens
        its.append((t, dt, n_pre, len(dec), requests, keys, e_k, e_g))
        # the decoding requests got their token
        if len(dec):
            pos += 1
            nxtpos[dec] = pos
            energy[dec] += share
            done = pos >= stop[dec]
            # (a request's last token is its last time: set when it ends)
            if np.count_nonzero(done):
                finished = dec[done]
                last[finished] = t_end
                free += int(blocks[finished].sum())
                blocks[finished] = 0
                decoding = np.concatenate([dec[~done], decoding[len(dec):]]) if prefix \
                    else decoding[nxtpos[decoding] < stop[decoding]]
        new_dec = []
        for r, take in chunks:
            done_prefill[r] += take
            energy[r] += share * take
            if done_prefill[r] < prompt_l[r]:  # the rest of its prompt comes first next time
                prefilling.appendleft(r)
                continue
            nxtpos[r] = prompt_l[r]  # the prefill's token
            first[r] = last[r] = t_end
            if gen_l[r] == 1:
                free += int(blocks[r])
                blocks[r] = 0
            else:
                new_dec.append(r)
        if new_dec:
            decoding = np.concatenate([decoding, np.asarray(new_dec, np.int64)])
        t = t_end
    a = np.array(its, dtype=float).reshape(-1, 8)
    return Simulation(a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4], a[:, 5], a[:, 6], a[:, 7],
                      first, last, energy, float(np.nanmax(last)), idle, held)


def repriced(sim: Simulation, costs: IterationCosts) -> tuple[np.ndarray, np.ndarray]:
    """(kernel J, launch-gap J) of each iteration of a simulated schedule priced by other
    costs of the same iteration times (another power): a schedule depends on the times
    alone, so these are the energies a simulation with `costs` would give."""
    tokens = (sim.it_prefill_tokens + sim.it_decode_tokens).tolist()
    priced = np.array([costs.cost_one(t, r, k) for t, r, k in
                       zip(tokens, sim.it_requests.tolist(), sim.it_keys.tolist())],
                      dtype=float).reshape(-1, 3)
    if not np.array_equal(priced[:, 0], sim.it_time_s):
        raise ValueError("repriced: these costs change the iterations' times")
    return priced[:, 1], priced[:, 2]
