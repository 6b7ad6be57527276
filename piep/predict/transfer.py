"""Spec-sheet transfer (`--allow-uncalibrated`): a GPU without calibration is predicted by
the calibrated reference GPU's learned predictor, rebuilt on a profile scaled by spec-sheet
ratios (`piep.core.gpus.transfer_gpu`). Module time keeps the learned efficiency over the new
roofline; board power scales with TDP; collectives with link bandwidth. Flagged, with a
wide fixed band: nothing of it was measured on the target GPU."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from piep.core.layout import Deployment
from piep.predict.pricing import Prices
from piep.predict.table import LeafTable

BAND = (0.5, 2.0)


@dataclass(eq=False)  # one predictor is one object: hashed and compared by identity
class TransferredModel:
    base: Any
    ratios: dict[str, float]
    reference: str
    name: str = "learned (spec-sheet transfer)"

    @classmethod
    def build(cls, learned, gpu, ratios, reference: str) -> "TransferredModel":
        return cls(learned.on_gpu(gpu), ratios, reference)

    def price(self, table: LeafTable) -> Prices:
        p = self.base.price(table)
        power = self.ratios["power"]
        return replace(p, time_s=np.where(table.is_comm, p.time_s / self.ratios["link"],
                                          p.time_s),
                       power_w=p.power_w * power, idle_w=p.idle_w * power,
                       wait_w=p.wait_w * power,
                       gap_w=None if p.gap_w is None else p.gap_w * power)

    def interval(self, dep: Deployment, energy_j: float, time_s: float, *,
                 far: bool = False) -> dict[str, Any]:
        lo, hi = BAND
        return {"energy_j": [energy_j * lo, energy_j * hi], "time_s": [time_s * lo, time_s * hi],
                "level": f"uncalibrated GPU: spec-sheet transfer from {self.reference}, fixed "
                         f"x{lo}-x{hi} band (not validated on this GPU)"}
