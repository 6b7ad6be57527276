"""Device probe (issue: measure, step 0). Read-only NVML; never sets clocks or limits.

    python -m piep.sampling.probe nocontext --seconds 30 --out A.json
    torchrun --nproc-per-node 2 -m piep.sampling.probe main --seconds 30 --out B.json

`nocontext` samples idle power of every GPU from a process that opens no CUDA context;
`main` (one process per GPU) measures idle with a context, the counter's tick period and
step, memory overheads, NCCL collectives eager and captured in a CUDA graph (timed with
external events), the power of busy-polling in a collective, of a bf16 GEMM and of a
memory-bound copy.
"""

from __future__ import annotations

import argparse
import json
import statistics

from piep.device import clock


def _sample_power(devs, seconds: float, every_s: float = 0.25):
    """Counter tick-to-tick power and mean field-186 readings over `seconds`."""
    from piep.device.energy import TickMeter
    meters = [TickMeter(d) for d in devs]
    t0 = [m.wait_tick() for m in meters]
    inst = [[] for _ in devs]
    end = clock.now() + seconds
    while clock.now() < end:
        for i, d in enumerate(devs):
            inst[i].append(d.power_w())
        clock.sleep(every_s)
    t1 = [m.wait_tick() for m in meters]
    out = []
    for i, d in enumerate(devs):
        out.append({"uuid": d.uuid, "counter_power_w": (t1[i].energy_mj - t0[i].energy_mj) / 1000
                    / (t1[i].time_s - t0[i].time_s),
                    "field186_mean_w": statistics.mean(inst[i]),
                    "averaged_power_w": d.averaged_power_w(), "samples": len(inst[i]),
                    "window_s": t1[i].time_s - t0[i].time_s})
    return out


def nocontext(seconds: float) -> dict:
    from piep.device.nvml import NvmlDevice, driver_version, nvml_gpus
    devs = [NvmlDevice(index=g["index"]) for g in nvml_gpus()]
    return {"driver": driver_version(), "gpus": nvml_gpus(),
            "idle_no_context": _sample_power(devs, seconds)}


def _ticks(dev, n: int = 25) -> dict:
    from piep.device.energy import TickMeter
    m = TickMeter(dev)
    ticks = [m.wait_tick() for _ in range(n)]
    periods = [b.time_s - a.time_s for a, b in zip(ticks, ticks[1:])]
    steps = [b.energy_mj - a.energy_mj for a, b in zip(ticks, ticks[1:])]
    polls = [t.poll_s for t in ticks]
    return {"period_s_median": statistics.median(periods), "period_s_min": min(periods),
            "period_s_max": max(periods), "step_mj_median": statistics.median(steps),
            "nvml_energy_call_s_median": statistics.median(polls)}


