"""LightGBM's text models evaluated with numpy: a prediction needs no LightGBM (its import
is most of a `piep predict`'s start), and gives LightGBM's numbers bit for bit.

A model is LightGBM's text format (`Booster.model_to_string()`): per tree the split
feature, threshold, decision type, children and leaf values of every node. A row goes left
where its feature is <= the threshold (a missing value: the node's default direction); the
prediction is the leaf values added tree after tree in double precision, as LightGBM adds
them. Regression only (one output per row, no categorical splits, no linear leaves): what
piep's module models are; anything else is refused when the text is read.
"""

from __future__ import annotations

import os
import sys
from functools import cached_property
from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

DEFAULT_LEFT = 2     # decision_type bit: a missing value goes left
MISSING_SHIFT = 2    # decision_type bits 2-3: what counts as missing (0 none, 1 zero, 2 NaN)
# LightGBM's kZeroThreshold: `const double kZeroThreshold = 1e-35f` (include/LightGBM/
# meta.h), the float 1e-35 widened: 1.0000000180025095e-35, not the double 1e-35
ZERO = float(np.float32(1e-35))
# rows from which LightGBM's evaluator (when installed) answers, ~10x faster there: its
# import (~0.2 s) pays off; a prediction's few hundred rows stay with numpy (no import).
# Once a process has imported LightGBM (a sweep, a fit, a server), it answers from
# SOME_ROWS: below that its call costs more than numpy's walk.
MANY_ROWS = 1_000
SOME_ROWS = 16


