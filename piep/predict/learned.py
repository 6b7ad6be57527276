"""Learned predictor: LightGBM module models over the roofline + tanh combiner (SPEC §2).

* Module model, one pair of GBDTs per node kind group, trained on isolated module
  samples: log(measured time / (roofline time + 1 us)) (the achieved efficiency; the
  roofline carries the scaling) and the power that prices a call (energy per call / time
  per call). Nodes far from the training data (nearest-neighbour distance in normalized
  feature space) are flagged `out_of_range`.
* Communication: time and power per call interpolated in log size from the collectives
  measured in isolation with their energy (the probe's table where a kind or mode was not
  sampled), plus the expected waiting time of the measured wait distributions, priced at
  the measured busy-poll power; more than 2 GPUs scale by the ring volume (extrapolated).
* Launch gaps: per kernel in graph replay; in eager code (prefill always, decode in eager
  mode) the host issues kernels at `host_launch_s` each and the GPU idles when it waits
  (eager decode over pipeline stages: one stage's gaps, `engine.hides_host_gaps`).
* Combiner: energy = sum alpha(c) * E(c), alpha = 1 + tanh(W.f(c) + b) / tau, fitted on
  end-to-end runs together with the gap terms.
"""

from __future__ import annotations

import logging
import math
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from piep.gpus import GPU
from piep.layout import Deployment
from piep.predict.engine import LeafCost
from piep.predict import features as _features
from piep.predict.features import FEATURES, leaf_features, roofline_time_s
from piep.tree.builder import LINEAR_KINDS
from piep.tree.nodes import Node

log = logging.getLogger("piep.predict")
SCHEMA = "piep.learned_predictor"
SCHEMA_VERSION = 1
TAU = 2.5
GBDT_PARAMS = {"objective": "regression", "learning_rate": 0.15, "max_depth": 7,
               "num_leaves": 15, "feature_fraction": 0.8, "min_data_in_leaf": 3,
               "min_data_in_bin": 1, "lambda_l2": 1.0, "verbose": -1, "num_threads": 1,
               "seed": 0, "deterministic": True}
ROUNDS = 100  # with lr 0.15: the same 5-fold module error as 300 x 0.05, 3x faster
ALPHA_FEATURES = ("decode", "eager_decode", "linear", "attention", "comm", "wait", "other",
                  "log_tokens")


# --- module models ---------------------------------------------------------------------
@dataclass
class KindModel:
    time_booster: Any
    power_booster: Any
    mean: np.ndarray
    std: np.ndarray
    train_z: np.ndarray
    oor_threshold: float
    _tree: Any = field(default=None, repr=False)

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        threads = 2 if len(x) > 256 else 1
        log_ratio = self.time_booster.predict(x, num_threads=threads)
        power = self.power_booster.predict(x, num_threads=threads)
        return log_ratio, power, self.out_of_range(x)

    def out_of_range(self, x: np.ndarray) -> np.ndarray:
        """Standardized distance to the nearest training sample above the threshold. A
        k-d tree stops at the threshold: most leaves lie close to a sample, so the query
        is far cheaper than all pairwise distances (the training set grows)."""
        if len(self.train_z) == 0:
            return np.ones(len(x), dtype=bool)
        if self._tree is None:
            from scipy.spatial import cKDTree
            self._tree = cKDTree(self.train_z)
        z = (x - self.mean) / self.std
        d, _ = self._tree.query(z, k=1, distance_upper_bound=self.oor_threshold * (1 + 1e-9))
        return ~np.isfinite(d) | (d > self.oor_threshold)


def _fit_kind(x: np.ndarray, log_ratio: np.ndarray, power: np.ndarray) -> KindModel:
    import lightgbm as lgb
    tb = lgb.train(GBDT_PARAMS, lgb.Dataset(x, log_ratio, params={"verbose": -1}), ROUNDS)
    pb = lgb.train(GBDT_PARAMS, lgb.Dataset(x, power, params={"verbose": -1}), ROUNDS)
    mean, std = x.mean(0), x.std(0) + 1e-9
    z = (x - mean) / std
    if len(z) > 1:
        d = np.sqrt(((z[:, None, :] - z[None, :, :]) ** 2).sum(-1))
        np.fill_diagonal(d, np.inf)
        thr = float(np.quantile(d.min(1), 0.95) * 1.5)
    else:
        thr = 0.0
    return KindModel(tb, pb, mean, std, z, thr)


