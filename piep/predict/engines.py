"""Engine profiles: what an engine changes relative to piep's module models.

The module models price the kernels; an engine adds its own host path and its own way of
holding the KV cache. The cache handling is structure, in the model tree
(`piep.tree.builder`: transformers' DynamicCache copies the whole cache every decode step;
a static-cache decode step attends the whole cache, K/V expanded to every head; the
kernels are priced by module samples of transformers' own ops). What a profile holds is
fitted on end-to-end runs of the engine: host time per kernel launch (prefill, decode),
per graph-replayed kernel, per generated token outside the model, per call (hf-static's
generate() setup: ~12 ms), and optionally the combiner; a compiled engine's fused
pointwise kernels take the in-situ time its kernel census measured
(`piep.fit.census`). A profile names the engine's version it was measured with.
Engines fitted per host (`host_fitted` in the registry) scale each run's host time by its launch probe
over the median of the runs' (the profile's reference host, `HostTerms.host_probe_ref_s`).

Shipped profiles live in `calibration/<gpu>/engines/<engine>/profile.json`; a user's own
(`piep train --engine NAME --from-measurements FILE`) go to the user data directory and
take precedence.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

import numpy as np

from piep.core.artifacts import (calibration_dir, fitted, read_json, read_text,
                            user_gpu_dir, write_json)
from piep.predict.learned import Combiner
from piep.predict.host import TERMS, HostTerms
from piep.core.engines import names as engine_names
from piep.core.scenario import ENGINE_PROFILE_SCHEMA, forget_user_engines

log = logging.getLogger("piep.engines")
SCHEMA = ENGINE_PROFILE_SCHEMA
SCHEMA_VERSION = 1


def shipped_profile_dir(gpu: str, engine: str) -> Path:
    """Where piep ships an engine's profile and its runs (`raw/`)."""
    return calibration_dir(gpu) / "engines" / engine


def user_profile_dir(gpu: str, engine: str) -> Path:
    """Where a user's own fit of an engine goes (it takes precedence)."""
    return user_gpu_dir(gpu) / "engines" / engine


@dataclass
class ProfileMeta:
    """What a profile's fit recorded beside its terms (`meta` of profile.json): the runs it
    was fitted on, how its bands were sized, what its runs covered. Keys another piep
    wrote that this one does not know are kept in `extra`."""
    runs: int | None = None                   # end-to-end runs (or replays) fitted on
    models: list[str] | None = None           # their models
    traces: list[str] | None = None           # a serving engine's replayed traces
    iteration_logs: int | None = None         # ... how many of them logged iterations
    scheduler: dict[str, Any] | None = None   # a serving engine's scheduler settings
    fitted_terms: list[str] | None = None     # the host terms fitted
    combiner: str | None = None               # how its combiner was fitted (or kept)
    fused_kernel_from: str | None = None      # a compiled engine's fused-kernel census
    held_out: str | None = None               # what its bands hold out (model, trace)
    interval_basis: dict[str, str] | None = None  # per band group: what it was sized on
    interval_from: dict[str, Any] | None = None   # a user's too-few runs: the base's band
    lomo_runs: int | None = None
    lomo_energy_mape: float | None = None
    lomo_time_mape: float | None = None
    lomo_energy_mape_host_probe: float | None = None
    lomo_time_mape_host_probe: float | None = None
    host_probe_range_us: list[float] | None = None  # its runs' fastest and slowest hosts
    tp_measured: list[int] | None = None      # the tp degrees its runs had
    tp_path: dict[str, Any] | None = None     # transformers' tp>1 path, fitted apart
    window_measured: bool | None = None       # its runs attended past a sliding window
    families_measured: list[str] | None = None  # the model families its runs had
    # a serving engine's replays: per kind, the farthest from the module samples a row
    # they read lies (`IterationCosts.farthest_read`); its band holds rows as far
    far_read: dict[str, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: dict[str, Any] | None) -> "ProfileMeta":
        """The record of a profile.json's `meta` (unknown keys into `extra`)."""
        names = {f.name for f in dataclass_fields(cls)} - {"extra"}
        doc = dict(doc or {})
        return cls(**{k: doc.pop(k) for k in list(doc) if k in names}, extra=doc)

    def to_json(self) -> dict[str, Any]:
        """The recorded keys (those set), then the unknown ones."""
        out = {f.name: getattr(self, f.name) for f in dataclass_fields(self)
               if f.name != "extra" and getattr(self, f.name) is not None}
        return {**out, **self.extra}


