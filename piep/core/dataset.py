"""Committed calibration data of a GPU, read into plain Python structures."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from piep.core.artifacts import calibration_dir, check_document, load_json, read_json, read_jsonl
from piep.core.errors import ArtifactError
from piep.core.gpus import DEFAULT_GPU
from piep.core.samples import (CollectiveSample, HostOverhead, ModuleSample, ProbeCollective,
                               WaitFit, sampler_op_version)
from piep.core.records import Measurement


@dataclass
class Calibration:
    gpu: str
    modules: list[ModuleSample]  # the samples of the newest sampler ops
    host: list[HostOverhead]  # each module campaign's host probe
    e2e: list[Measurement]  # every end-to-end run (repeats not merged)
    collectives: list[ProbeCollective]  # the device probe's collective times
    wait_fits: list[WaitFit]
    files: list[Path] = field(default_factory=list)
    collective_samples: list[CollectiveSample] = field(default_factory=list)
    # the module samples' training features, kept between fits on subsets of them
    feature_cache: dict = field(default_factory=dict, repr=False, compare=False)

    def data_hash(self) -> str:
        h = hashlib.sha256()
        for f in sorted(self.files):
            h.update(f.name.encode())
            h.update(f.read_bytes())
        return h.hexdigest()[:16]


def _jsonl(folder: Path, pattern: str, files: list[Path]) -> list[dict[str, Any]]:
    """Every piep record of the files, each checked against its schema."""
    rows: list[dict[str, Any]] = []
    for f in sorted(folder.glob(pattern)):
        files.append(f)
        rows += [check_document(r, str(f)) for r in read_jsonl(f)
                 if str(r.get("schema", "")).startswith("piep.")]
    return rows


def load_calibration(gpu: str = DEFAULT_GPU, root: Path | None = None) -> Calibration:
    root = Path(root) if root else calibration_dir(gpu)
    if not root.is_dir():
        raise ArtifactError(f"no calibration for {gpu!r} at {root}")
    files: list[Path] = []
    raw, host = [], []
    for f in sorted((root / "modules").glob("*.jsonl")):
        rows = _jsonl(f.parent, f.name, files)
        raw += rows
        host += [HostOverhead.from_json(r, f.name) for r in rows
                 if r.get("schema") == "piep.host_overhead"]
    modules = latest_ops([ModuleSample.from_json(r, f"{root}/modules") for r in raw
                          if r.get("schema") == "piep.module_sample"
                          and "error" not in r and r.get("energy_j") is not None])
    e2e = [Measurement.from_json(r, f"{root}/e2e/raw")
           for r in _jsonl(root / "e2e" / "raw", "*.jsonl", files)
           if r.get("schema") == "piep.measurement" and r.get("energy_j") is not None]
    collectives: list[ProbeCollective] = []
    probe = root / "probe" / "probe_main.json"
    if probe.is_file():
        files.append(probe)
        collectives = [ProbeCollective.from_json(r, str(probe))
                       for r in load_json(probe)["ranks"][0].get("collectives", [])]
    fits_path = root / "waits" / "fits.json"
    wait_fits = [WaitFit.from_json(f, str(fits_path))
                 for f in read_json(fits_path, "piep.wait_fits")["fits"]] \
        if fits_path.is_file() else []
    if fits_path.is_file():
        files.append(fits_path)
    coll_samples = [CollectiveSample.from_json(r, f"{root}/collectives")
                    for r in _jsonl(root / "collectives", "*.jsonl", files)
                    if r.get("schema") == "piep.collective_sample"]
    return Calibration(gpu, modules, host, e2e, collectives, wait_fits, files, coll_samples)


# the module campaign whose host's launch probe starts the reference runner's fitted host
# time per kernel (the fit is local: the start moves it); the first file by name until a
# later campaign's file sorted before it
REFERENCE_HOST_FILE = "modules_eager_v3.jsonl"


def reference_host(host: list[HostOverhead]) -> HostOverhead | None:
    """The host record that starts the reference runner's host terms (see
    `REFERENCE_HOST_FILE`; else the first; None without any)."""
    pinned = [h for h in host if h.file == REFERENCE_HOST_FILE]
    return (pinned or host or [None])[0]


def latest_ops(modules: list[ModuleSample]) -> list[ModuleSample]:
    """Per node kind, only the samples of the newest sampler op version (a newer op
    replaces an older one that did not run the same kernels as the runner)."""
    def version(s):  # rows stamped before the per-kind table carry the global number
        return min(s.op_version, sampler_op_version(s.kind, s.mode))
    newest: dict[tuple[str, str], int] = {}
    for s in modules:
        key = (s.kind, s.mode)
        newest[key] = max(newest.get(key, 1), version(s))
    return [s for s in modules if version(s) == newest[(s.kind, s.mode)]]


def module_repeat_pairs(modules: list[ModuleSample]
                        ) -> list[tuple[ModuleSample, ModuleSample]]:
    """(first, repeat) samples of every shape the module sampler measured twice."""
    by: dict[str, dict[int, ModuleSample]] = {}
    for s in modules:  # pairs within one campaign (sampler op version, repeat check)
        key = repr((s.op_version > 1 and s.kind in ("attention", "rope"), s.check,
                    s.captures is not None, sorted(s.shape.items())))
        by.setdefault(key, {})[s.repeat] = s
    return [(v[0], v[1]) for v in by.values() if 0 in v and 1 in v]


def repeat_check_pairs(modules: list[ModuleSample]
                       ) -> list[tuple[ModuleSample, ModuleSample]]:
    """The repeat check as finally run: two passes minutes apart with 1 s windows; calls
    under 20 us as the median of 3 fresh builds (their duration depends on the capture)."""
    pairs = module_repeat_pairs(modules)
    long_ = [(a, b) for a, b in pairs if a.check == "repeat" and not a.captures
             and a.time_s >= 20e-6]
    tiny = [(a, b) for a, b in pairs if a.check == "repeat" and a.captures]
    return long_ + tiny
