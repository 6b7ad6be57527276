"""Collectives priced from the table of collectives measured in isolation with their
energy: time and board power per call interpolated in log size (the device probe's
times where a kind or mode was not sampled), plus the expected waiting time of the
measured wait distributions. More than 2 GPUs scale by the ring volume (extrapolated).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

import numpy as np

if TYPE_CHECKING:  # a prediction reads no records: their module loads when they are given
    from piep.core.samples import CollectiveSample, ProbeCollective, WaitFit

Curve = tuple[list[float], list[float]]  # x: log2 size in bytes, y: per the table


def collective_rows(samples: Iterable[CollectiveSample]) -> list[CollectiveSample]:
    """The isolated collective samples that price collectives: with energy on every GPU,
    not superseded by a later measurement of the same point, and AllReduce with the
    runner's SUM where it was measured so (AVG is a pre-multiplied sum)."""
    rows = [r for r in samples if not r.superseded and r.energy_known]
    summed = {r.mode for r in rows if r.kind == "allreduce" and r.reduce_op == "sum"}
    return [r for r in rows if not (r.kind == "allreduce" and r.mode in summed
                                    and r.reduce_op != "sum")]


@dataclass
class Collectives:
    table: dict[tuple[str, str], Curve]   # (kind, mode) -> log2 time of a call in s
    waits: dict[tuple[str, str], Curve]   # (phase, mode) -> mean wait per call in s
    # (kind, mode) -> board power in W (collectives sampled in isolation)
    power: dict[tuple[str, str], Curve] = field(default_factory=dict)

    @classmethod
    def from_calibration(cls, collectives: Iterable[ProbeCollective],
                         wait_fits: Iterable[WaitFit],
                         samples: Iterable[CollectiveSample] = ()) -> "Collectives":
        from piep.stats.gamma import expected_wait_s
        table: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for probed in collectives:
            for mode, t in (("eager", probed.eager_s), ("graph", probed.graph_s)):
                if t:
                    table.setdefault((probed.kind, mode), []).append(
                        (math.log2(probed.size_bytes), math.log2(t)))
        waits: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for f in wait_fits:
            # per rank: only the earlier rank of a pair waits (w = d - min d), so the mean
            # over all ranks is the positive waits' mean times their share
            waits.setdefault((f.phase, f.mode), []).append(
                (math.log2(f.size_bytes), expected_wait_s(f.fit) * f.share))
        # collectives sampled in isolation replace the probe's times where they exist, and
        # price a call at its own energy: power = energy per call and GPU / time per call.
        # (LOMO with the probe's times: 3.9 / 2.8 % graph energy / time; with the isolated SUM
        # times 3.9 / 2.9 %; the isolated table is the one measured with energy.)
        iso: dict[tuple[str, str, int], list[CollectiveSample]] = {}
        for row in collective_rows(samples):
            iso.setdefault((row.kind, row.mode, row.size_bytes), []).append(row)
        iso_time: dict[tuple[str, str], list[tuple[float, float]]] = {}
        power: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for (kind, mode, size), rows in iso.items():  # campaigns merged by their median
            t = statistics.median(r.time_s for r in rows)
            e = statistics.median(statistics.mean(r.energy_j_per_gpu) for r in rows)
            iso_time.setdefault((kind, mode), []).append((math.log2(size), math.log2(t)))
            power.setdefault((kind, mode), []).append((math.log2(size), e / t))
        table.update(iso_time)
        pack = lambda d: {k: ([p[0] for p in sorted(v)], [p[1] for p in sorted(v)])  # noqa: E731
                          for k, v in d.items()}
        return cls(pack(table), pack(waits), pack(power))

    def transfer_s(self, kind: np.ndarray, size: np.ndarray, group: np.ndarray,
                   eager: np.ndarray) -> np.ndarray:
        """Transfer time of one call (kind: object array; eager: bool array)."""
        out = np.zeros(len(size))
        for k in set(kind):
            for e in (False, True):
                sel = (kind == k) & (eager == e)
                if sel.any():
                    out[sel] = self._transfer(k, size[sel], group[sel], "eager" if e else "graph")
        return out

    def _transfer(self, kind: str, size: np.ndarray, group: np.ndarray, mode: str) -> np.ndarray:
        xs, ys = self.table.get((kind, mode)) or self.table[(kind, "eager")]
        t = 2 ** np.interp(np.log2(np.maximum(size, 1.0)), xs, ys)
        # beyond the table: bandwidth-bound, linear in size
        t = np.where(size > 2 ** xs[-1], 2 ** ys[-1] * size / 2 ** xs[-1], t)
        # ring volume 2(n-1)/n (AllReduce) or (n-1)/n relative to n = 2
        ring = (2 * (group - 1) / group) if kind == "allreduce" else (group - 1) / group * 2
        return np.where(group > 2, t * ring, t)

    def power_w(self, kind: np.ndarray, size: np.ndarray, eager: np.ndarray,
                default_w: float) -> np.ndarray:
        """Board power during one call; `default_w` where a collective was not sampled."""
        out = np.full(len(size), default_w)
        for k in set(kind):
            for e in (False, True):
                sel = (kind == k) & (eager == e)
                xy = self.power.get((k, "eager" if e else "graph")) or self.power.get((k, "eager"))
                if sel.any() and xy:
                    out[sel] = np.interp(np.log2(np.maximum(size[sel], 1.0)), xy[0], xy[1])
        return out

    def wait_s(self, kind: np.ndarray, decode: np.ndarray, mode_eager: np.ndarray,
               size: np.ndarray) -> np.ndarray:
        """Expected busy-wait per call: AllReduce only, by phase and run mode (prefill runs
        eagerly in both modes)."""
        out = np.zeros(len(size))
        for d in (False, True):
            for m in (False, True):
                sel = (kind == "allreduce") & (decode == d) & (mode_eager == m)
                if not sel.any():
                    continue
                phase, mode = ("decode" if d else "prefill"), ("eager" if m else "graph")
                key = (phase, mode if d else "eager")
                xy = self.waits.get(key) or self.waits.get((phase, mode))
                if xy:
                    out[sel] = np.interp(np.log2(np.maximum(size[sel], 1.0)), xy[0], xy[1])
        return out
