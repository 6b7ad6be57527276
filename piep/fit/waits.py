"""The Gamma fits of AllReduce waiting times (SPEC §2), from the samples `piep calibrate
waits` measured: one fit per (model, collective, group size, phase, mode, size)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from piep.core.samples import WaitSample


def fit_all(samples: Path, out: Path) -> list[dict[str, Any]]:
    """Gamma fit per (collective, bytes, group size, phase, mode) of the raw samples, and
    the median transfer time of the fastest rank; written to `out` (piep.wait_fits)."""
    from piep.core.artifacts import read_records, write_json
    from piep.stats.gamma import fit_waits
    fits = []
    for s in read_records(samples, "piep.wait_samples", given=True, parse=WaitSample.from_json):
        fastest = sorted(s.fastest_ms)
        fits.append(dict(s.key) | {"fit": fit_waits(s.waits),
                                   "transfer_ms_median": fastest[len(fastest) // 2]})
    write_json(out, "piep.wait_fits", 1, {"fits": fits}, source=str(samples))
    return fits
