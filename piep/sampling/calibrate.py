"""`piep calibrate`: module samples, host launch overhead, launch-gap power, and waiting
times of collectives in real multi-GPU decoding (synchronized sampler, SPEC §2).

    python -m piep calibrate modules --out M.jsonl --shard 0/2 --budget-s 200
    torchrun --nproc-per-node 2 -m piep calibrate waits --out W.jsonl
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import random
import time
from pathlib import Path
from typing import Any

import torch

from piep.core.artifacts import read_jsonl
from piep.core.config import Parallel, Workload
from piep.device import clock
from piep.core.errors import PiepError
from piep.core.models import synthetic_specs
from piep.core.writer import append_record
from piep.sampling.options import CalibrateOptions
from piep.sampling.protocol import capture, seconds
from piep.core.gpus import DEFAULT_GPU

log = logging.getLogger("piep.calibrate")

def module_shapes(*, seed: int = 0, per_kind: int = 28, kinds: tuple[str, ...] | None = None,
                  modes: tuple[str, ...] | None = None,
                  head_dims: tuple[int, ...] | None = None,
                  models: tuple[str, ...] | None = None,
                  tps: tuple[int, ...] | None = None) -> list[dict[str, Any]]:
    """Unique leaf shapes from trees of many deployments (of `models` when given, else of
    every shipped dense model and the synthetic shapes; at tp `tps`, default 1, 2, 4, 8),
    stratified per (kind, phase); the kernels only transformers' engines run
    (`ENGINE_KERNELS`) are drawn by
    `engine_kernel_shapes` instead."""
    engine_kinds = tuple(k for k in kinds or () if k in ENGINE_KERNELS)
    if engine_kinds:
        rest = tuple(k for k in kinds if k not in ENGINE_KERNELS)
        drawn = engine_kernel_shapes(engine_kinds, seed=seed, per_kind=per_kind,
                                     head_dims=head_dims, modes=modes)
        return drawn + (module_shapes(seed=seed, per_kind=per_kind, kinds=rest, modes=modes,
                                      head_dims=head_dims, models=models, tps=tps)
                        if rest else [])
    from piep.core.gpus import load_gpu
    from piep.core.models import load_model, shipped_models
    from piep.sampling.modules import shape_key
    rng = random.Random(seed)
    gpu = load_gpu(DEFAULT_GPU)
    if models:
        specs = [load_model(m) for m in models]
    else:
        specs = [load_model(m.name) for m in shipped_models()]
        specs = [s for s in specs if not s.is_moe] + synthetic_specs()
    pool: dict[tuple, dict[str, dict[str, Any]]] = {}
    for leaf in _drawn_leaves(specs, tps or (1, 2, 4, 8), gpu, kinds):
        key = shape_key(leaf)
        if leaf.kind == "rope":  # the sampler's layout of q and k
            key.update(leaf.attrs["layout"])
        if head_dims and key.get("head_dim") not in head_dims:
            continue
        if leaf.kind == "fp8_linear" and (key["d_in"] % 16 or key["d_out"] % 16):
            continue  # (FP8 GEMMs take sizes in multiples of 16: no checkpoint has others)
        if leaf.kind == "sinks_attention" and leaf.tokens * leaf.attrs["heads"] \
                * leaf.context_len > SINKS_MAX_SCORES:
            continue  # (its five live copies of the scores would not fit the card)
        pool.setdefault((key["kind"], key["phase"]), {})[repr(sorted(key.items()))] = key
    chosen = []
    for (kind, phase), shapes in sorted(pool.items()):
        items = sorted(shapes.values(), key=lambda s: repr(sorted(s.items())))
        n = per_kind if kind not in ("attention",) else 2 * per_kind
        picks = rng.sample(items, min(n, len(items)))
        for s in picks:
            chosen.append({**s, "mode": "graph"})
            if kind == "attention" and phase == "decode":
                chosen.append({**s, "mode": "eager"})
    rng.shuffle(chosen)
    return [s for s in chosen if not modes or s["mode"] in modes]


# the most scores (queries x keys x heads) an eager attention with sinks is sampled at:
# transformers' code holds about five tensors of them at once (4.3e9 bf16 scores: 43 GB)
SINKS_MAX_SCORES = 2 ** 32

# the quantization an FP8 projection's samples are drawn for (`fp8_linear`)
FP8_ROWWISE = "FP8 (row-wise weights, dynamic per-token activations)"


def _drawn_leaves(specs, tps, gpu, kinds):
    """The compute leaves (of `kinds`, or all) of every spec's trees over a grid of
    layouts and workloads; a mixture of experts' also under generate() (its eager engine),
    whose decode steps run other expert kernels (`experts_batched`), where those are asked
    for."""
    from piep.core.engines import names
    from piep.core.layout import Deployment
    from piep.sampling.modules import COMPUTE_KINDS
    from piep.tree import build_tree
    generate = names(runs_generate=True, decode="eager")[:1] \
        if kinds and "experts_batched" in kinds else ()
    if kinds and "fp8_linear" in kinds:  # the dense models' projections in FP8
        specs = [dataclasses.replace(s, quantization=FP8_ROWWISE) for s in specs
                 if not s.is_moe]
    for spec in specs:
        for tp in tps:
            if spec.num_heads % tp or (spec.num_kv_heads % tp and tp % spec.num_kv_heads):
                continue
            for batch, prompt, gen in itertools.product((1, 2, 4, 8, 16, 32, 64),
                                                        (128, 512, 2048), (64, 2048)):
                wl = Workload(batch=batch, prompt_len=prompt, gen_len=gen)
                for engine in (None, *(generate if spec.is_moe else ())):
                    dep = Deployment(spec, Parallel(tp=tp), wl, gpu, engine=engine)
                    yield from (leaf for _, _, leaf in build_tree(dep).leaves()
                                if leaf.kind in COMPUTE_KINDS
                                and (not kinds or leaf.kind in kinds))


# kernels of transformers' engines that piep's reference runner does not run (the masked
# SDPA over a static or gathered paged cache, K/V cache copies), with the modes they run in
# (the first drawn by default; repeat_kv in an eager decode step, hf-eager's past a
# sliding window, is a strided copy several times slower than hf-static's compiled one)
ENGINE_KERNELS = {"sdpa_masked": ("graph",), "kv_expand": ("graph", "eager"),
                  "kv_append": ("eager",), "kv_gather": ("graph",), "kv_slide": ("eager",),
                  # continuous batching's packed iteration under its additive mask (no tree
                  # prices it yet: its samples wait for hf-cb's attention to be switched)
                  "sdpa_paged": ("graph",)}
PAGED_QUERIES = 8192  # hf-cb's token budget of one iteration
ENGINE_KV_BYTES = 6e9  # the largest expanded K + V of a drawn shape


def engine_kernel_shapes(kinds: tuple[str, ...], *, seed: int = 0, per_kind: int = 28,
                         head_dims: tuple[int, ...] | None = None,
                         modes: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Shapes of transformers' own kernels drawn at random (log-uniform batch, cache and
    query lengths; heads per rank of every shipped and synthetic model at tp 1 and 2),
    not taken from the trees of measured runs: a held-out shape's exact kernels stay out.
    Per kind (the masked SDPA twice as many): decode steps of the static and dynamic
    caches (batch 1-128, cache 16-8192), and for the masked SDPA static-cache prefills
    (batch 1-32, prompt 16-2048, cache up to prompt + 1024) and continuous batching's
    packed iterations (batch 1, 1-2048 queries over 16-65536 gathered keys); continuous
    batching's own packed attention under its additive mask (`sdpa_paged`, as many as the
    masked SDPA: half decoding iterations of 1-512 requests with a query each over 16-4096
    keys each, half prompt chunks of 16-8192 queries of 1-64 requests over up to 131072
    keys). `modes`: the kind's modes among them (default its first); a copy drawn only in
    eager mode is a decode step's (eager prefill copies train nothing:
    `module_models.is_fitted`)."""
    from piep.core.models import load_model, shipped_models
    rng = random.Random(seed)
    specs = [load_model(m.name) for m in shipped_models()]
    specs = [s for s in specs if not s.is_moe] + synthetic_specs()
    heads = sorted({(s.num_heads // tp, max(1, s.num_kv_heads // tp), s.head_dim)
                    for s in specs for tp in (1, 2) if s.num_heads % tp == 0
                    and (not head_dims or s.head_dim in head_dims)})

    def logu(lo: int, hi: int) -> int:
        return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
    out = []
    for kind in kinds:
        kind_modes = [m for m in ENGINE_KERNELS[kind] if m in modes] if modes \
            else ENGINE_KERNELS[kind][:1]
        if not kind_modes:
            continue
        pool = [h for h in heads if h[0] != h[1]] if kind == "kv_expand" else heads
        n = 0
        while n < per_kind * (2 if kind in ("sdpa_masked", "sdpa_paged") else 1):
            hq, hkv, d = rng.choice(pool)
            shape = {"kind": kind, "phase": "decode", "heads": hq, "kv_heads": hkv,
                     "head_dim": d, "batch": logu(1, 128), "context_len": logu(16, 8192)}
            form = n % 4
            if kind == "sdpa_masked":
                shape["kv_heads"] = hq  # K/V expanded before the call
                shape["q_len"] = 1
                if form == 1:  # static-cache prefill: the prompt over the whole cache
                    shape["batch"] = logu(1, 32)
                    shape["q_len"] = logu(16, 2048)
                    shape["context_len"] = shape["q_len"] + logu(8, 1024)
                elif form == 2:  # a packed continuous-batching iteration
                    shape["batch"] = 1
                    shape["q_len"] = logu(1, 2048)
                    shape["context_len"] = max(shape["q_len"], logu(16, 65536))
                if form in (1, 2):
                    shape["phase"] = "prefill"
            elif kind == "sdpa_paged":  # one packed iteration, K/V expanded before the call
                shape.update(kv_heads=hq, batch=1, phase="prefill")
                if form % 2 == 0:  # decoding requests, a query each
                    shape["requests"] = shape["q_len"] = logu(1, 512)
                    shape["context_len"] = shape["q_len"] * logu(16, 4096)
                else:  # prompt chunks packed up to the token budget
                    shape["q_len"] = logu(16, PAGED_QUERIES)
                    shape["requests"] = logu(1, min(shape["q_len"], 64))
                    shape["context_len"] = max(shape["q_len"], logu(64, 131072))
            elif kind == "kv_gather" and form >= 2:  # one packed iteration
                shape.update(phase="prefill", batch=1, context_len=logu(16, 65536))
            elif kind == "kv_expand" and form == 3 and "graph" in kind_modes:
                shape["phase"] = "prefill"  # a static-cache prefill
            b, ctx = shape["batch"], shape["context_len"]
            if 4 * b * ctx * hq * d > ENGINE_KV_BYTES or \
                    b * shape.get("q_len", 1) * ctx > 2e9:
                continue
            shape["tokens"] = b * shape.get("q_len", 1) if kind in ("sdpa_masked", "sdpa_paged") \
                else b
            out += [{**shape, "mode": mode} for mode in kind_modes]
            n += 1
    rng.shuffle(out)
    return out


def _gpu_meter():
    """(device, NVML handle, tick meter, idle power with a context) of the visible GPU 0."""
    from piep.device.energy import TickMeter
    from piep.device.nvml import NvmlDevice
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    nvml = NvmlDevice(uuid=str(torch.cuda.get_device_properties(device).uuid))
    meter = TickMeter(nvml)
    torch.zeros(1, device=device)
    return device, nvml, meter, meter.idle_power_w(1.0)


def _key(s: dict[str, Any]) -> str:
    return repr(sorted((k, v) for k, v in s.items() if k not in ("repeat",)))


def run_modules(out: Path, *, budget_s: float, shard: tuple[int, int], repeat_every: int = 10,
                min_window_s: float = 0.3, kinds: tuple[str, ...] | None = None,
                modes: tuple[str, ...] | None = None, seed: int = 0,
                per_kind: int = 28, head_dims: tuple[int, ...] | None = None,
                models: tuple[str, ...] | None = None,
                tps: tuple[int, ...] | None = None) -> int:
    from piep.sampling.modules import sample_shape
    device, nvml, meter, idle_w = _gpu_meter()
    done = sampled_keys(out)
    shapes = [s for i, s in enumerate(module_shapes(kinds=kinds, modes=modes, seed=seed,
                                                    per_kind=per_kind, head_dims=head_dims,
                                                    models=models, tps=tps))
              if i % shard[1] == shard[0]]
    start = clock.now()
    n = 0
    append_record(out, host_overhead_row(meter, idle_w, nvml.uuid))
    for i, s in enumerate(shapes):
        if clock.now() - start > budget_s:
            log.info("budget reached after %d of %d shapes", i, len(shapes))
            break
        if _key(s) in done:
            continue
        for rep in ((0, 1) if i % repeat_every == 0 else (0,)):
            try:
                row = sample_shape(s, s["mode"], meter=meter, idle_w=idle_w, device=device,
                                   min_window_s=min_window_s, nvml=nvml)
            except (RuntimeError, PiepError) as exc:
                log.warning("%s failed: %s", s, exc)
                row = {**s, "error": str(exc)[:300]}
                torch.cuda.empty_cache()
            append_record(out, stamped(row, s, repeat=rep, uuid=nvml.uuid, idle_w=idle_w))
            n += 1
        torch.cuda.empty_cache()
    return n


def sampled_keys(out: Path) -> set[str]:
    """The shapes a module-sample file holds (measured, or failed: not retried)."""
    return {_key({k: v for k, v in r.items() if k in r.get("shape_fields", [])})
            for r in read_jsonl(out)}


def stamped(row: dict[str, Any], shape: dict[str, Any], *, repeat: int, uuid: str | None,
            idle_w: float | None) -> dict[str, Any]:
    """A module sample's row as its file keeps it: schema, the shape's fields, which
    measurement of the shape, the board and its idle power."""
    row.update(schema="piep.module_sample", schema_version=1, repeat=repeat,
               shape_fields=sorted(shape), gpu_uuid=uuid, idle_power_w=idle_w)
    return row


def host_overhead_row(meter, idle_w: float, uuid: str | None,
                      device="cuda") -> dict[str, Any]:
    """Host launch overhead (s per eager kernel launch) and the board power of a GPU
    that only sees tiny kernels separated by launch gaps."""
    from piep.sampling.runner import _sync, launch_time_s
    x = torch.zeros(1, device=device)
    n = 20000
    per_launch = launch_time_s(x, n, 1000, device, drained=True)
    reps = max(1, int(1.0 / (per_launch * n)))

    def work():
        for _ in range(reps * n):
            x.add_(1)
        _sync(device)
    w = meter.measure(work, idle_power_w=idle_w)
    return {"schema": "piep.host_overhead", "schema_version": 1, "launch_s": per_launch,
            "launch_gap_power_w": w.energy_j / w.duration_s, "window_s": w.duration_s,
            "idle_power_w": idle_w, "gpu_uuid": uuid, "torch": torch.__version__}


class CollectiveTimer:
    """CUDA events around each collective of a step; `external=True` inside a graph."""

    def __init__(self, slots: int, external: bool):
        kw = {"enable_timing": True}
        if external:
            kw["external"] = True
        self.events = [(torch.cuda.Event(**kw), torch.cuda.Event(**kw)) for _ in range(slots)]
        self.i = 0

    def start(self) -> None:
        self.events[self.i][0].record()

    def stop(self) -> None:
        self.events[self.i][1].record()
        self.i = (self.i + 1) % len(self.events)  # a step fills every slot exactly once

    def read_ms(self, n: int) -> list[float]:
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in self.events[:n]]


