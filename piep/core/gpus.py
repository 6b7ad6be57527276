"""GPU profiles: what the roofline and memory fit need, read from calibration/<gpu>/gpu.json."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from piep.core.artifacts import calibration_dir, gpu_key, read_json
from piep.core.errors import ConfigError

DEFAULT_GPU = "h200"  # the GPU piep is calibrated on; every command's default

_FIELDS = ("memory_gib", "bf16_flops", "hbm_bytes_per_s", "link_bytes_per_s",
           "collective_latency_s", "p2p_latency_s", "kernel_gap_graph_s", "kernel_gap_eager_s",
           "idle_power_w", "wait_power_w", "comm_power_w", "compute_power_w", "memory_power_w",
           "max_power_w", "min_power_limit_w", "sm_clock_max_mhz", "sm_clock_min_mhz", "context_gib",
           "cublas_workspace_gib", "nccl_workspace_gib", "graph_pool_factor")


@dataclass(frozen=True, kw_only=True)
class GPU:
    name: str
    memory_gib: float
    bf16_flops: float
    hbm_bytes_per_s: float
    link_bytes_per_s: float
    collective_latency_s: float
    p2p_latency_s: float
    kernel_gap_graph_s: float
    kernel_gap_eager_s: float
    idle_power_w: float
    wait_power_w: float
    comm_power_w: float
    compute_power_w: float
    memory_power_w: float
    max_power_w: float        # the board's default power limit
    min_power_limit_w: float  # the lowest power limit the board can be set to
    sm_clock_max_mhz: float
    sm_clock_min_mhz: float
    context_gib: float
    cublas_workspace_gib: float
    nccl_workspace_gib: float
    graph_pool_factor: float
    sources: tuple[tuple[str, str], ...] = ()

    def kernel_gap_s(self, mode: str) -> float:
        return self.kernel_gap_graph_s if mode == "graph" else self.kernel_gap_eager_s

    def check_power_limits(self, limits_w, what: str) -> None:
        """Power limits this board can be set to (its settable range), else one error."""
        for w in limits_w:
            if not self.min_power_limit_w <= w <= self.max_power_w:
                raise ConfigError(f"{what}={w:g} W is outside the power limits a {self.name} "
                                  f"board can be set to ({self.min_power_limit_w:.0f}-"
                                  f"{self.max_power_w:.0f} W)")


def known_gpus() -> list[str]:
    from piep.core.artifacts import user_calibration_dir
    roots = (calibration_dir("x").parent, user_calibration_dir("x").parent)
    return sorted({p.parent.name for root in roots for p in root.glob("*/gpu.json")})


@lru_cache(maxsize=8)
def load_gpu(name: str) -> GPU:
    key = gpu_key(name)
    path = calibration_dir(key) / "gpu.json"
    if not path.is_file():
        raise ConfigError(f"unknown GPU {name!r}: no calibration/{key}/gpu.json; "
                          f"known: {', '.join(known_gpus()) or 'none'}")
    doc = read_json(path, "piep.gpu_profile")
    values: dict[str, Any] = doc["values"]
    missing = [f for f in _FIELDS if f not in values]
    if missing:
        raise ConfigError(f"{path}: missing {', '.join(missing)}")
    return GPU(name=key, **{f: float(values[f]["value"]) for f in _FIELDS},
               sources=tuple((f, values[f].get("source", "")) for f in _FIELDS))


def spec_sheets() -> dict[str, Any]:
    from piep.core.artifacts import data_root
    return read_json(data_root() / "calibration" / "spec_sheets.json", "piep.spec_sheets")


def board_name(name: str) -> str:
    """The name a GPU is priced under: its own where a calibration has it (shipped or the
    user's, `piep calibrate gpu --name`), else the spec sheet's that lists it among its
    aliases (nvidia-smi's 'NVIDIA H100 80GB HBM3', 'h100-sxm': h100), else as given."""
    key = gpu_key(name)
    if (calibration_dir(key) / "gpu.json").is_file():
        return key
    return next((sheet for sheet, doc in spec_sheets()["gpus"].items()
                 if key in doc.get("aliases", ())), key)


def transfer_gpu(name: str) -> tuple[GPU, dict[str, float]]:
    """A GPU without calibration, from its spec sheet: the calibrated reference GPU's
    measured profile scaled by spec-sheet ratios (so measured efficiency carries over).
    Returns the profile and the ratios (flops, hbm, link, power)."""
    from dataclasses import replace
    doc = spec_sheets()
    key = name.strip().lower()
    sheets = doc["gpus"]
    if key not in sheets:
        raise ConfigError(f"unknown GPU {name!r}: no calibration and no spec sheet; spec "
                          f"sheets: {', '.join(sorted(sheets))}")
    ref_name = doc["reference"]
    ref, tgt, base = sheets[ref_name], sheets[key], load_gpu(ref_name)
    r = {"flops": tgt["bf16_tflops"] / ref["bf16_tflops"], "hbm": tgt["hbm_tb_s"] / ref["hbm_tb_s"],
         "link": tgt["link_gb_s"] / ref["link_gb_s"], "power": tgt["tdp_w"] / ref["tdp_w"],
         "memory": tgt["memory_gb"] / ref["memory_gb"]}
    gpu = replace(
        base, name=key, memory_gib=base.memory_gib * r["memory"],
        bf16_flops=base.bf16_flops * r["flops"], hbm_bytes_per_s=base.hbm_bytes_per_s * r["hbm"],
        link_bytes_per_s=base.link_bytes_per_s * r["link"],
        idle_power_w=base.idle_power_w * r["power"], wait_power_w=base.wait_power_w * r["power"],
        comm_power_w=base.comm_power_w * r["power"],
        compute_power_w=base.compute_power_w * r["power"],
        memory_power_w=base.memory_power_w * r["power"], max_power_w=float(tgt["tdp_w"]),
        min_power_limit_w=base.min_power_limit_w * r["power"],
        sm_clock_max_mhz=float(tgt["sm_clock_max_mhz"]),
        sources=(("spec_sheet", tgt["source"]), ("reference", ref_name)))
    return gpu, r
