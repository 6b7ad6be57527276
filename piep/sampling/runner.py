"""`piep measure`: real inference of the reference decoder with tick-aligned energy windows.

Launch with `torchrun --nproc-per-node N -m piep measure ...` (or a plain process for one
GPU). Every process builds its stage/TP shard, warms up at the full workload shape,
captures the decode step (graph mode), then measures prefill and decode windows
(repeated back to back until each window spans several counter ticks) and gathers
per-GPU results on rank 0, which writes one JSON record per configuration.
"""

from __future__ import annotations

import logging
import math
import os
import platform
import statistics
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from piep.sampling.meter import model_shape  # noqa: F401  (re-exported: samplers import it here)
from piep.core.config import ModelSpec, Parallel, Workload
from piep.device import clock
from piep.core.errors import ConfigError
from piep.sampling.generate import Generator
from piep.sampling.model import StageModel, Topology, make_tp_groups

log = logging.getLogger("piep.measure")
RECORD_SCHEMA = "piep.measurement"
RECORD_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class Hygiene:
    """Measurement hygiene as named parameters (SPEC §3, STYLE rule 6)."""

    repeats: int = 3              # interleaved repeats of (prefill window, decode window)
    min_window_s: float = 0.5     # a window spans >= this (5 counter ticks at ~100 ms)
    idle_s: float = 1.0           # idle-power window, tick to tick, context open
    warmup_decode_steps: int = 8  # decode steps run at full shape before measuring
    continuous_check: bool = True  # also one continuous prefill+decode window
    cooldown_s: float = 0.0       # sleep between configurations


class Dist:
    """Process group state; a world of one needs no torch.distributed at all."""

    def __init__(self, backend: str | None = None):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.cpu_group = None
        if self.world > 1 and not dist.is_initialized():
            backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
            if backend == "nccl":
                torch.cuda.set_device(self.local_rank)
                dist.init_process_group(backend, device_id=torch.device("cuda", self.local_rank),
                                        timeout=timedelta(seconds=180))
            else:
                dist.init_process_group(backend, timeout=timedelta(seconds=180))
            # CPU barriers keep GPUs idle (not busy-polling) while ranks align
            self.cpu_group = dist.new_group(backend="gloo") if backend == "nccl" else None

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier(group=self.cpu_group)

    def gather(self, obj: Any) -> list[Any]:
        if self.world == 1:
            return [obj]
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj, group=self.cpu_group)
        return out

    def close(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def launch_time_s(x, launches: int, warmup: int, device, *, drained: bool) -> float:
    """Host time per `x.add_(1)` of `launches` back to back (after `warmup` of them and a
    sync): until the host has issued them (`drained` off: the launch probe), or until the
    GPU has run them too (the launch-gap power row's pace)."""
    for _ in range(warmup):
        x.add_(1)
    _sync(device)
    t0 = clock.now()
    for _ in range(launches):
        x.add_(1)
    if drained:
        _sync(device)
    elapsed = clock.now() - t0
    _sync(device)
    return elapsed / launches


def _provenance(device) -> dict[str, Any]:
    from piep.core.artifacts import git_hash
    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                            "host_cpu": _cpu_model(), "runner_git": git_hash(),
                            "vm_runtime": platform.release(), "python": platform.python_version()}
    if torch.device(device).type == "cuda":
        info["gpu_name"] = torch.cuda.get_device_name()
        info["cudnn"] = torch.backends.cudnn.version()
        info["flash_sdp"] = torch.backends.cuda.flash_sdp_enabled()
        info["mem_efficient_sdp"] = torch.backends.cuda.mem_efficient_sdp_enabled()
    return info


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


class RankMeter:
    """This rank's GPU: NVML meter where available, else timing only (CPU tests)."""

    def __init__(self, device, *, fake=None):
        self.nvml = None
        self.meter = None
        if fake is not None:
            from piep.device.energy import TickMeter
            self.nvml, self.meter = fake, TickMeter(fake, clock=fake.clock,
                                                    sleep=fake.clock.sleep)
        elif torch.device(device).type == "cuda":
            from piep.device.energy import TickMeter
            from piep.device.nvml import NvmlDevice
            uuid = str(torch.cuda.get_device_properties(device).uuid)
            self.nvml = NvmlDevice(uuid=uuid)
            self.meter = TickMeter(self.nvml)
        self.idle_w: float | None = None

    def idle(self, seconds: float) -> float | None:
        if self.meter is None:
            return None
        if self.idle_w is None:
            self.idle_w = self.meter.idle_power_w(seconds)
        return self.idle_w

    def snapshot(self) -> dict[str, Any]:
        return self.nvml.snapshot() if self.nvml is not None else {}

    def window(self, work, before) -> dict[str, Any]:
        if self.meter is None:
            before()
            t0 = clock.now()
            work()
            return {"energy_j": None, "duration_s": clock.now() - t0}
        return self.meter.measure(work, idle_power_w=self.idle_w or 0.0, before=before).to_dict()