def sample_leaf(row: dict[str, Any]) -> Node:
    from piep.tree.builder import leaf_from_shape
    return leaf_from_shape({k: row[k] for k in row["shape_fields"] if k != "mode"})


def model_group(kind: str) -> str:
    """Kinds that run the same kernels share one pair of GBDTs (their shapes are in the
    features): all projections (GEMMs), and both RMSNorms. Each then learns from far more
    samples than a kind alone has."""
    if kind in LINEAR_KINDS:
        return "linear"
    return "norm" if kind in ("rmsnorm", "final_norm") else kind


def _call_power_w(row: dict[str, Any]) -> float:
    """Board power that prices one call: energy per call over its event-timed duration.
    Long prefill GEMMs slow down ~14 % inside the energy window (sustained power lowers the
    clock), so the window's mean power x the event time would miss that energy."""
    return row["energy_j"] / max(row["time_s"], 1e-9)


# The power that prices a call may exceed the board limit: energy per call / event time
# of kernels that slow down under sustained power reached 906 W (1.29x 700 W) in the
# module samples. The bounds only stop a GBDT extrapolating to absurd values.
POWER_CEILING = 1.35  # x the GPU's board power limit


def priced_power_w(p, floor_w: float, gpu: GPU):
    """A module model's power output (a float, or an array of them) within
    [floor_w, POWER_CEILING x board limit]. Floats take builtins: `leaf_cost` is called
    hundreds of thousands of times in a fit."""
    ceiling = gpu.max_power_w * POWER_CEILING
    if isinstance(p, float):
        return min(max(p, floor_w), ceiling)
    return np.minimum(np.maximum(p, floor_w), ceiling)


def fit_module_models(samples: list[dict[str, Any]], gpu: GPU) -> dict[str, KindModel]:
    by_kind: dict[str, list] = {}
    for row in samples:
        if row.get("repeat", 0):
            continue
        leaf = sample_leaf(row)
        f = leaf_features(leaf, gpu, row["mode"])
        ratio = math.log(max(row["time_s"], 1e-9) / _features.base_time_s(leaf, gpu))
        by_kind.setdefault(model_group(row["kind"]), []).append((f, ratio, _call_power_w(row)))
    models = {}
    for kind, rows in sorted(by_kind.items()):
        x = np.asarray([r[0] for r in rows])
        models[kind] = _fit_kind(x, np.asarray([r[1] for r in rows]),
                                 np.asarray([r[2] for r in rows]))
    return models


# --- communication ----------------------------------------------------------------------
def collective_rows(samples) -> list[dict[str, Any]]:
    """The isolated collective samples that price collectives: with energy on every GPU,
    not superseded by a later measurement of the same point, and AllReduce with the
    runner's SUM where it was measured so (AVG, session 2, is a pre-multiplied sum)."""
    rows = [r for r in samples if not r.get("superseded_by")
            and all(e is not None for e in r.get("energy_j_per_gpu", [None]))]
    summed = {r["mode"] for r in rows if r["kind"] == "allreduce" and r.get("reduce_op") == "sum"}
    return [r for r in rows if not (r["kind"] == "allreduce" and r["mode"] in summed
                                    and r.get("reduce_op") != "sum")]


