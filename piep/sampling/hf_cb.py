"""transformers' continuous batching (`hf-cb`) replaying a request trace in real time.

`model.init_continuous_batching()` with the default `ContinuousBatchingConfig()`, greedy,
no logits processor beyond it, EOS off (every request generates exactly its `gen_len`
tokens, the first from its prefill), the default attention. The manager is started and a
few short requests run to completion outside the window; then each request is submitted at
its arrival time. One tick-aligned energy window runs from the first arrival to the last
token of the last request (idle gaps included). Per request: the token timestamps
transformers records, so TTFT, TPOT and end-to-end latency. Per iteration of the engine
(the batch processor's `prepare_next_batch` .. `update_batch`, wrapped while the window
runs; NVML is not polled inside it): host start and end times from the first arrival, the
packed query tokens Σq, the keys read Σkv, the requests and how many of them decode. The
host's probes before and after the replay (`host_probes`, `PROBES_EACH_SIDE` on each
side; the record's `host_probe` is their median: one probe alone moved by half from one
replay to the next on one host, and the committed replays of one probe a side read their
host about a third as well as their call's median did, reports/serving.md), and the
board's (`per_gpu`: its UUID, idle power and `gpu_probe`, as generate()'s runs carry them).

The replay keeps wall time (`time.perf_counter`), not `piep.device.clock`: transformers
stamps each request's tokens on that clock, and arrivals, iterations and tokens must share
one.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import time
from typing import Any

import torch

from piep.core.config import ModelSpec
from piep.core.errors import DeviceError
from piep.sampling.hf import host_probe, median_probe, probe_outside_peak
from piep.sampling.runner import (Dist, Hygiene, RankMeter, _cpu_model, _driver, _sync,
                                  model_shape)
from piep.core.trace import Trace

log = logging.getLogger("piep.measure")
SCHEMA = "piep.serving_measurement"
WARMUP_REQUESTS = 4
# host probes taken before the replay and as many after (about 50 ms each)
PROBES_EACH_SIDE = 5


def _config_seen(manager) -> dict[str, Any]:
    """What the manager decided (block size, token budget, graphs...), where readable."""
    out: dict[str, Any] = {}
    cfg = getattr(manager, "continuous_batching_config", None)
    for key in ("block_size", "num_blocks", "max_batch_tokens", "max_requests_per_batch",
                "use_cuda_graph", "scheduler_type", "use_async_batching", "safety_margin"):
        value = getattr(cfg, key, None)
        out[key] = list(value) if isinstance(value, tuple) else value
    proc = getattr(manager, "batch_processor", None)
    cache = getattr(proc, "cache", None)
    for key in ("num_blocks", "max_batch_tokens", "block_size"):
        value = getattr(cache, key, None)
        if isinstance(value, int):
            out[f"cache_{key}"] = value
    out["attn_implementation"] = getattr(getattr(manager, "model", None), "config", None) and \
        manager.model.config._attn_implementation
    return out


class IterationLog:
    """Per-iteration host timestamps and sizes of the engine's batches, recorded by wrapping
    the batch processor's class (`prepare_next_batch`, `update_batch`) while `on`."""

    FIELDS = ("t_start_s", "t_end_s", "q_tokens", "kv_tokens", "requests", "decode_requests")

    def __init__(self):
        self.rows: list[tuple] = []
        self.on = False
        self.origin = 0.0
        self._pending = None

    @contextlib.contextmanager
    def wrapping(self, processor_cls):
        prepare, update = processor_cls.prepare_next_batch, processor_cls.update_batch
        log_ = self

        def prepare_next_batch(proc):
            sched = proc.scheduler
            if not getattr(sched, "_piep_wrapped", False):
                inner = sched.schedule_batch

                def schedule_batch(*a, **kw):
                    out = inner(*a, **kw)
                    reqs, _, q, kv = out
                    sched._piep_last = (len(reqs or ()), q, kv,
                                        sum(1 for f in reqs or () if f.query_length == 1))
                    return out
                sched.schedule_batch = schedule_batch
                sched._piep_wrapped = True
            t0 = time.perf_counter()
            sched._piep_last = None
            ready = prepare(proc)
            log_._pending = (t0, sched._piep_last) if ready and sched._piep_last else None
            return ready

        def update_batch(proc):
            out = update(proc)
            if log_.on and log_._pending is not None:
                t0, (n, q, kv, dec) = log_._pending
                log_.rows.append((t0 - log_.origin, time.perf_counter() - log_.origin,
                                  int(q), int(kv), n, dec))
            log_._pending = None
            return out
        processor_cls.prepare_next_batch = prepare_next_batch
        processor_cls.update_batch = update_batch
        try:
            yield self
        finally:
            processor_cls.prepare_next_batch, processor_cls.update_batch = prepare, update

    def columns(self) -> dict[str, list]:
        return {f: [r[i] for r in self.rows] for i, f in enumerate(self.FIELDS)}


def _processor_class():
    from transformers.generation.continuous_batching import continuous_api
    return continuous_api.ContinuousBatchProcessor