def run_waits(out: Path, *, models: list[str], workloads: list[dict[str, int]],
              modes: tuple[str, ...] = ("graph", "eager"), steps: int = 64,
              prefills: int = 16) -> None:
    """Real tp=2 generation; each rank times every AllReduce; rank 0 writes raw waits."""
    from piep.core.models import load_model
    from piep.sampling.generate import Generator
    from piep.sampling.model import StageModel, Topology, make_tp_groups
    from piep.sampling.runner import Dist
    d = Dist()
    world = d.world
    device = torch.device("cuda", d.local_rank)
    for name in models:
        spec = load_model(name)
        for wl in workloads:
            for mode in modes:
                topo = Topology(tp=world, rank=d.rank)
                make_tp_groups(topo, world)
                model = StageModel(spec, topo, batch=wl["batch"],
                                   max_len=wl["prompt_len"] + steps + 2, device=device)
                gen = Generator(model, topo, prompt_len=wl["prompt_len"], gen_len=steps + 1,
                                mode=mode)
                n_coll = 2 * len(model.layers)
                rows = []
                # prefill (eager in both modes)
                timer = CollectiveTimer(n_coll, external=False)
                for layer in model.layers:
                    layer.timer = timer
                for _ in range(prefills):
                    timer.i = 0
                    d.barrier()
                    gen.prefill()
                    rows.append(("prefill", timer.read_ms(n_coll)))
                # decode: capture with external events (graph) or eager steps
                timer = CollectiveTimer(n_coll, external=mode == "graph")
                for layer in model.layers:
                    layer.timer = timer
                if mode == "graph":
                    timer.i = 0
                    gen.capture()  # prefill + warm-up steps wrap the slots back to 0
                    gen.pos.fill_(wl["prompt_len"])
                    for _ in range(steps):
                        gen.graph.replay()
                        rows.append(("decode", timer.read_ms(n_coll)))
                else:
                    for _ in range(steps):
                        timer.i = 0
                        gen.decode(1)
                        rows.append(("decode", timer.read_ms(n_coll)))
                for layer in model.layers:
                    layer.timer = None
                gathered = d.gather(rows)
                if d.rank == 0:
                    size = wl["batch"] * spec.hidden_size * 2
                    for phase in ("prefill", "decode"):
                        per_rank = [[r for p, r in g if p == phase] for g in gathered]
                        durs = [[ms for step in rk for ms in step] for rk in per_rank]
                        bytes_ = size * (wl["prompt_len"] if phase == "prefill" else 1)
                        waits = [[(r[j] - min(x[j] for x in durs)) / 1000 for j in range(len(r))]
                                 for r in durs]
                        append_record(out, {
                            "schema": "piep.wait_samples", "schema_version": 1,
                            "model": name, "collective": "allreduce", "group_size": world,
                            "phase": phase, "mode": mode, "size_bytes": bytes_, **wl,
                            "durations_ms": durs, "waits_s": waits})
                gen = model = None  # free the GPU memory before the next shape
                torch.cuda.empty_cache()
                d.barrier()
    d.close()


