"""Hugging Face transformers `generate()` as an engine piep measures.

The measured quantity of `hf-eager` and `hf-static`: one whole `generate()` call on B
prompts of exactly P random token ids (no padding, an attention mask of ones), greedy,
`max_new_tokens = min_new_tokens = G` (G counts the token the prefill produces), after
warm-up calls of the same (B, P, G) on the same model object, in one tick-aligned energy
window summed over the GPUs of the run. `hf-eager` is the default `generate()`
(DynamicCache); `hf-static` passes `cache_implementation="static"`, with which
transformers compiles the decode step (`torch.compile`, mode reduce-overhead: CUDA
graphs); its prefill stays uncompiled. A secondary window, `generate()` with one new
token, splits prefill from decode. Tensor parallelism is transformers' own
(`from_pretrained(checkpoint, tp_plan="auto")` under torchrun); random weights are saved
to a checkpoint once for it.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from piep.core.config import ModelSpec, Parallel, Workload
from piep.device import clock
from piep.core.engines import engine as engine_record, names
from piep.core.errors import ConfigError
from piep.core.families import FAMILIES
from piep.sampling.runner import (Dist, Hygiene, RankMeter, _cpu_model, _driver, _spread, _sync,
                                 launch_time_s, record_head)

log = logging.getLogger("piep.measure")
HF_ENGINES = names(runs_generate=True)  # the engines measured as one generate() call


# a decoder small enough that its decode step is all host time (2 layers, ~100 kernels)
TINY_DECODER = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                "vocab_size": 512, "max_position_embeddings": 4096}
_tiny: dict[str, Any] = {}


def tiny_decode_step_s(device, steps: int = 20) -> float | None:
    """Seconds per eager decode step of a tiny transformers Llama (DynamicCache, batch 1)
    on this host: the host path of an eager engine's step (Python modules, dispatch,
    launches) with next to no GPU time; None without transformers."""
    try:
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError:
        return None
    key = str(device)
    if key not in _tiny:  # built once per device, with the keyword its cache goes by
        cfg = dict(TINY_DECODER)
        cfg = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
        with torch.device(device):
            tiny = AutoModelForCausalLM.from_config(cfg).eval()
        # `cache` in newer transformers, `past_key_values` before
        _tiny[key] = (tiny, "cache" if "cache" in inspect.signature(tiny.forward).parameters
                      else "past_key_values")
    model, kw = _tiny[key]
    ids = torch.arange(16, device=device)[None]
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=True)
        cache, tok = out[kw] if kw in out else out[1], out.logits[:, -1:].argmax(-1)
        _sync(device)
        t0 = clock.now()
        for _ in range(steps):
            out = model(input_ids=tok, use_cache=True, **{kw: cache})
            tok = out.logits[:, -1:].argmax(-1)
        _sync(device)
    return (clock.now() - t0) / steps


def host_probe(device) -> dict[str, float]:
    """How fast this host issues work: a fixed pure-Python loop, the launch time of a
    tiny kernel (eager host paths scale with both), and where transformers is installed
    a tiny model's eager decode step (recorded to test as a host probe; the profiles use
    the launch time)."""
    t0 = clock.now()
    acc = 0
    for i in range(200_000):
        acc += i & 7
    python_s = clock.now() - t0
    launch_s = launch_time_s(torch.zeros(16, device=device), 2000, 50, device, drained=False)
    out = {"python_loop_200k_s": python_s, "launch_add_s": launch_s}
    step = tiny_decode_step_s(device)
    if step is not None:
        out["tiny_decode_step_s"] = step
    return out


# the GPU probe's two fixed kernels: an HBM copy and a decode-like GEMM (8 tokens through a
# 4096 x 14336 projection), each repeated back to back in one metered window
GPU_PROBE_COPY_BYTES = 1 << 30
GPU_PROBE_GEMM = (8, 4096, 14336)
_gpu_probes: dict[str, dict[str, float]] = {}


def gpu_probe(device, meter: RankMeter, window_s: float = 1.0,
              copy_bytes: int = GPU_PROBE_COPY_BYTES,
              gemm: tuple[int, int, int] = GPU_PROBE_GEMM) -> dict[str, float] | None:
    """How much power this GPU draws on two fixed memory-bound kernels (boards of one kind
    differ: the decode power of the same run moved from call to call): the mean board
    power and speed of an HBM copy and of a decode-like GEMM, each over a metered window of
    `window_s`; measured once per GPU and process, None without a meter."""
    if meter.meter is None:
        return None
    key = str(device)
    if key in _gpu_probes:
        return _gpu_probes[key]
    meter.idle(window_s)  # the windows' alignment waits are priced at idle power
    src = torch.empty(copy_bytes // 2, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    m, k, n = gemm
    w = [torch.randn(k, n, dtype=torch.bfloat16, device=device) for _ in range(4)]
    x = torch.randn(m, k, dtype=torch.bfloat16, device=device)
    out: dict[str, float] = {}
    ops = (("copy", lambda i: dst.copy_(src)), ("decode_gemm", lambda i: x @ w[i % 4]))
    for name, op in ops:
        for i in range(3):
            op(i)
        _sync(device)
        t0 = clock.now()
        for i in range(20):
            op(i)
        _sync(device)
        calls = max(1, math.ceil(window_s / max((clock.now() - t0) / 20, 1e-7)))

        def work(op=op, calls=calls):
            for i in range(calls):
                op(i)
            _sync(device)
        win = meter.window(work, lambda: None)
        out[f"{name}_power_w"] = win["energy_j"] / win["duration_s"]
        out[f"{name}_s"] = win["duration_s"] / calls
    out["copy_gbps"] = 2 * copy_bytes / out["copy_s"] / 1e9
    _gpu_probes[key] = out
    return out


def probe_outside_peak(device, meter: RankMeter, probe=None) -> tuple[dict | None, int]:
    """The GPU probe (`probe`, default `gpu_probe`) without its buffers in the run's peak
    memory: returns the probe (None where it failed: a probe never costs a run) and the
    peak reserved bytes before it; on a GPU the probe's blocks go back to the device and
    the peak statistic restarts, so the run's peak is the larger of that and the new one."""
    probe = probe or gpu_probe
    cuda = torch.device(device).type == "cuda"
    before = torch.cuda.max_memory_reserved() if cuda else 0
    try:
        board = probe(device, meter)
    except (RuntimeError, torch.cuda.OutOfMemoryError) as exc:
        log.warning("GPU probe skipped: %s", exc)
        board = None
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return board, before


