"""What `piep measure` and `piep calibrate` are asked to do, as frozen typed options (the
command line builds them; the GPU side never sees its argument namespace)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from piep.core.engines import DEFAULT_ENGINE
from piep.core.config import parse_shard
from piep.core.errors import ConfigError
from piep.core.gpus import DEFAULT_GPU



def check_gpu_name(name: str) -> str:
    """A name for a GPU calibration of the user's own: a folder name, no shipped one's."""
    from piep.core.artifacts import USER_NAME, data_root
    if not USER_NAME.fullmatch(name or ""):
        raise ConfigError(f"--name {name!r}: lower-case letters, digits, '.', '_', '-' "
                          f"(e.g. h100-sxm)")
    if (data_root() / "calibration" / name).is_dir():
        raise ConfigError(f"--name {name}: piep ships a calibration of that name; choose "
                          f"another for yours (e.g. {name}-mine)")
    return name


@dataclass(frozen=True, kw_only=True)
class MeasureOptions:
    model: str | None = None
    grid: str | None = None
    out: str | None = None
    budget_s: float = math.inf
    shard: str = "0/1"
    gpu: str = DEFAULT_GPU
    tp: int = 1
    pp: int = 1
    dp: int = 1
    batch: int = 1
    prompt_len: int = 512
    gen_len: int = 128
    mode: str = "graph"
    engine: str = DEFAULT_ENGINE
    repeats: int = 3
    min_window_s: float = 0.5
    idle_s: float = 1.0
    cooldown_s: float = 0.0
    continuous: bool = True
    device: str = "auto"
    dtype: str = "bf16"
    weights: str | None = None
    seed: int = 0
    clock_plan: str | None = None
    clock_dry_run: bool = True
    clock_state_dir: str | None = None
    trace: tuple[str, ...] = ()  # hf-cb: replay these request traces, one after another

    @property
    def shard_index(self) -> tuple[int, int]:
        return parse_shard(self.shard)


@dataclass(frozen=True, kw_only=True)
class CalibrateOptions:
    out: str
    samples: str | None = None
    budget_s: float = math.inf
    shard: str = "0/1"
    models: tuple[str, ...] | None = None  # see `wait_models`
    tps: tuple[int, ...] | None = None  # modules: the tp degrees drawn from (default 1-8)
    kinds: tuple[str, ...] | None = None
    sizes_from: int = 0
    reduce_op: str = "sum"
    modes: tuple[str, ...] | None = None
    min_window_s: float = 0.3
    captures: int = 1
    tiny_only: bool = False
    seed: int = 0
    per_kind: int = 28
    head_dims: tuple[int, ...] | None = None
    repeat_every: int = 10

    @property
    def shard_index(self) -> tuple[int, int]:
        return parse_shard(self.shard)

    @property
    def wait_models(self) -> tuple[str, ...]:
        """The models whose tp=N decoding `calibrate waits` times."""
        return self.models or ("llama-2-7b", "llama-3-8b")
