"""The cost of one scheduler iteration, from the one pricing path.

An iteration of a continuous-batching engine packs T query tokens of R requests that read
K cached keys in all (paged attention over the gathered keys, K/V expanded to every
head). Its rows fall in three groups whose costs add up: the body (embedding,
projections, MLP, norms: a function of T), the attention and the K/V expansion (of T and
K), and the head (final norm, LM head on each request's last position, sampling, the
scheduler's host time per step and per request: of R). Each group is priced once on a
grid through `piep.predict.pricing` (iteration tables of the engine's model tree) and
interpolated in log-log space, so a simulator can ask for millions of iterations.

An iteration whose kernels would draw more than the boards' power limit is held at the
limit (`under_limit`): its energy is the limit's over its time. Its time stays as priced:
the serving profiles' time terms are fitted on measured iteration durations, which the
boards' clocks already held.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Mapping, NamedTuple

import numpy as np

from piep.core.layout import Deployment
from piep.predict.pricing import row_energies
from piep.predict.table import HEAD_KINDS, TableBuilder, iteration_table

ATTENTION_KINDS = ("attention", "sdpa_masked", "sdpa_paged", "kv_expand", "kv_gather")
STEP = 0.25  # grid step in log2


def _grid(top: float) -> np.ndarray:
    return 2.0 ** np.arange(0.0, np.log2(max(top, 2.0)) + STEP, STEP)


def grid_sizes(*, max_tokens: int, max_requests: int, max_keys: int) -> tuple[int, int, int]:
    """The points of each axis of a grid of these bounds (grids of equal sizes are
    equal: every axis starts at 1 and steps by STEP in log2)."""
    return len(_grid(max_tokens)), len(_grid(max_requests)), len(_grid(max_keys))


@dataclass(frozen=True)
class Curve:
    """Time and energy (kernels; launch gaps) of a row group on a log2 grid of its
    variables (one or two); of the kernels' energy, what collectives move and what
    ranks spend busy-waiting in them (the partition a batch prediction gives)."""
    x: np.ndarray                 # log2 of the first variable
    y: np.ndarray | None          # log2 of the second, or None
    time_s: np.ndarray
    kernel_j: np.ndarray
    gap_j: np.ndarray
    comm_j: np.ndarray            # of kernel_j: collective transfers
    wait_j: np.ndarray            # of kernel_j: busy-waiting in collectives


def held_share(time_s, kernel_j, gap_j, limit_w):
    """The share of iterations' energy (numbers or arrays) the power limit `limit_w` of
    all their boards leaves them: 1 where they draw no more, else the limit's energy over
    `time_s` over theirs (a continuous batch runs iterations back to back, so the
    short-window allowance of a lone phase does not apply)."""
    total = kernel_j + gap_j
    return np.minimum(1.0, limit_w * time_s / np.where(total > 0, total, 1.0))


def under_limit(time_s, kernel_j, gap_j, limit_w):
    """(kernel J, launch-gap J) of iterations held at the power limit (`held_share`)."""
    keep = held_share(time_s, kernel_j, gap_j, limit_w)
    return kernel_j * keep, gap_j * keep


@dataclass(frozen=True)
class IterationCosts:
    body: Curve      # of T
    attention: Curve  # of (T, K)
    head: Curve      # of R
    idle_power_w: float  # the GPUs when no request is in flight (all GPUs of the layout)
    out_of_range: bool
    limit_w: float = math.inf  # the power limit of all the layout's boards together
    out_of_range_kinds: tuple[str, ...] = ()  # the kinds of the rows out_of_range
    # the rows out of range: their group (0 body, 1 attention, 2 head), grid point along
    # the group's first and second axis, kind, and how far from the module samples
    # (`ModuleModels.reach`; `within` keeps those a stream read)
    far: tuple[np.ndarray, ...] = ()

    def within(self, sim, longest: float | None = None,
               allowance: Mapping[str, float] | None = None) -> "IterationCosts":
        """These costs naming as out of range only the kinds of the rows a simulation
        read (`_read`), and of those only the rows farther from the samples than
        `allowance` says for their kind (the farthest the replays an engine's band was
        sized on read, `farthest_read`; none: any). `longest`: unused (the paged costs'
        prompts)."""
        if not len(self.far):
            return self
        from piep.predict.table import KIND_NAMES
        kinds, reach = self.far[3:]
        read = self._read(sim)
        if allowance:
            read &= reach > np.array([allowance.get(n, 1.0) for n in KIND_NAMES])[kinds]
        named = tuple(sorted(set(KIND_NAMES[kinds[read]])))
        return replace(self, out_of_range=bool(named), out_of_range_kinds=named)

    def farthest_read(self, sim) -> dict[str, float]:
        """Per kind, how far from the module samples the farthest row a simulation read
        lies (`ModuleModels.reach`: above 1, out of range), for the kinds out of range."""
        if not len(self.far):
            return {}
        from piep.predict.table import KIND_NAMES
        kinds, reach = self.far[3:]
        read = self._read(sim)
        out: dict[str, float] = {}
        for kind, r in zip(KIND_NAMES[kinds[read]], reach[read]):
            out[kind] = max(out.get(kind, 0.0), float(r))
        return out

    def _read(self, sim) -> np.ndarray:
        """Which out-of-range rows (`far`) a simulation read: each iteration's corners of
        the cells its tokens, keys and requests fall in (what the interpolation reads;
        the attention's by tokens and keys together, so no point of more tokens than
        keys is counted)."""
        group, a, b = self.far[:3]
        tokens = sim.it_prefill_tokens + sim.it_decode_tokens
        nk = len(self.attention.y)

        def ends(values, axis):  # a cell's upper end is read only with a weight on it
            low, high, w = _corners(np.log2(np.maximum(np.asarray(values, float), 1.0)), axis)
            return low, np.where(w > 0, high, low)
        t, k, r = (ends(v, axis) for v, axis in (
            (tokens, self.body.x), (sim.it_keys, self.attention.y), (sim.it_requests, self.head.x)))
        pairs = np.concatenate([ti * nk + ki for ti in t for ki in k])
        return ((group == 0) & np.isin(a, np.concatenate(t))) \
            | ((group == 1) & np.isin(a * nk + b, pairs)) \
            | ((group == 2) & np.isin(a, np.concatenate(r)))

    @cached_property
    def _scalar(self) -> tuple:
        """log2 values as Python lists: one iteration at a time is priced with scalar math
        (a simulator asks for hundreds of thousands; a fit asks for arrays, not these)."""
        def logs(c):
            return [np.log2(np.maximum(getattr(c, f), 1e-30)).tolist()
                    for f in ("time_s", "kernel_j", "gap_j")]
        return logs(self.body), logs(self.attention), logs(self.head)

    @cached_property
    def _ends(self) -> tuple[dict, dict]:
        """Per token count met so far: the body's three values there, the attention's
        rows either side of it (its upper one None past the grid) and its weight on the
        upper; per request count, the head's three values (a stream meets few counts
        and many key counts)."""
        return {}, {}

    def cost_one(self, tokens: float, requests: float, keys: float) -> tuple[float, float, float]:
        """(time s, kernel energy J, launch-gap energy J) of one iteration."""
        by_tokens, by_requests = self._ends
        if (b := by_tokens.get(tokens)) is None:
            body, att, _ = self._scalar
            bt, bw, body_at = _line(body, *_cell(tokens, len(body[0])))
            b = by_tokens[tokens] = (body_at, [(a[bt], a[bt + 1] if bt + 1 < len(a) else None)
                                               for a in att], bw)
        if (head_at := by_requests.get(requests)) is None:
            head = self._scalar[2]
            head_at = by_requests[requests] = _line(head, *_cell(requests, len(head[0])))[2]
        body_at, rows, bw = b
        ak, kw = _cell(keys, len(rows[0][0]))
        last = ak + 1 == len(rows[0][0])  # clamped to the grid's last point
        out = []
        for (low, high), body_v, head_v in zip(rows, body_at, head_at):
            lo = low[ak] if last else low[ak] + (low[ak + 1] - low[ak]) * kw
            if high is not None:
                hi = high[ak] if last else high[ak] + (high[ak + 1] - high[ak]) * kw
                lo = lo + (hi - lo) * bw
            out.append(body_v + 2.0 ** lo + head_v)
        time_s, kernel_j, gap_j = out
        if kernel_j + gap_j > self.limit_w * time_s:  # (rare: skip the call otherwise)
            kernel_j, gap_j = (float(v) for v in under_limit(time_s, kernel_j, gap_j,
                                                             self.limit_w))
        return time_s, kernel_j, gap_j

    def cost(self, tokens, requests, keys) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(time s, kernel energy J, launch-gap energy J) of iterations (arrays)."""
        time_s, kernel_j, gap_j = self.fields(("time_s", "kernel_j", "gap_j"), tokens,
                                              requests, keys)
        return time_s, kernel_j, gap_j

    def fields(self, names: tuple[str, ...], tokens, requests, keys) -> list[np.ndarray]:
        """Fields of `Curve` (time_s, kernel_j...) of iterations, their groups added; the
        energies held at the power limit (`under_limit`: every energy field by the same
        share)."""
        lt, lr, lk = (np.log2(np.maximum(np.asarray(v, float), 1.0))
                      for v in (tokens, requests, keys))
        values = {f: self._sum(f, lt, lr, lk) for f in names}
        if any(f != "time_s" for f in names) and math.isfinite(self.limit_w):
            keep = held_share(*(values[f] if f in values else self._sum(f, lt, lr, lk)
                                for f in ("time_s", "kernel_j", "gap_j")), self.limit_w)
            values = {f: v if f == "time_s" else v * keep for f, v in values.items()}
        return [values[f] for f in names]

    def partition(self, tokens, requests, keys) -> tuple[np.ndarray, np.ndarray]:
        """(collective transfer J, busy-waiting J) of iterations: the parts of their
        kernel energy that are communication and wait (zero on one GPU), bounded by it."""
        kernel, comm, wait = self.fields(("kernel_j", "comm_j", "wait_j"), tokens, requests,
                                         keys)
        scale = np.minimum(1.0, kernel / np.maximum(comm + wait, 1e-300))
        return comm * scale, wait * scale

    def _sum(self, field: str, lt, lr, lk) -> np.ndarray:
        """A field of the three groups, interpolated and added (a field zero on a group's
        whole grid stays zero there)."""
        return sum(f(c, field, *a) if np.any(getattr(c, field)) else np.zeros_like(lt)
                   for f, c, a in ((_interp1, self.body, (lt,)),
                                   (_interp2, self.attention, (lt, lk)),
                                   (_interp1, self.head, (lr,))))


