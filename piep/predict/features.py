"""Features of a compute leaf (SPEC §2): structural, workload, mode and the roofline terms.
No telemetry of the target run. The same function serves training rows (module samples,
rebuilt as leaves) and prediction (leaves of a deployment's tree)."""

from __future__ import annotations

import math

import numpy as np

from piep.gpus import GPU
from piep.tree.nodes import Node

FEATURES = ("log_tokens", "log_flops", "log_bytes", "log_intensity", "log_roof_ratio",
            "log_d_in", "log_d_out", "heads", "kv_heads", "log_context", "log_batch",
            "log_width", "decode", "eager")


def _log(x: float) -> float:
    return math.log2(max(x, 1.0))


def roofline_time_s(node: Node, gpu: GPU) -> float:
    return max(node.flops / gpu.bf16_flops, node.bytes_moved / gpu.hbm_bytes_per_s, 1e-9)


def leaf_features(node: Node, gpu: GPU, mode: str) -> list[float]:
    a = node.attrs
    t_f = node.flops / gpu.bf16_flops
    t_b = node.bytes_moved / gpu.hbm_bytes_per_s
    return [
        _log(node.tokens), _log(node.flops), _log(node.bytes_moved),
        math.log2(max(node.flops, 1.0) / max(node.bytes_moved, 1.0)),
        math.log2(max(t_f, 1e-12) / max(t_b, 1e-12)),
        _log(a.get("d_in", 0)), _log(a.get("d_out", 0)),
        float(a.get("heads", 0)), float(a.get("kv_heads", 0)), _log(node.context_len),
        _log(a.get("batch", 0)), _log(a.get("width", a.get("vocab", 0))),
        1.0 if node.phase == "decode" else 0.0,
        # prefill runs eagerly in both modes; only decode kernels differ by mode
        1.0 if (mode == "eager" and node.phase == "decode") else 0.0,
    ]


def matrix(rows: list[list[float]]) -> np.ndarray:
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(FEATURES))
