"""piep's meter for engines piep does not run (vLLM, SGLang, your own server): energy
windows aligned to the NVML counter's ticks around any work on this machine's GPUs (the
waits to the ticks priced at idle power), written as measurement records an engine
profile is fitted on (`piep train --engine NAME --from-measurements`).

    from piep.sampling import meter
    with meter.window([0, 1]) as whole:          # the GPUs the engine runs on
        engine.generate(prompts, max_new_tokens=G)  # must return when the GPUs are done
    rec = meter.record("llama-3-8b", engine="vllm", engine_version="0.9", batch=B,
                       prompt_len=P, gen_len=G, tp=2, whole=whole)
    meter.append("runs.jsonl", rec)

or from a shell: `piep meter --model M --engine NAME --batch B --prompt-len P --gen-len G
--out runs.jsonl -- CMD ...` (and `--prefill-cmd` for the prefill split). Torch-free: NVML
through `piep.device` only; fakes are injected for tests.
"""

from __future__ import annotations

import platform
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from piep.core.config import ModelSpec, Parallel, Workload
from piep.device import clock as host_clock
from piep.core.errors import DeviceError

RECORD_SCHEMA, RECORD_VERSION = "piep.measurement", 1


def model_shape(spec: ModelSpec) -> dict[str, Any]:
    """The shape fields a measurement record carries (enough to rebuild the ModelSpec)."""
    facts = spec.facts()
    return {"hidden": spec.hidden_size, "layers": spec.num_layers, "heads": spec.num_heads,
            "kv_heads": spec.num_kv_heads, "head_dim": spec.head_dim,
            "ffn": spec.intermediate_size, "vocab": spec.vocab_size, "qkv_bias": spec.qkv_bias,
            **({"sliding_window": spec.sliding_window} if spec.sliding_window else {}),
            **({"tied": True} if spec.tie_word_embeddings else {}),
            # a family beyond Llama's: its type and what its layer runs (piep.core.families)
            **({"model_type": spec.model_type, "family": facts} if facts or spec.is_moe
               else {}),
            # a mixture of experts: how many, how many a token, their width, a shared one's
            **({"experts": {"count": spec.num_experts, "per_token": spec.experts_per_token,
                            "ffn": spec.ffn_of_experts, "shared_ffn": spec.shared_expert_ffn}}
               if spec.is_moe else {}),
            # quantized weights, in words (`ModelSpec.quantization`)
            **({"quantization": spec.quantization} if spec.quantization else {})}


def record_head(spec: ModelSpec, parallel: Parallel, workload: Workload,
                mode: str) -> dict[str, Any]:
    """What every measurement record starts with: schema, the model's shape, the layout
    and the workload."""
    return {
        "schema": RECORD_SCHEMA, "schema_version": RECORD_VERSION, "boundary": "gpu_board",
        "model": spec.name, "config_hash": spec.config_hash(),
        "shape": {**model_shape(spec), "params": spec.num_params()},
        "tp": parallel.tp, "pp": parallel.pp, "dp": parallel.dp, "gpus": parallel.world_size,
        **({"ep": parallel.ep} if parallel.ep > 1 else {}),
        "batch": workload.batch, "prompt_len": workload.prompt_len,
        "gen_len": workload.gen_len, "mode": mode}


@dataclass
class Metered:
    """One window over several GPUs: filled when the `with` block ends."""
    gpus: list[dict[str, Any]]
    energy_j: float | None = None   # all GPUs, idle-corrected alignment waits
    time_s: float | None = None     # the block's wall time
    per_gpu: list[dict[str, Any]] = field(default_factory=list)

    @property
    def short(self) -> bool:
        """Shorter than one counter tick: its energy is not trusted alone."""
        return any(g["short"] for g in self.per_gpu)


def _nvml_devices(gpus: Sequence[int] | None) -> list:
    from piep.device import list_gpus
    seen = list_gpus()
    if not seen:
        raise DeviceError("the meter needs NVIDIA GPUs and their driver (pynvml found none "
                          "here): run it on the machine that runs the engine")
    indices = list(gpus) if gpus is not None else [g["index"] for g in seen]
    unknown = sorted(set(indices) - {g["index"] for g in seen})
    if unknown:
        raise DeviceError(f"GPU {unknown[0]} is not on this machine; GPUs: "
                          f"{', '.join(str(g['index']) for g in seen)}")
    from piep.device.nvml import NvmlDevice
    return [NvmlDevice(index=i) for i in indices]


@contextmanager
def window(gpus: Sequence[int] | None = None, *, devices: Sequence | None = None,
           idle_s: float = 1.0, clock: Callable[[], float] = host_clock.now,
           sleep: Callable[[float], None] = host_clock.sleep) -> Iterator[Metered]:
    """Energy and time of the work in the block on `gpus` (NVML indices; default all), or
    on `devices` (objects with `energy_mj()`, e.g. `piep.device.fake.FakeDevice`). Each
    GPU's idle power is read first; the block starts on a counter tick of every GPU and
    ends on the next ones, their waits subtracted at idle power. Nothing polls the GPUs
    while the block runs. The block must return when the GPU work is done."""
    from piep.device.energy import TickMeter
    devs = list(devices) if devices is not None else _nvml_devices(gpus)
    meters = [TickMeter(d, clock=clock, sleep=sleep) for d in devs]
    idle = [m.idle_power_w(idle_s) for m in meters]
    out = Metered([{"index": getattr(d, "index", i), "uuid": getattr(d, "uuid", None)}
                   for i, d in enumerate(devs)])
    first = [m.wait_tick() for m in meters]
    start = clock()
    yield out
    end = clock()
    for g, m, t0, w in zip(out.gpus, meters, first, idle):
        out.per_gpu.append({**g, **m.close(t0, start, end, idle_power_w=w).to_dict()})
    out.energy_j = sum(g["energy_j"] for g in out.per_gpu)
    out.time_s = end - start


def record(model: str | ModelSpec, *, engine: str, engine_version: str, batch: int,
           prompt_len: int, gen_len: int, whole: Metered, prefill: Metered | None = None,
           tp: int = 1, mode: str = "eager", **extra: Any) -> dict[str, Any]:
    """A measurement record of one run of a foreign engine: `whole` is one window around
    the whole call (B prompts of P tokens, G new tokens each), `prefill` optionally one
    around the same call with one new token (the prefill split; decode = the rest)."""
    from piep.core.models import load_model
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    rec = record_head(spec, Parallel(tp=tp), Workload(batch=batch, prompt_len=prompt_len,
                                                      gen_len=gen_len), mode)
    pre = {"time_s": None, "energy_j": None, "window": None}
    if prefill is not None:
        pre = {"time_s": prefill.time_s, "energy_j": prefill.energy_j,
               "window": "the same call with one new token", "reps_per_window": 1}
    dec = {"time_s": None if prefill is None else whole.time_s - prefill.time_s,
           "energy_j": None if prefill is None else whole.energy_j - prefill.energy_j}
    rec.update({"engine": {"name": engine, "version": engine_version},
                "energy_j": whole.energy_j, "time_s": whole.time_s, "prefill": pre,
                "decode": dec, "repeats": 1, "reps_per_window": 1,
                "per_gpu": whole.per_gpu, "metered": True,
                "flags": ["short_window"] if whole.short else [],
                "host_cpu": platform.processor() or platform.machine(), **extra})
    from piep import __version__
    rec["provenance"] = {"piep_version": __version__,
                         "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    return rec
