"""Features of a compute leaf (SPEC §2): structural, workload, mode and the roofline terms.
No telemetry of the target run. The same function serves training rows (module samples,
rebuilt as leaves) and prediction (leaves of a deployment's tree)."""

from __future__ import annotations

import math

import numpy as np

from piep.core.gpus import GPU
from piep.tree.nodes import Node

FEATURES = ("log_tokens", "log_flops", "log_bytes", "log_intensity", "log_roof_ratio",
            "log_d_in", "log_d_out", "heads", "kv_heads", "log_context", "log_batch",
            "log_width", "decode", "eager", "align_d_in", "align_d_out")


def _log(x: float) -> float:
    return math.log2(max(x, 1.0))


def roofline_time_s(node: Node, gpu: GPU, flops: float | None = None) -> float:
    """The node's time at the GPU's peak rate or bandwidth (`flops`: the work its kernel
    computes, where that exceeds the node's: a grouped GEMM's rows rounded up to tiles)."""
    return max((node.flops if flops is None else flops) / gpu.bf16_flops,
               node.bytes_moved / gpu.hbm_bytes_per_s, 1e-9)


# A kernel never takes less than a few microseconds: the learned model's time target is
# log(time / (roofline + floor)), smooth from launch-bound tiny kernels to big ones.
KERNEL_FLOOR_S = 1e-6  # 5-fold module energy error 12.1 % -> 8.4 % (floors 0-5 us tried)


def base_time_s(node: Node, gpu: GPU, flops: float | None = None) -> float:
    return roofline_time_s(node, gpu, flops) + KERNEL_FLOOR_S


def leaf_features(node: Node, gpu: GPU, mode: str) -> list[float]:
    a = node.attrs
    return feature_matrix(
        {"tokens": node.tokens, "flops": node.flops, "bytes": node.bytes_moved,
         "d_in": a.get("d_in", 0), "d_out": a.get("d_out", 0), "heads": a.get("heads", 0),
         "kv_heads": a.get("kv_heads", 0), "context_len": node.context_len,
         "batch": a.get("batch", 0), "width": a.get("width", a.get("vocab", 0)),
         "decode": node.phase == "decode", "eager": mode == "eager"}, gpu)[0].tolist()


def feature_matrix(c: dict, gpu: GPU) -> np.ndarray:
    """Features (FEATURES order) of many leaves given as columns (arrays or scalars)."""
    def lg(x):
        return np.log2(np.maximum(np.asarray(x, dtype=float), 1.0))
    flops = np.asarray(c["flops"], dtype=float)
    nbytes = np.asarray(c["bytes"], dtype=float)
    t_f, t_b = flops / gpu.bf16_flops, nbytes / gpu.hbm_bytes_per_s
    decode = np.asarray(c["decode"], dtype=float)
    cols = [lg(c["tokens"]), lg(flops), lg(nbytes),
            np.log2(np.maximum(flops, 1.0) / np.maximum(nbytes, 1.0)),
            np.log2(np.maximum(t_f, 1e-12) / np.maximum(t_b, 1e-12)),
            lg(c["d_in"]), lg(c["d_out"]),
            np.asarray(c["heads"], dtype=float), np.asarray(c["kv_heads"], dtype=float),
            lg(c["context_len"]), lg(c["batch"]), lg(c["width"]), decode,
            # prefill runs eagerly in both modes; only decode kernels differ by mode
            decode * np.asarray(c["eager"], dtype=float),
            # GEMM kernels depend on alignment: trailing zero bits of the sizes, capped at 8
            _align(c["d_in"]), _align(c["d_out"])]
    return _rows_of(np.stack(np.broadcast_arrays(*cols)))


def _rows_of(columns: np.ndarray) -> np.ndarray:
    """The rows of `columns` (one array per column), C-ordered: copied a block of rows at a
    time (the transpose of the whole is slower: each row is written strided apart)."""
    n = columns.shape[1] if columns.ndim == 2 else 1
    out = np.empty((n, len(columns)))
    for i in range(0, n, ROW_BLOCK):
        out[i:i + ROW_BLOCK] = columns.reshape(len(columns), n)[:, i:i + ROW_BLOCK].T
    return out


ROW_BLOCK = 4096  # rows of features copied at once (16 columns: 512 KiB)


def _align(x) -> np.ndarray:
    """Trailing zero bits of an integer size, capped at 8 (256-aligned); 8 for size 0."""
    v = np.asarray(x, dtype=np.int64)
    low = np.where(v > 0, v & -v, 256)  # lowest set bit
    return np.minimum(np.log2(low), 8.0)


def matrix(rows: list[list[float]]) -> np.ndarray:
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(FEATURES))
