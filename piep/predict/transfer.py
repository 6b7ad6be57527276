"""Spec-sheet transfer (`--allow-uncalibrated`): a GPU without calibration is predicted by
the calibrated reference GPU's learned predictor, rebuilt on a profile scaled by spec-sheet
ratios (`piep.core.gpus.transfer_gpu`). Module time keeps the learned efficiency over the new
roofline; collectives scale with link bandwidth. Board power: idle scales with TDP; a
kernel's power above idle, by the share of its roofline time on the target that is HBM
traffic: that share keeps the energy per byte the reference drew (the same kind of memory,
read faster or slower: its power above idle times the reference's time over the target's),
the rest scales with TDP (energy per flop x TDP over peak flops). A memory-bound kernel on
an H100 (the H200's TDP, 0.70 its bandwidth) so draws less power above idle over the
longer time it takes, the same energy. Flagged, with a wide fixed band: nothing of it was
measured on the target GPU."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from piep.core.layout import Deployment
from piep.predict.pricing import Prices
from piep.predict.roofline import roofline_times
from piep.predict.table import LeafTable

BAND = (0.5, 2.0)


@dataclass(eq=False)  # one predictor is one object: hashed and compared by identity
class TransferredModel:
    base: Any                # the reference's learned predictor on the target's profile
    ratios: dict[str, float]
    reference: str
    source: Any              # the same predictor on the reference GPU
    name: str = "learned (spec-sheet transfer)"

    @classmethod
    def build(cls, learned, gpu, ratios, reference: str) -> "TransferredModel":
        return cls(learned.on_gpu(gpu), ratios, reference, source=learned)

    def price(self, table: LeafTable) -> Prices:
        p, ref = self.base.price(table), self.source.price(table)
        power = self.ratios["power"]
        idle_w = p.idle_w * power
        share = self.memory_share(table)
        # above idle: the flops' share x TDP, the bytes' share at the reference's energy
        by_tdp = p.power_w * power - idle_w
        by_bytes = (ref.power_w - ref.idle_w) * np.divide(
            ref.time_s, p.time_s, out=np.ones(len(table)), where=p.time_s > 0)
        above = (1.0 - share) * by_tdp + share * by_bytes
        power_w = np.where(table.is_comm, p.power_w * power, idle_w + above)
        return replace(p, time_s=np.where(table.is_comm, p.time_s / self.ratios["link"],
                                          p.time_s),
                       power_w=power_w, idle_w=idle_w,
                       wait_w=p.wait_w * power,
                       gap_w=None if p.gap_w is None else p.gap_w * power)

    def memory_share(self, table: LeafTable) -> np.ndarray:
        """Per row, the share of its roofline time on the target GPU that is HBM traffic
        (its bytes at HBM bandwidth over that plus its flops at peak)."""
        flops_s, bytes_s = roofline_times(table.q, self.base.gpu)
        total = bytes_s + flops_s
        return np.divide(bytes_s, total, out=np.zeros(len(table)), where=total > 0)

    def interval(self, dep: Deployment, energy_j: float, time_s: float, *,
                 far: bool = False) -> dict[str, Any]:
        lo, hi = BAND
        return {"energy_j": [energy_j * lo, energy_j * hi], "time_s": [time_s * lo, time_s * hi],
                "level": f"uncalibrated GPU: spec-sheet transfer from {self.reference}, fixed "
                         f"x{lo}-x{hi} band (not validated on this GPU)"}
