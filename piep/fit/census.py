"""Kernel census records read on the CPU: the deployment each one measured, and what a
compiled decode step's fused pointwise kernels take in situ.

A census (`python -m piep.sampling.census`, on a GPU) profiles one `generate()` call of
transformers at two layer counts and splits a decode step's CUDA kernels into per layer
and outside the layers, with their durations. Under a compiled step (hf-static) the
compiler names each fused kernel after the ops it fuses (`triton_poi_fused_...`,
`triton_red_fused_...`); the one that fuses repeat_kv's `expand` copies the K/V cache out
to every query head (piep's `kv_expand` leaf, priced by its own module samples), the
others are the pointwise chains (norms, rope, residual adds, activation, the cache write)
that piep's tree holds as fused leaves. Their in-situ time per layer, less their bytes at
HBM bandwidth, shared among the layer's fused leaves, is a profile's `fused_kernel_s`.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from piep.core.artifacts import calibration_dir, read_records
from piep.core.config import ModelSpec
from piep.core.layout import Deployment
from piep.core.samples import KernelCensus

SCHEMA = "piep.kernel_census"
FUSED_PREFIX = "triton_"     # kernels a compiler generated
EXPAND_MARK = "expand"       # of those, the K/V expansion (repeat_kv)


def census_dir(gpu: str) -> Path:
    """Where the census files of `gpu` live."""
    return calibration_dir(gpu) / "engines" / "census"


def census_deployment(rec: KernelCensus, spec: ModelSpec, gpu) -> Deployment:
    """The deployment a census record of the model `spec` profiled (tp 1, its engine's
    decode mode)."""
    from piep.core.config import Parallel, Workload
    from piep.core.layout import validate
    from piep.core.engines import engine
    wl = Workload(batch=rec.batch, prompt_len=rec.prompt_len, gen_len=rec.gen_len,
                  mode=engine(rec.engine).decode)
    return validate(spec, Parallel(), wl, gpu, check_memory=False, engine=rec.engine)


def census_records(gpu: str, name: str | None = None) -> list[KernelCensus]:
    """The records of one census file of `gpu` (`name`), or of all of them."""
    folder = census_dir(gpu)
    files = [folder / name] if name else sorted(folder.glob("*.jsonl"))
    return [r for f in files if f.is_file()
            for r in read_records(f, SCHEMA, parse=KernelCensus.from_json)]


def fused_pointwise_us(rec: KernelCensus) -> float | None:
    """The in-situ time (us) of one layer's fused pointwise kernels in a census record's
    decode step; None for a record without durations or without compiled kernels."""
    by_name = rec.decode_step.get("per_layer_us_by_name")
    if not by_name:
        return None
    fused = [us for name, us in by_name.items()
             if name.startswith(FUSED_PREFIX) and EXPAND_MARK not in name]
    return sum(fused) if fused else None


def fused_kernel_estimate(gpu, engine: str, specs: dict[str, ModelSpec]) -> float | None:
    """A compiled engine's in-situ time of one fused pointwise kernel beyond its bytes at
    HBM bandwidth: over the engine's census records with durations of the models in
    `specs` (name -> shape), each layer's fused kernel time less the bytes of the tree's
    fused leaves of that layer, shared among them; the median over records (None without
    such a record)."""
    from piep.predict.table import TableBuilder
    builder = TableBuilder()
    per_kernel = []
    for rec in census_records(gpu.name):
        us = fused_pointwise_us(rec) if rec.engine == engine else None
        if us is None or rec.model not in specs:
            continue
        dep = census_deployment(rec, specs[rec.model], gpu)
        t = builder.table([dep])
        if t.fused is None:
            continue
        steps = rec.gen_len - 1
        layers = dep.model.num_layers
        # the fused leaves of the decode step's layers, per layer (final_norm is outside)
        inside = t.fused & (t.kind != "final_norm")
        n = (t.count * inside).sum() / steps / layers
        moved = ((t.q["bytes_read"] + t.q["bytes_written"]) * t.count * inside).sum() \
            / steps / layers
        per_kernel.append((us * 1e-6 - moved / gpu.hbm_bytes_per_s) / n)
    return max(0.0, statistics.median(per_kernel)) if per_kernel else None

