"""The tanh combiner: a node's energy counts alpha(c) times, alpha = 1 + tanh(W.f(c) + b) / tau
(IrEne's form), fitted on end-to-end runs. W = 0, b = 0 is the plain sum."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from piep.predict.blas import product
from piep.predict.table import KIND_ID, KINDS
from piep.tree.builder import ATTENTION_LIKE, LINEAR_KINDS, PAGED_ATTENTION
from piep.tree.nodes import COMM_KINDS

TAU = 2.5
FEATURES = ("decode", "eager_decode", "linear", "attention", "comm", "wait", "other",
            "log_tokens")
# generate()'s decode-step experts (two long kernels: a gather of weights and a batched
# GEMV over them, memory-bound as a decode projection is) count as projections for the
# combiner; an FP8 projection stays apart (eight short elementwise kernels quantize its
# input before its GEMM). Set after the first held-out comparison (reports/moe.md)
GEMM_LIKE = LINEAR_KINDS + ("experts_batched", "experts_bmm")
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
