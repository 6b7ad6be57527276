"""Body of `piep measure` (imports torch; the command module stays light)."""

from __future__ import annotations

import gc
import logging
import os
from pathlib import Path
from typing import Any

import torch

from piep.core.config import Parallel, Workload
from piep.core.engines import ENGINES
from piep.core.errors import ConfigError
from piep.core.writer import append_record
from piep.sampling.grid import (free_memory, load_design, parallel_workload, run_grid,
                                spec_of)
from piep.sampling.hf import HF_ENGINES, build_model, measure_hf
from piep.sampling.options import MeasureOptions
from piep.sampling.runner import Dist, Hygiene, RankMeter, measure_config

log = logging.getLogger("piep.measure")


def _device(choice: str, d: Dist):
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError("--device cuda but torch sees no CUDA GPU")
    torch.cuda.set_device(d.local_rank)
    return torch.device("cuda", d.local_rank)


def _predicted_memory(spec, parallel, workload, gpu: str) -> float | None:
    """piep's own memory estimate, recorded beside the measured peak (None where piep
    refuses the layout: that must not stop a measurement)."""
    from piep.core.errors import PiepError
    from piep.core.gpus import load_gpu
    from piep.core.layout import validate
    try:
        return validate(spec, parallel, workload, load_gpu(gpu),
                        check_memory=False).peak_memory_gib()
    except PiepError:
        return None


def _load_weights(folder: str | None):
    if not folder:
        return None
    from safetensors.torch import load_file
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise ConfigError(f"{folder}: no *.safetensors files")
    state: dict[str, Any] = {}
    for f in files:
        state.update(load_file(str(f)))
    return state


def measure_main(opts: MeasureOptions) -> dict[str, Any] | None:
    d = Dist()
    device = _device(opts.device, d)
    dtype = torch.bfloat16 if opts.dtype == "bf16" else torch.float32
    hygiene = Hygiene(repeats=opts.repeats, min_window_s=opts.min_window_s, idle_s=opts.idle_s,
                      continuous_check=opts.continuous, cooldown_s=opts.cooldown_s)
    meter = RankMeter(device)
    model = None
    try:
        if opts.grid:
            return _grid(opts, d, device, dtype, hygiene, meter)
        from piep.core.models import load_model
        spec = load_model(opts.model)
        if device.type == "cpu" and opts.device == "auto" and spec.num_params() > 1e9:
            raise ConfigError(f"no CUDA GPU: measuring {spec.name} on the CPU measures no "
                              f"energy and takes minutes; pass --device cpu to do it anyway")
        if ENGINES[opts.engine].kind == "stream":  # a request trace replayed
            from piep.sampling.hf_cb import measure_trace
            from piep.core.trace import read_trace
            traces = [(path, read_trace(path)) for path in opts.trace]  # all valid first
            model = build_model(spec, Parallel(), d, device, dtype, opts.weights, opts.seed)
            recs = []
            for path, trace in traces:
                rec = measure_trace(spec, trace, d=d, device=device, model=model, meter=meter,
                                    hygiene=hygiene, seed=opts.seed,
                                    extra={"command": _command(), "trace": path})
                log.info("%s: %d requests, %s J, %.2f s", path, len(trace), rec["energy_j"],
                         rec["time_s"])
                if opts.out:
                    append_record(opts.out, rec)
                recs.append(rec)
            return recs[0] if len(recs) == 1 else {"traces": recs}
        parallel = Parallel(tp=opts.tp, pp=opts.pp, dp=opts.dp)
        workload = Workload(batch=opts.batch, prompt_len=opts.prompt_len,
                            gen_len=opts.gen_len, mode=opts.mode)
        from piep.core.gpus import load_gpu
        from piep.core.layout import validate
        validate(spec, parallel, workload, load_gpu(opts.gpu), check_memory=False)
        if opts.engine in HF_ENGINES:
            if opts.clock_plan:
                raise ConfigError("--clock-plan needs the reference runner's phase hooks; "
                                  f"{opts.engine} has none")
            model = build_model(spec, parallel, d, device, dtype, opts.weights, opts.seed)
            rec = measure_hf(spec, parallel, workload, engine=opts.engine, d=d, device=device,
                             model=model, dtype=dtype, hygiene=hygiene, meter=meter,
                             seed=opts.seed, extra={"command": _command()})
            if rec is not None and opts.out:
                append_record(opts.out, rec)
            return rec
        clocks = _phase_clocks(opts, d)
        with clocks if clocks else _nothing():
            rec = measure_config(spec, parallel, workload, d=d, device=device, dtype=dtype,
                                 hygiene=hygiene, meter=meter, seed=opts.seed,
                                 state=_load_weights(opts.weights),
                                 predicted_memory_gib=_predicted_memory(spec, parallel,
                                                                        workload, opts.gpu),
                                 extra={"command": _command()},
                                 phase_hook=clocks.enter if clocks else None)
        if rec is not None and clocks:
            rec["clock_plan"] = {"file": opts.clock_plan, **clocks.summary()}
        if rec is not None and opts.out:
            append_record(opts.out, rec)
        return rec
    finally:
        # the model dropped before its process groups: transformers' sharded weights hold
        # them, and groups left to the interpreter's exit aborted tp=2 gloo runs after
        # their record was out (SIGABRT: 5 of 38 before, 0 of 34 after, session 36)
        model = None  # noqa: F841
        gc.collect()
        d.close()


