"""The Gamma fits of AllReduce waiting times (SPEC §2), from the samples `piep calibrate
waits` measured: one fit per (model, collective, group size, phase, mode, size)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

WAIT_KEYS = ("model", "collective", "group_size", "phase", "mode", "size_bytes", "batch",
             "prompt_len")


def fit_all(samples: Path, out: Path) -> list[dict[str, Any]]:
    """Gamma fit per (collective, bytes, group size, phase, mode) of the raw samples, and
    the median transfer time of the fastest rank; written to `out` (piep.wait_fits)."""
    from piep.artifacts import read_jsonl, write_json
    from piep.stats.gamma import fit_waits
    fits = []
    for r in read_jsonl(samples):
        if r.get("schema") != "piep.wait_samples":
            continue
        waits = [w for rank in r["waits_s"] for w in rank]
        durations = sorted(min(x) for x in zip(*r["durations_ms"]))
        fits.append({k: r[k] for k in WAIT_KEYS}
                    | {"fit": fit_waits(waits), "transfer_ms_median": durations[len(durations) // 2]})
    write_json(out, "piep.wait_fits", 1, {"fits": fits}, source=str(samples))
    return fits
