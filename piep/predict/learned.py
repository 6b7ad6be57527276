"""Learned predictor: module models over the roofline, measured collectives, host terms and
the tanh combiner, each a part with one job:

* `ModuleModels` (`module_models.py`): compute rows' isolated time and power;
* `Collectives` (`collectives.py`): transfer time, power and waiting time of collectives;
* `HostTerms` (`host.py`): launch gaps and in-situ corrections of the reference runner;
* `Combiner` (here): alpha per node, alpha = 1 + tanh(W.f(c) + b) / tau (IrEne's
  form), fitted on end-to-end runs; W = 0, b = 0 is the plain sum.

Files are read and written by `store.py`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from piep.core.gpus import GPU
from piep.core.layout import Deployment
from piep.predict.collectives import Collectives
from piep.predict.host import HostTerms
from piep.predict.module_models import ModuleModels, ModuleOutputs, priced_power_w
from piep.predict.pricing import Prices
from piep.predict.table import KIND_ID, KIND_NAMES, KINDS, LeafTable, product
from piep.predict.timeline import stage_keys
from piep.tree.builder import ATTENTION_LIKE, LINEAR_KINDS, PAGED_ATTENTION
from piep.tree.nodes import COMM_KINDS

log = logging.getLogger("piep.predict")
# an interval's log half-widths are widened by this where the prediction leaves what was
# measured: module models extrapolating (out_of_range), collectives beyond n = 2, an
# engine at a tp degree none of its runs had. A caution, not a fit (on the committed
# engine runs the out_of_range runs were predicted no worse than the others;
# reports/engines.md)
OUT_OF_RANGE_WIDENING = 1.5


TAU = 2.5
FEATURES = ("decode", "eager_decode", "linear", "attention", "comm", "wait", "other",
            "log_tokens")
# generate()'s decode-step experts (two long kernels: a gather of weights and a batched
# GEMV over them, memory-bound as a decode projection is) count as projections for the
# combiner; an FP8 projection stays apart (eight short elementwise kernels quantize its
# input before its GEMM). Set after the first held-out comparison (reports/moe.md)
GEMM_LIKE = LINEAR_KINDS + ("experts_batched", "experts_bmm", "experts_fused")
# per kind (KINDS order): linear, attention, communication, pipeline wait
_CATEGORY = np.array([[k in GEMM_LIKE, k in ATTENTION_LIKE + (PAGED_ATTENTION,), k in COMM_KINDS,
                       k == "pipeline_wait"] for k in KINDS], dtype=float)


@dataclass(frozen=True)
class Combiner:
    w: np.ndarray = field(default_factory=lambda: np.zeros(len(FEATURES)))
    b: float = 0.0
    tau: float = TAU

    @staticmethod
    def features(kind_id: np.ndarray, decode: np.ndarray, mode_eager: np.ndarray,
                 tokens: np.ndarray) -> np.ndarray:
        """f(c) of many nodes (kind_id indexes `piep.predict.table.KINDS`)."""
        cat = _CATEGORY[np.asarray(kind_id)]
        decode = np.asarray(decode, dtype=float)
        return np.column_stack([decode, decode * np.asarray(mode_eager, dtype=float), cat,
                                1.0 - np.clip(cat.sum(1), 0, 1),
                                np.log10(np.maximum(tokens, 1.0)) / 3.0])

    def alpha(self, kind_id, decode, mode_eager, tokens) -> np.ndarray:
        return self.weights(self.features(kind_id, decode, mode_eager, tokens))

    def table_alphas(self, table) -> tuple[np.ndarray, np.ndarray]:
        """alpha of every row of a leaf table and of its segments' pipeline bubbles; the
        features are the table's own, computed once (re-pricing with other host terms
        changes none of them)."""
        f = table.derived.get("combiner")
        if f is None:
            seg = table.segments
            f = table.derived["combiner"] = (
                self.features(table.kind_id, table.decode, table.mode_eager, table.q["tokens"]),
                self.features(np.full(len(seg), KIND_ID["pipeline_wait"]), seg.phase == 1,
                              table.eager[seg.cfg], seg.tokens))
        # and the alphas, while this combiner prices it (a fit of host terms re-prices one
        # table hundreds of times with the same combiner)
        key = (self.w.tobytes(), self.b, self.tau)
        cached = table.derived.get("alphas")
        if cached is None or cached[0] != key:
            cached = table.derived["alphas"] = (key, self.weights(f[0]), self.weights(f[1]))
        return cached[1], cached[2]

    def weights(self, f: np.ndarray) -> np.ndarray:
        """alpha of feature rows."""
        return 1.0 + np.tanh(product(f, self.w) + self.b) / self.tau


@dataclass(eq=False)  # one predictor is one object: hashed and compared by identity
class LearnedModel:
    gpu: GPU
    modules: ModuleModels
    collectives: Collectives
    host: HostTerms = field(default_factory=HostTerms)
    combiner: Combiner = field(default_factory=Combiner)
    intervals: dict[str, float] = field(default_factory=dict)  # group -> q90 |log ratio| energy
    time_intervals: dict[str, float] = field(default_factory=dict)
    # group -> what its band is (`piep.stats.conformal.basis`)
    interval_basis: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    # an engine profile's measured tp degrees (empty: the reference runner, measured at
    # every degree up to n = 2)
    measured_tp: tuple[int, ...] = ()
    name: str = "learned"

    def on_gpu(self, gpu: GPU) -> "LearnedModel":
        """The same model over another GPU profile (its roofline and features)."""
        return replace(self, gpu=gpu)

    def price(self, table: LeafTable, modules: ModuleOutputs | None = None) -> Prices:
        """Every row of `table`; `modules` when the caller already holds the module
        models' outputs for it (training re-prices one table many times)."""
        mo = modules or self.modules.predict(table, self.gpu)
        host = self.host
        decode, mode_eager = table.decode, table.mode_eager
        eager = ~decode | mode_eager  # prefill runs eagerly in both modes
        t = host.kernel_time_s(mo.time_s, decode, table.q["tokens"], table.kind_id)
        if table.fused is not None and host.fused_kernel_s:
            moved = table.q["bytes_read"] + table.q["bytes_written"]
            t = np.where(table.fused, host.fused_time_s(moved, self.gpu.hbm_bytes_per_s), t)
        power = priced_power_w(mo.power_w, host.launch_gap_w, self.gpu)
        wait = np.zeros(len(table))
        cm = table.is_comm
        if cm.any():
            kinds, sizes = KIND_NAMES[table.kind_id[cm]], table.q["comm_bytes"][cm]
            t[cm] = self.collectives.transfer_s(kinds, sizes, table.group_size[cm], eager[cm])
            power[cm] = self.collectives.power_w(kinds, sizes, eager[cm], host.comm_w)
            wait[cm] = self.collectives.wait_s(kinds, decode[cm], mode_eager[cm], sizes)
        factor = 1.0  # per row: the host's time relative to the terms' host
        if host.host_probe_ref_s:  # only a profile fitted per host reads the deployments'
            factor = host.host_factor(table.host_probes())[table.cfg]
        # a host queueing ahead of the GPU idles it per segment and stage, not per row
        group = stage_keys(table.segment, table.stage, table.pp)[0] if host.queue_ahead \
            else None
        gap = host.gap_s(table.launches, t + wait, decode, eager, factor, count=table.count,
                         group=group, sliding=table.sliding)
        gap_w = None
        split = table.tp[table.cfg] > 1
        if (host.tp_call_host_s or host.tp_step_host_s) and split.any():
            # transformers' tensor-parallel path: host time per sharded module call and
            # per compiled step, in gaps of their own board power
            sharded = np.where(split, table.q["tp_calls"], 0.0)
            tp_gap = host.gap_s(table.launches, t + wait, decode, eager, factor,
                                count=table.count, group=group, sliding=table.sliding,
                                sharded=sharded) - gap
            tp_gap = tp_gap + np.where(split & decode & ~mode_eager
                                       & (table.kind_id == KIND_ID["sampling"]),
                                       host.tp_step_host_s * factor, 0.0)
            tp_w = host.launch_gap_w if host.tp_gap_w is None else host.tp_gap_w
            total = gap + tp_gap
            gap_w = np.where(total > 0, (gap * host.launch_gap_w + tp_gap * tp_w)
                             / np.where(total > 0, total, 1.0), host.launch_gap_w)
            gap = total
        if host.step_host_s or host.request_host_s:  # per step (and request), beside sampling
            per_step = (host.step_host_s + host.request_host_s * table.q["tokens"]) * factor
            gap = gap + np.where(table.kind_id == KIND_ID["sampling"], per_step, 0.0)
        if host.key_host_s:  # per key an iteration reads, shared by its K/V gathers
            gather = table.kind_id == KIND_ID["kv_gather"]
            calls = np.bincount(table.cfg[gather], weights=table.count[gather],
                                minlength=len(table.deps))
            per_call = host.key_host_s * table.q["context_len"] * factor \
                / np.maximum(calls[table.cfg], 1.0)
            gap = gap + np.where(gather, per_call, 0.0)
        if host.call_host_s:  # once per call: beside the prefill's sampling
            gap = gap + np.where((table.kind_id == KIND_ID["sampling"]) & ~decode,
                                 host.call_host_s * factor, 0.0)
        alpha, segment_alpha = self.combiner.table_alphas(table)
        return Prices(
            time_s=t, power_w=power, gap_s=gap, wait_s=wait,
            out_of_range=mo.out_of_range & ~cm, alpha=alpha, segment_alpha=segment_alpha,
            idle_w=host.launch_gap_w, wait_w=host.busy_wait_w, limit=host.board_limit(),
            gap_w=gap_w)

    def interval(self, dep: Deployment, energy_j: float, time_s: float, *,
                 far: bool = False) -> dict[str, Any]:
        """The 90 % interval of a prediction of `dep`: the held-out half-widths of its
        group (named for what they are: `interval_basis`), widened where collectives are
        extrapolated beyond n = 2, where an engine runs at a tp degree its profile never
        measured and where the module models extrapolate (`far`)."""
        group = interval_group(dep.workload.mode, dep.parallel)
        if group not in self.intervals:  # an engine profile's pooled residuals
            group = "all"
        qe = self.intervals.get(group, 0.2)
        qt = self.time_intervals.get(group, self.time_intervals.get("all", 0.2))
        level = self.interval_basis.get(
            group, f"90 % jackknife interval (leave-one-model-out residuals, group {group})")
        widened = [what for what, beyond in (
            ("collectives beyond 2 GPUs", dep.parallel.world_size > 2),
            (f"the engine at tp={dep.parallel.tp}, which none of its runs had",
             bool(self.measured_tp) and dep.parallel.tp not in self.measured_tp),
            ("the module models extrapolate", far),
            ("experts sharded over the ranks, which no run had", dep.parallel.ep > 1))
            if beyond]
        for what in widened:
            qe, qt = qe * OUT_OF_RANGE_WIDENING, qt * OUT_OF_RANGE_WIDENING
            level += f"; widened x{OUT_OF_RANGE_WIDENING} (log): {what}"
        return {"energy_j": [energy_j * math.exp(-qe), energy_j * math.exp(qe)],
                "time_s": [time_s * math.exp(-qt), time_s * math.exp(qt)], "level": level}


def interval_group(mode: str, parallel) -> str:
    lay = "tp" if parallel.tp > 1 else "pp" if parallel.pp > 1 else "dp" if parallel.dp > 1 \
        else "single"
    return f"{mode}/{lay}"