def median_probe(probes: list[dict[str, float]]) -> dict[str, float]:
    """The median of each host probe over several measurements."""
    return {k: statistics.median(p[k] for p in probes) for k in probes[0]}


def _hf_config(spec: ModelSpec):
    """The transformers config of `spec`'s own family (its modeling code is what runs; for
    a vision-language model's text decoder, the family its row `runs_as`); padding is
    token 0 (a family's own pad id may lie beyond a small vocabulary)."""
    from transformers import AutoConfig
    cfg = spec.to_hf_config()
    model_type = cfg.pop("model_type")
    if FAMILIES[model_type].remote_code:
        raise ConfigError(f"{spec.name}: transformers ships no modeling code for "
                          f"model_type {model_type!r} (its model repo's own runs, "
                          f"trust_remote_code); piep prices it but samples and measures "
                          f"the families transformers ships")
    cfg.pop("architectures", None)
    # (a vision-language model's text decoder: the family whose CausalLM runs its layer)
    return AutoConfig.for_model(FAMILIES[model_type].runs_as or model_type, **cfg,
                                pad_token_id=0)


def build_model(spec: ModelSpec, parallel: Parallel, d: Dist, device, dtype,
                weights: str | None, seed: int):
    """The transformers model on this rank: random weights made on the GPU (HF's own
    init), or `weights` (a checkpoint folder); TP through a checkpoint on disk."""
    from transformers import AutoModelForCausalLM
    if parallel.pp != 1 or parallel.dp != 1:
        raise ConfigError("the transformers engines run tensor parallelism only (pp=dp=1)")
    torch.manual_seed(seed)
    if spec.fp8_weights and (parallel.tp != 1 or weights):
        raise ConfigError("FP8 layers are built from random weights at tp=1 only")
    if parallel.tp == 1:
        if weights:
            return AutoModelForCausalLM.from_pretrained(weights, dtype=dtype).to(device).eval()
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(_hf_config(spec), dtype=dtype)
        if spec.fp8_weights:  # the layers' projections as an FP8 checkpoint holds them
            from piep.sampling.fp8 import to_fp8
            log.info("%s: %d projections in row-wise FP8", spec.name, to_fp8(model))
            torch.cuda.empty_cache() if torch.cuda.is_available() else None
        return model.eval()
    ckpt = weights or _random_checkpoint(spec, d, device, dtype, seed)
    try:  # transformers >= 5.17 names it DistributedConfig; `tp_plan=` is its older alias
        from transformers import DistributedConfig
        kw: dict[str, Any] = {"distributed_config": DistributedConfig(
            tp_plan="auto", enable_expert_parallel=parallel.ep > 1)}
    except ImportError:
        if parallel.ep > 1:
            raise ConfigError("experts sharded over the ranks (ep > 1) need transformers "
                              ">= 5.17 (DistributedConfig)") from None
        kw = {"tp_plan": "auto"}
    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=dtype, **kw)
    return model.eval()


