"""Kernel census of transformers' `generate()`: the kernels one call launches, per layer
and outside the layers, in prefill and per decode step, by kernel name.

An eager engine's host issues every kernel itself, so its time follows the kernels it
launches; which attention kernel SDPA picks (flash, memory-efficient, the math fallback of
many small kernels) changes that count with the head dim and the cache. The census runs
the model twice, with `layers` = (a, b) decoder layers (random weights, the same
(B, P, G)), under the torch profiler: per layer = (count at b - count at a) / (b - a),
outside the layers = count at a - a x per layer; per decode step = (whole call - prefill
call) / (G - 1) (a long G divides the prefill's timing noise among many steps). On a GPU
it counts CUDA kernels; on a CPU (tests) the top-level aten
operators the Python code dispatches. Beside each count, the time they ran (us: a CUDA
kernel's duration on the GPU; an operator's on the CPU), split the same way: which kernels
a step's GPU time goes to, against the module models' leaves.

    python -m piep.sampling.census --models llama-3-8b piep-unlisted-hd96 --out census.jsonl
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

import torch

from piep.core.artifacts import writable
from piep.core.config import ModelSpec, Parallel, Workload
from piep.device import clock
from piep.core.errors import ConfigError, PiepError
from piep.core.writer import append_record
from piep.sampling.hf import HF_ENGINES, HFGenerate, build_model
from piep.sampling.runner import Dist, _sync

SCHEMA = "piep.kernel_census"


def _launched(device, call) -> tuple[Counter, Counter]:
    """Kernels (CUDA) or top-level aten operators (CPU) one call launches, by name: (how
    many, their summed duration in us)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    cuda = torch.device(device).type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        call()
        _sync(device)
    names: Counter = Counter()
    us: Counter = Counter()
    for e in prof.events():
        if cuda:
            counted = e.device_type == DeviceType.CUDA
        else:
            counted = e.name.startswith("aten::") and (
                e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))
        if counted:
            names[e.name] += 1
            us[e.name] += e.time_range.elapsed_us()
    return names, us


def _calls(spec: ModelSpec, engine: str, workload: Workload, device, seed: int
           ) -> tuple[tuple[Counter, Counter], tuple[Counter, Counter]]:
    """(prefill call, whole call) launches of `spec` after two warm-up calls, each as
    (counts, durations)."""
    d = Dist()
    model = build_model(spec, Parallel(), d, device, torch.bfloat16, None, seed)
    run = HFGenerate(model, engine, workload, device, seed)
    for _ in range(2):
        run.generate()
        run.generate(1)
    first = _launched(device, lambda: run.generate(1))
    whole = _launched(device, run.generate)
    run.model = None
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return first, whole


def split_counts(counts: dict[int, Counter]) -> tuple[Counter, Counter]:
    """(per layer, outside the layers) from the counts of two layer counts."""
    (a, ca), (b, cb) = sorted(counts.items())
    per_layer = Counter({k: (cb[k] - ca[k]) / (b - a) for k in set(ca) | set(cb)
                         if cb[k] != ca[k]})
    outside = Counter({k: ca[k] - a * per_layer[k] for k in ca
                       if ca[k] - a * per_layer[k]})
    return per_layer, outside


def _needs_a_decode_step(workload: Workload) -> None:
    if workload.gen_len < 2:
        raise ConfigError("--gen-len must be >= 2 (a census needs a decode step)")


def _per_step(whole: Counter, first: Counter, steps: int) -> Counter:
    return Counter({k: (whole[k] - first[k]) / steps for k in whole if whole[k] != first[k]})


def census(spec: ModelSpec, engine: str, workload: Workload, device, *,
           layers: tuple[int, int] = (2, 4), seed: int = 0) -> dict[str, Any]:
    """The census record of one model shape under `engine` (see the module doc)."""
    _needs_a_decode_step(workload)
    # per phase, (counts, durations), each by layer count
    split: dict[str, tuple[dict[int, Counter], ...]] = {"prefill": ({}, {}),
                                                       "decode_step": ({}, {})}
    for n in layers:
        first, whole = _calls(spec.first_layers(n), engine, workload, device, seed)
        for i in (0, 1):
            split["prefill"][i][n] = first[i]
            split["decode_step"][i][n] = _per_step(whole[i], first[i], workload.gen_len - 1)
    out: dict[str, Any] = {"schema": SCHEMA, "schema_version": 1, "model": spec.name, "engine": engine,
                           "batch": workload.batch, "prompt_len": workload.prompt_len,
                           "gen_len": workload.gen_len, "layers": list(layers),
                           "head_dim": spec.head_dim, "heads": spec.num_heads,
                           "kv_heads": spec.num_kv_heads,
                           "unit": "cuda_kernel" if torch.device(device).type == "cuda"
                           else "aten_op"}
    for phase, (counts, us) in split.items():
        per_layer, outside = split_counts(counts)
        layer_us, outside_us = split_counts(us)
        out[phase] = {"per_layer": sum(per_layer.values()), "outside": sum(outside.values()),
                      "per_layer_by_name": dict(per_layer.most_common()),
                      "outside_by_name": dict(outside.most_common()),
                      "per_layer_us": sum(layer_us.values()),
                      "outside_us": sum(outside_us.values()),
                      "per_layer_us_by_name": dict(layer_us.most_common()),
                      "outside_us_by_name": dict(outside_us.most_common())}
    return out


def main(argv: list[str] | None = None) -> int:
    from piep.sampling.design import named_spec
    ap = argparse.ArgumentParser(prog="python -m piep.sampling.census")
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--engines", nargs="+", default=[HF_ENGINES[0]], choices=HF_ENGINES)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen-len", type=int, default=9)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:  # every name, the workload and the output checked before any model is built
        specs = [named_spec(name)[0] for name in args.models]
        wl = Workload(batch=args.batch, prompt_len=args.prompt_len, gen_len=args.gen_len)
        _needs_a_decode_step(wl)
        writable(args.out, "--out", claim=False)  # (appended to)
    except PiepError as exc:
        print(f"census: error: {exc}", file=sys.stderr)
        return 2
    for engine in args.engines:
        for name, spec in zip(args.models, specs):
            t0 = clock.now()
            rec = census(spec, engine, wl, device)
            rec["wall_s"] = clock.now() - t0
            append_record(args.out, rec)
            step = rec["decode_step"]
            print(f"{engine} {name}: prefill {rec['prefill']['per_layer']:.1f}/layer + "
                  f"{rec['prefill']['outside']:.1f}, decode step "
                  f"{step['per_layer']:.1f}/layer + {step['outside']:.1f}; decode step "
                  f"{step['per_layer_us']:.0f} us/layer + {step['outside_us']:.0f} us "
                  f"({rec['wall_s']:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
