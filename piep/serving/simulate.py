"""An iteration-level simulator of a continuous-batching scheduler.

The policy is transformers' FIFO scheduler (`hf-cb`), parameterized: each iteration
first gives every decoding request one token, then prefills (the partly prefilled first,
then the waiting in arrival order) within a token budget, splitting a prompt that does
not fit across iterations; a request needs KV blocks for what it holds, and no new
prefill starts while the free blocks are below a safety margin (the first scheduled one
excepted). Iterations run back to back while requests are in flight; the GPUs idle
between the last token in flight and the next arrival. Time advances by each
iteration's priced cost (`piep.serving.costs`). Iterations that only decode run several
at once where nothing can change the batch between them (the same iterations, to the
bit, as one at a time). With `preempt` (vLLM), a decoding request that needs a block when
none is free takes the blocks of the last request scheduled, which recomputes its prompt
and tokens so far when it is scheduled again. Costs that read prefills apart
(`reads_prefill`) are told each iteration's decoding requests, the keys its prompt chunks
read and their query-key pairs.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from piep.core.errors import ConfigError
from piep.serving.costs import IterationCosts
from piep.core.trace import Trace


DECODE_RUN = 4  # decode-only iterations run at once from this many (fewer: one at a time)
MANY_SHARES = 16  # ... whose energies are added to their requests' as one array from this many


@dataclass(frozen=True, kw_only=True)
class SchedulerPolicy:
    """A continuous-batching policy (transformers' defaults for hf-cb)."""
    block_size: int = 256
    num_blocks: int = 3051               # KV blocks (measured on H200 for llama-3-8b)
    max_batch_tokens: int = 8192         # token budget of one iteration
    max_requests_per_batch: int = 1024
    safety_margin: float = 0.15          # share of blocks kept free from new prefills
    # a decoding request short of a KV block takes one from the last one scheduled, which
    # goes back to the head of the queue and recomputes its tokens (vLLM's preemption);
    # without it, it waits for a block (transformers' continuous batching)
    preempt: bool = False
    # an idle engine forms its next batch this long after a request arrives (its loop's
    # wake-up); what arrives meanwhile joins that batch (hf-cb: from its iteration logs)
    pickup_s: float = 0.0

    def __post_init__(self) -> None:
        for key in ("block_size", "num_blocks", "max_batch_tokens", "max_requests_per_batch"):
            if int(getattr(self, key)) < 1:
                raise ConfigError(f"scheduler {key}={getattr(self, key)!r} must be >= 1")
        if not self.pickup_s >= 0.0:
            raise ConfigError(f"scheduler pickup_s={self.pickup_s!r} must be >= 0 seconds")


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
    preempted: int = 0          # requests preempted (their tokens recomputed)


class _Decoding:
    """The decoding requests in scheduling order, each with its next position to feed
    (prompt + generated - 1), the position that opens its next KV block (its blocks x
    block size), the position at which it has generated all (prompt + gen - 1) and its
    energy so far: rows in that order, filled to `n` (an iteration updates their head in
    place through the columns' views)."""

    def __init__(self, capacity: int, block_size: int):
        self.n, self.block_size = 0, block_size
        self.rows = np.zeros((capacity, 4), np.int64)  # id, pos, edge, stop
        self.pos, self.edge, self.stop = self.rows[:, 1], self.rows[:, 2], self.rows[:, 3]
        self.energy = np.zeros(capacity)

    def add(self, rows: list[tuple[int, int, int, int]], energy: list[float]) -> None:
        a, b = self.n, self.n + len(rows)
        self.rows[a:b], self.energy[a:b] = rows, energy
        self.n = b

    def remove(self, at: np.ndarray) -> tuple[list[int], list[float], int]:
        """Drop the requests at positions `at` (ascending; the others keep their order);
        their ids and energies, and the KV blocks they held."""
        n = self.n
        if len(at) <= 4:  # (the usual case: shift the rows after each, the last first)
            ids, energy, edges = [], [], 0
            for i in reversed(at.tolist()):
                rid, _, edge, _ = self.rows[i].tolist()
                ids.append(rid)
                energy.append(self.energy.item(i))
                edges += edge
                self.rows[i:n - 1] = self.rows[i + 1:n]
                self.energy[i:n - 1] = self.energy[i + 1:n]
                n -= 1
        else:
            rows, energy = self.rows[at], self.energy[at].tolist()
            ids, edges = rows[:, 0].tolist(), int(rows[:, 2].sum())
            keep = np.ones(n, bool)
            keep[at] = False
            n -= len(at)
            self.rows[:n], self.energy[:n] = self.rows[:self.n][keep], self.energy[:self.n][keep]
        self.n = n
        return ids, energy, edges // self.block_size

    def preempt_last(self) -> tuple[int, int, int, float]:
        """The last request in the order leaves: its id, next position to feed, KV blocks
        and energy so far."""
        i = self.n - 1
        rid, pos, edge, _ = self.rows[i].tolist()
        self.n = i
        return rid, pos, edge // self.block_size, self.energy.item(i)

    def finish(self, head: int, sel: np.ndarray | None, t_end: float, last: np.ndarray,
               energy: np.ndarray) -> int:
        """The requests of the head of the order (`sel`: those of it that decoded, None:
        all) that made their last token in an iteration ending at `t_end` leave (their
        last time and energy written); the KV blocks they free."""
        done = self.pos[:head] >= self.stop[:head] if sel is None \
            else self.pos[sel] >= self.stop[sel]
        if not np.count_nonzero(done):
            return 0
        ids, spent, freed = self.remove(done.nonzero()[0] if sel is None else sel[done])
        for r, e in zip(ids, spent):
            last[r], energy[r] = t_end, e
        return freed

    def decode_alone(self, t: float, free: int, arrival_s: float, cost, its: list,
                     at_least: int) -> tuple[int, float, int]:
        """Iterations of every decoding request and nothing else (no prompt waits), from
        `t` back to back, as the scheduler runs them one at a time: up to the one in which
        a request makes its last token, and before one that would start at or after the
        next arrival (`arrival_s`) or open more KV blocks than are free. Each is appended
        to `its`; (iterations run, the time after them, free blocks), none where fewer
        than `at_least` could run."""
        n, bs = self.n, self.block_size
        pos = self.pos[:n]
        runs = int((self.stop[:n] - pos).min())  # the first request ends in the last
        if runs < at_least:
            return 0, t, free
        # the iterations (from 0) in which each opens a block: then every block size
        first = self.edge[:n] - pos
        at, opening = first[first < runs], []
        while len(at):
            opening.append(at)
            at = at[at + bs < runs] + bs
        if opening:
            opened = np.cumsum(np.bincount(np.concatenate(opening), minlength=runs))
            if opened[-1] > free:  # from that iteration on, some would wait for a block
                runs = int(np.argmax(opened > free))
                if runs < at_least:
                    return 0, t, free
        keys = int(np.add.reduce(pos)) + n
        ran, shares = 0, []  # (each iteration's energy a request, added once at the end)
        while ran < runs and (not ran or t < arrival_s):
            dt, e_k, e_g = cost(n, n, keys)
            its.append((t, dt, 0, n, n, keys, e_k, e_g))
            shares.append((e_k + e_g) / n)
            t += dt
            keys += n
            ran += 1
        spent = self.energy[:n]
        if ran < MANY_SHARES:
            for share in shares:
                spent += share
        else:  # the same additions in the same order (a cumulative sum adds left to right)
            spent[:] = np.cumsum(np.column_stack([spent, np.tile(shares, (n, 1))]),
                                 axis=1)[:, -1]
        pos += ran
        if opening:
            self.edge[:n] += np.where(first < ran, 1 + (ran - 1 - first) // bs, 0) * bs
            free -= int(opened[ran - 1])
        return ran, t, free


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
    blocks = [0] * n                       # KV blocks held while prefilling
    first = np.full(n, np.nan)
    last = np.full(n, np.nan)
    energy = np.zeros(n)                   # until decoding (then `decoding.energy`)
    free = policy.num_blocks
    margin = policy.safety_margin * policy.num_blocks
    decoding = _Decoding(n, bs)
    prefilling: deque[int] = deque()       # partly prefilled
    waiting: deque[int] = deque()
    nxt = 0
    pickup = policy.pickup_s
    # the window opens at 0; an idle engine starts `pickup` after the first arrival
    t = idle = arrival_l[0] + pickup if n and pickup else 0.0
    held = 0
    its: list[tuple] = []
    cost = costs.cost_one
    apart = getattr(costs, "reads_prefill", False)
    recomputed: set[int] = set()  # preempted requests: their first token already came
    preempted = 0
    while True:
        while nxt < n and arrival_l[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        if not decoding.n and not prefilling and not waiting:
            if nxt >= n:
                break
            idle += arrival_l[nxt] + pickup - t
            t = arrival_l[nxt] + pickup
            continue
        # decoding requests: one token each (their next position may open a block), the
        # head of the order (`sel`: those of it with a block, where some have none)
        budget = policy.max_batch_tokens
        req_budget = policy.max_requests_per_batch
        head = min(decoding.n, budget, req_budget)
        if head == decoding.n and not prefilling and not waiting:
            # decoding alone until a request ends or arrives, or blocks run short: several
            # iterations at once where several can run (the same iterations)
            ran, t, free = decoding.decode_alone(t, free, arrival_l[nxt] if nxt < n
                                                 else math.inf, cost, its, DECODE_RUN)
            if ran:
                free += decoding.finish(head, None, t, last, energy)
                continue
        pos = decoding.pos[:head]
        opens = pos >= decoding.edge[:head]  # the position opens a block (never past one)
        n_open = int(np.count_nonzero(opens))
        while policy.preempt and n_open > free and decoding.n > 1:
            # the last request scheduled gives its blocks back and waits to recompute
            r, p_r, blocks_r, spent = decoding.preempt_last()
            free += blocks_r
            preempted += 1
            recomputed.add(r)
            # its prompt and every token so far are prefilled again; it stops where it did
            gen_l[r] = prompt_l[r] + gen_l[r] - p_r - 1
            prompt_l[r], done_prefill[r], blocks[r], energy[r] = p_r + 1, 0, 0, spent
            waiting.appendleft(r)
            head = min(head, decoding.n)
            pos = decoding.pos[:head]
            opens = pos >= decoding.edge[:head]
            n_open = int(np.count_nonzero(opens))
        sel = None
        if n_open > free:  # no block for some: they wait this iteration
            sel = np.flatnonzero(np.cumsum(opens) <= free)
            pos, opens = pos[sel], opens[sel]
            n_open = int(np.count_nonzero(opens))
        if n_open:
            if sel is None:
                decoding.edge[:head] += opens * bs
            else:
                decoding.edge[sel[opens]] += bs
            free -= n_open
        n_dec = head if sel is None else len(sel)
        budget -= n_dec
        req_budget -= n_dec
        keys = int(np.add.reduce(pos)) + n_dec  # (the cheapest exact sum of a few)
        chunks: list[tuple[int, int]] = []
        n_pre = 0  # their tokens
        pre_keys = pairs = 0  # the keys their attention reads, its query-key pairs
        for queue in (prefilling, waiting):
            while queue and budget > 0 and req_budget > 0:
                if free < margin and (n_dec or chunks):
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
                pre_keys += done_prefill[r] + take
                pairs += take * done_prefill[r] + take * (take + 1) // 2
            if budget <= 0 or req_budget <= 0:
                break
        tokens = n_dec + n_pre
        if tokens == 0:  # nothing fits: memory holds everything back (cannot progress)
            if decoding.n:  # every block held by decoding requests that each need one more
                fit = policy.num_blocks // int(need_blocks.max())
                raise ConfigError(f"the KV cache ({policy.num_blocks} blocks of {bs} tokens) "
                                  f"fills with {decoding.n} decoding requests that each need "
                                  f"one more block: the scheduler stalls (it preempts "
                                  f"nothing); at most {fit} of the longest requests fit at "
                                  f"once: lower the batch or the lengths")
            raise ConfigError("the KV cache cannot hold the next request's prompt: raise "
                              "the cache's blocks or shorten the prompts")
        requests = n_dec + len(chunks)
        dt, e_k, e_g = cost(tokens, requests, keys, n_dec, pre_keys, pairs) if apart \
            else cost(tokens, requests, keys)
        t_end = t + dt
        share = (e_k + e_g) / tokens
        its.append((t, dt, n_pre, n_dec, requests, keys, e_k, e_g))
        # the decoding requests got their token
        if n_dec:
            if sel is None:
                pos += 1
                decoding.energy[:head] += share
            else:
                decoding.pos[sel] += 1
                decoding.energy[sel] += share
            # (a request's last token is its last time: set when it ends)
            free += decoding.finish(head, sel, t_end, last, energy)
        new, new_j = [], []  # decoding from the next iteration on
        for r, take in chunks:
            done_prefill[r] += take
            energy[r] += share * take
            if done_prefill[r] < prompt_l[r]:  # the rest of its prompt comes first next time
                prefilling.appendleft(r)
                continue
            if r not in recomputed:
                first[r] = t_end
            last[r] = t_end
            if gen_l[r] == 1:
                free += blocks[r]
            else:  # its next position: the prefill's token
                new.append((r, prompt_l[r], blocks[r] * bs, prompt_l[r] + gen_l[r] - 1))
                new_j.append(energy[r])
            blocks[r] = 0
        if new:
            decoding.add(new, new_j)
        t = t_end
    a = np.array(its, dtype=float).reshape(-1, 8)
    return Simulation(a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4], a[:, 5], a[:, 6], a[:, 7],
                      first, last, energy, float(np.nanmax(last)), idle, held, preempted)


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
