"""The leaf table: every leaf use of many deployments as columns (one row per leaf of the
model tree of each deployment).

The tree builder (`piep.tree.builder`) is the one definition of the tree. A *skeleton*
per (model, tp, pp, GPU) lists the leaves of that tree with their structural
multiplicity; every per-leaf quantity (FLOPs, bytes, tokens, context, ...) is a
polynomial in (replica batch b, prompt q, KV-cache slots L, decode context c) with
basis [1, b, q, bq, bq^2, L, bL, bqL] (prefill; the L terms for engines whose prefill
attends a whole static cache) and [1, b, c, bc] (decode), solved from a few canonical
trees (a residual check refuses a skeleton the basis does not reproduce). A table of any
number of deployments is then a handful of array operations, and a single prediction is
a table of one.

Rows are grouped into *segments*: spans of the timeline whose stages run one after
another (a phase of a batch: prefill or decode). Cost models price rows
(`piep.predict.pricing`); the timeline (`piep.predict.timeline`) reduces them per segment.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from piep.core.config import Parallel, Workload
from piep.core.layout import Deployment
from piep.tree import build_tree
from piep.tree.builder import SLIDING, decode_context, experts_hit, rank_pairs
from piep.tree.nodes import COMM_KINDS, COMPUTE_KINDS, COPY_KINDS

# Matrix products a block of rows at a time, each block below the sizes at which numpy's
# OpenBLAS goes parallel: its threads spin ~0.1 s after a product, taking the cycles of the
# forests' worker thread (`python benchmarks/blas_threads.py`). Rows do not mix, so the
# blocks give the whole product's numbers (tests/predict/test_gbdt.py).
VECTOR_ELEMENTS = 1 << 16  # rows x inner size of a matrix-vector product's block
MATRIX_MNK = 1 << 18       # rows x inner size x columns of a matrix product's block


def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a @ b` (`a` 2-D; `b` a vector or a matrix), a block of `a`'s rows at a time."""
    inner = a.shape[1] * (b.shape[1] if b.ndim == 2 else 1)
    per = max(1, (VECTOR_ELEMENTS if b.ndim == 1 else MATRIX_MNK) // max(inner, 1))
    if len(a) <= per:
        return a @ b
    out = np.empty((len(a),) + b.shape[1:], dtype=np.result_type(a, b))
    for i in range(0, len(a), per):
        np.matmul(a[i:i + per], b, out=out[i:i + per])
    return out


# leaf kinds by index (`LeafTable.kind_id`); the combiner also prices pipeline waits
KINDS = COMPUTE_KINDS + COMM_KINDS + COPY_KINDS + ("pipeline_wait",)
KIND_ID = {k: i for i, k in enumerate(KINDS)}
KIND_NAMES = np.array(KINDS, dtype=object)

PHASES = ("prefill", "decode")
QUANT = ("flops", "bytes_read", "bytes_written", "comm_bytes", "tokens", "context_len",
         "batch_attr")
# (tp_calls: the calls of modules transformers' tensor-parallel plan hooks, per call of
# the leaf: `piep.tree.builder._mark_sharded_calls`)
STATIC = ("d_in", "d_out", "heads", "kv_heads", "width", "tp_calls")
# canonical (replica batch, prompt, gen) points: prefill basis rank 8, decode rank 4, and a
# mixture of experts' experts reached beside them, with points to spare for the residual
# check; experts sharded over ranks add the busiest rank's pairs (ranks 10 and 6): three
# points more (only there: every skeleton built costs a tree per point)
CANON = ((1, 1, 2), (2, 1, 2), (1, 2, 3), (1, 3, 5), (2, 3, 4), (3, 2, 7), (2, 5, 9),
         (3, 4, 6), (1, 5, 4))
CANON_EP = CANON + ((3, 5, 3), (4, 1, 6), (1, 6, 2))


Experts = tuple[int, int, float, int]  # (count, per token, routing skew, ranks sharding them)


def _hit(tokens: np.ndarray, experts: Experts | None) -> np.ndarray:
    """The experts `tokens` reach (`piep.tree.builder.experts_hit`; zero without experts)
    and the pairs of the busiest rank where experts are sharded over ranks
    (`rank_pairs`; zero otherwise): the quantities of a tree not polynomial in the
    workload (a mixture of experts reads the weights of the experts its tokens reach)."""
    if experts is None:
        return np.zeros((2, *np.shape(tokens)))
    count, per_token, skew, ep = experts
    return np.stack([experts_hit(count, per_token, tokens, skew) * np.ones_like(tokens),
                     rank_pairs(count, per_token, tokens, skew, ep)])


def _prefill_basis(b, q, cache, experts: Experts | None = None):
    b, q, L = np.asarray(b, float), np.asarray(q, float), np.asarray(cache, float)
    return np.stack([np.ones_like(b), b, q, b * q, b * q * q, L, b * L, b * q * L,
                     *_hit(b * q, experts)], -1)


def _decode_basis(b, c, experts: Experts | None = None):
    b, c = np.asarray(b, float), np.asarray(c, float)
    return np.stack([np.ones_like(b), b, c, b * c, *_hit(b, experts)], -1)


def hides_host_gaps(eager: np.ndarray, phase: str, pp: np.ndarray) -> np.ndarray:
    """Eager decode over pipeline stages: each stage's process launches its kernels while
    the stage before it computes (they queue behind the receive), so only one stage's
    launch gaps reach the step time. Measured: with the gaps of every stage summed,
    eager pp2 decode was predicted 12-77 % too slow (13 runs). Per deployment (`eager`:
    its decode runs eagerly; `pp`: its stages)."""
    return (pp > 1) & eager & (phase == "decode")


@dataclass(eq=False)  # one skeleton is one object: hashed and compared by identity
class Skeleton:
    """The leaves of one (model, layout, GPU, engine) tree: what they are, and each
    quantity as polynomial coefficients in the workload."""
    kind: list[str]
    kind_id: np.ndarray
    path: list[str]
    phase: np.ndarray        # 0 prefill, 1 decode
    stage: np.ndarray
    count: np.ndarray        # structural multiplicity (decode: per step)
    launches: np.ndarray
    group_size: np.ndarray
    is_comm: np.ndarray
    static: dict[str, np.ndarray]   # STATIC columns
    coef: dict[str, tuple]          # quantity -> ((leaves, 9) prefill, (leaves, 5) decode)
    window: np.ndarray       # 0, or a windowed engine's attention form (FULL_CONTEXT, SLIDING)
    fused: np.ndarray        # bool: a pointwise leaf fused by a compiled step's compiler
    # bool per leaf: of a layer that attends every key in a model whose other layers
    # slide (its decode quantities are in the full context, `decode_context(full=True)`);
    # None: no such leaf
    full_context: np.ndarray | None = None
    # a mixture of experts' (experts, per token, routing skew): the bases' column of
    # experts reached
    experts: Experts | None = None
    # the coefficients of every quantity side by side (QUANT order, the leaves within each),
    # prefill's (8, quantities x leaves) and decode's (4, ...), and which columns are
    # prefill leaves: one product per basis gives all of a deployment's quantities
    stacked: tuple[np.ndarray, np.ndarray, np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.stacked = (np.concatenate([self.coef[k][0] for k in QUANT]).T,
                        np.concatenate([self.coef[k][1] for k in QUANT]).T,
                        np.tile(self.phase == 0, len(QUANT)))


def _leaves(dep: Deployment, *, paths: bool = True):
    """(phase index, stage index, path, leaf, structural count) in tree order; paths as
    `prefill/stage0/layer/q_proj` and `decode/step/stage0/...` (None without `paths`)."""
    tree = build_tree(dep, all_forms=True)
    for phase in tree.children[0].children:
        ph = PHASES.index(phase.name)
        stages = []
        for child in phase.children:
            if child.kind == "step":
                stages += [(s, f"{phase.name}/step") for s in child.children]
            else:
                stages.append((child, phase.name))
        for idx, (stage, base) in enumerate(stages):
            if paths:
                for path, m, node in stage.walk(base):
                    if node.is_leaf and node is not stage:
                        yield ph, idx, path, node, m
                continue
            stack = [(1, c) for c in reversed(stage.children)]
            while stack:  # pre-order, as Node.walk, without building paths
                m, node = stack.pop()
                m *= node.count
                if node.is_leaf:
                    yield ph, idx, None, node, m
                else:
                    stack += [(m, c) for c in reversed(node.children)]


def _quant(node) -> list[float]:
    return [node.flops, node.bytes_read, node.bytes_written, node.comm_bytes, node.tokens,
            node.context_len, node.attrs.get("batch", 0)]


def _solve(basis: np.ndarray, y: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """Coefficients of the leaves `sel` in the basis. Every quantity the builder states is
    an integer polynomial of integer inputs: the least-squares coefficients are rounded to
    integers where that reproduces every canonical tree exactly (a coefficient off by 1e-15
    times a prompt of thousands squared would miss FLOPs by units). The canonical points
    must determine every basis column that is not zero on them (else least squares picks
    one of many fits, right at the points and wrong between them)."""
    used = np.any(basis != 0, axis=0)
    if np.linalg.matrix_rank(basis[:, used]) < used.sum():
        raise ValueError("the canonical points do not determine the skeleton basis: add "
                         "points (CANON, CANON_EP)")
    c, *_ = np.linalg.lstsq(basis, y, rcond=None)
    whole = np.rint(c)
    ok = np.all(basis @ whole == y, axis=0)
    c = np.where(ok[None, :], whole, c)
    err = np.abs(basis @ c - y)[:, sel]
    if err.size and (err > 1e-6 * np.maximum(1.0, np.abs(y[:, sel]))).any():
        raise ValueError("a leaf quantity is not polynomial in the skeleton basis")
    return c


def build_skeleton(model, parallel: Parallel, gpu, engine: str | None = None) -> Skeleton:
    """Solve the skeleton of a model on a layout from the builder's canonical trees."""
    rows, first = [], None
    for b, q, g in CANON_EP if model.is_moe and parallel.ep > 1 else CANON:
        dep = Deployment(model, parallel, Workload(batch=b * parallel.dp, prompt_len=q,
                                                   gen_len=g, mode="graph"), gpu,
                         engine=engine)
        leaves = list(_leaves(dep, paths=first is None))
        if first is None:
            first = leaves
        elif [(p, s, n.kind, m) for p, s, _, n, m in leaves] != \
                [(p, s, n.kind, m) for p, s, _, n, m in first]:
            raise ValueError("tree structure depends on the workload")
        rows.append(([_quant(n) for *_, n, _ in leaves], b, q, dep.workload.context_len,
                     decode_context(dep), decode_context(dep, full=True)))
    phase = np.array([p for p, *_ in first])
    vals = np.array([r[0] for r in rows], float)           # (canon, leaves, quant)
    experts = (model.num_experts, model.experts_per_token, model.routing_skew, parallel.ep) \
        if model.is_moe else None
    pb = _prefill_basis([r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
                        experts)
    db = _decode_basis([r[1] for r in rows], [r[4] for r in rows], experts)
    n_leaf = vals.shape[1]
    y = vals.transpose(0, 2, 1).reshape(len(rows), -1)     # (canon, quant x leaves)
    sel = np.tile(phase, len(QUANT))
    full = np.array([n.attrs.get("context") == "full" for *_, n, _ in first])
    full_cols = np.tile(full, len(QUANT))
    cp, cd = _solve(pb, y, sel == 0), _solve(db, y, (sel == 1) & ~full_cols)
    if full.any():  # those leaves in the full context's basis
        db_full = _decode_basis([r[1] for r in rows], [r[5] for r in rows], experts)
        cd[:, full_cols] = _solve(db_full, y, (sel == 1) & full_cols)[:, full_cols]
    coef = {name: (cp[:, qi * n_leaf:(qi + 1) * n_leaf].T, cd[:, qi * n_leaf:(qi + 1) * n_leaf].T)
            for qi, name in enumerate(QUANT)}
    leaves = [n for *_, n, _ in first]

    def attr(key, alt=None):
        return np.array([float(n.attrs.get(key, n.attrs.get(alt, 0) if alt else 0))
                         for n in leaves])
    return Skeleton([n.kind for n in leaves], np.array([KIND_ID[n.kind] for n in leaves]),
                    [p for _, _, p, _, _ in first], phase,
                    np.array([s for _, s, *_ in first]),
                    np.array([m for *_, m in first], float),
                    np.array([n.launches for n in leaves], float),
                    np.array([n.group_size for n in leaves], float),
                    np.array([n.is_comm for n in leaves]),
                    {"d_in": attr("d_in"), "d_out": attr("d_out"), "heads": attr("heads"),
                     "kv_heads": attr("kv_heads"), "width": attr("width", "vocab"),
                     "tp_calls": attr("tp_calls")},
                    coef, np.array([n.attrs.get("window", 0) for n in leaves]),
                    np.array([bool(n.attrs.get("fused")) for n in leaves]),
                    full if full.any() else None, experts)


@dataclass
class Segments:
    """Spans of the timeline (one per phase of each deployment here): the deployment
    they belong to, their phase, whether only one stage's launch gaps reach their time,
    and the tokens in flight (the combiner's feature for pipeline waits)."""
    cfg: np.ndarray       # deployment index
    phase: np.ndarray     # 0 prefill, 1 decode
    hide_gaps: np.ndarray  # bool
    tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.cfg)


@dataclass
class LeafTable:
    """Leaf uses of `deps` as columns. Per row: the deployment (`cfg`), its segment, phase
    and stage, `count` calls per GPU, the leaf's shape and quantities of one call. Per
    deployment (arrays of len(deps)): tp, pp, dp, eager mode."""
    deps: Sequence[Deployment]
    cfg: np.ndarray
    segment: np.ndarray
    phase: np.ndarray
    stage: np.ndarray
    count: np.ndarray
    kind_id: np.ndarray    # index into KINDS (`kind`: the names)
    path: np.ndarray | None  # object; with detail only
    is_comm: np.ndarray
    launches: np.ndarray
    group_size: np.ndarray
    q: dict[str, np.ndarray]   # QUANT and STATIC columns
    segments: Segments
    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    eager: np.ndarray      # per deployment: decode runs eagerly
    # per row: the share of its calls made in steps past a windowed engine's window (1 on
    # the sliding form's rows, 0 on the full-context form's, the phase's sliding share on
    # the rows both forms run); None: no window
    sliding: np.ndarray | None = None
    # per row: a pointwise leaf fused by a compiled decode step; None: no such leaf
    fused: np.ndarray | None = None
    # arrays derived from the rows alone, computed once by their first user (the
    # combiner's features: `combiner_features`); a copy with other deployments keeps them
    derived: dict = field(default_factory=dict, repr=False, compare=False)
    # each deployment's launch probe, read once per table (a copy reads its own)
    _probes: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.cfg)

    def host_probes(self) -> np.ndarray:
        """Each deployment's host launch probe in seconds (NaN: not given)."""
        if self._probes is None:
            self._probes = np.array([np.nan if d.host_probe_s is None else d.host_probe_s
                                     for d in self.deps])
        return self._probes

    @property
    def gpu(self):
        """The GPU of every deployment of the table."""
        return self.deps[0].gpu

    @property
    def kind(self) -> np.ndarray:
        """Per row: the leaf's kind (an object array of `KINDS` names)."""
        return KIND_NAMES[self.kind_id]

    @property
    def decode(self) -> np.ndarray:
        """Per row: the leaf runs in decode."""
        return self.phase == 1

    @property
    def mode_eager(self) -> np.ndarray:
        """Per row: the run's mode is eager."""
        return self.eager[self.cfg]


# skeletons are structure (the tree builder's leaves, no cost): the process keeps the
# latest this many for every table builder (a sweep, a fit, a comparison meets few)
SKELETONS_KEPT = 1024
_skeletons: dict[tuple, Skeleton] = {}


class TableBuilder:
    """Leaf tables of deployments; skeletons are kept per (model, tp, pp, GPU, engine),
    nothing else (no cost, no prediction) is reused between deployments."""

    def skeleton(self, dep: Deployment) -> Skeleton:
        """The skeleton of `dep`'s tree, built on first use in the process."""
        # the leaves do not depend on dp (replicas are identical; b is per replica) nor on
        # the mode (only the decode context does, through the basis)
        p = dep.parallel
        key = (dep.model, p.tp, p.pp, p.ep, dep.gpu, dep.engine)
        sk = _skeletons.get(key)
        if sk is None:
            if len(_skeletons) >= SKELETONS_KEPT:
                del _skeletons[next(iter(_skeletons))]  # the oldest
            sk = _skeletons[key] = build_skeleton(dep.model, Parallel(tp=p.tp, pp=p.pp, ep=p.ep),
                                                  dep.gpu, dep.engine)
        return sk

    def table(self, deps: Sequence[Deployment], *, detail: bool = False) -> LeafTable:
        """One table of `deps` (all on one GPU); `detail` adds the leaves' paths."""
        if not deps:
            raise ValueError("a leaf table needs at least one deployment")
        gpu = deps[0].gpu
        if any(d.gpu is not gpu and d.gpu != gpu for d in deps):
            raise ValueError("a leaf table holds deployments of one GPU")
        groups: dict[Skeleton, list[int]] = {}
        known: dict[tuple, Skeleton] = {}  # this call's skeletons by model, layout and engine
        for i, dep in enumerate(deps):
            p = dep.parallel
            key = (dep.model, p.tp, p.pp, p.ep, dep.engine)
            sk = known.get(key)
            if sk is None:
                sk = known[key] = self.skeleton(dep)
            groups.setdefault(sk, []).append(i)
        n = len(deps)
        work = [d.workload for d in deps]
        eager = np.array([w.mode == "eager" for w in work], dtype=bool)
        pp = np.array([d.parallel.pp for d in deps])
        per = {"b": np.array([d.replica_batch for d in deps], float),
               "prompt": np.array([w.prompt_len for w in work], float),
               "cache": np.array([w.context_len for w in work], float),
               "context": np.array([decode_context(d) for d in deps], float),
               "steps": np.array([max(w.gen_len - 1, 0) for w in work], float)}
        size = sum(len(idx) * len(sk.kind) for sk, idx in groups.items())
        like = next(iter(groups))  # a skeleton: the integer columns' types
        r = {k: np.empty(size) for k in QUANT + STATIC + ("count", "sliding", "launches",
                                                           "group_size")}
        r.update(phase=np.empty(size, like.phase.dtype), stage=np.empty(size, like.stage.dtype),
                 is_comm=np.empty(size, bool), kind_id=np.empty(size, like.kind_id.dtype),
                 fused=np.empty(size, bool), cfg=np.empty(size, int))
        if detail:
            r["path"] = np.empty(size, dtype=object)
        start = 0
        for sk, idx in groups.items():
            stop = start + len(idx) * len(sk.kind)
            _fill(sk, deps, np.asarray(idx), per, {k: v[start:stop] for k, v in r.items()})
            start = stop
        b, prompt, steps = per["b"], per["prompt"], per["steps"]
        segments = Segments(
            cfg=np.repeat(np.arange(n), 2), phase=np.tile([0, 1], n),
            hide_gaps=np.column_stack([hides_host_gaps(eager, ph, pp)
                                       for ph in PHASES]).reshape(-1),
            tokens=np.column_stack([b * prompt, b * steps]).reshape(-1))
        return LeafTable(
            deps=deps, cfg=r["cfg"], segment=r["cfg"] * 2 + r["phase"], phase=r["phase"],
            stage=r["stage"], count=r["count"], kind_id=r["kind_id"],
            path=r["path"] if detail else None, is_comm=r["is_comm"],
            launches=r["launches"], group_size=r["group_size"],
            q={k: r[k] for k in QUANT + STATIC}, segments=segments,
            tp=np.array([d.parallel.tp for d in deps], float), pp=pp,
            dp=np.array([d.parallel.dp for d in deps], float),
            eager=eager, sliding=r["sliding"] if r["sliding"].any() else None,
            fused=r["fused"] if r["fused"].any() else None)


# rows computed once per request of a step (the LM head on each request's last position)
HEAD_KINDS = ("final_norm", "lm_head", "allgather", "sampling")


def iteration_table(builder: TableBuilder, dep: Deployment, tokens: np.ndarray,
                    requests: np.ndarray, keys: np.ndarray) -> LeafTable:
    """Scheduler iterations of a serving engine on `dep`'s layout: each packs `tokens`
    query tokens of `requests` requests that read `keys` cached keys in all (paged
    attention over the gathered keys). Each iteration is a deployment of its own (one
    segment): the prefill rows of the engine's skeleton at batch 1, `tokens` prompt
    tokens and a cache of `keys`, the head rows at batch `requests`."""
    sk = builder.skeleton(dep)
    n = len(tokens)
    pre = np.flatnonzero(sk.phase == 0)
    head = np.isin(np.array(sk.kind, dtype=object)[pre], HEAD_KINDS)
    ones = np.ones(n)
    body_basis = _prefill_basis(ones, tokens, keys, sk.experts)
    head_basis = _prefill_basis(requests, ones, ones, sk.experts)
    q = {}
    for name in QUANT:
        cp = sk.coef[name][0][pre]
        q[name] = np.rint(np.where(head[None, :], head_basis @ cp.T,
                                   body_basis @ cp.T)).reshape(-1)
    tile = lambda a: np.tile(a[pre], n)  # noqa: E731
    for k, v in sk.static.items():
        q[k] = tile(v)
    cfg = np.repeat(np.arange(n), len(pre))
    p = dep.parallel
    return LeafTable(
        deps=[dep] * n, cfg=cfg, segment=cfg, phase=np.zeros(len(cfg), dtype=int),
        stage=tile(sk.stage), count=np.tile(sk.count[pre], n),
        kind_id=tile(sk.kind_id),
        path=None, is_comm=tile(sk.is_comm), launches=tile(sk.launches),
        group_size=tile(sk.group_size), q=q,
        segments=Segments(cfg=np.arange(n), phase=np.zeros(n, dtype=int),
                          hide_gaps=np.zeros(n, dtype=bool), tokens=np.asarray(tokens, float)),
        tp=np.full(n, float(p.tp)), pp=np.full(n, p.pp), dp=np.full(n, float(p.dp)),
        eager=np.full(n, dep.workload.mode == "eager"))


def select(table: LeafTable, idx: np.ndarray) -> LeafTable:
    """The deployments `idx` (ascending) of a table, renumbered 0..len(idx)-1, with their
    rows and segments (in table order)."""
    idx = np.asarray(idx, dtype=int)
    new = np.full(len(table.deps), -1)
    new[idx] = np.arange(len(idx))
    rows = new[table.cfg] >= 0
    segs = new[table.segments.cfg] >= 0
    cfg = new[table.cfg[rows]]
    s = table.segments
    return LeafTable(
        deps=[table.deps[i] for i in idx], cfg=cfg,
        segment=(np.cumsum(segs) - 1)[table.segment[rows]],
        phase=table.phase[rows], stage=table.stage[rows], count=table.count[rows],
        kind_id=table.kind_id[rows],
        path=None if table.path is None else table.path[rows], is_comm=table.is_comm[rows],
        launches=table.launches[rows], group_size=table.group_size[rows],
        q={k: v[rows] for k, v in table.q.items()},
        segments=Segments(new[s.cfg[segs]], s.phase[segs], s.hide_gaps[segs], s.tokens[segs]),
        tp=table.tp[idx], pp=table.pp[idx], dp=table.dp[idx], eager=table.eager[idx],
        sliding=None if table.sliding is None else table.sliding[rows],
        fused=None if table.fused is None else table.fused[rows])


def take_rows(table: LeafTable, keep: np.ndarray) -> LeafTable:
    """The rows `keep` (a mask) of a table, its deployments and segments as they are: each
    row prices as it did where its price reads no other row (not where a host queues
    ahead: `HostTerms.queue_ahead` shares a stage's gap among its rows)."""
    take = lambda a: None if a is None else a[keep]  # noqa: E731
    return replace(table, cfg=table.cfg[keep], segment=table.segment[keep],
                   phase=table.phase[keep], stage=table.stage[keep], count=table.count[keep],
                   kind_id=table.kind_id[keep], path=take(table.path),
                   is_comm=table.is_comm[keep], launches=table.launches[keep],
                   group_size=table.group_size[keep],
                   q={k: v[keep] for k, v in table.q.items()}, sliding=take(table.sliding),
                   fused=take(table.fused), derived={})


def concat(tables: Sequence[LeafTable]) -> LeafTable:
    """One table of the deployments of `tables`, in order: their rows one after another,
    deployments and segments renumbered (a row's prices do not depend on its neighbours,
    so pricing the stack prices each table)."""
    if len({t.gpu for t in tables}) > 1:
        raise ValueError("a leaf table holds deployments of one GPU")
    deps = np.cumsum([0] + [len(t.deps) for t in tables])[:-1]
    segs = np.cumsum([0] + [len(t.segments) for t in tables])[:-1]
    cat = lambda get: np.concatenate([get(t) for t in tables])  # noqa: E731

    def optional(name, empty):  # None on a table where no row has it
        if all(getattr(t, name) is None for t in tables):
            return None
        return cat(lambda t: empty(len(t)) if getattr(t, name) is None else getattr(t, name))
    s = [t.segments for t in tables]
    return LeafTable(
        deps=[d for t in tables for d in t.deps],
        cfg=np.concatenate([t.cfg + o for t, o in zip(tables, deps)]),
        segment=np.concatenate([t.segment + o for t, o in zip(tables, segs)]),
        phase=cat(lambda t: t.phase), stage=cat(lambda t: t.stage),
        count=cat(lambda t: t.count), kind_id=cat(lambda t: t.kind_id),
        path=None if any(t.path is None for t in tables) else cat(lambda t: t.path),
        is_comm=cat(lambda t: t.is_comm), launches=cat(lambda t: t.launches),
        group_size=cat(lambda t: t.group_size),
        q={k: cat(lambda t: t.q[k]) for k in tables[0].q},
        segments=Segments(np.concatenate([x.cfg + o for x, o in zip(s, deps)]),
                          np.concatenate([x.phase for x in s]),
                          np.concatenate([x.hide_gaps for x in s]),
                          np.concatenate([x.tokens for x in s])),
        tp=cat(lambda t: t.tp), pp=cat(lambda t: t.pp), dp=cat(lambda t: t.dp),
        eager=cat(lambda t: t.eager),
        sliding=optional("sliding", np.zeros), fused=optional("fused",
                                                             lambda n: np.zeros(n, bool)))


def _form_shares(sk: Skeleton, deps: Sequence[Deployment],
                 idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the deployments `idx` of `deps`, leaves) twice: the share of its phase each leaf's
    attention form runs (1 for leaves outside a windowed engine's attention forms), and
    the share of each leaf's calls made in steps past the window."""
    n = (len(idx), len(sk.kind))
    if not sk.window.any():
        return np.ones(n), np.zeros(n)
    w = np.array([deps[i].window_weights for i in idx])  # (deps, phase, form)
    sliding = sk.window == SLIDING
    shares = w[:, sk.phase, sliding.astype(int)]
    form = sk.window[None, :] > 0
    return (np.where(form, shares, 1.0),
            np.where(form, np.broadcast_to(sliding, n), w[:, sk.phase, 1]).astype(float))


def _fill(sk: Skeleton, deps: Sequence[Deployment], idx: np.ndarray,
          per: dict[str, np.ndarray], out: dict[str, np.ndarray]) -> None:
    """Write the leaf rows of the deployments `idx` of one skeleton (deployment-major) into
    `out` (a table's columns, their span of it); `per`: per deployment of the table, its
    replica batch, prompt, KV-cache slots, decode context and decode steps."""
    n_cfg, n_leaf = len(idx), len(sk.kind)
    rows = {k: v.reshape(n_cfg, n_leaf) for k, v in out.items()}
    b, q, cache, c, steps = (per[k][idx] for k in ("b", "prompt", "cache", "context", "steps"))
    prefill, decode, pre_columns = sk.stacked
    v = np.where(pre_columns, product(_prefill_basis(b, q, cache, sk.experts), prefill),
                 product(_decode_basis(b, c, sk.experts), decode))
    if sk.full_context is not None:  # layers attending every key beside sliding ones
        c_full = np.array([decode_context(deps[i], full=True) for i in idx], float)
        cols = np.tile(sk.full_context, len(QUANT)) & ~pre_columns
        v[:, cols] = product(_decode_basis(b, c_full, sk.experts), decode[:, cols])
    np.rint(v, out=v)  # every quantity is integral
    for i, name in enumerate(QUANT):
        rows[name][:] = v[:, i * n_leaf:(i + 1) * n_leaf]
    shares, sliding = _form_shares(sk, deps, idx)
    np.multiply(np.where(sk.phase == 0, 1.0, steps[:, None]) * sk.count, shares,
                out=rows["count"])
    rows["sliding"][:] = sliding
    for name in ("phase", "stage", "launches", "group_size", "is_comm", "kind_id", "fused"):
        rows[name][:] = getattr(sk, name)
    for name, v in sk.static.items():
        rows[name][:] = v
    if "path" in rows:
        rows["path"][:] = np.array(sk.path, dtype=object)
    rows["cfg"][:] = idx[:, None]
