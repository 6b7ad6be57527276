"""The cost of one scheduler iteration, from the one pricing path.

An iteration of a continuous-batching engine packs T query tokens of R requests that read
K cached keys in all (paged attention over the gathered keys, K/V expanded to every
head). Its rows fall in three groups whose costs add up: the body (embedding,
projections, MLP, norms: a function of T), the attention and the K/V expansion (of T and
K), and the head (final norm, LM head on each request's last position, sampling, the
scheduler's host time per step and per request: of R). Each group is priced once on a
grid through `piep.predict.pricing` (iteration tables of the engine's model tree) and
interpolated in log-log space, so a simulator can ask for millions of iterations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from piep.layout import Deployment
from piep.predict.pricing import row_energies
from piep.predict.table import HEAD_KINDS, TableBuilder, iteration_table

ATTENTION_KINDS = ("attention", "sdpa_masked", "kv_expand", "kv_gather")
STEP = 0.25  # grid step in log2


def _grid(top: float) -> np.ndarray:
    return 2.0 ** np.arange(0.0, np.log2(max(top, 2.0)) + STEP, STEP)


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


@dataclass(frozen=True)
class IterationCosts:
    body: Curve      # of T
    attention: Curve  # of (T, K)
    head: Curve      # of R
    idle_power_w: float  # the GPUs when no request is in flight (all GPUs of the layout)
    out_of_range: bool

    @cached_property
    def _scalar(self) -> tuple:
        """log2 values as Python lists: one iteration at a time is priced with scalar math
        (a simulator asks for hundreds of thousands; a fit asks for arrays, not these)."""
        def logs(c):
            return [np.log2(np.maximum(getattr(c, f), 1e-30)).tolist()
                    for f in ("time_s", "kernel_j", "gap_j")]
        return logs(self.body), logs(self.attention), logs(self.head)

    def cost_one(self, tokens: float, requests: float, keys: float) -> tuple[float, float, float]:
        """(time s, kernel energy J, launch-gap energy J) of one iteration."""
        body, att, head = self._scalar
        bt, bw = _cell(tokens, len(body[0]))
        hr, hw = _cell(requests, len(head[0]))
        ak, kw = _cell(keys, len(att[0][0]))
        out = []
        for f in range(3):
            b, a, h = body[f], att[f], head[f]
            v = (b[bt] + (b[bt + 1] - b[bt]) * bw if bw else b[bt]) if bt + 1 < len(b) \
                else b[bt]
            lo = a[bt][ak] + (a[bt][ak + 1] - a[bt][ak]) * kw if ak + 1 < len(a[bt]) \
                else a[bt][ak]
            if bt + 1 < len(a):
                hi = a[bt + 1][ak] + (a[bt + 1][ak + 1] - a[bt + 1][ak]) * kw \
                    if ak + 1 < len(a[bt]) else a[bt + 1][ak]
                lo = lo + (hi - lo) * bw
            w = h[hr] + (h[hr + 1] - h[hr]) * hw if hr + 1 < len(h) else h[hr]
            out.append(2.0 ** v + 2.0 ** lo + 2.0 ** w)
        return out[0], out[1], out[2]

    def cost(self, tokens, requests, keys) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(time s, kernel energy J, launch-gap energy J) of iterations (arrays)."""
        lt = np.log2(np.maximum(np.asarray(tokens, float), 1.0))
        lr = np.log2(np.maximum(np.asarray(requests, float), 1.0))
        lk = np.log2(np.maximum(np.asarray(keys, float), 1.0))
        time_s, kernel_j, gap_j = (self._sum(f, lt, lr, lk) for f in ("time_s", "kernel_j",
                                                                       "gap_j"))
        return time_s, kernel_j, gap_j

    def partition(self, tokens, requests, keys) -> tuple[np.ndarray, np.ndarray]:
        """(collective transfer J, busy-waiting J) of iterations: the parts of their
        kernel energy that are communication and wait (zero on one GPU), bounded by it."""
        lt = np.log2(np.maximum(np.asarray(tokens, float), 1.0))
        lr = np.log2(np.maximum(np.asarray(requests, float), 1.0))
        lk = np.log2(np.maximum(np.asarray(keys, float), 1.0))
        kernel, comm, wait = (self._sum(f, lt, lr, lk) for f in ("kernel_j", "comm_j",
                                                                  "wait_j"))
        scale = np.minimum(1.0, kernel / np.maximum(comm + wait, 1e-300))
        return comm * scale, wait * scale

    def _sum(self, field: str, lt, lr, lk) -> np.ndarray:
        """A field of the three groups, interpolated and added (a field zero on a group's
        whole grid stays zero there)."""
        return sum(f(c, field, *a) if np.any(getattr(c, field)) else np.zeros_like(lt)
                   for f, c, a in ((_interp1, self.body, (lt,)),
                                   (_interp2, self.attention, (lt, lk)),
                                   (_interp1, self.head, (lr,))))