@dataclass
class EngineProfile:
    """An engine's fitted host terms (and optionally its combiner) over piep's module
    models, with the engine version its runs were measured with."""
    name: str
    version: str              # the engine's version the runs were measured with
    gpu: str
    host: HostTerms
    combiner: Combiner | None = None   # None: the reference runner's
    intervals: dict[str, float] = field(default_factory=dict)       # q90 |log| energy
    time_intervals: dict[str, float] = field(default_factory=dict)
    meta: ProfileMeta = field(default_factory=ProfileMeta)
    # an engine of the user's own: the built-in engine it is priced as (None: a built-in)
    like: str | None = None

    @property
    def measured_tp(self) -> tuple[int, ...]:
        """The tensor-parallel degrees the profile's runs had (a profile without the
        record: tp=1 alone)."""
        return tuple(self.meta.tp_measured or (1,))

    def apply(self, base):
        """The learned model `base` running this engine (its intervals widened at a tp
        degree none of the runs had)."""
        own = bool(self.intervals)
        return replace(base, host=copy.deepcopy(self.host),
                       combiner=self.combiner or base.combiner,
                       intervals=self.intervals or base.intervals,
                       time_intervals=self.time_intervals or base.time_intervals,
                       interval_basis=(self.meta.interval_basis or {}) if own
                       else base.interval_basis,
                       measured_tp=self.measured_tp,
                       name=f"{base.name} + {self.name} profile")

    def to_json(self) -> dict[str, Any]:
        """The body of `profile.json` (the envelope is added by `save_profile`)."""
        engine = {"name": self.name, "version": self.version,
                  **({"like": self.like} if self.like else {})}
        return {"engine": engine, "gpu": self.gpu,
                "terms": self.host.to_dict(),
                "combiner": None if self.combiner is None else
                {"W": self.combiner.w.tolist(), "b": self.combiner.b, "tau": self.combiner.tau},
                "intervals": {"energy_log": self.intervals, "time_log": self.time_intervals},
                "meta": self.meta.to_json()}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "EngineProfile":
        """A profile from the body of `profile.json`."""
        comb = doc.get("combiner")
        return cls(doc["engine"]["name"], doc["engine"]["version"], doc["gpu"],
                   HostTerms(**{k: v for k, v in doc["terms"].items() if k in TERMS}),
                   None if comb is None else Combiner(np.asarray(comb["W"], float),
                                                      float(comb["b"]), float(comb["tau"])),
                   doc["intervals"]["energy_log"], doc["intervals"]["time_log"],
                   ProfileMeta.from_json(doc.get("meta")), doc["engine"].get("like"))


def save_profile(profile: EngineProfile, folder: Path, **prov: Any) -> Path:
    """Write `folder/profile.json` (enveloped, atomic); returns its path."""
    path = write_json(Path(folder) / "profile.json", SCHEMA, SCHEMA_VERSION,
                      profile.to_json(), **prov)
    forget_user_engines()  # a user's engine may have come or changed
    _profile_text.cache_clear()  # and a profile read before, within the file clock's tick
    return path


def load_profile(gpu: str, engine: str) -> EngineProfile | None:
    """The user's profile of `engine` on `gpu`, else the shipped one, else None (a new
    object each time; the file is read once while it stays as it is)."""
    path = fitted(gpu, "engines", engine, "profile.json")
    if path is None:
        return None
    st = path.stat()
    return EngineProfile.from_json(json.loads(_profile_text(str(path), st.st_mtime_ns,
                                                            st.st_size)))


@functools.lru_cache(maxsize=32)
def _profile_text(path: str, mtime_ns: int, size: int) -> str:
    """A profile file's text, checked against its schema."""
    read_json(path, SCHEMA)
    return read_text(path)


def known_profiles(gpu: str) -> dict[str, EngineProfile]:
    """Every engine with a profile on `gpu` (shipped or the user's), by name."""
    found = set(engine_names(reference=False))
    for root in (calibration_dir(gpu) / "engines", user_gpu_dir(gpu) / "engines"):
        if root.is_dir():
            found |= {p.parent.name for p in root.glob("*/profile.json")}
    out = {}
    for name in sorted(found):
        prof = load_profile(gpu, name)
        if prof is not None:
            out[name] = prof
    return out