@dataclass
class CommModel:
    table: dict[tuple[str, str], tuple[list[float], list[float]]]  # (kind, mode) -> log2 size, log2 s
    waits: dict[tuple[str, str], tuple[list[float], list[float]]]  # (phase, mode) -> log2 size, s
    # (kind, mode) -> log2 size, board power W (collectives sampled in isolation)
    power: dict[tuple[str, str], tuple[list[float], list[float]]] = field(default_factory=dict)

    @classmethod
    def from_calibration(cls, collectives, wait_fits, samples=()) -> "CommModel":
        from piep.stats.gamma import expected_wait_s
        table: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for row in collectives:
            kind = "p2p" if row["kind"] == "sendrecv" else row["kind"]
            for mode, key in (("eager", "eager_ms"), ("graph", "graph_ms")):
                if row.get(key):
                    table.setdefault((kind, mode), []).append(
                        (math.log2(row["size_bytes"]), math.log2(row[key] / 1000)))
        waits: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for f in wait_fits:
            # per rank: only the earlier rank of a pair waits (w = d - min d), so the mean
            # over all ranks is the positive waits' mean times their share
            share = f["fit"]["n"] / max(f["fit"]["n_total"], 1)
            waits.setdefault((f["phase"], f["mode"]), []).append(
                (math.log2(f["size_bytes"]), expected_wait_s(f["fit"]) * share))
        # collectives sampled in isolation replace the probe's times where they exist, and
        # price a call at its own energy: power = energy per call and GPU / time per call.
        # (LOMO, session 3: probe times 3.9 / 2.8 % graph energy / time, isolated SUM
        # times 3.9 / 2.9 %; the isolated table is the one measured with energy.)
        iso: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        for row in collective_rows(samples):
            iso.setdefault((row["kind"], row["mode"], row["size_bytes"]), []).append(row)
        iso_time: dict[tuple[str, str], list[tuple[float, float]]] = {}
        power: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for (kind, mode, size), rows in iso.items():  # campaigns merged by their median
            t = statistics.median(r["time_s"] for r in rows)
            e = statistics.median(statistics.mean(r["energy_j_per_gpu"]) for r in rows)
            iso_time.setdefault((kind, mode), []).append((math.log2(size), math.log2(t)))
            power.setdefault((kind, mode), []).append((math.log2(size), e / t))
        table.update(iso_time)
        pack = lambda d: {k: ([p[0] for p in sorted(v)], [p[1] for p in sorted(v)])  # noqa: E731
                          for k, v in d.items()}
        return cls(pack(table), pack(waits), pack(power))

    def power_w(self, kind: str, size: float, mode: str) -> float | None:
        """Measured board power during the collective (None where not sampled)."""
        xy = self.power.get((kind, mode)) or self.power.get((kind, "eager"))
        if not xy:
            return None
        return float(self.power_arrays(kind, np.array([size]), mode)[0])

    def power_arrays(self, kind: str, size: np.ndarray, mode: str) -> np.ndarray:
        xy = self.power.get((kind, mode)) or self.power.get((kind, "eager"))
        return np.interp(np.log2(np.maximum(size, 1.0)), xy[0], xy[1])

    def transfer_s(self, kind: str, size: float, group: int, mode: str) -> float:
        return float(self.transfer_arrays_one(kind, np.array([size], float),
                                              np.array([group], float), mode)[0])

    def transfer_arrays_one(self, kind: str, size: np.ndarray, group: np.ndarray,
                            mode: str) -> np.ndarray:
        """Transfer time of one collective kind and mode over arrays of sizes/groups."""
        xs, ys = self.table.get((kind, mode)) or self.table[(kind, "eager")]
        t = 2 ** np.interp(np.log2(np.maximum(size, 1.0)), xs, ys)
        # beyond the table: bandwidth-bound, linear in size
        t = np.where(size > 2 ** xs[-1], 2 ** ys[-1] * size / 2 ** xs[-1], t)
        # ring volume 2(n-1)/n (AllReduce) or (n-1)/n relative to n = 2
        ring = (2 * (group - 1) / group) if kind == "allreduce" else (group - 1) / group * 2
        return np.where(group > 2, t * ring, t)

    def transfer_arrays(self, kind, size, group, eager) -> np.ndarray:
        """transfer_s over arrays (kind: object array; eager: bool array)."""
        out = np.zeros(len(size))
        for k in set(kind):
            for e in (False, True):
                sel = (kind == k) & (eager == e)
                if sel.any():
                    out[sel] = self.transfer_arrays_one(k, size[sel], group[sel],
                                                        "eager" if e else "graph")
        return out

    def waits_for(self, kind, decode, mode_eager, size) -> np.ndarray:
        """wait_s over arrays: AllReduce only, by phase and run mode."""
        out = np.zeros(len(size))
        for d in (False, True):
            for m in (False, True):
                sel = (kind == "allreduce") & (decode == d) & (mode_eager == m)
                if sel.any():
                    out[sel] = self.wait_arrays("decode" if d else "prefill",
                                                "eager" if m else "graph", size[sel])
        return out

    def powers_for(self, kind, eager, size, default: float) -> np.ndarray:
        """power_w over arrays (kind: object array; eager: bool array); `default` where
        a collective was not sampled."""
        out = np.full(len(size), default)
        for k in set(kind):
            for e in (False, True):
                sel = (kind == k) & (eager == e)
                mode = "eager" if e else "graph"
                if sel.any() and (self.power.get((k, mode)) or self.power.get((k, "eager"))):
                    out[sel] = self.power_arrays(k, size[sel], mode)
        return out

    def wait_arrays(self, phase: str, mode: str, size: np.ndarray) -> np.ndarray:
        key = (phase, mode if phase == "decode" else "eager")
        if key not in self.waits:
            key = (phase, mode)
        if key not in self.waits:
            return np.zeros(len(size))
        xs, ys = self.waits[key]
        return np.interp(np.log2(np.maximum(size, 1.0)), xs, ys)

    def wait_s(self, phase: str, mode: str, size: float) -> float:
        return float(self.wait_arrays(phase, mode, np.array([size], float))[0])