def measure_config(spec: ModelSpec, parallel: Parallel, workload: Workload, *, d: Dist,
                   device, dtype=torch.bfloat16, hygiene: Hygiene = Hygiene(), meter: RankMeter,
                   seed: int = 0, state=None, predicted_memory_gib: float | None = None,
                   extra: dict[str, Any] | None = None,
                   phase_hook=None) -> dict[str, Any] | None:
    """Measure one configuration on all ranks; rank 0 returns the record, others None.
    `phase_hook(phase)` is called at every phase boundary of the measured windows (the
    clock runtime's entry point)."""
    hook = phase_hook or (lambda phase: None)
    if spec.facts():
        raise ConfigError(f"{spec.name}: piep's reference runner runs Llama's layer; a "
                          f"{spec.model_type} layer ({', '.join(spec.facts())}) is measured "
                          f"with transformers: --engine hf-eager, hf-static or hf-cb")
    if parallel.world_size != d.world:
        raise ConfigError(f"tp*pp*dp = {parallel.world_size} but {d.world} processes run; "
                          f"launch with torchrun --nproc-per-node {parallel.world_size}")
    topo = Topology(tp=parallel.tp, pp=parallel.pp, dp=parallel.dp, rank=d.rank)
    make_tp_groups(topo, d.world)
    b = workload.batch // parallel.dp
    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    snap_start = meter.snapshot()
    model = StageModel(spec, topo, batch=b, max_len=workload.context_len, device=device,
                       dtype=dtype, state=state, seed=seed)
    gen = Generator(model, topo, prompt_len=workload.prompt_len, gen_len=workload.gen_len,
                    mode=workload.mode, seed=seed)
    sdpa = _sdpa_backend(model, workload) if cuda else "math (cpu)"

    # warm-up at the full workload shape, graph capture, timing estimates
    d.barrier()
    gen.capture()
    _sync(device)
    t0 = clock.now()
    gen.prefill()
    _sync(device)
    t_prefill = clock.now() - t0
    gen.check()
    warm = max(1, min(hygiene.warmup_decode_steps, workload.gen_len - 1))
    t0 = clock.now()
    gen.decode(warm)
    _sync(device)
    t_step = (clock.now() - t0) / warm
    est = d.gather((t_prefill, t_step))
    t_prefill = max(e[0] for e in est)
    t_step = max(e[1] for e in est)
    steps = workload.gen_len - 1
    k_prefill = max(1, math.ceil(hygiene.min_window_s / max(t_prefill, 1e-6)))
    k_decode = max(1, math.ceil(hygiene.min_window_s / max(t_step * max(steps, 1), 1e-6))) \
        if steps else 0
    idle_w = meter.idle(hygiene.idle_s)

    def prefill_work():
        for _ in range(k_prefill):
            hook("prefill")
            gen.prefill()
        _sync(device)

    def decode_work():
        for _ in range(k_decode):
            hook("decode")
            gen.decode()
        _sync(device)

    def continuous_work():
        hook("prefill")
        gen.prefill()
        hook("decode")
        gen.decode()
        _sync(device)

    windows: dict[str, list[dict[str, Any]]] = {"prefill": [], "decode": [], "continuous": []}
    for _ in range(hygiene.repeats):
        windows["prefill"].append(meter.window(prefill_work, d.barrier))
        if k_decode:
            windows["decode"].append(meter.window(decode_work, d.barrier))
    if hygiene.continuous_check:
        windows["continuous"].append(meter.window(continuous_work, d.barrier))
    snap_end = meter.snapshot()
    peak_alloc = torch.cuda.max_memory_allocated() / 1024 ** 3 if cuda else None
    peak_reserved = torch.cuda.max_memory_reserved() / 1024 ** 3 if cuda else None
    mine = {"rank": d.rank, "stage": topo.pp_rank, "tp_rank": topo.tp_rank,
            "replica": topo.dp_rank, "uuid": getattr(meter.nvml, "uuid", None),
            "idle_power_w": idle_w, "windows": windows, "start": snap_start, "end": snap_end,
            "peak_allocated_gib": peak_alloc, "peak_reserved_gib": peak_reserved,
            "weight_gib": model.weight_bytes() / 1024 ** 3}
    tokens = gen.tokens.cpu().tolist() if topo.last and topo.dp_rank == 0 else None
    ranks = d.gather(mine)
    toks = d.gather(tokens)
    gen = model = None  # free the GPU memory before the next configuration
    if cuda:
        torch.cuda.empty_cache()
    if hygiene.cooldown_s > 0:  # let the board cool before the next configuration
        clock.sleep(hygiene.cooldown_s)
    if d.rank != 0:
        return None
    return _record(spec, parallel, workload, ranks, k_prefill, k_decode, steps, sdpa,
                   next(t for t in toks if t is not None), device, predicted_memory_gib,
                   extra or {})