def main(seconds: float) -> dict | None:
    import torch
    import torch.distributed as dist

    from piep.device.energy import TickMeter
    from piep.device.nvml import NvmlDevice
    from piep.sampling.protocol import capture, seconds as gpu_seconds
    from piep.sampling.runner import Dist
    d = Dist()
    rank, world = d.rank, d.world
    torch.cuda.set_device(d.local_rank)
    dev = torch.device("cuda", d.local_rank)
    nv = NvmlDevice(uuid=str(torch.cuda.get_device_properties(dev).uuid))
    res: dict = {"rank": rank, "uuid": nv.uuid, "name": nv.name}
    mem = {"before_context_used_gib": nv.memory_used_gib()}
    torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    mem["context_used_gib"] = nv.memory_used_gib()
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    (a @ a).sum().item()
    mem["after_cublas_used_gib"] = nv.memory_used_gib()
    mem["after_cublas_torch_reserved_gib"] = torch.cuda.memory_reserved() / 2 ** 30
    x = torch.ones(1024, device=dev)
    if world > 1:
        dist.all_reduce(x)
        torch.cuda.synchronize()
    mem["after_nccl_used_gib"] = nv.memory_used_gib()
    mem["after_nccl_torch_reserved_gib"] = torch.cuda.memory_reserved() / 2 ** 30
    d.barrier()
    res["idle_with_context"] = _sample_power([nv], seconds)[0]
    res["ticks"] = _ticks(nv)
    meter = TickMeter(nv)
    idle_w = res["idle_with_context"]["counter_power_w"]

    # collectives: eager and captured in a CUDA graph, timed with events
    sizes = [2 ** k for k in range(10, 29, 2)]  # 1 KiB .. 256 MiB
    coll = []
    for size in sizes:
        n = size // 2
        t = torch.ones(n, device=dev, dtype=torch.bfloat16)
        for kind in ("allreduce", "allgather", "sendrecv"):
            if world < 2:
                break
            outs = [torch.empty_like(t) for _ in range(world)] if kind == "allgather" else None

            def op():
                if kind == "allreduce":
                    dist.all_reduce(t)
                elif kind == "allgather":
                    dist.all_gather(outs, t)
                elif rank == 0:
                    dist.send(t, 1)
                else:
                    dist.recv(t, 0)
            reps = 20 if size <= 2 ** 22 else 5
            for _ in range(3):
                op()
            torch.cuda.synchronize()
            d.barrier()
            eager_ms = gpu_seconds(lambda i: op(), reps) * 1000
            row = {"kind": kind, "size_bytes": size, "eager_ms": eager_ms}
            try:  # the same op captured in a graph; events inside with external=True
                ev = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(2)]

                def body(ev=ev, reps=reps):
                    ev[0].record()
                    for _ in range(reps):
                        op()
                    ev[1].record()
                g = capture(body, warm=op)
                d.barrier()
                g.replay()
                torch.cuda.synchronize()
                row["graph_ms"] = ev[0].elapsed_time(ev[1]) / reps
                row["graph_ok"] = True
            except Exception as exc:  # record what failed; the probe goes on
                row["graph_ok"] = False
                row["graph_error"] = f"{type(exc).__name__}: {exc}"[:300]
            coll.append(row)
    res["collectives"] = coll
    if world > 1:  # correctness of a captured AllReduce
        t = torch.full((8,), float(rank + 1), device=dev)
        g = capture(lambda: dist.all_reduce(t), then=lambda: t.fill_(float(rank + 1)))
        g.replay()
        torch.cuda.synchronize()
        res["graph_allreduce_value"] = t[0].item()
        res["graph_allreduce_expected"] = float(sum(range(1, world + 1)))

    # busy-poll power: rank 1 waits inside an AllReduce while rank 0 sleeps on the CPU
    if world > 1:
        t = torch.ones(1024, device=dev)
        d.barrier()
        if rank == 1:
            w = meter.measure(lambda: (dist.all_reduce(t), torch.cuda.synchronize()),
                              idle_power_w=idle_w)
            res["wait_in_allreduce"] = {"power_w": w.energy_j / w.duration_s,
                                        "duration_s": w.duration_s}
        else:
            clock.sleep(0.3)  # rank 1 is waiting for its tick meanwhile
            clock.sleep(2.0)
            dist.all_reduce(t)
            torch.cuda.synchronize()
        d.barrier()

    # compute-bound and memory-bound power
    m = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    big = torch.empty(2 ** 30, device=dev, dtype=torch.uint8)
    big2 = torch.empty_like(big)
    for name, fn, flops, nbytes in (
            ("gemm_8192_bf16", lambda: m @ m, 2 * 8192 ** 3, 0),
            ("copy_1gib", lambda: big2.copy_(big), 0, 2 * 2 ** 30)):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        per = gpu_seconds(lambda i, fn=fn: fn(), 20)
        reps = max(1, int(2.0 / per))

        def work():
            for _ in range(reps):
                fn()
            torch.cuda.synchronize()
        w = meter.measure(work, idle_power_w=idle_w)
        snap = nv.snapshot()
        res[name] = {"power_w": w.energy_j / w.duration_s, "seconds": w.duration_s,
                     "per_call_s": per, "tflops": flops / per / 1e12 if flops else None,
                     "tb_per_s": nbytes / per / 1e12 if nbytes else None,
                     "sm_clock_after_mhz": snap["sm_clock_mhz"],
                     "temperature_after_c": snap["temperature_c"]}
    big = big2 = None
    # graph pool of a small captured step
    before = torch.cuda.memory_reserved()
    xx = torch.randn(64, 4096, device=dev, dtype=torch.bfloat16)
    ww = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    kept = []
    g = capture(lambda: kept.append((xx @ ww).relu()), warm=lambda: (xx @ ww).relu())
    torch.cuda.synchronize()
    mem["graph_pool_small_step_gib"] = (torch.cuda.memory_reserved() - before) / 2 ** 30
    res["memory"] = mem
    res["torch"] = torch.__version__
    res["cuda"] = torch.version.cuda
    _ = g, kept
    gathered = d.gather(res)
    d.close()
    return {"ranks": gathered} if rank == 0 else None


def cli() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("nocontext", "main"))
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    doc = nocontext(args.seconds) if args.what == "nocontext" else main(args.seconds)
    if doc is not None:
        doc["command"] = " ".join(__import__("sys").argv)
        from piep.core.artifacts import write_text
        write_text(args.out, json.dumps(doc, indent=2))


if __name__ == "__main__":
    cli()
