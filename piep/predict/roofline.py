"""Analytic baseline: FLOPs at measured bf16 peak, bytes at HBM bandwidth, collectives by
latency + bytes / bus bandwidth, constant power terms of the GPU profile.

It stays in piep as the baseline the learned predictor must beat, and as the analytic
term the learned predictor corrects (the GBDT learns a dimensionless residual over it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from piep.core.gpus import GPU
from piep.core.layout import Deployment
from piep.predict.pricing import Prices
from piep.predict.table import LeafTable


def collective_time_s(kind: np.ndarray, size_bytes: np.ndarray, group: np.ndarray,
                      gpu: GPU) -> np.ndarray:
    """Latency + bus-bandwidth term (ring algorithm volumes)."""
    volume = np.where(kind == "allreduce", 2.0 * (group - 1) / group * size_bytes,
                      np.where(kind == "allgather", (group - 1) / group * size_bytes,
                               size_bytes))
    latency = np.where(kind == "p2p", gpu.p2p_latency_s, gpu.collective_latency_s)
    return latency + volume / gpu.link_bytes_per_s


def roofline_times(q: dict[str, np.ndarray], gpu: GPU) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a leaf table's quantities `q`: (its flops at `gpu`'s bf16 peak, its bytes
    read and written at its HBM bandwidth), seconds."""
    return (q["flops"] / gpu.bf16_flops,
            (q["bytes_read"] + q["bytes_written"]) / gpu.hbm_bytes_per_s)


def roofline_power_w(t_flops: np.ndarray, t_bytes: np.ndarray, gpu: GPU) -> np.ndarray:
    """Power between the memory-bound and compute-bound levels by achieved compute share."""
    busy = np.maximum(t_flops, t_bytes)
    share = np.where(busy > 0, t_flops / np.where(busy > 0, busy, 1.0), 0.0)
    return gpu.memory_power_w + (gpu.compute_power_w - gpu.memory_power_w) * share


@dataclass(eq=False)  # one predictor is one object: hashed and compared by identity
class RooflineModel:
    """The uncalibrated baseline (benchmarks/accuracy.py also reports it refit with
    per-mode factors on the same folds as the learned predictor)."""

    name: str = "roofline"
    rel_interval: tuple[float, float] = (0.6, 1.6)
    level: str = "uncalibrated (fixed band)"

    def price(self, table: LeafTable) -> Prices:
        gpu, q = table.gpu, table.q
        mode_eager = table.mode_eager
        gap = table.launches * np.where(mode_eager, gpu.kernel_gap_eager_s,
                                        gpu.kernel_gap_graph_s)
        t_f, t_b = roofline_times(q, gpu)
        cm = table.is_comm
        t = np.where(cm, collective_time_s(table.kind, q["comm_bytes"], table.group_size, gpu),
                     np.maximum(t_f, t_b))
        power = np.where(cm, gpu.comm_power_w, roofline_power_w(t_f, t_b, gpu))
        n, n_seg = len(table), len(table.segments)
        return Prices(time_s=t, power_w=power, gap_s=gap, wait_s=np.zeros(n),
                      out_of_range=np.zeros(n, dtype=bool), alpha=np.ones(n),
                      segment_alpha=np.ones(n_seg), idle_w=gpu.idle_power_w,
                      wait_w=gpu.wait_power_w)

    def interval(self, dep: Deployment, energy_j: float, time_s: float, *,
                 far: bool = False) -> dict[str, Any]:
        lo, hi = self.rel_interval
        return {"energy_j": [energy_j * lo, energy_j * hi], "time_s": [time_s * lo, time_s * hi],
                "level": self.level}