def _random_checkpoint(spec: ModelSpec, d: Dist, device, dtype, seed: int) -> str:
    """Random weights saved once (rank 0) where every rank can read them."""
    from transformers import AutoModelForCausalLM
    root = Path(os.environ.get("PIEP_CHECKPOINTS", tempfile.gettempdir())) / "piep-ckpt"
    folder = root / f"{spec.name}-{spec.config_hash()}-seed{seed}"
    if d.rank == 0 and not (folder / "config.json").is_file():
        t0 = clock.now()
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(_hf_config(spec), dtype=dtype)
        tmp = folder.with_name(folder.name + ".tmp")
        model.save_pretrained(tmp)
        tmp.rename(folder)
        del model
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
        log.info("saved random %s weights to %s in %.0f s", spec.name, folder,
                 clock.now() - t0)
    d.barrier()
    return str(folder)


class HFGenerate:
    """One engine configuration on a built model: its `generate()` calls and windows."""

    def __init__(self, model, engine: str, workload: Workload, device, seed: int):
        if engine not in HF_ENGINES:
            raise ConfigError(f"engine {engine!r} is not one of {', '.join(HF_ENGINES)}")
        self.model, self.engine, self.workload, self.device = model, engine, workload, device
        g = torch.Generator(device="cpu").manual_seed(seed)
        vocab = model.config.vocab_size
        self.input_ids = torch.randint(0, vocab, (workload.batch, workload.prompt_len),
                                       generator=g).to(device)
        self.mask = torch.ones_like(self.input_ids)
        self.last: torch.Tensor | None = None

    def generate(self, new_tokens: int | None = None, **extra: Any):
        """One `generate()` call of this configuration (`new_tokens`: another length;
        `extra`: more keywords of `generate`); its output is kept in `last`."""
        g = self.workload.gen_len if new_tokens is None else new_tokens
        kw: dict[str, Any] = {"do_sample": False, "max_new_tokens": g, "min_new_tokens": g,
                              "pad_token_id": 0, **extra}
        if engine_record(self.engine).masked_cache:  # the static cache
            kw["cache_implementation"] = "static"
        with torch.inference_mode():
            self.last = self.model.generate(self.input_ids, attention_mask=self.mask, **kw)
        return self.last

    def cache_layers(self) -> list[str] | None:
        """The class names of the KV-cache layers a short call of this configuration uses
        (transformers' `DynamicSlidingWindowLayer`, `StaticSlidingWindowLayer`: the cache
        applies the model's sliding window); None where the version does not expose them."""
        try:
            out = self.generate(2, return_dict_in_generate=True)
            return sorted({type(layer).__name__
                           for layer in getattr(out.past_key_values, "layers", ())}) or None
        except Exception:  # a record without it is still a record
            return None

    def cache_len(self) -> int | None:
        """The static cache's length (the largest P + G of any call on this model)."""
        return getattr(self.model, "_previous_max_cache_length", None) \
            if engine_record(self.engine).masked_cache else None


def _dynamo_counts() -> dict[str, int]:
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    return {"unique_graphs": int(counters["stats"].get("unique_graphs", 0)),
            "recompiles": int(sum(counters["recompiles"].values()))
            if "recompiles" in counters else 0}


