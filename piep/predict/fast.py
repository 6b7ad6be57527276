"""Vectorized sweep path of the learned predictor (`piep sweep`, `piep.sweep.sweep`).

The reference path (`engine.evaluate`) walks one Python tree per configuration. Here the
leaves of every configuration of a chunk become rows of numpy arrays and are priced in a
handful of array operations:

* Structure: per (model, layout, mode) a *skeleton* lists the leaves of the tree with
  their structural multiplicity; every per-leaf quantity (FLOPs, bytes, tokens, context,
  ...) is a polynomial in (replica batch b, prompt q, decode context c) with basis
  [1, b, q, bq, bq^2] (prefill) and [1, b, c, bc] (decode). Its coefficients are solved from a
  few canonical trees built by `tree.builder`, so the builder stays the one definition
  of the tree (a residual check refuses a skeleton the basis does not reproduce).
* Costs: the learned model's own array functions (features, GBDT, communication tables,
  launch gaps, combiner) over all rows at once.

No prediction or leaf cost is reused between configurations; only skeletons (structure)
are kept per (model, layout, mode). `tests/test_fast.py` checks equality with
`engine.evaluate` on random configurations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from piep.config import Parallel, Workload
from piep.layout import Deployment
from piep.predict.engine import hides_host_gaps
from piep.tree import build_tree
from piep.tree.builder import decode_context

QUANT = ("flops", "bytes_read", "bytes_written", "comm_bytes", "tokens", "context_len",
         "batch_attr")
# canonical (replica batch, prompt, gen) points: prefill basis rank 5, decode rank 4
CANON = ((1, 1, 2), (2, 1, 2), (1, 2, 3), (1, 3, 5), (2, 3, 4), (3, 2, 7), (2, 5, 9))


def _prefill_basis(b, q):
    b, q = np.asarray(b, float), np.asarray(q, float)
    return np.stack([np.ones_like(b), b, q, b * q, b * q * q], -1)


def _decode_basis(b, c):
    b, c = np.asarray(b, float), np.asarray(c, float)
    return np.stack([np.ones_like(b), b, c, b * c], -1)


@dataclass
class Skeleton:
    kind: list[str]
    group: list[str]         # the learned model's GBDT group of each leaf
    phase: np.ndarray        # 0 prefill, 1 decode
    stage: np.ndarray
    count: np.ndarray        # structural multiplicity (decode: per step)
    launches: np.ndarray
    group_size: np.ndarray
    is_comm: np.ndarray
    static: dict[str, np.ndarray]   # d_in, d_out, heads, kv_heads, width
    coef: dict[str, tuple]          # quantity -> ((leaves, 5) prefill, (leaves, 4) decode)


def _leaves(dep: Deployment):
    """(phase index, stage index, leaf, structural count) in the engine's order."""
    tree = build_tree(dep)
    for phase in tree.children[0].children:
        ph = 0 if phase.name == "prefill" else 1
        stages = []
        for child in phase.children:
            if child.kind == "step":
                stages += [(s, child.count) for s in child.children]
            else:
                stages.append((child, 1))
        for idx, (stage, per) in enumerate(stages):
            stack = [(1, c) for c in reversed(stage.children)]
            while stack:  # pre-order, as Node.walk, without building paths
                m, node = stack.pop()
                m *= node.count
                if node.is_leaf:
                    yield ph, idx, node, m
                else:
                    stack += [(m, c) for c in reversed(node.children)]


def _quant(node) -> list[float]:
    batch = node.attrs.get("batch", 0)
    return [node.flops, node.bytes_read, node.bytes_written, node.comm_bytes, node.tokens,
            node.context_len, batch]