class _ModelSlot:
    """The last transformers model built, kept while the grid stays on its shape: the
    compiled decode of hf-static is reused across the configurations of one model."""

    def __init__(self):
        self.key, self.model = None, None

    def get(self, spec, parallel, build):
        key = (spec.config_hash(), parallel.tp)
        if key != self.key:
            self.clear()
            self.model, self.key = build(), key
        return self.model

    def clear(self) -> None:
        if self.model is not None:
            self.model, self.key = None, None
            free_memory()


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _phase_clocks(opts: MeasureOptions, d: Dist):
    """The clock runtime for --clock-plan (dry-run unless --no-dry-run)."""
    if not opts.clock_plan:
        return None
    from piep.clocks import PhaseClocks, load_plan
    plan = load_plan(opts.clock_plan)
    devices = []
    if not opts.clock_dry_run:
        from piep.device.nvml import NvmlDevice
        devices = [NvmlDevice(index=d.local_rank)]
    # real sets (milliseconds each) go to a worker thread, off the measured critical path
    return PhaseClocks(plan, devices, rank=d.rank, dry_run=opts.clock_dry_run,
                       background=not opts.clock_dry_run,
                       state_dir=Path(opts.clock_state_dir) if opts.clock_state_dir else None)


def _command() -> str:
    import sys
    return " ".join(["torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else "python -m piep"]
                    + sys.argv[1:])


def _grid(opts: MeasureOptions, d, device, dtype, hygiene, meter):
    if not opts.out:
        raise ConfigError("--grid needs --out FILE.jsonl")
    design = load_design(Path(opts.grid))
    i, n = opts.shard_index
    import torch.distributed as dist

    def broadcast(flag: bool) -> bool:
        if d.world == 1:
            return flag
        box = [flag]
        dist.broadcast_object_list(box, src=0, group=d.cpu_group)
        return bool(box[0])

    models = _ModelSlot()

    def one(cfg):
        spec = spec_of(cfg)
        parallel, workload = parallel_workload(cfg)
        engine = cfg.get("engine", opts.engine)
        if engine in HF_ENGINES:
            model = models.get(spec, parallel, lambda: build_model(
                spec, parallel, d, device, dtype, opts.weights, opts.seed))
            return measure_hf(spec, parallel, workload, engine=engine, d=d, device=device,
                              model=model, dtype=dtype, hygiene=hygiene, meter=meter,
                              seed=opts.seed, extra={"command": _command(),
                                                     "design": Path(opts.grid).name})
        models.clear()
        return measure_config(spec, parallel, workload, d=d, device=device, dtype=dtype,
                              hygiene=hygiene, meter=meter, seed=opts.seed,
                              predicted_memory_gib=_predicted_memory(spec, parallel, workload,
                                                                     opts.gpu),
                              extra={"command": _command(), "design": Path(opts.grid).name})
    n_done = run_grid(design, Path(opts.out), budget_s=opts.budget_s, measure_one=one,
                      world=d.world, rank=d.rank, shard=(i, n), broadcast=broadcast)
    return {"records": n_done, "out": opts.out} if d.rank == 0 else None
