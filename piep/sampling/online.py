"""Real measurements for the online search of `piep optimize` (one process, one GPU)."""

from __future__ import annotations

from typing import Any

import torch

from piep.core.config import ModelSpec, Parallel, Workload
from piep.core.errors import ConfigError
from piep.core.models import load_model
from piep.sampling.runner import Dist, Hygiene, RankMeter, measure_config


def runner_measure(model: "str | ModelSpec", *, prompt_len: int, gen_len: int, mode: str,
                   hygiene: Hygiene, seed: int = 0):
    """A measure(point) function: runs the reference runner at the point's batch and
    returns its GPU-board energy and time. Clock and power axes are moved by the caller."""
    d = Dist()
    if d.world != 1:
        raise ConfigError("the online search measures in one process (tp=pp=dp=1)")
    if not torch.cuda.is_available():
        raise ConfigError("the online search measures real runs: it needs a CUDA GPU")
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    meter = RankMeter(device)
    spec = model if isinstance(model, ModelSpec) else load_model(model)

    def measure(p: dict[str, Any]) -> dict[str, Any]:
        rec = measure_config(spec, Parallel(), Workload(batch=p["batch"], prompt_len=prompt_len,
                                                        gen_len=gen_len, mode=mode),
                             d=d, device=device, meter=meter, hygiene=hygiene, seed=seed,
                             extra={"command": "piep optimize --online"})
        if rec.get("energy_j") is None:
            raise ConfigError("no energy counter on this GPU: the online search needs NVML")
        return {"batch": p["batch"], "power_limit_w": p["power_limit_w"],
                "sm_mhz": p["sm_mhz"], "energy_j": rec["energy_j"], "time_s": rec["time_s"],
                "ttft_s": rec["prefill"]["time_s"], "gen_len": gen_len,
                "spread": rec.get("spread"), "sm_clock_mhz_seen": _clocks(rec),
                "key": rec.get("key")}
    return measure


def _clocks(rec: dict[str, Any]):
    try:
        return [g["end"]["sm_clock_mhz"] for g in rec["per_gpu"]]
    except (KeyError, TypeError):
        return None