def build_skeleton(model, parallel: Parallel, mode: str, gpu) -> Skeleton:
    rows, first = [], None
    for b, q, g in CANON:
        dep = Deployment(model, parallel, Workload(batch=b * parallel.dp, prompt_len=q,
                                                   gen_len=g, mode=mode), gpu)
        leaves = list(_leaves(dep))
        if first is None:
            first = leaves
        elif [(p, s, n.kind, m) for p, s, n, m in leaves] != \
                [(p, s, n.kind, m) for p, s, n, m in first]:
            raise ValueError("tree structure depends on the workload")
        ctx = decode_context(dep.workload)
        rows.append(([_quant(n) for _, _, n, _ in leaves], b, q, ctx))
    phase = np.array([p for p, _, _, _ in first])
    vals = np.array([r[0] for r in rows], float)           # (canon, leaves, quant)
    pb = _prefill_basis([r[1] for r in rows], [r[2] for r in rows])
    db = _decode_basis([r[1] for r in rows], [r[3] for r in rows])
    coef = {}
    for qi, name in enumerate(QUANT):
        y = vals[:, :, qi]
        cp, *_ = np.linalg.lstsq(pb, y, rcond=None)
        cd, *_ = np.linalg.lstsq(db, y, rcond=None)
        for basis, c, sel in ((pb, cp, phase == 0), (db, cd, phase == 1)):
            err = np.abs(basis @ c - y)[:, sel]
            if err.size and err.max() > 1e-6 * max(1.0, np.abs(y[:, sel]).max()):
                raise ValueError(f"{name} is not polynomial in the skeleton basis")
        coef[name] = (cp.T, cd.T)
    leaves = [n for _, _, n, _ in first]

    def attr(key, alt=None):
        return np.array([float(n.attrs.get(key, n.attrs.get(alt, 0) if alt else 0))
                         for n in leaves])
    from piep.predict.learned import model_group
    return Skeleton([n.kind for n in leaves], [model_group(n.kind) for n in leaves], phase, np.array([s for _, s, _, _ in first]),
                    np.array([m for _, _, _, m in first], float),
                    np.array([n.launches for n in leaves], float),
                    np.array([n.group_size for n in leaves], float),
                    np.array([n.is_comm for n in leaves]),
                    {"d_in": attr("d_in"), "d_out": attr("d_out"), "heads": attr("heads"),
                     "kv_heads": attr("kv_heads"), "width": attr("width", "vocab")},
                    coef)


def _rows(sk: Skeleton, deps: list[Deployment]) -> dict[str, np.ndarray]:
    """Leaf rows of several deployments of one skeleton (config-major)."""
    n_cfg, n_leaf = len(deps), len(sk.kind)
    b = np.array([d.replica_batch for d in deps], float)
    q = np.array([d.workload.prompt_len for d in deps], float)
    c = np.array([decode_context(d.workload) for d in deps], float)
    steps = np.array([max(d.workload.gen_len - 1, 0) for d in deps], float)
    pb, db = _prefill_basis(b, q), _decode_basis(b, c)
    pre = sk.phase == 0
    out = {}
    for name in QUANT:
        cp, cd = sk.coef[name]
        v = np.where(pre[None, :], pb @ cp.T, db @ cd.T)
        out[name] = np.rint(v).reshape(-1)  # every quantity is integral
    tile = lambda a: np.tile(a, n_cfg)  # noqa: E731
    out["count"] = (np.where(pre[None, :], 1.0, steps[:, None]) * sk.count[None, :]).reshape(-1)
    out["phase"], out["stage"] = tile(sk.phase), tile(sk.stage)
    out["launches"], out["group_size"] = tile(sk.launches), tile(sk.group_size)
    out["is_comm"] = tile(sk.is_comm)
    for k, v in sk.static.items():
        out[k] = tile(v)
    out["kind"] = np.array(sk.kind * n_cfg, dtype=object)
    out["group"] = np.array(sk.group * n_cfg, dtype=object)
    out["cfg"] = np.repeat(np.arange(n_cfg), n_leaf)
    return out