# --- the cost model ---------------------------------------------------------------------
@dataclass
class LearnedModel:
    gpu: GPU
    kinds: dict[str, KindModel]
    comm: CommModel
    gap_graph_s: float = 2e-6
    host_launch_s: float = 7e-6         # host time per kernel in eager prefill
    eager_decode_launch_s: float = 2e-5  # host time per kernel in an eager decode step
    launch_gap_w: float = 120.0   # board power in launch gaps (measured)
    busy_wait_w: float = 121.5    # board power busy-polling in a collective (measured)
    comm_w: float = 200.0         # board power during a collective transfer (assumed)
    # in-situ / isolated kernel time ratio per phase (fitted on end-to-end runs)
    time_scale: dict[str, float] = field(default_factory=lambda: {"prefill": 1.0,
                                                                  "decode": 1.0})
    decode_batch_exponent: float = 0.0
    alpha_w: np.ndarray = field(default_factory=lambda: np.zeros(len(ALPHA_FEATURES)))
    alpha_b: float = 0.0
    intervals: dict[str, float] = field(default_factory=dict)  # group -> q90 |log ratio| energy
    time_intervals: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    name: str = "learned"
    # id(node) -> (node, time, power, out_of_range); holding the node keeps its id unique
    _cache: dict[int, tuple[Node, float, float, bool]] = field(default_factory=dict, repr=False)
    _alpha_memo: dict[tuple, float] = field(default_factory=dict, repr=False)

    # --- bulk prediction of compute leaves --------------------------------------------
    def prepare(self, items: list[tuple[Deployment, Node]]) -> None:
        """Predict every compute leaf of many trees in one GBDT call per kind."""
        # identical leaves (same kind, shape and mode; common across the decode steps of
        # similar deployments) are predicted once per call
        per_kind: dict[str, dict[tuple, list]] = {}
        for dep, tree in items:
            eager = dep.workload.mode == "eager"
            for _, _, leaf in tree.leaves():
                group = model_group(leaf.kind)
                if leaf.is_comm or group not in self.kinds:
                    continue
                key = (leaf.kind, leaf.phase, leaf.tokens, leaf.context_len, leaf.flops,
                       leaf.bytes_read, leaf.bytes_written, eager and leaf.phase == "decode")
                slot = per_kind.setdefault(group, {}).get(key)
                if slot is None:
                    slot = per_kind[group][key] = [leaf_features(leaf, dep.gpu,
                                                                 dep.workload.mode), []]
                slot[1].append(leaf)
        for kind, rows in per_kind.items():
            slots = list(rows.values())
            x = np.asarray([s[0] for s in slots])
            log_ratio, power, oor = self.kinds[kind].predict(x)
            for (_, leaves), lr, p, o in zip(slots, log_ratio, power, oor):
                t = _features.base_time_s(leaves[0], self.gpu) * math.exp(lr)
                for leaf in leaves:
                    self._cache[id(leaf)] = (leaf, t, float(p), bool(o))

    def clear(self) -> None:
        self._cache.clear()

    def _compute(self, node: Node, dep: Deployment) -> tuple[float, float, bool]:
        hit = self._cache.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1:]
        if len(self._cache) > 200_000:
            self._cache.clear()
        if model_group(node.kind) not in self.kinds:  # no samples: roofline at memory power
            return roofline_time_s(node, self.gpu), self.gpu.memory_power_w, True
        x = np.asarray([leaf_features(node, dep.gpu, dep.workload.mode)])
        lr, p, o = self.kinds[model_group(node.kind)].predict(x)
        out = (_features.base_time_s(node, self.gpu) * math.exp(lr[0]), float(p[0]),
               bool(o[0]))
        self._cache[id(node)] = (node, *out)
        return out

    def leaf_cost(self, node: Node, dep: Deployment) -> LeafCost:
        mode = dep.workload.mode
        eager = node.phase == "prefill" or mode == "eager"
        host = self.host_launch_s if node.phase == "prefill" else self.eager_decode_launch_s
        if node.is_comm:
            cmode = "eager" if eager else "graph"
            t = self.comm.transfer_s(node.kind, node.comm_bytes, node.group_size, cmode)
            w = self.comm.wait_s(node.phase or "decode", mode, node.comm_bytes) \
                if node.kind == "allreduce" else 0.0
            gap = node.launches * (host if eager else self.gap_graph_s)
            gap = max(0.0, gap - t) if eager else gap
            p = self.comm.power_w(node.kind, node.comm_bytes, cmode)
            return LeafCost(t, self.comm_w if p is None else p, gap, wait_s=w)
        t, p, oor = self._compute(node, dep)
        t *= self.time_scale.get(node.phase or "decode", 1.0)
        if node.phase == "decode" and self.decode_batch_exponent:
            # in-situ vs isolated kernel time drifts with the tokens of a decode step
            t *= (max(node.tokens, 1) / 16.0) ** self.decode_batch_exponent
        if eager:  # the host issues kernels; the GPU idles when it outruns the host
            gap = max(0.0, node.launches * host - t)
        else:
            gap = node.launches * self.gap_graph_s
        return LeafCost(t, priced_power_w(p, self.launch_gap_w, self.gpu), gap,
                        out_of_range=oor)

    def cost_arrays(self, r: dict[str, np.ndarray], mode_eager: np.ndarray):
        """`leaf_cost` over the rows of `fast._rows`: (time, power, gap, wait, oor) of one
        call of every leaf. tests/test_fast.py holds it equal to `leaf_cost`."""
        from piep.predict.features import feature_matrix
        n = len(r["flops"])
        decode = r["phase"] == 1
        eager = ~decode | mode_eager
        host = np.where(decode, self.eager_decode_launch_s, self.host_launch_s)
        nbytes = r["bytes_read"] + r["bytes_written"]
        roof = np.maximum(np.maximum(r["flops"] / self.gpu.bf16_flops,
                                     nbytes / self.gpu.hbm_bytes_per_s), 1e-9)
        t, p = np.zeros(n), np.zeros(n)
        oor = np.zeros(n, dtype=bool)
        x = feature_matrix({"tokens": r["tokens"], "flops": r["flops"], "bytes": nbytes,
                            "d_in": r["d_in"], "d_out": r["d_out"], "heads": r["heads"],
                            "kv_heads": r["kv_heads"], "context_len": r["context_len"],
                            "batch": r["batch_attr"], "width": r["width"],
                            "decode": decode, "eager": mode_eager}, self.gpu)
        group = r["group"] if "group" in r else \
            np.array([model_group(k) for k in r["kind"]], dtype=object)
        for g in set(group):
            sel = (group == g) & ~r["is_comm"]
            if not sel.any():
                continue
            if g not in self.kinds:  # no samples: roofline at memory power
                t[sel], p[sel], oor[sel] = roof[sel], self.gpu.memory_power_w, True
                continue
            # identical leaves (the same shape in many configurations) are predicted once
            xs = np.ascontiguousarray(x[sel])
            keys = xs.view(np.dtype((np.void, xs.dtype.itemsize * xs.shape[1]))).ravel()
            _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
            lr, pw, o = self.kinds[g].predict(xs[first])
            inv = inv.reshape(-1)
            base = roof[sel] + _features.KERNEL_FLOOR_S
            t[sel], p[sel], oor[sel] = base * np.exp(lr[inv]), pw[inv], o[inv]
        comp = ~r["is_comm"]
        t = np.where(comp & ~decode, t * self.time_scale.get("prefill", 1.0), t)
        t = np.where(comp & decode, t * self.time_scale.get("decode", 1.0), t)
        if self.decode_batch_exponent:
            t = np.where(comp & decode, t * (np.maximum(r["tokens"], 1) / 16.0)
                         ** self.decode_batch_exponent, t)
        gap = np.where(eager, np.maximum(0.0, r["launches"] * host - t),
                       r["launches"] * self.gap_graph_s)
        power = priced_power_w(p, self.launch_gap_w, self.gpu)
        wait = np.zeros(n)
        cm = r["is_comm"]
        if cm.any():
            kinds = r["kind"][cm]
            tc = self.comm.transfer_arrays(kinds, r["comm_bytes"][cm], r["group_size"][cm],
                                           eager[cm])
            t[cm] = tc
            g_c = r["launches"][cm] * np.where(eager[cm], host[cm], self.gap_graph_s)
            gap[cm] = np.where(eager[cm], np.maximum(0.0, g_c - tc), g_c)
            sizes = r["comm_bytes"][cm]
            wc = self.comm.waits_for(kinds, decode[cm], mode_eager[cm], sizes)
            pc = self.comm.powers_for(kinds, eager[cm], sizes, self.comm_w)
            wait[cm], power[cm] = wc, pc
            oor[cm] = False
        return t, power, gap, wait, oor

    def alpha_arrays(self, kind, phase, mode_eager, tokens) -> np.ndarray:
        """`alpha` over arrays (phase: 0 prefill, 1 decode)."""
        kinds, inv = np.unique(np.asarray(kind, dtype=object).astype(str), return_inverse=True)
        cat = np.array([[k in LINEAR_KINDS, k == "attention",
                         k in ("allreduce", "allgather", "p2p"), k == "pipeline_wait"]
                        for k in kinds], dtype=float)[inv.reshape(-1)]
        decode = (np.asarray(phase) == 1).astype(float)
        f = np.column_stack([decode, decode * mode_eager, cat,
                             1.0 - np.clip(cat.sum(1), 0, 1),
                             np.log10(np.maximum(tokens, 1.0)) / 3.0])
        return 1.0 + np.tanh(f @ self.alpha_w + self.alpha_b) / TAU

    def idle_power_w(self, dep: Deployment) -> float:
        return self.launch_gap_w

    def wait_power_w(self, dep: Deployment) -> float:
        return self.busy_wait_w

    def set_combiner(self, w: np.ndarray, b: float) -> None:
        """The only way to change W and b: the memo of alpha values depends on them."""
        self.alpha_w, self.alpha_b = np.asarray(w, dtype=float), float(b)
        self._alpha_memo.clear()

    def alpha(self, kind: str, phase: str, mode: str, tokens: float) -> float:
        key = (kind, phase, mode, tokens)
        hit = self._alpha_memo.get(key)
        if hit is None:
            f = alpha_features(kind, phase, mode, tokens)
            hit = 1.0 + math.tanh(float(np.dot(self.alpha_w, f)) + self.alpha_b) / TAU
            if len(self._alpha_memo) > 100_000:
                self._alpha_memo.clear()
            self._alpha_memo[key] = hit
        return hit

    def interval(self, dep: Deployment, energy_j: float, time_s: float) -> dict[str, Any]:
        group = interval_group(dep.workload.mode, dep.parallel)
        qe = self.intervals.get(group, self.intervals.get("all", 0.2))
        qt = self.time_intervals.get(group, self.time_intervals.get("all", 0.2))
        if dep.parallel.world_size > 2:  # collectives extrapolated beyond n = 2
            qe, qt = qe * 1.5, qt * 1.5
        return {"energy_j": [energy_j * math.exp(-qe), energy_j * math.exp(qe)],
                "time_s": [time_s * math.exp(-qt), time_s * math.exp(qt)],
                "level": "90% split-conformal (leave-one-model-out residuals, "
                         f"group {group})"}

    # --- persistence ---------------------------------------------------------------
    def save(self, folder: Path, **prov: Any) -> None:
        from piep.artifacts import write_json, write_text
        folder.mkdir(parents=True, exist_ok=True)
        kinds = {}
        for kind, km in self.kinds.items():
            write_text(folder / f"{kind}.time.txt", km.time_booster.model_to_string())
            write_text(folder / f"{kind}.power.txt", km.power_booster.model_to_string())
            kinds[kind] = {"mean": km.mean.tolist(), "std": km.std.tolist(),
                           "train_z": km.train_z.round(5).tolist(),
                           "oor_threshold": km.oor_threshold}
        write_json(folder / "predictor.json", SCHEMA, SCHEMA_VERSION, {
            "gpu": self.gpu.name, "features": list(FEATURES), "kinds": kinds,
            "comm": {"table": {f"{k[0]}|{k[1]}": v for k, v in self.comm.table.items()},
                     "waits": {f"{k[0]}|{k[1]}": v for k, v in self.comm.waits.items()},
                     "power": {f"{k[0]}|{k[1]}": v for k, v in self.comm.power.items()}},
            "terms": {"gap_graph_s": self.gap_graph_s, "host_launch_s": self.host_launch_s,
                      "eager_decode_launch_s": self.eager_decode_launch_s,
                      "launch_gap_w": self.launch_gap_w, "busy_wait_w": self.busy_wait_w,
                      "comm_w": self.comm_w, "time_scale": self.time_scale,
                      "decode_batch_exponent": self.decode_batch_exponent},
            "combiner": {"features": list(ALPHA_FEATURES), "W": self.alpha_w.tolist(),
                         "b": self.alpha_b, "tau": TAU},
            "intervals": {"energy_log": self.intervals, "time_log": self.time_intervals},
            "meta": self.meta}, **prov)

    @classmethod
    def load(cls, folder: Path, gpu: GPU) -> "LearnedModel":
        import lightgbm as lgb

        from piep.artifacts import read_json
        doc = read_json(folder / "predictor.json", SCHEMA, SCHEMA_VERSION)
        kinds = {}
        for kind, k in doc["kinds"].items():
            kinds[kind] = KindModel(
                lgb.Booster(model_str=(folder / f"{kind}.time.txt").read_text()),
                lgb.Booster(model_str=(folder / f"{kind}.power.txt").read_text()),
                np.asarray(k["mean"]), np.asarray(k["std"]), np.asarray(k["train_z"]),
                float(k["oor_threshold"]))
        unpack = lambda d: {tuple(key.split("|")): tuple(v) for key, v in d.items()}  # noqa: E731
        comm = CommModel(unpack(doc["comm"]["table"]), unpack(doc["comm"]["waits"]),
                         unpack(doc["comm"].get("power", {})))
        return cls(gpu, kinds, comm, **doc["terms"], alpha_w=np.asarray(doc["combiner"]["W"]),
                   alpha_b=float(doc["combiner"]["b"]),
                   intervals=doc["intervals"]["energy_log"],
                   time_intervals=doc["intervals"]["time_log"], meta=doc.get("meta", {}))


