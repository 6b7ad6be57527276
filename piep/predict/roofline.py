"""Analytic baseline: FLOPs at measured bf16 peak, bytes at HBM bandwidth, collectives by
latency + bytes / bus bandwidth, constant power terms of the GPU profile.

It stays in piep as the baseline the learned predictor must beat, and as the analytic
term the learned predictor corrects (the GBDT learns a dimensionless residual over it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from piep.gpus import GPU
from piep.layout import Deployment
from piep.predict.engine import LeafCost
from piep.tree.nodes import Node


def collective_time_s(kind: str, size_bytes: float, group: int, gpu: GPU) -> float:
    """Latency + bus-bandwidth term (ring algorithm volumes)."""
    if kind == "allreduce":
        volume = 2.0 * (group - 1) / group * size_bytes
    elif kind == "allgather":
        volume = (group - 1) / group * size_bytes
    else:  # p2p
        volume = size_bytes
    latency = gpu.p2p_latency_s if kind == "p2p" else gpu.collective_latency_s
    return latency + volume / gpu.link_bytes_per_s


def roofline_times(node: Node, gpu: GPU) -> tuple[float, float]:
    """(time at peak FLOP/s, time at HBM bandwidth) for one call of a compute leaf."""
    return node.flops / gpu.bf16_flops, node.bytes_moved / gpu.hbm_bytes_per_s


def roofline_power_w(t_flops: float, t_bytes: float, gpu: GPU) -> float:
    """Power between the memory-bound and compute-bound levels by achieved compute share."""
    busy = max(t_flops, t_bytes)
    share = t_flops / busy if busy > 0 else 0.0
    return gpu.memory_power_w + (gpu.compute_power_w - gpu.memory_power_w) * share


@dataclass
class RooflineModel:
    """The uncalibrated baseline (benchmarks/accuracy.py also reports it refit with
    per-mode factors on the same folds as the learned predictor)."""

    name: str = "roofline"
    rel_interval: tuple[float, float] = (0.6, 1.6)
    level: str = "uncalibrated (fixed band)"

    def leaf_cost(self, node: Node, dep: Deployment) -> LeafCost:
        gpu = dep.gpu
        gap = node.launches * gpu.kernel_gap_s(dep.workload.mode)
        if node.is_comm:
            return LeafCost(collective_time_s(node.kind, node.comm_bytes, node.group_size, gpu),
                            gpu.comm_power_w, gap)
        t_f, t_b = roofline_times(node, gpu)
        return LeafCost(max(t_f, t_b), roofline_power_w(t_f, t_b, gpu), gap)

    def idle_power_w(self, dep: Deployment) -> float:
        return dep.gpu.idle_power_w

    def wait_power_w(self, dep: Deployment) -> float:
        return dep.gpu.wait_power_w

    def interval(self, dep: Deployment, energy_j: float, time_s: float) -> dict[str, Any]:
        lo, hi = self.rel_interval
        return {"energy_j": [energy_j * lo, energy_j * hi], "time_s": [time_s * lo, time_s * hi],
                "level": self.level}