def _sdpa_backend(model: StageModel, workload: Workload) -> str:
    """Which SDPA kernel this shape gets (recorded as provenance)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return "unknown"
    layer = model.layers[0]
    q = torch.zeros(1, layer.hq, 8, model.spec.head_dim, device=model.device, dtype=model.dtype)
    k = torch.zeros(1, layer.hkv, 8, model.spec.head_dim, device=model.device, dtype=model.dtype)
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                          ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                          ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)):
        try:
            with sdpa_kernel(backend):
                torch.nn.functional.scaled_dot_product_attention(
                    q, k, k, is_causal=True, enable_gqa=layer.hq != layer.hkv)
            return f"prefill:{name}"
        except RuntimeError:
            continue
    return "unknown"


def _per_rep(windows: list[dict], k: int) -> list[tuple[float | None, float]]:
    return [((w["energy_j"] / k) if w["energy_j"] is not None else None, w["duration_s"] / k)
            for w in windows]


def _spread(values: list[float]) -> float | None:
    if len(values) < 2:
        return 0.0 if values else None
    med = statistics.median(values)
    return (max(values) - min(values)) / med if med else None


def _record(spec, parallel, workload, ranks, k_prefill, k_decode, steps, sdpa, tokens, device,
            predicted_memory_gib, extra) -> dict[str, Any]:
    from piep import __version__
    repeats = len(ranks[0]["windows"]["prefill"])
    per_gpu = []
    pre_e = [0.0] * repeats
    dec_e = [0.0] * repeats
    pre_t = [0.0] * repeats
    dec_t = [0.0] * repeats
    has_energy = ranks[0]["windows"]["prefill"][0]["energy_j"] is not None
    for r in ranks:
        pre = _per_rep(r["windows"]["prefill"], k_prefill)
        dec = _per_rep(r["windows"]["decode"], k_decode) if k_decode else [(0.0, 0.0)] * repeats
        for i in range(repeats):
            if has_energy:
                pre_e[i] += pre[i][0]
                dec_e[i] += dec[i][0]
            pre_t[i] = max(pre_t[i], pre[i][1])
            dec_t[i] = max(dec_t[i], dec[i][1])
        gpu_pre = statistics.median(p[0] for p in pre) if has_energy else None
        gpu_dec = statistics.median(p[0] for p in dec) if has_energy else None
        per_gpu.append({
            "rank": r["rank"], "stage": r["stage"], "tp_rank": r["tp_rank"],
            "replica": r["replica"], "uuid": r["uuid"], "idle_power_w": r["idle_power_w"],
            "prefill_energy_j": gpu_pre, "decode_energy_j": gpu_dec,
            "peak_allocated_gib": r["peak_allocated_gib"],
            "peak_reserved_gib": r["peak_reserved_gib"], "weight_gib": r["weight_gib"],
            "start": r["start"], "end": r["end"],
            "short_windows": sum(w.get("short", False) for ws in r["windows"].values() for w in ws),
            "bound_j": sum(w.get("bound_j", 0.0) for ws in r["windows"].values() for w in ws),
        })
    prefill_t, decode_t = statistics.median(pre_t), statistics.median(dec_t)
    time_s = prefill_t + decode_t
    rec: dict[str, Any] = {
        **record_head(spec, parallel, workload, workload.mode),
        "engine": "piep reference runner",
        "time_s": time_s,
        "prefill": {"time_s": prefill_t, "reps_per_window": k_prefill},
        "decode": {"time_s": decode_t, "tpot_s": decode_t / steps if steps else 0.0,
                   "reps_per_window": k_decode, "steps": steps},
        "repeats": repeats, "per_gpu": per_gpu, "sdpa_backend": sdpa,
        "tokens_head": [row[:4] for row in tokens[:4]],
        "predicted_memory_gib": predicted_memory_gib,
        "measured_peak_reserved_gib": max((g["peak_reserved_gib"] or 0) for g in per_gpu)
        if per_gpu[0]["peak_reserved_gib"] is not None else None,
        "provenance": {**_provenance(device), "piep_version": __version__,
                       "driver": _driver(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
        **extra,
    }
    if has_energy:
        totals = [p + q for p, q in zip(pre_e, dec_e)]
        rec.update(energy_j=statistics.median(pre_e) + statistics.median(dec_e))
        rec["prefill"]["energy_j"] = statistics.median(pre_e)
        rec["decode"]["energy_j"] = statistics.median(dec_e)
        rec["repeat_energy_j"] = totals
        rec["spread"] = _spread(totals)
        rec["prefill"]["spread"] = _spread(pre_e)
        rec["decode"]["spread"] = _spread(dec_e)
        cont = [r["windows"]["continuous"] for r in ranks if r["windows"]["continuous"]]
        if cont:
            rec["continuous"] = {"energy_j": sum(c[0]["energy_j"] for c in cont),
                                 "time_s": max(c[0]["duration_s"] for c in cont)}
        rec["bound_j"] = sum(g["bound_j"] for g in per_gpu) / (2 * repeats + 1)
    else:
        rec["energy_j"] = None
    return rec


def record_head(spec: ModelSpec, parallel: Parallel, workload: Workload,
                mode: str) -> dict[str, Any]:
    """What every measurement record starts with (`piep.sampling.meter.record_head`)."""
    from piep.sampling.meter import record_head as head
    return head(spec, parallel, workload, mode)


def _driver() -> str | None:
    try:
        from piep.device.nvml import driver_version
        return driver_version()
    except Exception:  # no NVML (CPU run) or no driver: recorded as unknown
        return None