def _cell(value: float, n: int) -> tuple[int, float]:
    """Grid cell and weight of a value on the log2 grid 0, STEP, 2 STEP... (n points),
    clamped at both ends."""
    f = math.log2(value) / STEP if value > 1.0 else 0.0
    i = int(f)
    if i >= n - 1:
        return n - 1, 0.0
    return i, f - i


def _interp1(c: Curve, field: str, x: np.ndarray) -> np.ndarray:
    v = getattr(c, field)
    return np.exp2(np.interp(x, c.x, np.log2(np.maximum(v, 1e-30))))


def _interp2(c: Curve, field: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bilinear in (log2 x, log2 y) of log2 values, clamped to the grid."""
    v = np.log2(np.maximum(getattr(c, field), 1e-30))
    xi = np.clip(np.interp(x, c.x, np.arange(len(c.x))), 0, len(c.x) - 1)
    yi = np.clip(np.interp(y, c.y, np.arange(len(c.y))), 0, len(c.y) - 1)
    x0, y0 = np.floor(xi).astype(int), np.floor(yi).astype(int)
    x1, y1 = np.minimum(x0 + 1, len(c.x) - 1), np.minimum(y0 + 1, len(c.y) - 1)
    fx, fy = xi - x0, yi - y0
    top = v[x0, y0] * (1 - fy) + v[x0, y1] * fy
    bottom = v[x1, y0] * (1 - fy) + v[x1, y1] * fy
    return np.exp2(top * (1 - fx) + bottom * fx)


@dataclass
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

    def costs(self, model, *, time_only: bool = False) -> IterationCosts:
        """The iterations priced by `model`; `time_only`: their times alone, every energy
        zero (what a fit of time terms reads)."""
        curves, oor = [], False
        for i, (table, sel, axes) in enumerate(self.tables[:3]):
            prices = self._price(model, i)
            n = len(table.deps)
            t = table.count * (prices.time_s + prices.gap_s + prices.wait_s)
            rows, cfg = self._selected(i)  # the group's rows, in table order
            if time_only:
                per = [np.bincount(cfg, weights=t[rows], minlength=n)] \
                    + [np.zeros(n)] * 4
            else:
                # an iteration alone: how the board holds its limit depends on the trace
                weight = prices.alpha * (table.tp * table.dp)[table.cfg]  # all GPUs, no limit
                e_run, e_gap, e_wait = row_energies(table, prices)
                gap_e, kernel_e = weight * e_gap, weight * (e_run + e_wait)
                comm_e, wait_e = weight * np.where(table.is_comm, e_run, 0.0), weight * e_wait
                per = [np.bincount(cfg, weights=v[rows], minlength=n)
                       for v in (t, kernel_e, gap_e, comm_e, wait_e)]
            if axes[1] is not None:
                per = [v.reshape(len(axes[0]), len(axes[1])) for v in per]
            curves.append(Curve(axes[0], axes[1], *per))
            oor |= bool((prices.out_of_range & sel).any())
        idle_w = 0.0 if time_only else \
            self._price(model, 3).idle_w * self.dep.parallel.world_size
        return IterationCosts(*curves, idle_w, oor)

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
        from piep.predict.learned import LearnedModel
        table = self.tables[i][0]
        if isinstance(model, LearnedModel):
            key = (i, id(model.modules))  # one grid may be priced by several predictors
            mo = self.cache.get(key)
            if mo is None:
                mo = self.cache[key] = model.modules.predict(table, model.gpu)
            return model.price(table, mo)
        return model.price(table)


def iteration_costs(dep: Deployment, model, *, max_tokens: int, max_requests: int,
                    max_keys: int) -> IterationCosts:
    """Price the three row groups of `dep`'s engine on their grids with `model`."""
    return IterationGrid.build(dep, max_tokens=max_tokens, max_requests=max_requests,
                               max_keys=max_keys).costs(model)