class Forest:
    """A LightGBM regression model read from its text, evaluated on many rows at once."""

    def __init__(self, text: str):
        self.text = text
        head = text[:text.find("\nTree=")]
        header = dict(line.partition("=")[::2] for line in head.splitlines())
        if header.get("num_class", "1") != "1" or header.get("num_tree_per_iteration",
                                                               "1") != "1":
            raise ValueError("only single-output LightGBM models are evaluated here")
        if not header.get("objective", "").startswith("regression"):
            raise ValueError(f"LightGBM objective {header.get('objective')!r}: only "
                             "regression models are evaluated here")
        # a model cut short (a write killed halfway) lacks trees its header counts
        trees, found = len(header.get("tree_sizes", "").split()), text.count("\nTree=")
        ended = "\nend of trees" in text
        if not ended or found != trees or not trees:
            raise ValueError(f"{found} trees of the {trees} its header counts, and "
                             f"{'an' if ended else 'no'} end: a model cut short")
        self.num_features = int(header["max_feature_idx"]) + 1

    @cached_property
    def _nodes(self) -> "_Nodes":
        """Every tree's nodes in one table, read on the first prediction (a prediction
        reads a few of the module models' groups)."""
        return _Nodes(self.text[:self.text.find("\nend of trees")])

    @cached_property
    def _booster(self):
        """LightGBM's booster of the same text, or None where LightGBM is not installed."""
        try:
            import lightgbm
        except ImportError:
            return None
        return lightgbm.Booster(model_str=self.text)

    @cached_property
    def _edges(self) -> list[np.ndarray]:
        """Per feature, the distinct thresholds the model's splits compare it with."""
        m = self._nodes
        return [sorted_distinct(m.threshold[m.feature == f]) for f in range(self.num_features)]

    @cached_property
    def _zero_missing(self) -> np.ndarray:
        """Per feature, whether a split of the model takes its zero for missing."""
        m = self._nodes
        return np.bincount(m.feature[m.missing == 1], minlength=self.num_features) > 0

    def cells(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(a row of `x` per cell, each row's cell) of this model's splits (`cell_rows`)."""
        return cell_rows(x, self._edges, self._zero_missing)

    def model_to_string(self) -> str:
        """The text it was read from (as a LightGBM Booster writes itself)."""
        return self.text

    def predict(self, x: np.ndarray, num_threads: int | None = None) -> np.ndarray:
        """One prediction per row of `x`; many rows at once (a sweep), or more than a few in
        a process that has imported LightGBM, go to LightGBM's own evaluator where it is
        installed (the same numbers, `tests/predict/test_gbdt.py`, several times faster there;
        `num_threads` is its)."""
        return predict_together([self], x, num_threads)[0]

    def _evaluate(self, x: np.ndarray, num_threads: int | None) -> np.ndarray:
        """`predict` of every row."""
        many = MANY_ROWS if "lightgbm" not in sys.modules else SOME_ROWS
        if len(x) >= many and (booster := self._booster) is not None:
            kw = {"num_threads": num_threads} if num_threads else {}
            return booster.predict(x, **kw)
        m = self._nodes
        node = np.broadcast_to(m.roots, (len(x), len(m.roots))).copy()
        rows = np.arange(len(x))[:, None]
        while True:
            inner = node >= 0
            if not inner.any():
                break
            r, t = np.nonzero(inner)
            n = node[r, t]
            v = x[rows[r, 0], m.feature[n]]
            miss = m.missing[n]
            nan = np.isnan(v)
            v = np.where(nan & (miss != 2), 0.0, v)  # NaN is zero unless NaN is missing
            missing = ((miss == 1) & (np.abs(v) <= ZERO)) | ((miss == 2) & nan)
            go_left = np.where(missing, m.default_left[n], v <= m.threshold[n])
            node[r, t] = np.where(go_left, m.left[n], m.right[n])
        values = m.leaf_value[-1 - node]
        # tree after tree, left to right, as LightGBM adds them (a cumulative sum is a
        # sequential one; a plain sum would pair them up and round otherwise)
        return np.cumsum(values, axis=1)[:, -1] if values.shape[1] else np.zeros(len(x))


def predict_together(forests: list[Forest], x: np.ndarray, num_threads: int | None = None,
                     splits: tuple[list[np.ndarray], np.ndarray] | None = None
                     ) -> list[np.ndarray]:
    """Each forest's predictions of the rows of `x`, one row per cell of all their splits
    evaluated (`splits`: `joint_splits(forests)` where the caller keeps it)."""
    rows, cell = _cells_of(forests, x, splits)
    return [forest._evaluate(rows, num_threads)[cell] for forest in forests]


def predict_aside(forests: list[Forest], x: np.ndarray,
                  splits: tuple[list[np.ndarray], np.ndarray] | None = None
                  ) -> Callable[[], list[np.ndarray]]:
    """`predict_together`'s answer (one thread), the forests evaluated on a worker thread
    while the caller goes on: the function returned waits for it. The cells are found
    on the caller's thread; LightGBM's evaluator leaves Python while it runs, so the
    caller's numpy work and the forests share two cores."""
    rows, cell = _cells_of(forests, x, splits)
    global _WORKER
    if _WORKER is None:
        from concurrent.futures import ThreadPoolExecutor
        _WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="piep-forests")
    job = _WORKER.submit(lambda: [forest._evaluate(rows, 1) for forest in forests])
    return lambda: [values[cell] for values in job.result()]


_WORKER: ThreadPoolExecutor | None = None  # `predict_aside`'s thread, started on first use


def _forget_worker() -> None:
    """A forked child has none of its parent's threads: it starts a worker of its own
    (the parent's would take its jobs and never run them)."""
    global _WORKER
    _WORKER = None


os.register_at_fork(after_in_child=_forget_worker)


def _cells_of(forests: list[Forest], x: np.ndarray,
              splits: tuple[list[np.ndarray], np.ndarray] | None
              ) -> tuple[np.ndarray, np.ndarray]:
    """(a row of `x` per cell of the forests' splits, each row's cell)."""
    x = np.asarray(x, dtype=np.float64)
    for forest in forests:
        if x.ndim != 2 or x.shape[1] != forest.num_features:
            raise ValueError(f"rows of {forest.num_features} features expected, got shape "
                             f"{x.shape}")
    first, cell = cell_rows(x, *(splits or joint_splits(forests)))
    return x[first], cell  # one row per cell: the same predictions, fewer rows


def sorted_distinct(x: np.ndarray) -> np.ndarray:
    """`np.unique` of a 1-D array without NaN (numpy 2's unique imports numpy.ma the
    first time: 5 ms of every command's start)."""
    s = np.sort(x)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if len(s) else s


def joint_splits(forests: list[Forest]) -> tuple[list[np.ndarray], np.ndarray]:
    """(per feature, the thresholds of every forest; per feature, whether a forest takes
    its zero for missing): cells of these go the same way in each forest."""
    if len(forests) == 1:
        return forests[0]._edges, forests[0]._zero_missing
    edges = [sorted_distinct(np.concatenate(t)) for t in zip(*(f._edges for f in forests))]
    return edges, np.logical_or.reduce([f._zero_missing for f in forests])


def cell_rows(x: np.ndarray, edges: list[np.ndarray], zero_missing: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """(a row of `x` per cell, each row's cell): the cell of a row is, per feature, how
    many of the thresholds `edges` lie below its value, whether the value is NaN, and
    where a split takes zero for missing (`zero_missing`), whether it is zero (LightGBM's
    missing values). Rows of one cell go the same way at every split of every tree: they
    have the same prediction, to the bit."""
    codes = np.empty(x.shape, dtype=np.int64)
    nan = bool(np.isnan(x).any())
    for f, thresholds in enumerate(edges):
        v = x[:, f]
        code = np.searchsorted(thresholds, v, side="left") * 4
        if nan:
            code += 2 * np.isnan(v)
        if zero_missing[f]:
            code += np.abs(v) <= ZERO
        codes[:, f] = code
    return distinct_rows(codes.astype(np.uint16) if codes.max(initial=0) < 1 << 16
                         else codes)


def distinct_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the index of a row per group of equal rows of the 2-D array `a`; each row's group).
    Rows are grouped by a weighted sum of their columns (one number to sort, not a row
    of bytes), the sum taken column by column (each row's the same wherever it lies),
    and the grouping checked bit for bit: rows of one group are equal, else (sums of
    unequal rows that coincide, a NaN) rows are grouped by their bytes. A group's row is
    any of its rows (they are the same bits)."""
    a = np.ascontiguousarray(a)
    if a.shape[1] and len(a) and a.dtype.kind in "fiu":
        found = _grouped_by_sums(list(a.T))
        if found is not None:
            return found
    keys = a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def distinct_columns(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """`distinct_rows` of the rows that `columns` (1-D numeric arrays of one length) make,
    read column by column: the rows are only stacked where their sums cannot tell."""
    found = _grouped_by_sums(columns) if len(columns[0]) else None
    return found if found is not None else distinct_rows(np.column_stack(columns))


def _grouped_by_sums(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """`distinct_rows`' grouping by weighted sums, or None where it does not hold."""
    key = columns[0] * _WEIGHTS[0]
    for j in range(1, len(columns)):
        key += columns[j] * _WEIGHTS[j % len(_WEIGHTS)]
    if np.isnan(key).any():
        return None
    order = np.argsort(key)
    ranked = key[order]
    starts = np.empty(len(key), dtype=bool)
    starts[0] = True
    np.not_equal(ranked[1:], ranked[:-1], out=starts[1:])
    first = order[starts]
    group = np.empty(len(key), dtype=np.intp)
    group[order] = np.cumsum(starts) - 1
    each = first[group]
    for c in columns:
        bits = c.view(np.dtype(f"u{c.dtype.itemsize}"))
        if not np.array_equal(bits[each], bits):
            return None
    return first, group


# the weights of `distinct_rows`' sums: irregular, so that unequal rows rarely coincide
_WEIGHTS = 1.0 + np.arange(1, 65) * 0.6180339887498949 % 1.0


class _Nodes:
    """The nodes of every tree of a model in one table: split feature, threshold, children
    (a leaf: -1 - its row in the leaf table), default direction and missing-value kind;
    the leaf values; each tree's root (a node, or a leaf for a tree of one leaf)."""

    def __init__(self, trees: str):
        if _field(trees, "num_cat", int).any() or _field(trees, "is_linear", int).any():
            raise ValueError("categorical splits and linear leaves are not evaluated here")
        leaves = _field(trees, "num_leaves", int)
        nodes = leaves - 1
        first_node, first_leaf = np.cumsum(nodes) - nodes, np.cumsum(leaves) - leaves
        node0, leaf0 = np.repeat(first_node, nodes), np.repeat(first_leaf, nodes)
        kind = _field(trees, "decision_type", int)
        self.feature = _field(trees, "split_feature", int)
        self.threshold = _field(trees, "threshold", float)
        self.left, self.right = (np.where(c >= 0, c + node0, c - leaf0) for c in (
            _field(trees, "left_child", int), _field(trees, "right_child", int)))
        self.default_left = (kind & DEFAULT_LEFT).astype(bool)
        self.missing = (kind >> MISSING_SHIFT) & 3
        self.leaf_value = _field(trees, "leaf_value", float)
        self.roots = np.where(nodes > 0, first_node, -1 - first_leaf)
        if not (len(self.feature) == len(self.threshold) == len(kind) == nodes.sum()
                and len(self.leaf_value) == leaves.sum()):
            raise ValueError("a LightGBM text model whose trees do not add up")


def _field(trees: str, name: str, kind) -> np.ndarray:
    """One field of every tree, its values end to end (tree after tree)."""
    values = " ".join(p[:p.find("\n")] for p in trees.split(f"\n{name}=")[1:]).split()
    return np.array([kind(v) for v in values], dtype=np.float64 if kind is float else np.intp)