def measure_trace(spec: ModelSpec, trace: Trace, *, d: Dist, device, model, meter: RankMeter,
                  hygiene: Hygiene = Hygiene(), seed: int = 0, timeout_s: float = 600.0,
                  extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Replay `trace` against transformers' continuous batching on `model`; rank 0 returns
    the record (schema piep.serving_measurement)."""
    import transformers
    from transformers import GenerationConfig
    if d.world != 1:
        raise DeviceError("hf-cb is measured on one GPU (its TP runs its own processes)")
    g = torch.Generator(device="cpu").manual_seed(seed)
    vocab = model.config.vocab_size
    prompts = [torch.randint(0, vocab, (int(p),), generator=g).tolist() for p in trace.prompt_len]
    gen_cfg = GenerationConfig(do_sample=False, max_new_tokens=int(trace.gen_len.max()),
                               eos_token_id=-1, pad_token_id=0)
    iterations = IterationLog()
    # the board's power on two fixed kernels (boards of one kind differ; once a process)
    board, _ = probe_outside_peak(device, meter)
    # the host's speed before and after the replay (one probe alone varies), both taken
    # while no manager thread runs
    probes = [host_probe(device) for _ in range(PROBES_EACH_SIDE)]
    manager = model.init_continuous_batching(generation_config=gen_cfg)
    with iterations.wrapping(_processor_class()):
        manager.start()
        try:
            t0 = time.perf_counter()
            for i in range(WARMUP_REQUESTS):  # outside the window: first kernels, allocator
                manager.add_request(prompts[i % len(prompts)][:32] or [1], request_id=f"warm{i}",
                                    max_new_tokens=8)
            _collect(manager, WARMUP_REQUESTS, timeout_s)
            warmup_s = time.perf_counter() - t0
            idle_w = meter.idle(hygiene.idle_s)
            results: dict[str, Any] = {}
            submitted: dict[str, float] = {}

            def replay():
                start = iterations.origin = time.perf_counter()
                iterations.on = True
                for rid, at, prompt, gen in zip(trace.ids, trace.arrival_s, prompts, trace.gen_len):
                    wait = start + float(at) - time.perf_counter()
                    if wait > 0:
                        time.sleep(wait)
                    submitted[rid] = time.perf_counter() - start
                    manager.add_request(prompt, request_id=rid, max_new_tokens=int(gen),
                                        record_timestamps=True)
                    for out in _drain(manager):
                        results[out.request_id] = out
                while len(results) < len(trace):
                    out = manager.get_result(timeout=timeout_s)
                    if out is None:
                        raise DeviceError(f"hf-cb: {len(trace) - len(results)} requests never "
                                          f"finished")
                    results[out.request_id] = out
                _sync(device)
                iterations.on = False
                replay.start = start
            window = meter.window(replay, d.barrier)
            config = _config_seen(manager)
        finally:
            manager.stop(block=True) if _has_block(manager) else manager.stop()
            if hasattr(model, "destroy_cached_continuous_batching_manager"):
                model.destroy_cached_continuous_batching_manager()  # the next trace starts afresh
    probes += [host_probe(device) for _ in range(PROBES_EACH_SIDE)]
    per_request = []
    start = replay.start
    for rid, at, p, gen in zip(trace.ids, trace.arrival_s, trace.prompt_len, trace.gen_len):
        out = results[rid]
        ts = list(out.timestamps or [])
        arrive = start + submitted[rid]
        per_request.append({
            "id": rid, "arrival_s": float(at), "submitted_s": submitted[rid],
            "prompt_len": int(p), "gen_len": int(gen), "generated": len(out.generated_tokens),
            "ttft_s": ts[0] - arrive if ts else None,
            "tpot_s": (ts[-1] - ts[0]) / (len(ts) - 1) if len(ts) > 1 else 0.0,
            "e2e_s": ts[-1] - arrive if ts else None, "error": out.error})
    ttft = [r["ttft_s"] for r in per_request if r["ttft_s"] is not None]
    return {
        "schema": SCHEMA, "schema_version": 1, "boundary": "gpu_board",
        "engine": {"name": "hf-cb", "version": transformers.__version__},
        "model": spec.name, "config_hash": spec.config_hash(),
        "shape": model_shape(spec),
        "tp": 1, "gpus": 1, "requests": len(trace), "gen_tokens": trace.gen_tokens,
        "energy_j": window["energy_j"], "time_s": window["duration_s"],
        "window": {k: v for k, v in window.items() if k not in ("energy_j", "duration_s")},
        "idle_power_w": idle_w, "warmup_s": warmup_s, "cb_config": config,
        "per_gpu": [{"rank": 0, "uuid": getattr(meter.nvml, "uuid", None),
                     "idle_power_w": idle_w, **({"gpu_probe": board} if board else {})}],
        "ttft_s_median": statistics.median(ttft) if ttft else None,
        "per_request": per_request, "iterations": iterations.columns(),
        "host_probe": median_probe(probes), "host_probes": probes,
        "host_cpu": _cpu_model(), "driver": _driver(), "torch": torch.__version__,
        "provenance": {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, **(extra or {})}


def _has_block(manager) -> bool:
    import inspect
    return "block" in inspect.signature(manager.stop).parameters


def _drain(manager):
    """Results already finished, without waiting."""
    while True:
        out = manager.get_result(timeout=0.0)
        if out is None:
            return
        yield out


def _collect(manager, n: int, timeout_s: float) -> None:
    for _ in range(n):
        if manager.get_result(timeout=timeout_s) is None:
            raise DeviceError("hf-cb: a warm-up request never finished")
