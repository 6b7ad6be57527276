"""Spec-sheet transfer (`--allow-uncalibrated`): a GPU without calibration is predicted by
the calibrated reference GPU's learned predictor, rebuilt on a profile scaled by spec-sheet
ratios (`piep.gpus.transfer_gpu`). Module time keeps the learned efficiency over the new
roofline; board power scales with TDP; collectives with link bandwidth. Flagged, with a
wide fixed band: nothing of it was measured on the target GPU."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from piep.layout import Deployment
from piep.predict.engine import LeafCost
from piep.tree.nodes import Node

BAND = (0.5, 2.0)


@dataclass
class TransferredModel:
    base: Any
    ratios: dict[str, float]
    reference: str
    name: str = "learned (spec-sheet transfer)"

    @classmethod
    def build(cls, learned, gpu, ratios, reference: str) -> "TransferredModel":
        return cls(replace(learned, gpu=gpu, _cache={}), ratios, reference)

    def leaf_cost(self, node: Node, dep: Deployment) -> LeafCost:
        c = self.base.leaf_cost(node, dep)
        t = c.time_s / self.ratios["link"] if node.is_comm else c.time_s
        return LeafCost(t, c.power_w * self.ratios["power"], c.gap_s, c.wait_s, c.out_of_range)

    def prepare(self, items) -> None:
        self.base.prepare(items)

    def clear(self) -> None:
        self.base.clear()

    def alpha(self, kind: str, phase: str, mode: str, tokens: float) -> float:
        return self.base.alpha(kind, phase, mode, tokens)

    def idle_power_w(self, dep: Deployment) -> float:
        return self.base.idle_power_w(dep) * self.ratios["power"]

    def wait_power_w(self, dep: Deployment) -> float:
        return self.base.wait_power_w(dep) * self.ratios["power"]

    def interval(self, dep: Deployment, energy_j: float, time_s: float) -> dict[str, Any]:
        lo, hi = BAND
        return {"energy_j": [energy_j * lo, energy_j * hi], "time_s": [time_s * lo, time_s * hi],
                "level": f"uncalibrated GPU: spec-sheet transfer from {self.reference}, fixed "
                         f"x{lo}-x{hi} band (not validated on this GPU)"}
