"""What a user asks piep about, validated once at the edge: model, GPU, parallel layout,
engine and workload.

A `Scenario` is frozen; report actions, comparisons and the optimizer derive variants
with `.replace(tp=4)` or `.replace(batch=64)`, which validates again. Library functions
take scenarios, never command-line namespaces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from piep import __version__
from piep.config import ModelSpec, Parallel, Workload
from piep.errors import ConfigError
from piep.gpus import DEFAULT_GPU, GPU
from piep.layout import Deployment, validate

# engine name -> the reference runner's mode it runs (the engines piep predicts today)
REFERENCE_ENGINES = {"piep-graph": "graph", "piep-eager": "eager"}
DEFAULT_ENGINE = "piep-graph"


@dataclass(frozen=True, kw_only=True)
class EngineRef:
    """The software that runs the model, named with its version."""
    name: str = DEFAULT_ENGINE
    version: str = __version__

    def __post_init__(self) -> None:
        if self.name not in REFERENCE_ENGINES:
            raise ConfigError(f"engine {self.name!r} is not known; engines: "
                              f"{', '.join(REFERENCE_ENGINES)}")

    @property
    def mode(self) -> str:
        return REFERENCE_ENGINES[self.name]

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version}


def engine_for(engine: str | None = None, mode: str | None = None) -> EngineRef:
    """The engine named, or the reference runner's engine of `mode` (`--mode` is an alias
    of `--engine piep-graph|piep-eager`); both given must agree."""
    if mode is not None and mode not in REFERENCE_ENGINES.values():
        raise ConfigError(f"mode={mode!r} is not one of graph, eager")
    by_mode = {m: name for name, m in REFERENCE_ENGINES.items()}
    if engine is None:
        return EngineRef(name=by_mode[mode or "graph"])
    ref = EngineRef(name=engine)
    if mode is not None and ref.mode != mode:
        raise ConfigError(f"--engine {engine} runs {ref.mode} decode; drop --mode {mode} or "
                          f"use --engine {by_mode[mode]}")
    return ref


@dataclass(frozen=True, kw_only=True)
class Batch:
    """A fixed global batch of prompts of exactly `prompt_len` tokens, `gen_len` new tokens
    each (the first comes from the prefill)."""
    batch: int = 1
    prompt_len: int = 512
    gen_len: int = 128


@dataclass(frozen=True, kw_only=True)
class Scenario:
    model: ModelSpec
    gpu: GPU
    parallel: Parallel = field(default_factory=Parallel)
    engine: EngineRef = field(default_factory=EngineRef)
    workload: Batch = field(default_factory=Batch)
    # spec-sheet ratios when the GPU has no calibration of its own (flagged)
    transfer: tuple[tuple[str, float], ...] | None = None
    deployment: Deployment = field(init=False, repr=False, compare=False)
    check_memory: bool = True

    def __post_init__(self) -> None:
        w = self.workload
        dep = validate(self.model, self.parallel,
                       Workload(batch=w.batch, prompt_len=w.prompt_len, gen_len=w.gen_len,
                                mode=self.engine.mode), self.gpu,
                       check_memory=self.check_memory)
        object.__setattr__(self, "deployment", dep)

    @classmethod
    def build(cls, model: str | ModelSpec, *, gpu: str | GPU = DEFAULT_GPU, tp: int = 1,
              pp: int = 1, dp: int = 1, engine: str | None = None, mode: str | None = None,
              batch: int = 1, prompt_len: int = 512, gen_len: int = 128,
              allow_uncalibrated: bool = False, check_memory: bool = True) -> "Scenario":
        """From names and numbers: a shipped model name or config path, a GPU name."""
        from piep.models import load_model
        spec = model if isinstance(model, ModelSpec) else load_model(model)
        profile, ratios = (gpu, None) if isinstance(gpu, GPU) else \
            gpu_profile(gpu, allow_uncalibrated)
        return cls(model=spec, gpu=profile, parallel=Parallel(tp=tp, pp=pp, dp=dp),
                   engine=engine_for(engine, mode),
                   workload=Batch(batch=batch, prompt_len=prompt_len, gen_len=gen_len),
                   transfer=tuple(sorted(ratios.items())) if ratios else None,
                   check_memory=check_memory)

    def replace(self, **changes: Any) -> "Scenario":
        """A variant: any of model, gpu, tp, pp, dp, engine, mode, batch, prompt_len,
        gen_len; validated again."""
        from piep.models import load_model
        model = changes.pop("model", self.model)
        gpu, transfer = self.gpu, self.transfer
        if "gpu" in changes:
            new = changes.pop("gpu")
            gpu, ratios = (new, None) if isinstance(new, GPU) else \
                gpu_profile(new, changes.pop("allow_uncalibrated", False))
            transfer = tuple(sorted(ratios.items())) if ratios else None
        p, w = self.parallel, self.workload
        parallel = Parallel(tp=changes.pop("tp", p.tp), pp=changes.pop("pp", p.pp),
                            dp=changes.pop("dp", p.dp))
        engine = self.engine
        if "engine" in changes or "mode" in changes:
            engine = engine_for(changes.pop("engine", None), changes.pop("mode", None))
        workload = Batch(batch=changes.pop("batch", w.batch),
                         prompt_len=changes.pop("prompt_len", w.prompt_len),
                         gen_len=changes.pop("gen_len", w.gen_len))
        if changes:
            raise TypeError(f"Scenario.replace() got unknown fields {sorted(changes)}")
        return Scenario(model=load_model(model) if isinstance(model, str) else model, gpu=gpu,
                        parallel=parallel, engine=engine, workload=workload,
                        transfer=transfer, check_memory=self.check_memory)

    @property
    def mode(self) -> str:
        return self.engine.mode

    def label(self) -> str:
        p = self.parallel
        return f"{self.model.name}@tp{p.tp}pp{p.pp}dp{p.dp}"


def gpu_profile(name: str, allow_uncalibrated: bool = False) -> tuple[GPU, dict | None]:
    """(GPU profile, spec-sheet ratios or None): the calibration, or with
    `allow_uncalibrated` the spec-sheet transfer for a GPU that has none."""
    from piep.gpus import known_gpus, load_gpu, transfer_gpu
    try:
        return load_gpu(name), None
    except ConfigError:
        if not allow_uncalibrated:
            raise ConfigError(f"GPU {name!r} has no calibration (calibrated: "
                              f"{', '.join(known_gpus())}); pass --allow-uncalibrated to "
                              f"predict it from its spec sheet, flagged and with a wide "
                              f"interval") from None
    return transfer_gpu(name)