def _line(fields: list[list[float]], i: int, w: float) -> tuple[int, float, list[float]]:
    """A cell of a one-variable curve's log2 fields, its weight, and each field's value
    there (linear in log2 between the cell's ends)."""
    return i, w, [2.0 ** ((v[i] + (v[i + 1] - v[i]) * w if w else v[i]) if i + 1 < len(v)
                          else v[i]) for v in fields]


def _cell(value: float, n: int) -> tuple[int, float]:
    """Grid cell and weight of a value on the log2 grid 0, STEP, 2 STEP... (n points),
    clamped at both ends."""
    f = math.log2(value) / STEP if value > 1.0 else 0.0
    i = int(f)
    if i >= n - 1:
        return n - 1, 0.0
    return i, f - i


def _log2(v: np.ndarray) -> np.ndarray:
    """log2 of a curve's values, zero held at 1e-30."""
    return np.log2(np.maximum(v, 1e-30))


def _interp1(c: Curve, field: str, x: np.ndarray) -> np.ndarray:
    return np.exp2(np.interp(x, c.x, _log2(getattr(c, field))))


def _corners(x: np.ndarray, axis: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The grid points either side of each value of `x` on `axis` (clamped) and its
    weight on the upper one."""
    xi = np.clip(np.interp(x, axis, np.arange(len(axis))), 0, len(axis) - 1)
    x0 = np.floor(xi).astype(int)
    return x0, np.minimum(x0 + 1, len(axis) - 1), xi - x0


def _interp2(c: Curve, field: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bilinear in (log2 x, log2 y) of log2 values, clamped to the grid."""
    v = _log2(getattr(c, field))
    (x0, x1, fx), (y0, y1, fy) = _corners(x, c.x), _corners(y, c.y)
    return _blend(v[x0, y0], v[x0, y1], v[x1, y0], v[x1, y1], fx, fy)


def _blend(v00, v01, v10, v11, fx, fy) -> np.ndarray:
    """Bilinear between four corners' log2 values (first index x, second y)."""
    top = v00 * (1 - fy) + v01 * fy
    bottom = v10 * (1 - fy) + v11 * fy
    return np.exp2(top * (1 - fx) + bottom * fx)


@dataclass(eq=False)  # one grid is one object: hashed and compared by identity
class IterationGrid:
    """The three row groups' iteration tables on their grids, built once per (model,
    layout, engine); `costs(model)` prices them (re-pricing with other host terms reuses
    the module models' outputs)."""
    dep: Deployment
    tables: tuple                 # body, attention, head: (table, rows of the group, shape)
    cache: dict = None  # computed once per grid: the module models' outputs, groups' rows

    @classmethod
    def build(cls, dep: Deployment, *, max_tokens: int, max_requests: int,
              max_keys: int) -> "IterationGrid":
        builder = TableBuilder()
        t_grid, r_grid, k_grid = _grid(max_tokens), _grid(max_requests), _grid(max_keys)
        tt, kk = np.meshgrid(t_grid, k_grid, indexing="ij")
        kinds = lambda t, names: np.isin(t.kind, names)  # noqa: E731
        body = iteration_table(builder, dep, t_grid, np.ones_like(t_grid), t_grid)
        att = iteration_table(builder, dep, tt.ravel(), np.ones(tt.size), kk.ravel())
        head = iteration_table(builder, dep, r_grid, r_grid, r_grid)
        idle = iteration_table(builder, dep, np.ones(1), np.ones(1), np.ones(1))
        return cls(dep, ((body, ~kinds(body, HEAD_KINDS + ATTENTION_KINDS),
                          (np.log2(t_grid), None)),
                         (att, kinds(att, ATTENTION_KINDS), (np.log2(t_grid), np.log2(k_grid))),
                         (head, kinds(head, HEAD_KINDS), (np.log2(r_grid), None)),
                         (idle, None, None)), {})

    def on_host(self, probe_s: float | None) -> "IterationGrid":
        """The same iterations with a host of launch probe `probe_s` (None: unknown) in
        their deployments; the module models' outputs are shared (the host does not change
        them)."""
        if probe_s == self.dep.host_probe_s:
            return self
        dep = replace(self.dep, host_probe_s=probe_s)
        tables = tuple((replace(t, deps=[dep] * len(t.deps)), sel, axes)
                       for t, sel, axes in self.tables)
        return IterationGrid(dep, tables, self.cache)

    def costs(self, model, *, time_only: bool = False,
              points: tuple[np.ndarray, ...] | None = None) -> IterationCosts:
        """The iterations priced by `model`; `time_only`: their times alone, every energy
        zero (what a fit of time terms reads); `points`: per row group, the grid points
        to price (`read_points`; the others are zero), for iterations known in advance."""
        curves, far, where = [], set(), []
        for i, (table, sel, axes) in enumerate(self.tables[:3]):
            idx = None if points is None else points[i]
            part, mo, group, kept = self._part(model, i, idx)
            prices = model.price(part) if mo is None else model.price(part, mo)
            t = _elapsed_s(part, prices)
            if idx is None:
                rows, cfg = self._selected(i)  # the group's rows, in table order
            else:
                rows = np.flatnonzero(group)
                cfg = part.cfg[rows]
            n = len(part.deps)
            if time_only:
                per = [np.bincount(cfg, weights=t[rows], minlength=n)] \
                    + [np.zeros(n)] * 4
            else:
                per = [np.bincount(cfg, weights=v[rows], minlength=n)
                       for v in (t, *_row_energies(part, prices))]
            if idx is not None:  # the points' sums on the whole grid
                per = [np.bincount(idx, weights=v, minlength=len(table.deps)) for v in per]
            if axes[1] is not None:
                per = [v.reshape(len(axes[0]), len(axes[1])) for v in per]
            curves.append(Curve(axes[0], axes[1], *per))
            out = np.flatnonzero(prices.out_of_range & group)
            far.update(part.kind[out])
            point = part.cfg[out] if idx is None else idx[part.cfg[out]]
            a, b = divmod(point, len(axes[1])) if axes[1] is not None else (point, 0 * point)
            reach = np.full(len(out), np.inf) if mo is None else \
                self._reach(model, i)[out if kept is None else kept[out]]
            where.append((np.full(len(out), i), a, b, part.kind_id[out], reach))
        idle_w = 0.0 if time_only else \
            self._price(model, 3).idle_w * self.dep.parallel.world_size
        return IterationCosts(*curves, idle_w, bool(far), self.limit_w, tuple(sorted(far)),
                              tuple(np.concatenate(c) for c in zip(*where)))

    @property
    def limit_w(self) -> float:
        """The power limit of all the deployment's boards together."""
        return self.dep.gpu.max_power_w * self.dep.parallel.world_size

    def read_points(self, tokens, requests, keys) -> tuple[np.ndarray, ...]:
        """Per row group, the grid points the costs of these iterations read (a few
        more: a point each side), for `costs(points=...)`."""
        (tx, _), (_, kx), (rx, _) = (axes for _, _, axes in self.tables[:3])

        def near(values, axis):  # the cells around each value's (`_cell`), each side one
            f = np.floor(np.log2(np.maximum(np.asarray(values, float), 1.0)) / STEP)
            return [np.clip(f + d, 0, len(axis) - 1).astype(int) for d in (-1, 0, 1, 2)]
        ts, ks = near(tokens, tx), near(keys, kx)
        pairs = [a * len(kx) + b for a in ts for b in ks]
        return (np.unique(np.concatenate(ts)), np.unique(np.concatenate(pairs)),
                np.unique(np.concatenate(near(requests, rx))))

    def part(self, model, i: int, points: np.ndarray | None = None):
        """Table `i` to price for the grid points `points` (ascending; None: all), its
        module outputs (a learned predictor's; else None) and which of its rows are the
        group's. A learned predictor's row prices read no other row (unless its host
        queues ahead): of the points' rows only the group's are kept."""
        return self._part(model, i, points)[:3]

    def _part(self, model, i: int, points: np.ndarray | None = None):
        """`part`, and the rows of the whole table it keeps (None: every row)."""
        from piep.predict.learned import LearnedModel
        from piep.predict.table import select, take_rows
        table, sel, _ = self.tables[i]
        learned = isinstance(model, LearnedModel)
        mo = self.module_outputs(model, i) if learned else None
        if points is None:
            return table, mo, sel, None
        rows = np.isin(table.cfg, points)  # the points' rows, in table order
        keep = sel[rows] if learned and not model.host.queue_ahead \
            else np.ones(int(rows.sum()), bool)
        kept = np.flatnonzero(rows)[keep]
        if mo is not None:
            mo = mo.take(kept)
        return take_rows(select(table, points), keep), mo, sel[rows][keep], kept

    def _selected(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows of table `i`'s group and their deployments (their sums add the same
        numbers in the same order as over every row with the others zeroed)."""
        key = ("rows", i)
        if key not in self.cache:
            table, sel, _ = self.tables[i]
            rows = np.flatnonzero(sel)
            self.cache[key] = (rows, table.cfg[rows])
        return self.cache[key]

    def _price(self, model, i: int):
        part, mo, _ = self.part(model, i)
        return model.price(part) if mo is None else model.price(part, mo)

    def _reach(self, model, i: int) -> np.ndarray:
        """Per row of table `i`, how far it lies from its module samples over the
        out-of-range threshold (`ModuleModels.reach`; 0 on rows within it), computed once
        per predictor's module models."""
        key = ("reach", i, model.modules)
        if key not in self.cache:
            far = np.flatnonzero(self.module_outputs(model, i).out_of_range)
            reach = np.zeros(len(self.tables[i][0].kind_id))
            reach[far] = model.modules.reach(self.tables[i][0], model.gpu, far)
            self.cache[key] = reach
        return self.cache[key]

    def module_outputs(self, model, i: int):
        """The module models' outputs for table `i` (computed once per predictor: one grid
        may be priced by several)."""
        key = (i, model.modules)
        if key not in self.cache:
            self.cache[key] = model.modules.predict(self.tables[i][0], model.gpu)
        return self.cache[key]


def _row_energies(table, prices) -> tuple[np.ndarray, ...]:
    """Per row, on every GPU that runs it: (kernel J, launch-gap J, collective transfer J
    and busy-waiting J of the kernels'). An iteration alone: how the board holds its limit
    depends on the trace, so no limit here."""
    weight = prices.alpha * (table.tp * table.dp)[table.cfg]
    e_run, e_gap, e_wait = row_energies(table, prices)
    return (weight * (e_run + e_wait), weight * e_gap,
            weight * np.where(table.is_comm, e_run, 0.0), weight * e_wait)


def _elapsed_s(table, prices) -> np.ndarray:
    """Per row: the time its calls hold the GPU (kernels, launch gaps, waits)."""
    return table.count * (prices.time_s + prices.gap_s + prices.wait_s)


class _Read(NamedTuple):
    """Iterations on one grid, as `IterationTimes` reads them."""
    grid: int  # among the distinct grids
    log_tokens: np.ndarray
    log_requests: np.ndarray
    corners: list[np.ndarray]  # the attention corners, as positions among its grid's points
    weights: tuple[np.ndarray, np.ndarray]  # on the upper corners (tokens, keys)


class IterationTimes:
    """The times of given iterations on several grids (a fit's logged iterations of many
    replays), equal to the bit to each grid's `costs(model, time_only=True)` at them
    (iteration times are positive), for a fraction of the work: each distinct grid is
    priced once for every item on it (replays of one shape share theirs), of its
    attention grid only the points its items' interpolation reads, the rows of every
    grid's groups are stacked in one leaf table priced in one pass (a fit re-prices them
    at every step; a row's price reads no other row's but where the host queues ahead),
    and the interpolation runs once per grid over its items' iterations. Learned
    predictors only (their module outputs are computed once per grid)."""

    def __init__(self, items: list[tuple[IterationGrid, np.ndarray, np.ndarray, np.ndarray]]):
        index: dict[IterationGrid, int] = {}  # a grid -> its place among the distinct grids
        reads = []
        for grid, q, n, k in items:
            g = index.setdefault(grid, len(index))
            (tx, _), (_, kx), _ = (axes for _, _, axes in grid.tables[:3])
            lt, lr, lk = (np.log2(np.maximum(np.asarray(v, float), 1.0)) for v in (q, n, k))
            (x0, x1, fx), (y0, y1, fy) = _corners(lt, tx), _corners(lk, kx)
            reads.append((g, lt, lr, [a * len(kx) + b for a in (x0, x1) for b in (y0, y1)],
                          (fx, fy)))
        self.grids: list[tuple[IterationGrid, tuple[np.ndarray, ...]]] = []
        for g, grid in enumerate(index):  # per group, the grid points priced
            (tx, _), _, (rx, _) = (axes for _, _, axes in grid.tables[:3])
            read = np.unique(np.concatenate([c for r in reads if r[0] == g for c in r[3]]))
            self.grids.append((grid, (np.arange(len(tx)), read, np.arange(len(rx)))))
        self.items = [_Read(g, lt, lr, [np.searchsorted(self.grids[g][1][1], c) for c in cs], w)
                      for g, lt, lr, cs, w in reads]
        sizes = [len(it.log_tokens) for it in self.items]
        self._splits = np.cumsum(sizes)[:-1]
        # where each item's iterations lie among every item's (`split`)
        self.spans = list(zip(np.concatenate([[0], self._splits]), np.cumsum(sizes)))
        self._weights = [np.concatenate([it.weights[i] for it in self.items]) for i in (0, 1)]
        # per grid: where its items' iterations lie among all, their tokens and requests
        at = np.split(np.arange(sum(sizes)), self._splits)
        self._on_grid = []
        for g in range(len(self.grids)):
            mine = [j for j, it in enumerate(self.items) if it.grid == g]
            self._on_grid.append((np.concatenate([at[j] for j in mine]),
                                  np.concatenate([self.items[j].log_tokens for j in mine]),
                                  np.concatenate([self.items[j].log_requests for j in mine])))
        # per item, the attention points it reads (a group zero on all of them adds zero)
        own = [np.unique(np.concatenate(it.corners)) for it in self.items]
        self._own = (np.concatenate(own), np.repeat([it.grid for it in self.items],
                                                    [len(o) for o in own]),
                     np.cumsum([0] + [len(o) for o in own])[:-1], np.asarray(sizes))
        self._stacked: dict[tuple, tuple] = {}
        # each iteration's boards' power limit (its grid's)
        self._limits_w = np.repeat([self.grids[it.grid][0].limit_w for it in self.items], sizes)

    def _stack(self, model):
        """The rows to price of every grid and group, as one table, its module outputs,
        the rows of the groups (in table order), where each (grid, group) starts among the
        stack's deployments, each iteration's attention corners among them, and its
        body's and head's reads (`_Lines`)."""
        from piep.predict.module_models import ModuleOutputs
        from piep.predict.table import concat
        key = (model.modules, model.host.queue_ahead)
        if key not in self._stacked:
            parts, outs, group = [], [], []
            for grid, points in self.grids:
                for i, idx in enumerate(points):
                    part, mo, sel = grid.part(model, i, idx)
                    parts.append(part)
                    outs.append(mo)
                    group.append(sel)
            starts = np.cumsum([0] + [len(p.deps) for p in parts])
            corners = [np.concatenate([starts[3 * it.grid + 1] + it.corners[c]
                                       for it in self.items]) for c in range(4)]
            self._stacked[key] = (concat(parts), ModuleOutputs.concat(outs),
                                  np.flatnonzero(np.concatenate(group)), starts, corners,
                                  [self._lines(starts, g) for g in (0, 2)])
        return self._stacked[key]

    def _lines(self, starts: np.ndarray, group: int) -> "_Lines":
        """Where every iteration reads group `group` (body 0: of its tokens; head 2: of its
        requests) among the stack's deployments, as `np.interp` reads a grid's values;
        each distinct value of a grid is read once."""
        parts = []  # per grid: its reads (lower, upper, offset, width, its (grid, group))
        read = np.zeros(len(self._weights[0]), int)  # each iteration's, among the reads
        for g, (grid, _) in enumerate(self.grids):
            at, tokens, requests = self._on_grid[g]
            x, inverse = np.unique(tokens if group == 0 else requests, return_inverse=True)
            read[at] = inverse + sum(len(p[0]) for p in parts)  # after the grids' before
            lo, hi, offset, width = interp_reads(x, grid.tables[group][2][0])
            start = starts[3 * g + group]
            parts.append((start + lo, start + hi, offset, width, np.full(len(x), 3 * g + group)))
        return _Lines(*(np.concatenate(v) for v in zip(*parts)), read)

    def times(self, model) -> list[np.ndarray]:
        """Each item's iteration times (s) priced by `model`."""
        stacked, mo, rows, *read = self._stack(model)
        t = _elapsed_s(stacked, model.price(stacked, mo))
        return self.split(self._at_iterations([t], stacked, rows, *read)[0])

    def costs(self, model) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """Each item's (iteration times s, kernel J, launch-gap J) priced by `model`, as
        its grid's `costs(model).cost` gives them (to rounding)."""
        t, kernel, gap = (self.split(v) for v in self.all_costs(model))
        return t, kernel, gap

    def all_costs(self, model) -> np.ndarray:
        """`costs` of every item's iterations, one after another (`spans`: each item's): a
        row each of times, kernel J and launch-gap J."""
        stacked, mo, rows, *read = self._stack(model)
        prices = model.price(stacked, mo)
        kernel_e, gap_e, _, _ = _row_energies(stacked, prices)
        out = self._at_iterations([_elapsed_s(stacked, prices), kernel_e, gap_e], stacked,
                                  rows, *read)
        out[1], out[2] = under_limit(*out, self._limits_w)
        return out

    def split(self, values: np.ndarray) -> list[np.ndarray]:
        """Values of every item's iterations, one after another, as each item's."""
        return [values[a:b] for a, b in self.spans]

    def _at_iterations(self, per_row: list[np.ndarray], stacked, rows, starts, corners,
                       lines) -> np.ndarray:
        """Values of the stack's rows (one array per field) summed per grid point,
        interpolated at every item's iterations (one after another) and their groups
        added (a group zero on all its points adds zero): a row per field."""
        raw = np.stack([np.bincount(stacked.cfg[rows], weights=v[rows],
                                    minlength=int(starts[-1])) for v in per_row])
        v = _log2(raw)
        nonzero = np.logical_or.reduceat(raw != 0, starts[:-1], axis=1)
        body, head = (ln.at(v, nonzero) for ln in lines)
        att = _blend(*(np.take(v, c, axis=1) for c in corners), *self._weights)
        points, grid_of, first, sizes = self._own
        read = np.logical_or.reduceat(np.take(raw, starts[3 * grid_of + 1] + points, axis=1)
                                      != 0, first, axis=1)
        if not read.all():
            att = np.where(np.repeat(~read, sizes, axis=1), 0.0, att)
        # as `IterationCosts.fields` adds its groups: body, attention, head
        return body + att + head


def interp_reads(x: np.ndarray, axis: np.ndarray) -> tuple[np.ndarray, ...]:
    """How `np.interp(x, axis, v)` reads any values `v` on the points `axis` (ascending),
    so that (v[hi] - v[lo]) / width * offset + v[lo] is its answer to the bit: the points
    either side of each x, its offset from the lower, their distance; at a point or past
    an end, numpy returns that point's value (lo = hi, offset 0, width 1)."""
    lo = np.clip(np.searchsorted(axis, x, side="right") - 1, 0, len(axis) - 1)
    inside = (lo < len(axis) - 1) & (axis[lo] != x) & (x > axis[0])
    hi = np.where(inside, lo + 1, lo)
    return lo, hi, np.where(inside, x - axis[lo], 0.0), np.where(inside, axis[hi] - axis[lo],
                                                                   1.0)


class _Lines(NamedTuple):
    """Linear reads of a one-variable group's log2 values, each what `np.interp` gives to
    the bit: the lower and upper points (the same point where numpy returns a point's
    value: at it, or past an end), the offset from the lower, the points' distance."""
    lo: np.ndarray
    hi: np.ndarray
    offset: np.ndarray
    width: np.ndarray
    group: np.ndarray  # the (grid, group) each reads, as 3 * grid + group
    read: np.ndarray   # per iteration, the read it takes

    def at(self, v: np.ndarray, nonzero: np.ndarray) -> np.ndarray:
        """2 to the values read (`v`: a row per field, a column per stack deployment), at
        every iteration; zero where its (grid, group) is zero on all its points
        (`nonzero`: a row per field, a column per (grid, group))."""
        low = np.take(v, self.lo, axis=1)
        out = np.exp2((np.take(v, self.hi, axis=1) - low) / self.width * self.offset + low)
        if not nonzero.all():
            out = np.where(np.take(nonzero, self.group, axis=1), out, 0.0)
        return np.take(out, self.read, axis=1)