INSITU_CASES = (("llama-2-7b", 8, 512), ("qwen2.5-7b", 32, 256), ("llama-2-13b", 2, 1024),
                ("mistral-small-24b", 16, 128))


def run_insitu(out: Path, *, decode_steps: int = 16) -> None:
    """Kernel times per module kind inside real eager prefill and decode (torch.profiler
    with a named range around each module), to check the isolated module samples."""
    from piep.core.models import load_model
    from piep.sampling import model as model_mod
    from piep.sampling.generate import Generator
    from piep.sampling.model import StageModel, Topology
    device = torch.device("cuda", 0)
    for name, batch, prompt in INSITU_CASES:
        spec = load_model(name)
        m = StageModel(spec, Topology(), batch=batch, max_len=prompt + decode_steps + 8,
                       device=device)
        gen = Generator(m, Topology(), prompt_len=prompt, gen_len=decode_steps + 1, mode="eager")
        gen.prefill()
        gen.decode(4)
        torch.cuda.synchronize()
        model_mod.PROFILE_SPANS = True
        try:
            for phase, fn, calls in (("prefill", gen.prefill, 1),
                                     ("decode", lambda: gen.decode(decode_steps), decode_steps)):
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                        torch.profiler.ProfilerActivity.CUDA]) as prof:
                    fn()
                    torch.cuda.synchronize()
                for ev in prof.key_averages():
                    if not ev.key.startswith("piep:"):
                        continue
                    dev_us = getattr(ev, "device_time_total", None)
                    if dev_us is None:
                        dev_us = ev.cuda_time_total
                    append_record(out, {"schema": "piep.insitu", "schema_version": 1,
                                       "model": name, "batch": batch, "prompt_len": prompt,
                                       "phase": phase, "kind": ev.key[5:], "mode": "eager",
                                       "calls": ev.count, "steps": calls,
                                       "device_time_s_per_call": dev_us / 1e6 / ev.count})
        finally:
            model_mod.PROFILE_SPANS = False
        gen = m = None
        torch.cuda.empty_cache()