def measure_hf(spec: ModelSpec, parallel: Parallel, workload: Workload, *, engine: str,
               d: Dist, device, model, dtype=torch.bfloat16, hygiene: Hygiene = Hygiene(),
               meter: RankMeter, seed: int = 0, max_warmups: int = 6,
               extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Measure one (B, P, G) on `model` (built by `build_model`); rank 0 returns the
    record (schema piep.measurement, with `engine` and the host probe)."""
    import transformers
    cuda = torch.device(device).type == "cuda"
    run = HFGenerate(model, engine, workload, device, seed)
    # warm-up: at least two calls, until two in a row agree within 10 % (compiles and
    # CUDA-graph recordings of a new shape land here, not in a window)
    times = []
    compile_s = 0.0
    for i in range(max_warmups):
        d.barrier()
        t0 = clock.now()
        run.generate()
        _sync(device)
        times.append(clock.now() - t0)
        if i == 0:
            compile_s = times[0]
        settled = len(times) >= 2 and abs(times[-1] / times[-2] - 1) < 0.1
        if all(d.gather(settled)):  # every rank makes the same number of calls
            break
    new_tokens = int(run.last.shape[1] - workload.prompt_len)
    t_call = max(v for v in d.gather(times[-1]))
    reps = max(1, math.ceil(hygiene.min_window_s / max(t_call, 1e-6)))
    d.barrier()
    t0 = clock.now()
    run.generate(1)
    _sync(device)
    t_first = max(v for v in d.gather(clock.now() - t0))
    reps_first = max(1, math.ceil(hygiene.min_window_s / max(t_first, 1e-6)))
    idle_w = meter.idle(hygiene.idle_s)
    board, peak_before = probe_outside_peak(device, meter)
    before_counts = _dynamo_counts()

    def whole():
        for _ in range(reps):
            run.generate()
        _sync(device)

    def first_token():
        for _ in range(reps_first):
            run.generate(1)
        _sync(device)

    windows: dict[str, list[dict[str, Any]]] = {"generate": [], "first_token": []}
    probes = []  # the host's speed beside every window (one probe alone varies)
    for _ in range(hygiene.repeats):
        probes.append(host_probe(device))
        windows["generate"].append(meter.window(whole, d.barrier))
        windows["first_token"].append(meter.window(first_token, d.barrier))
    probes.append(host_probe(device))
    after_counts = _dynamo_counts()
    layers = run.cache_layers()  # after the windows: its shorter call leaves them alone
    mine = {"rank": d.rank, "uuid": getattr(meter.nvml, "uuid", None), "idle_power_w": idle_w,
            "gpu_probe": board, "windows": windows,
            "peak_reserved_gib":
                max(peak_before, torch.cuda.max_memory_reserved()) / 2 ** 30 if cuda else None}
    ranks = d.gather(mine)
    if d.rank != 0:
        return None
    rec = _record(spec, parallel, workload, engine, ranks, reps, reps_first)
    rec.update({
        "engine": {"name": engine, "version": transformers.__version__},
        "warmup_s": times, "first_call_s": compile_s,
        "static_cache_len": run.cache_len(), "cache_layers": layers,
        "dynamo": {"before": before_counts, "after": after_counts,
                   "recompiled_in_window": before_counts != after_counts},
        "generated_tokens": new_tokens,
        "host_probe": median_probe(probes), "host_probes": probes,
        "host_cpu": _cpu_model(), "driver": _driver(),
        "torch": torch.__version__, **(extra or {})})
    if new_tokens != workload.gen_len:
        rec["flags"] = [f"generated {new_tokens} tokens, not {workload.gen_len}"]
    return rec


def _record(spec, parallel, workload, engine, ranks, reps, reps_first) -> dict[str, Any]:
    from piep import __version__
    has_energy = ranks[0]["windows"]["generate"][0]["energy_j"] is not None
    n = len(ranks[0]["windows"]["generate"])

    def per_call(kind: str, k: int) -> tuple[list[float], list[float]]:
        energy = [sum(r["windows"][kind][i]["energy_j"] for r in ranks) / k
                  if has_energy else None for i in range(n)]
        time_s = [max(r["windows"][kind][i]["duration_s"] for r in ranks) / k for i in range(n)]
        return energy, time_s
    e_all, t_all = per_call("generate", reps)
    e_first, t_first = per_call("first_token", reps_first)
    time_s, first_s = statistics.median(t_all), statistics.median(t_first)
    steps = workload.gen_len - 1
    rec: dict[str, Any] = {
        **record_head(spec, parallel, workload, engine_record(engine).decode),
        "time_s": time_s,
        "prefill": {"time_s": first_s, "window": "generate(max_new_tokens=1)",
                    "reps_per_window": reps_first},
        "decode": {"time_s": time_s - first_s,
                   "tpot_s": (time_s - first_s) / steps if steps else 0.0, "steps": steps},
        "reps_per_window": reps, "repeats": n, "repeat_time_s": t_all,
        "per_gpu": [{"rank": r["rank"], "uuid": r["uuid"], "idle_power_w": r["idle_power_w"],
                     **({"gpu_probe": r["gpu_probe"]} if r.get("gpu_probe") else {}),
                     "peak_reserved_gib": r["peak_reserved_gib"],
                     "short_windows": sum(w.get("short", False) for ws in r["windows"].values()
                                          for w in ws)} for r in ranks],
        "provenance": {"piep_version": __version__,
                       "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
    }
    if has_energy:
        energy = statistics.median(e_all)
        first = statistics.median(e_first)
        rec.update(energy_j=energy, repeat_energy_j=e_all, spread=_spread(e_all))
        rec["prefill"]["energy_j"] = first
        rec["decode"]["energy_j"] = energy - first
    else:
        rec["energy_j"] = None
    return rec