class FastSweep:
    """Prices many deployments at once with a LearnedModel."""

    def __init__(self, model):
        self.model = model
        self.skeletons: dict[tuple, Skeleton] = {}

    def skeleton(self, dep: Deployment) -> Skeleton:
        # the leaves do not depend on dp (replicas are identical; b is per replica) nor on
        # the mode (only the decode context does, through the basis)
        p = dep.parallel
        key = (dep.model, p.tp, p.pp, dep.gpu.name)
        sk = self.skeletons.get(key)
        if sk is None:
            sk = self.skeletons[key] = build_skeleton(dep.model, Parallel(tp=p.tp, pp=p.pp),
                                                      "graph", dep.gpu)
        return sk

    def evaluate(self, deps: list[Deployment]) -> list[dict[str, Any]]:
        groups: dict[int, tuple[Skeleton, list[int]]] = {}
        for i, dep in enumerate(deps):
            sk = self.skeleton(dep)
            groups.setdefault(id(sk), (sk, []))[1].append(i)
        parts = []
        for sk, idx in groups.values():
            rows = _rows(sk, [deps[i] for i in idx])
            rows["cfg"] = np.asarray(idx)[rows["cfg"]]
            parts.append(rows)
        r = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        n = len(deps)
        eager_cfg = np.array([d.workload.mode == "eager" for d in deps])
        mode_eager = eager_cfg[r["cfg"]]
        t, pw, gap, wait, oor = self.model.cost_arrays(r, mode_eager)
        alpha = self.model.alpha_arrays(r["kind"], r["phase"], mode_eager, r["tokens"])
        cfg = r["cfg"]
        tp = np.array([d.parallel.tp for d in deps], float)
        pp = np.array([d.parallel.pp for d in deps])
        dp = np.array([d.parallel.dp for d in deps], float)
        idle_w, wait_w = self.model.launch_gap_w, self.model.busy_wait_w
        e_rows = r["count"] * alpha * (t * pw + gap * idle_w + wait * wait_w)
        energy = np.bincount(cfg, weights=e_rows, minlength=n) * tp
        # phase time: stages run one after another (engine.phase_time_s); the bubbles of
        # all stages sum to pp x phase time - the stages' own time
        ns = int(pp.max())
        key = (cfg * 2 + r["phase"]) * ns + r["stage"]
        busy = np.bincount(key, weights=r["count"] * (t + wait),
                           minlength=2 * n * ns).reshape(n, 2, ns)
        gaps = np.bincount(key, weights=r["count"] * gap, minlength=2 * n * ns).reshape(n, 2, ns)
        hide = np.array([[hides_host_gaps(d.workload.mode, ph, d.parallel.pp)
                          for ph in ("prefill", "decode")] for d in deps], dtype=bool)
        phase_t = busy.sum(2) + np.where(hide, gaps.max(2), gaps.sum(2))
        own_t = busy.sum(2) + gaps.sum(2)
        b = np.array([d.replica_batch for d in deps], float)
        pl = np.array([d.workload.prompt_len for d in deps], float)
        steps = np.array([max(d.workload.gen_len - 1, 0) for d in deps], float)
        for ph, tokens in ((0, b * pl), (1, b * steps)):
            aw = self.model.alpha_arrays(np.array(["pipeline_wait"] * n, dtype=object),
                                         np.full(n, ph), eager_cfg, tokens)
            energy += tp * aw * (pp * phase_t[:, ph] - own_t[:, ph]) * wait_w
        energy *= dp
        oor_cfg = np.bincount(cfg, weights=oor.astype(float), minlength=n) > 0
        out = []
        for i, d in enumerate(deps):
            w = d.workload
            time_s = float(phase_t[i].sum())
            gen_tokens = w.batch * w.gen_len
            flags = (["extrapolated"] if d.parallel.world_size > 2 else []) + \
                (["out_of_range"] if oor_cfg[i] else []) + [f"note: {x}" for x in d.notes]
            out.append({"energy_j": float(energy[i]), "time_s": time_s,
                        "j_per_token": float(energy[i]) / gen_tokens,
                        "tokens_per_s": gen_tokens / time_s if time_s else 0.0,
                        "ttft_s": float(phase_t[i, 0]),
                        "tpot_s": float(phase_t[i, 1]) / steps[i] if steps[i] else 0.0,
                        "predictor": self.model.name, "flags": flags})
        return out
