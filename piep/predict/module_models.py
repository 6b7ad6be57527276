"""Module models: one pair of LightGBM GBDTs per group of node kinds, trained on isolated
module samples.

They learn log(measured time / (roofline time + 1 us)) (the achieved efficiency; the
roofline carries the scaling) and the power that prices a call (energy per call / time
per call). Rows far from the training data (nearest-neighbour distance in normalized
feature space) are flagged `out_of_range`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from piep.core.gpus import GPU
from piep.predict import features as _features
from piep.predict.table import MATRIX_MNK
from piep.predict.features import feature_matrix, leaf_features
from piep.predict.gbdt import (Forest, distinct_columns, joint_splits, predict_aside,
                               predict_together)
from piep.tree.builder import (GROUPED_KINDS, LINEAR_KINDS, PAGED_ATTENTION,
                                even_grouped_rows, expands_kv, routed_padding)
from piep.tree.nodes import COMPUTE_KINDS, COPY_KINDS, Node

GBDT_PARAMS = {"objective": "regression", "learning_rate": 0.15, "max_depth": 7,
               "num_leaves": 15, "feature_fraction": 0.8, "min_data_in_leaf": 3,
               "min_data_in_bin": 1, "lambda_l2": 1.0, "verbose": -1, "num_threads": 1,
               "seed": 0, "deterministic": True}
ROUNDS = 100  # with lr 0.15: the same 5-fold module error as 300 x 0.05, 3x faster
# groups whose few, noisy samples the settings above overfit: transformers' masked SDPA
# (170 samples over heads, head dim, batch, query and context lengths; the efficient-
# attention kernel) took steps in context: its time fell by up to half where the context
# grew. Smaller trees, stochastic boosting and a slower rate: 5-fold module energy error
# on held-out shapes 20.5 -> 16.8 %, steps of a decode grid where a longer context is
# predicted more than 5 % faster 11.7 -> 4.9 % (python benchmarks/module_smoothness.py)
GROUP_FITS = {"sdpa_masked": ({"num_leaves": 7, "min_data_in_leaf": 8, "lambda_l2": 5.0,
                               "learning_rate": 0.03, "bagging_fraction": 0.6,
                               "bagging_freq": 1}, 500)}


CONSTANT_STD = 1e-6  # a feature whose samples spread less than this is constant


# rows of a kind from which its GBDTs run on two threads (`boosted`), or beside the
# caller on a worker thread (`boosted_aside`)
MANY_ROWS = 256


@dataclass
class KindModel:
    time_booster: Any
    power_booster: Any
    mean: np.ndarray
    std: np.ndarray
    train_z: np.ndarray
    oor_threshold: float
    _train_sq: np.ndarray | None = field(default=None, repr=False, compare=False)
    _splits: tuple | None = field(default=None, repr=False, compare=False)

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(log time ratio, power, out of range) of each row of `x`."""
        return (*self.boosted(x), self.out_of_range(x))

    def boosted(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log time ratio, power) of each row of `x`: the GBDTs (read from text: both
        walk one row per cell of their splits together)."""
        threads = 2 if len(x) > MANY_ROWS else 1
        forests = self._forests()
        if forests is None:  # LightGBM's, as trained
            return tuple(b.predict(x, num_threads=threads)
                         for b in (self.time_booster, self.power_booster))
        log_ratio, power = predict_together(forests[0], x, threads, forests[1])
        return log_ratio, power

    def boosted_aside(self, x: np.ndarray) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
        """`boosted`, evaluated on a worker thread while the caller goes on
        (`predict_aside`; LightGBM's boosters as trained answer at once): the function
        returned waits for it."""
        forests = self._forests()
        if len(x) <= MANY_ROWS or forests is None:
            answer = self.boosted(x)  # a few rows (a prediction): no thread
            return lambda: answer
        wait = predict_aside(forests[0], x, forests[1])
        return lambda: tuple(wait())

    def _forests(self) -> tuple[list[Forest], tuple] | None:
        """(the GBDT pair read from text, their joint splits, kept), or None where the
        boosters are LightGBM's as trained."""
        pair = [self.time_booster, self.power_booster]
        if not all(isinstance(b, Forest) for b in pair):
            return None
        if self._splits is None:
            self._splits = joint_splits(pair)
        return pair, self._splits

    def out_of_range(self, x: np.ndarray) -> np.ndarray:
        """Standardized distance to the nearest training sample above the threshold (a
        search over the samples in chunks of leaves, `nearest_distance`: no spatial index
        to import or build, bounded memory)."""
        if len(self.train_z) == 0:
            return np.ones(len(x), dtype=bool)
        z = self._standard(x)  # (holds the samples' squared norms)
        return farther_than(z, self.train_z, self._train_sq, self.oor_threshold)

    def reach(self, x: np.ndarray) -> np.ndarray:
        """Each row's standardized distance to its nearest training sample over the
        threshold (above 1: out of range)."""
        if len(self.train_z) == 0 or len(x) == 0:
            return np.full(len(x), np.inf)
        z = self._standard(x)
        return nearest_distance(z, self.train_z, self._train_sq) / self.oor_threshold

    def _standard(self, x: np.ndarray) -> np.ndarray:
        """Rows standardized as the samples were. A feature constant over the samples
        (eager decode where only graph decode was sampled) cannot split the GBDTs, so it
        does not make a leaf far from them."""
        if self._train_sq is None:
            self._train_sq = (self.train_z * self.train_z).sum(1)
        return (x - self.mean) / np.where(self.std > CONSTANT_STD, self.std, np.inf)


def nearest_distance(z: np.ndarray, train: np.ndarray, train_sq: np.ndarray, *,
                     itself: bool = False) -> np.ndarray:
    """Each row's distance to its nearest row of `train` (`train_sq`: their squared
    norms; `itself`: `z` is `train`, each row's nearest other row). The nearest is found
    by `_nearest` in double precision, its distance then computed directly (no
    cancellation)."""
    nearest, _ = _nearest(z, -2.0 * train.T, train_sq, itself=itself)
    diff = z - train[nearest]
    return np.sqrt((diff * diff).sum(1))


def _nearest(z: np.ndarray, neg2_t: np.ndarray, train_sq: np.ndarray, *,
             itself: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(each row's nearest row of the samples, its |t|^2 - 2 z.t) in the precision of
    `neg2_t` (-2 x the samples, transposed) and `train_sq` (their squared norms): one
    matrix product per chunk of rows (|z|^2 is the row's own); `itself`: `z` is the
    samples, each row's nearest other row."""
    nearest, low = np.empty(len(z), dtype=np.intp), np.empty(len(z))
    step = max(1, OOR_CHUNK // len(train_sq))
    for i in range(0, len(z), step):
        score = z[i:i + step] @ neg2_t
        score += train_sq
        rows = np.arange(len(score))
        if itself:
            score[rows, rows + i] = np.inf
        nearest[i:i + step] = best = score.argmin(1)
        low[i:i + step] = score[rows, best]
    return nearest, low


def farther_than(z: np.ndarray, train: np.ndarray, train_sq: np.ndarray,
                 limit: float) -> np.ndarray:
    """Whether each row's nearest row of `train` is farther than `limit`: what
    `nearest_distance` answers, found in single precision where that is sure (`_screen`).
    Rows within `limit` of one of a strided subset of `SCREEN_SAMPLES` samples are within
    it (most rows of a sweep); the others are screened over every sample, and the rows
    that screen leaves unsure searched in double precision."""
    far = np.zeros(len(z), dtype=bool)
    if len(z) == 0:
        return far
    reach = math.sqrt(train_sq.max())
    rest = np.arange(len(z))
    if len(train) > 2 * SCREEN_SAMPLES:
        some = np.linspace(0, len(train) - 1, SCREEN_SAMPLES).astype(np.intp)
        rest = np.flatnonzero(~_screen(z, train[some], train_sq[some], limit, reach)[0])
    z = z[rest]
    within, beyond = _screen(z, train, train_sq, limit, reach)
    far[rest[beyond]] = True
    unsure = ~(within | beyond)
    if unsure.any():
        far[rest[unsure]] = ~(nearest_distance(z[unsure], train, train_sq) <= limit)
    return far


def _screen(z: np.ndarray, train: np.ndarray, train_sq: np.ndarray, limit: float,
            reach: float) -> tuple[np.ndarray, np.ndarray]:
    """(rows surely within `limit` of a row of `train`, rows surely farther than it from
    every one) by a single-precision search. Its nearest row within `limit` less a margin
    is a row within it; its smallest |z|^2 - 2 z.t + |t|^2 above `limit` plus the margin
    puts every row beyond it. The margin (64 units of single precision of (|z| +
    `reach`)^2, `reach` the largest |t| of all the samples) bounds the search's rounding,
    and double precision's."""
    nearest, low = _nearest(z.astype(np.float32), np.ascontiguousarray(
        -2.0 * train.T, dtype=np.float32), train_sq.astype(np.float32))
    z_sq = (z * z).sum(1)
    diff = z - train[nearest]
    margin = 64 * SINGLE_UNIT * (np.sqrt(z_sq) + reach) ** 2
    return ((diff * diff).sum(1) <= limit * limit - margin,
            low + z_sq > limit * limit + margin)


# samples of a kind's range test screened first (`farther_than`)
SCREEN_SAMPLES = 128
SINGLE_UNIT = 2.0 ** -24  # single precision's unit roundoff
# leaves x samples compared at once by the range test: one product of m.n.k
# MATRIX_MNK, which OpenBLAS runs on one thread (`piep.predict.table.product`)
OOR_CHUNK = MATRIX_MNK // len(_features.FEATURES)


def _fit_kind(x: np.ndarray, log_ratio: np.ndarray, power: np.ndarray,
              group: str = "") -> KindModel:
    import lightgbm as lgb
    changes, rounds = GROUP_FITS.get(group, ({}, ROUNDS))
    params = {**GBDT_PARAMS, **changes}
    # the booster as trained (not LightGBM's default round trip through its text, which
    # gives the same trees: the fit's slowest step after the boosting itself)
    tb = lgb.train(params, lgb.Dataset(x, log_ratio, params={"verbose": -1}), rounds,
                   keep_training_booster=True)
    pb = lgb.train(params, lgb.Dataset(x, power, params={"verbose": -1}), rounds,
                   keep_training_booster=True)
    mean, std = x.mean(0), x.std(0) + 1e-9
    z = (x - mean) / std
    if len(z) > 1:  # each sample's distance to its nearest other sample
        near = nearest_distance(z, z, (z * z).sum(1), itself=True)
        thr = float(np.quantile(near, 0.95) * 1.5)
    else:
        thr = 0.0
    return KindModel(tb, pb, mean, std, z, thr)


def sample_leaf(sample) -> Node:
    """The leaf a module sample measured (a `piep.core.samples.ModuleSample`)."""
    from piep.tree.builder import leaf_from_shape
    return leaf_from_shape({k: v for k, v in sample.shape.items() if k != "mode"})


# the KV copies a graph-mode decode step compiles (hf-static's repeat_kv: inductor's copy
# kernel); in an eager decode step (hf-eager's past a sliding window) the same shape runs
# eager's strided copy, several times slower
COMPILED_COPIES = ("kv_expand",)


def model_group(kind: str, decode: bool | None = None, eager: bool = False) -> str:
    """Kinds that run the same kernels share one pair of GBDTs (their shapes are in the
    features): all projections (GEMMs), and both RMSNorms. Each then learns from far more
    samples than a kind alone has. A KV-cache copy has one pair per phase: the same
    shape runs other kernels in a compiled decode step (inductor's copy) than in eager
    prefill code (a strided copy several times slower); a copy that a graph-mode decode
    step compiles has one more pair for eager decode (one pair over both missed hf-static's
    compiled copies: leave-one-model-out energy 4.4 -> 5.5 %)."""
    if kind == "experts_fused":  # (vLLM's Triton kernel: not torch's grouped GEMM)
        return kind
    if kind in GROUPED_KINDS:  # (one kernel over many experts' weights: not a GEMM's)
        return "experts"
    if kind in LINEAR_KINDS:
        return "linear"
    if kind in COPY_KINDS and decode is not None:
        eager_copy = decode and eager and kind in COMPILED_COPIES
        return f"{kind}.{'decode' if decode else 'prefill'}{'.eager' if eager_copy else ''}"
    return "norm" if kind in ("rmsnorm", "final_norm") else kind


def grouped_padding(table) -> np.ndarray | float:
    """Per row of a leaf table: the rows its kernel computes per row it routes (a grouped
    GEMM's experts each rounded up to whole tiles under its deployment's routing,
    `piep.tree.builder.routed_padding`; 1 elsewhere, and 1.0 for a table without them)."""
    from piep.predict.table import KIND_ID
    rows = np.flatnonzero(np.isin(table.kind_id, [KIND_ID[k] for k in GROUPED_KINDS]))
    if not len(rows):
        return 1.0
    out = np.ones(len(table))
    pairs, d_out = table.q["tokens"], table.q["d_out"]
    for c in np.unique(table.cfg[rows]):
        mine = rows[table.cfg[rows] == c]
        shapes, inv = np.unique(np.stack([pairs[mine], d_out[mine]]), axis=1,
                                return_inverse=True)
        out[mine] = routed_padding(table.deps[c], *shapes)[inv.ravel()]
    return out


# where a kind without module samples of its own is priced (predictors trained before
# transformers' masked SDPA was sampled price it as the unmasked attention; before the
# sliding cache's strided concatenation was sampled, as the contiguous one)
FALLBACK_GROUP = {"sdpa_masked": "attention", "kv_slide.decode": "kv_append.decode",
                  "kv_expand.decode.eager": "kv_expand.decode",
                  # before they were sampled: GeGLU's gate as SwiGLU's (one elementwise
                  # kernel and a multiply over the same bytes), a scalar multiply as an add
                  "geglu": "activation", "scale": "residual",
                  # eager attention's passes over its scores, as elementwise kernels
                  "scores": "activation",
                  # a mixture of experts' routing (softmax, top-k, sort: elementwise-bound
                  # passes over tokens x experts) and its copies of hidden states
                  "routing": "activation", "moe_copy": "residual",
                  # transformers' masks of the routed rows, as the copies of the same bytes
                  # (before masked_fill was sampled)
                  "moe_mask": "moe_copy",
                  # vLLM's fused MoE GEMM (no sample of its Triton kernel): as a GEMM
                  # reading the weights of every expert reached (how the experts were
                  # priced before torch's grouped GEMM was sampled; set after the public
                  # vLLM rows of Qwen3-30B-A3B were priced by the grouped GEMM's models,
                  # 1.8x their energy: reports/public.md)
                  "experts_fused": "linear",
                  # the experts' grouped GEMMs as GEMMs (predictors trained before their
                  # samples had a group of their own); an FP8 projection as a bf16 one
                  # (flagged `fp8_unsampled`)
                  "experts": "linear", "fp8_linear": "linear",
                  # Llama 4's batched GEMM over every expert, as one GEMM of the same work
                  "experts_bmm": "linear",
                  # gpt-oss's eager attention, whole, as the masked SDPA over its keys
                  "sinks_attention": "sdpa_masked",
                  # continuous batching's packed attention: its power as the attention's
                  # (its time from `PackedKernel` until it is sampled)
                  PAGED_ATTENTION: "attention"}
# a kind priced by its fallback's models runs this many times longer than they say:
# transformers' masks of the routed rows (masked_fill under a (rows, 1) mask, a slower
# kernel path) against the row gathers of `moe_copy`, the median over 28 tensors of the
# MoE designs' prefills, each pair on one card (an H100: device call 80,
# calibration/h100/moe/moe_kernels_ab_s80.jsonl, 2.37-3.08; no H200 came that session)
FALLBACK_TIME = {"moe_mask": 2.83}
# generate()'s decode-step experts (`experts_batched`) gather each pair's weights from the
# rank's table of experts; their samples gathered from a table of 8 (the sampler's op),
# which runs faster the fewer the experts. Per table size (experts on a rank), the median
# time of the gather + bmm from every expert over from a table of 8, each pair on one card,
# over two calls on H100s (no H200 came): call 94 at batch 8 and 32 on every MoE design's
# shape, call 97 at batch 8-192 on six (calibration/h100/moe/experts_table_ab_s9*.jsonl);
# between sizes, linear in log2(experts), held at the ends
BATCHED_TABLE_TIME = ((8, 0.985), (16, 1.073), (32, 1.129), (60, 1.165), (64, 1.132),
                      (128, 1.221), (256, 1.328))


def batched_table_time(experts: np.ndarray) -> np.ndarray:
    """How many times longer a decode step's experts run, gathered from a table of
    `experts`, than their samples (`BATCHED_TABLE_TIME`)."""
    size, ratio = (np.array(v, float) for v in zip(*BATCHED_TABLE_TIME))
    return np.interp(np.log2(np.maximum(experts, 1.0)), np.log2(size), ratio)


@dataclass(frozen=True)
class PackedKernel:
    """The time of SDPA under an arbitrary additive mask (continuous batching's packed
    iteration, `sdpa_paged`) before it is sampled. PyTorch runs it with the
    memory-efficient kernel, which does not split the keys: a block of `q_tile` queries of
    one head walks every key, `blocks` blocks run at once, so the time is the waves of
    blocks x the keys x a cost per key that grows with the head dim. A decoding
    iteration's few queries make one wave whatever the heads: its time follows the keys
    alone, where the unmasked SDPA the attention samples ran follows heads x keys. Fitted
    on device call 81's A/B on an H100 (80 iterations at 16-48 heads of 128 and 32 of 64:
    5.5 % mean error; `python benchmarks/paged_attention_ab.py --fit
    calibration/h100/serving/paged_attention_ab_s81.jsonl`): the H200 has the same die of
    132 SMs, and the hf-cb profile scales its time on the H200's logged iterations."""
    q_tile: int = 64
    blocks: float = 220.0
    key_s: float = 7.2e-9       # per key and wave
    key_dim_s: float = 1.13e-10  # per key, wave and unit of head dim
    floor_s: float = 2.3e-5
    sms: int = 132

    def _blocks(self, q) -> tuple[np.ndarray, ...]:
        t, k, h = (np.maximum(q[f], 1.0) for f in ("tokens", "context_len", "heads"))
        return h * np.ceil(t / self.q_tile), k, q["flops"] / (4.0 * t * k * h)

    def time_s(self, q) -> np.ndarray:
        """Per row of a leaf table's quantities `q` (queries `tokens`, keys
        `context_len`, `heads`; the head dim from the FLOPs, 4 x queries x keys x heads x
        head dim)."""
        blocks, keys, dim = self._blocks(q)
        waves = np.ceil(blocks / self.blocks)
        return self.floor_s + waves * keys * (self.key_s + self.key_dim_s * dim)

    def power_w(self, q, busy_w: np.ndarray, idle_w: float) -> np.ndarray:
        """Board power while it runs: above idle by `busy_w`'s share of the SMs its blocks
        keep busy (a decoding iteration's one head a block leaves most of them idle)."""
        share = np.minimum(1.0, self._blocks(q)[0] / self.sms)
        return idle_w + (busy_w - idle_w) * share


PACKED: PackedKernel | None = PackedKernel()  # (None: as the attention's models price it)


def _call_power_w(sample) -> float:
    """Board power that prices one call: energy per call over its event-timed duration.
    Long prefill GEMMs slow down ~14 % inside the energy window (sustained power lowers the
    clock), so the window's mean power x the event time would miss that energy."""
    return sample.energy_j / max(sample.time_s, 1e-9)


# The power that prices a call may exceed the board limit: energy per call / event time
# of kernels that slow down under sustained power reached 906 W (1.29x 700 W) in the
# module samples. The bounds only stop a GBDT extrapolating to absurd values.
POWER_CEILING = 1.35  # x the GPU's board power limit


def priced_power_w(p, floor_w: float, gpu: GPU):
    """A module model's power output within [floor_w, POWER_CEILING x board limit]."""
    return np.minimum(np.maximum(p, floor_w), gpu.max_power_w * POWER_CEILING)


def is_fitted(sample) -> bool:
    """Whether a module sample trains the module models: not a repeat; not a repeat_kv of
    one KV head (a view: no kernel was timed); not a KV copy outside a decode step (eager
    copies price only continuous batching's iterations, and its serving fit was worse
    with them: leave-one-shape-out energy 9.7 % against 5.8 % at the copy rate)."""
    if sample.repeat or sample.kind not in COMPUTE_KINDS + COPY_KINDS:
        return False
    if sample.kind == "kv_expand" and not expands_kv(sample.shape["heads"],
                                                     sample.shape["kv_heads"]):
        return False
    return not (sample.kind in COPY_KINDS and sample.phase != "decode")


def fit_module_models(samples: list, gpu: GPU,
                      prepared: list | None = None) -> dict[str, KindModel]:
    """The GBDT pair of every kind group, fitted on the samples that train them;
    `prepared`: their `training_rows`, computed once for fits on subsets of the same
    samples (leave one model out fits one per model)."""
    by_kind: dict[str, list] = {}
    for kept in training_rows(samples, gpu) if prepared is None else prepared:
        if kept is not None:
            group, f, ratio, power = kept
            by_kind.setdefault(group, []).append((f, ratio, power))
    models = {}
    for kind, rows in sorted(by_kind.items()):
        x = np.asarray([r[0] for r in rows])
        models[kind] = _fit_kind(x, np.asarray([r[1] for r in rows]),
                                 np.asarray([r[2] for r in rows]), kind)
    return models




def training_rows(samples: list, gpu: GPU) -> list[tuple | None]:
    """Each sample as its group's GBDTs learn it (None: a sample no model trains on)."""
    return [_training_row(s, gpu) if is_fitted(s) else None for s in samples]


def _training_row(sample, gpu: GPU) -> tuple[str, list[float], float, float]:
    """A sample as its group's GBDTs learn it: group, features, log time ratio, power."""
    leaf = sample_leaf(sample)
    f = leaf_features(leaf, gpu, sample.mode)
    computed = None  # (a grouped GEMM's rows in whole tiles: the sampler's even split)
    if leaf.kind in GROUPED_KINDS and leaf.tokens:
        a = leaf.attrs
        computed = leaf.flops * float(even_grouped_rows(leaf.tokens, a["experts"], a["d_out"])
                                      / leaf.tokens)
    ratio = math.log(max(sample.time_s, 1e-9) / _features.base_time_s(leaf, gpu, computed))
    group = model_group(sample.kind, sample.phase == "decode", sample.mode == "eager")
    return group, f, ratio, _call_power_w(sample)


@dataclass(frozen=True)
class ModuleOutputs:
    """What the module models say of the compute rows of a leaf table (zeros on
    communication rows): isolated kernel time of one call, the power that prices it, and
    whether the row lies far from the samples."""
    time_s: np.ndarray
    power_w: np.ndarray
    out_of_range: np.ndarray

    def take(self, rows: np.ndarray) -> "ModuleOutputs":
        """The outputs of some rows (a mask or indices), as their table's subset has them."""
        return ModuleOutputs(self.time_s[rows], self.power_w[rows], self.out_of_range[rows])

    @staticmethod
    def concat(parts: list["ModuleOutputs"]) -> "ModuleOutputs":
        """The outputs of tables stacked in this order (`piep.predict.table.concat`)."""
        return ModuleOutputs(*(np.concatenate([getattr(o, f) for o in parts])
                               for f in ("time_s", "power_w", "out_of_range")))


@dataclass(eq=False)  # hashed and compared by identity: outputs are cached per object
class ModuleModels:
    """The GBDT pair of every kind group, over leaf tables."""
    kinds: dict[str, KindModel]

    def group(self, kind: str, decode: bool, eager: bool = False) -> str:
        """The GBDT pair that prices `kind` in a phase and mode (see `FALLBACK_GROUP`)."""
        g = model_group(kind, decode, eager)
        while g not in self.kinds and g in FALLBACK_GROUP:  # (a fallback may have its own)
            g = FALLBACK_GROUP[g]
        return g

    def predict(self, table, gpu: GPU) -> ModuleOutputs:
        """Every compute row of `table` (a `piep.predict.table.LeafTable`) at once; each
        distinct shape goes through the features and the GBDTs once. Kinds without
        samples: KV-cache copies at the GPU's measured copy rate and power, the masked SDPA
        by the attention models (a predictor trained before either was sampled), the rest
        at the roofline and the GPU's memory-bound power, flagged out of range."""
        n = len(table)
        q = table.q
        nbytes = q["bytes_read"] + q["bytes_written"]
        roof = np.maximum(np.maximum(q["flops"] * grouped_padding(table) / gpu.bf16_flops,
                                     nbytes / gpu.hbm_bytes_per_s), 1e-9)
        t, p = np.zeros(n), np.zeros(n)
        oor = np.zeros(n, dtype=bool)
        shape, names, gid = self._rows(table)
        # each group's forests run on a worker thread while the next group's rows are
        # prepared and the range tests run here (the largest group first)
        pending, tested = [], []  # (a group's answer, each row's distinct row, its rows)
        size = np.bincount(gid[gid >= 0])
        for i in np.argsort(-size, kind="stable")[:np.count_nonzero(size)]:  # groups in use
            g, rows = names[i], np.flatnonzero(gid == i)
            if g not in self.kinds and g.split(".")[0] in COPY_KINDS:  # the copy rate
                t[rows] = nbytes[rows] / gpu.hbm_bytes_per_s + _features.KERNEL_FLOOR_S
                p[rows] = gpu.memory_power_w
                continue
            if g not in self.kinds:
                t[rows], p[rows], oor[rows] = roof[rows], gpu.memory_power_w, True
                continue
            cols = {k: v[rows] for k, v in shape.items()}
            first, inv = distinct_columns(list(cols.values()))
            xs = feature_matrix({k: v[first] for k, v in cols.items()}, gpu)
            pending.append((self.kinds[g].boosted_aside(xs), inv, rows))
            tested.append((self.kinds[g], xs, inv, rows))
        for model, xs, inv, rows in tested:
            oor[rows] = model.out_of_range(xs)[inv]
        for answer, inv, rows in pending:
            lr, pw = answer()
            t[rows] = (roof[rows] + _features.KERNEL_FLOOR_S) * np.exp(lr[inv])
            p[rows] = pw[inv]
        from piep.predict.table import KIND_ID
        for kind, ratio in FALLBACK_TIME.items():
            if model_group(kind) not in self.kinds:  # (its own samples price it as it runs)
                t[table.kind_id == KIND_ID[kind]] *= ratio
        batched = table.kind_id == KIND_ID["experts_batched"]
        if batched.any():  # (a table of its rank's experts: each deployment's)
            table_size = np.array([d.model.num_experts / d.parallel.ep for d in table.deps])
            t[batched] *= batched_table_time(table_size[table.cfg[batched]])
        if PACKED is not None and PAGED_ATTENTION not in self.kinds:
            rows = np.flatnonzero(table.kind_id == KIND_ID[PAGED_ATTENTION])
            if len(rows):  # (its power from the attention's models, by the SMs it keeps busy)
                packed = {f: v[rows] for f, v in q.items()}
                t[rows] = PACKED.time_s(packed)
                p[rows] = PACKED.power_w(packed, p[rows], gpu.idle_power_w)
        return ModuleOutputs(t, p, oor)

    def reach(self, table, gpu: GPU, rows: np.ndarray) -> np.ndarray:
        """How far some compute rows of `table` lie from their group's samples: the
        standardized distance to the nearest over the out-of-range threshold (above 1: out
        of range; inf for a group with no model)."""
        shape, names, gid = self._rows(table)
        out = np.full(len(rows), np.inf)
        for i in np.unique(gid[rows]):
            if i < 0 or names[i] not in self.kinds:
                continue
            at = np.flatnonzero(gid[rows] == i)
            cols = {k: v[rows[at]] for k, v in shape.items()}
            first, inv = distinct_columns(list(cols.values()))  # (a shape searched once)
            xs = feature_matrix({k: v[first] for k, v in cols.items()}, gpu)
            out[at] = self.kinds[names[i]].reach(xs)[inv]
        return out

    def _rows(self, table) -> tuple[dict[str, np.ndarray], list[str], np.ndarray]:
        """What the features read of each row of `table`, the kind groups' names, and each
        row's group (an index into them; -1 on communication rows). Eager only in decode:
        prefill runs eagerly in both modes, so its rows of either mode are one shape."""
        from piep.predict.table import KINDS
        q = table.q
        decode = table.decode
        shape = {"tokens": q["tokens"], "flops": q["flops"],
                 "bytes": q["bytes_read"] + q["bytes_written"],
                 "d_in": q["d_in"], "d_out": q["d_out"], "heads": q["heads"],
                 "kv_heads": q["kv_heads"], "context_len": q["context_len"],
                 "batch": q["batch_attr"], "width": q["width"],
                 "decode": decode.astype(float), "eager": (decode & table.mode_eager) * 1.0}
        modes = [(d, e) for d in (False, True) for e in (False, True)]
        names = sorted({self.group(k, d, e) for k in KINDS for d, e in modes})
        group_of = np.array([[names.index(self.group(k, d, e)) for d, e in modes]
                             for k in KINDS])
        column = 2 * np.asarray(decode, dtype=int) + np.asarray(table.mode_eager, dtype=int)
        return shape, names, np.where(table.is_comm, -1, group_of[table.kind_id, column])