def interval_group(mode: str, parallel) -> str:
    lay = "tp" if parallel.tp > 1 else "pp" if parallel.pp > 1 else "dp" if parallel.dp > 1 \
        else "single"
    return f"{mode}/{lay}"


def alpha_features(kind: str, phase: str, mode: str, tokens: float) -> np.ndarray:
    decode = 1.0 if phase == "decode" else 0.0
    return np.asarray([
        decode, decode * (mode == "eager"), float(kind in LINEAR_KINDS),
        float(kind == "attention"), float(kind in ("allreduce", "allgather", "p2p")),
        float(kind == "pipeline_wait"),
        float(kind not in LINEAR_KINDS and kind not in ("attention", "allreduce", "allgather",
                                                          "p2p", "pipeline_wait")),
        math.log10(max(tokens, 1.0)) / 3.0,
    ])


def predictor_dir(gpu: str) -> Path:
    from piep.artifacts import calibration_dir
    return calibration_dir(gpu) / "predictor"


@lru_cache(maxsize=4)
def load_learned(gpu: str) -> LearnedModel | None:
    """The shipped learned predictor for `gpu`, or None while none is trained."""
    from piep.gpus import load_gpu
    folder = predictor_dir(gpu)
    if not (folder / "predictor.json").is_file():
        return None
    try:
        import lightgbm  # noqa: F401
    except ImportError:
        log.warning("lightgbm is not installed: falling back to the roofline predictor")
        return None
    return LearnedModel.load(folder, load_gpu(gpu))

