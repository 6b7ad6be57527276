"""An engine's steady-state profile: its terms over piep's reference pricing, fitted on
whole runs of the engine held at a concurrency (`piep.fit.steady`), and where it is found
(the user's fit, else the shipped one fitted on public measurements). What the profile
scales is `piep.serving.steady`'s parts of an iteration, in these groups: what an
iteration costs before its work, what its tokens add, what its keys add, its collectives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from piep.core.engines import names
from piep.core.errors import ConfigError

GROUPS = ("fixed", "tokens", "keys", "comm")


@dataclass(frozen=True)
class SteadyProfile:
    """An engine's terms over piep's reference pricing: a time scale per kernel group,
    host time per iteration (its GPUs at idle power), a scale on the kernels' power."""
    name: str
    gpu: str
    time_scale: dict[str, float]
    step_host_s: float
    power_scale: float
    source: str = ""
    interval: tuple[float, float] | None = None  # 90 % interval of energy, as ratios
    time_interval: tuple[float, float] | None = None  # the same of time (per token)
    # the model families (`model_type`) of the runs it was fitted on
    families: tuple[str, ...] = ()

    @classmethod
    def neutral(cls, gpu: str) -> "SteadyProfile":
        return cls("reference", gpu, {g: 1.0 for g in GROUPS}, 0.0, 1.0)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "gpu": self.gpu, "time_scale": dict(self.time_scale),
                "step_host_s": self.step_host_s, "power_scale": self.power_scale,
                "source": self.source,
                "interval": list(self.interval) if self.interval else None,
                "time_interval": list(self.time_interval) if self.time_interval else None,
                "families": list(self.families)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "SteadyProfile":
        iv, tv = doc.get("interval"), doc.get("time_interval")
        return cls(doc["name"], doc["gpu"], {g: float(doc["time_scale"][g]) for g in GROUPS},
                   float(doc["step_host_s"]), float(doc["power_scale"]), doc.get("source", ""),
                   tuple(iv) if iv else None, tuple(tv) if tv else None,
                   tuple(doc.get("families") or ()))


PROFILE_SCHEMA = "piep.steady_profile"


def profile_path(engine: str, gpu: str):
    """Where the steady-state profile of `engine` on `gpu` is: the user's own fit (the
    user data directory), else the shipped one fitted on public measurements
    (calibration/public/engines/<engine>/<gpu>.json); None where neither exists."""
    from piep.core.artifacts import data_root, gpu_key, user_gpu_dir
    for path in (user_gpu_dir(gpu) / "engines" / engine / "steady.json",
                 data_root() / "calibration" / "public" / "engines" / engine
                 / f"{gpu_key(gpu)}.json"):
        if path.is_file():
            return path
    return None


def load_profile(engine: str, gpu: str) -> tuple[SteadyProfile, tuple[str, ...]]:
    """The steady-state profile of `engine` on `gpu`, and its flags: where `gpu` has none,
    the engine's profile of the GPU nearest in memory bandwidth by their spec sheets (its
    engine terms carried over, the GPU priced by piep's own calibration or spec sheet;
    flagged `steady_profile_other_gpu`)."""
    from piep.core.artifacts import read_json
    if engine not in names(profile="steady"):
        raise ConfigError(f"engine {engine!r} has no steady-state model; engines: "
                          f"{', '.join(names(profile='steady'))}")
    path = profile_path(engine, gpu)
    flags: tuple[str, ...] = ()
    if path is None:
        others = [p for p in shipped_profiles() if p.startswith(f"{engine} on ")]
        if not others:
            raise ConfigError(f"no steady-state profile of {engine}: fit one "
                              f"(benchmarks/public_mlenergy.py --fit is the example)")
        path = profile_path(engine, _nearest(gpu, [p.split(" on ", 1)[1] for p in others]))
        flags = ("steady_profile_other_gpu",)
    if "public" in path.parts:  # (the user's own fits live in the user data directory)
        flags = ("supplied_profile", *flags)
    return SteadyProfile.from_json(read_json(path, PROFILE_SCHEMA)["profile"]), flags


def _nearest(gpu: str, candidates: list[str]) -> str:
    """The candidate GPU whose spec-sheet HBM bandwidth is nearest `gpu`'s (in ratio); the
    first where either has no spec sheet."""
    from piep.core.gpus import spec_sheets
    sheets = spec_sheets()["gpus"]
    if gpu not in sheets:
        return candidates[0]
    bw = sheets[gpu]["hbm_tb_s"]
    known = [c for c in candidates if c in sheets]
    return min(known, key=lambda c: abs(math.log(sheets[c]["hbm_tb_s"] / bw))) if known \
        else candidates[0]


def shipped_profiles() -> list[str]:
    """'engine on gpu' of every shipped steady-state profile."""
    from piep.core.artifacts import data_root
    root = data_root() / "calibration" / "public" / "engines"
    return sorted(f"{p.parent.name} on {p.stem}" for p in root.glob("*/*.json"))