# 4 KiB .. 1 GiB, 2x apart (at 8x apart, interpolating between the points missed the
# sizes between them by 33-48 %)
COLLECTIVE_SIZES = tuple(2 ** k for k in range(12, 31))


COLLECTIVE_KINDS = ("allreduce", "allgather", "p2p")


def run_collectives(out: Path, *, sizes=COLLECTIVE_SIZES, modes=("graph", "eager"),
                    min_window_s: float = 0.5, fake=None, kinds=COLLECTIVE_KINDS,
                    reduce_op: str = "sum") -> None:
    """Each collective in isolation on every GPU of the group: time per call from CUDA
    events, energy per call and GPU from a tick-aligned window of back-to-back calls (a
    CUDA graph of many calls, or an eager loop). Rank 0 writes one row per point with
    every rank's energy. On CPU (gloo; tests) only eager mode runs, energy from `fake`.

    AllReduce runs the runner's SUM by default; every call then multiplies the buffer by
    the group size, so each buffer is scaled back by a power of two after at most 32 uses
    and at the end of a captured graph, which holds >= 32 uses of every buffer (at most
    one elementwise kernel per 32 calls: ~0.4 % of a 1 GiB AllReduce; fewer uses per
    capture put a scale kernel every few calls, +2-14 % at >= 64 MiB). `reduce_op="avg"`
    is NCCL's AVG, a pre-multiplied sum: up to 2x slower than SUM for small buffers."""
    import torch.distributed as dist

    from piep.sampling.runner import Dist, RankMeter
    d = Dist()
    cuda = torch.cuda.is_available() and fake is None
    device = torch.device("cuda", d.local_rank) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    if cuda:
        torch.cuda.set_device(device)
        torch.zeros(1, device=device)
    else:
        modes = tuple(m for m in modes if m == "eager")
    meter = RankMeter(device, fake=fake)
    idle_w = meter.idle(1.0) or 0.0
    world = d.world
    red = dist.ReduceOp.AVG if reduce_op == "avg" and cuda else dist.ReduceOp.SUM
    rescale = reduce_op == "sum"
    for kind in kinds:
        for size in sizes:
            n_el = size // 2
            n_rot = max(1, min(8, -(-4 * 60 * 2 ** 20 // size)))
            bufs = [torch.randn(n_el, device=device).to(dtype) for _ in range(n_rot)]
            outs = [[torch.empty_like(b) for _ in range(world)] for b in bufs] \
                if kind == "allgather" else None
            uses = [0] * n_rot

            def settle(bufs=bufs, uses=uses):  # back to the buffers' first magnitude
                for j, b in enumerate(bufs):
                    if uses[j]:
                        b.mul_(float(world) ** -uses[j])
                        uses[j] = 0

            def op(i, kind=kind, bufs=bufs, outs=outs, uses=uses):
                x = bufs[i % n_rot]
                if kind == "allreduce":
                    dist.all_reduce(x, op=red)
                    if rescale:
                        uses[i % n_rot] += 1
                        if uses[i % n_rot] >= 32:
                            x.mul_(float(world) ** -32)
                            uses[i % n_rot] = 0
                elif kind == "allgather":  # as the runner gathers logits
                    dist.all_gather(outs[i % n_rot], x)
                elif d.rank == 0:  # as the runner passes activations between stages
                    dist.send(x, 1)
                elif d.rank == 1:
                    dist.recv(x, 0)
            for mode in modes:
                log.info("collective %s %d B %s: start", kind, size, mode)
                rough = max(d.gather(_time_calls(op, 4, d, cuda)))  # every rank: same count
                calls = max(n_rot, min(2000, int(0.004 / max(rough, 1e-6))))
                if kind == "allreduce" and rescale and mode == "graph":
                    calls = max(calls, 32 * n_rot)  # the graph's settle(): <= 1/32 per call
                if mode == "graph":
                    resets = kind == "allreduce" and rescale

                    def before(resets=resets, settle=settle):
                        if resets:
                            # undo the calls before the capture, so that the captured
                            # settle() undoes exactly the graph's own calls on every replay
                            # (without it, small buffers shrank by 2^-1..2 per replay)
                            settle()
                            torch.cuda.synchronize()
                        d.barrier()

                    def body(calls=calls, op=op, resets=resets, settle=settle):
                        for i in range(calls):
                            op(i)
                        if resets:
                            settle()
                    replay = capture(body, warm=lambda op=op: op(0), then=before).replay
                else:
                    def replay(calls=calls, op=op):
                        for i in range(calls):
                            op(i)
                per_call = max(d.gather(_time_calls(lambda i: replay(), 3, d, cuda))) / calls
                reps = max(1, int(min_window_s / max(per_call * calls, 1e-6)) + 1)

                def work(reps=reps, replay=replay):
                    for _ in range(reps):
                        replay()
                    _sync(cuda)
                w = meter.window(work, d.barrier)
                n = reps * calls
                snap = meter.snapshot()
                e = w["energy_j"]
                mine = {"energy_j": None if e is None else e / n,
                        "power_w": None if e is None else e / max(w["duration_s"], 1e-9),
                        "window_time_s_per_call": w["duration_s"] / n, "idle_power_w": idle_w,
                        "sm_clock_mhz": snap.get("sm_clock_mhz"),
                        "uuid": getattr(meter.nvml, "uuid", None)}
                ranks = d.gather(mine)
                if d.rank == 0:
                    append_record(out, {
                        "schema": "piep.collective_sample", "schema_version": 1,
                        "kind": kind, "size_bytes": size, "group_size": world, "mode": mode,
                        "time_s": per_call,
                        "reduce_op": reduce_op if kind == "allreduce" else None, "calls": n,
                        "energy_j_per_gpu": [r["energy_j"] for r in ranks],
                        "power_w_per_gpu": [r["power_w"] for r in ranks],
                        "window_time_s_per_call": ranks[0]["window_time_s_per_call"],
                        "ranks": ranks, "time_unix": time.time()})
                    log.info("%s %d B %s: %.1f us, %s W", kind, size, mode, per_call * 1e6,
                             [None if r["power_w"] is None else round(r["power_w"])
                              for r in ranks])
                replay = None
            del bufs, outs
            if cuda:
                torch.cuda.empty_cache()
    d.barrier()
    if not cuda:  # on CUDA the caller leaves without NCCL's teardown (it hung twice)
        d.close()


def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def _time_calls(op, n: int, d, cuda: bool = True) -> float:
    """Seconds per call of op(i), after a warm-up and a barrier (CUDA events on a GPU)."""
    for i in range(2):
        op(i)
    _sync(cuda)
    d.barrier()
    return seconds(op, n, cuda=cuda)


def repeat_shapes(gpu: str = DEFAULT_GPU, *, under_s: float | None = None) -> list[dict[str, Any]]:
    """The shapes the first campaign measured twice (the repeat check's set); with
    `under_s`, only those of which some measured pair ran shorter calls than that."""
    from piep.core.dataset import load_calibration, module_repeat_pairs

    def key(s):
        return repr(sorted(s.shape.items()))
    pairs = module_repeat_pairs(load_calibration(gpu).modules)
    short = {key(a) for a, _ in pairs if under_s is not None and a.time_s < under_s}
    return [dict(a.shape) for a, _ in pairs
            if a.op_version == 1 and not a.check  # the first campaign
            and (under_s is None or key(a) in short)]


def run_repeat(out: Path, *, shard: tuple[int, int], min_window_s: float,
               budget_s: float, captures: int = 1, tiny_only: bool = False) -> int:
    """Measure every repeat-check shape in two passes (all shapes, then all again), so a
    repeat is minutes apart, not back to back."""
    from piep.sampling.modules import sample_shape
    device, nvml, meter, idle_w = _gpu_meter()
    from piep.sampling.modules import TINY_KERNEL_S
    shapes = repeat_shapes(under_s=TINY_KERNEL_S if tiny_only else None)
    shapes = [s for i, s in enumerate(shapes) if i % shard[1] == shard[0]]
    start, n = clock.now(), 0
    for rep in (0, 1):
        for s in shapes:
            if clock.now() - start > budget_s:
                return n
            row = sample_shape(s, s["mode"], meter=meter, idle_w=idle_w, device=device,
                               min_window_s=min_window_s, nvml=nvml, captures=captures)
            row.update(schema="piep.module_sample", schema_version=1, repeat=rep,
                       shape_fields=sorted(s), gpu_uuid=nvml.uuid, idle_power_w=idle_w,
                       check="repeat")
            append_record(out, row)
            n += 1
            torch.cuda.empty_cache()
    return n


def main(what: str, opts: CalibrateOptions) -> dict[str, Any] | None:
    """One `piep calibrate WHAT` on this machine's GPUs."""
    i, n = opts.shard_index
    if what == "modules":
        kinds = opts.kinds
        return {"samples": run_modules(Path(opts.out), budget_s=opts.budget_s, shard=(i, n),
                                       kinds=kinds, min_window_s=opts.min_window_s,
                                       modes=opts.modes,
                                       repeat_every=opts.repeat_every, seed=opts.seed,
                                       per_kind=opts.per_kind,
                                       head_dims=opts.head_dims, models=opts.models,
                                       tps=opts.tps)}
    if what == "repeat":
        return {"samples": run_repeat(Path(opts.out), shard=(i, n),
                                      min_window_s=opts.min_window_s, budget_s=opts.budget_s,
                                      captures=opts.captures, tiny_only=opts.tiny_only)}
    if what == "collectives":
        kinds = opts.kinds or COLLECTIVE_KINDS
        bad = set(kinds) - set(COLLECTIVE_KINDS)
        if bad:
            raise PiepError(f"collectives: unknown kind {sorted(bad)[0]!r}; use one of "
                            f"{', '.join(COLLECTIVE_KINDS)}")
        run_collectives(Path(opts.out), min_window_s=opts.min_window_s, kinds=kinds,
                        sizes=tuple(x for x in COLLECTIVE_SIZES if x >= opts.sizes_from),
                        reduce_op=opts.reduce_op, modes=tuple(opts.modes or ("graph", "eager")))
        if torch.cuda.is_available():
            # every row is written; NCCL's teardown after many captured graphs has hung in
            # twice on the lent machines, so the ranks leave without it
            import os
            import sys
            print(f"out: {opts.out}", flush=True)
            sys.stderr.flush()
            os._exit(0)
        return {"out": opts.out}
    if what == "waits":
        run_waits(Path(opts.out), models=list(opts.wait_models), workloads=[
            {"batch": 1, "prompt_len": 512}, {"batch": 16, "prompt_len": 256}])
        return None
    if what == "insitu":
        run_insitu(Path(opts.out))
        return {"out": opts.out}
    return None  # `calibrate fit` is fitting, not measuring: piep.fit.waits

