"""Census of transformers' tensor-parallel path (`tp_plan="auto"`): what one forward pass
of a Llama issues at tp > 1, counted rather than fitted.

Two processes (torchrun; gloo on a CPU, NCCL on GPUs) load a tiny random Llama with
`tp_plan="auto"` and run `generate()` under the torch profiler, at `--layers` a and b
decoder layers: per forward pass, the collectives (by profiler event), the sharded
modules' outputs returned to local tensors (`DTensor.to_local`, one per sharded module
call) and the DTensors made from local ones (`DTensor.from_local`), split per layer and
outside the layers as (count at b - count at a) / (b - a). Beside them, the host time of a
decode step at tp=2 and of the same model unsharded in one process (rank 0), and their
difference per sharded module call: on a CPU a measure of the dispatch cost of the path,
not of a GPU host's (which piep fits on GPU runs).

    torchrun --nproc_per_node 2 -m piep.sampling.tp_census --layers 2 4 --out tp_census.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections import Counter
from typing import Any

import torch
import torch.distributed as dist

from piep.device import clock

SCHEMA = "piep.tp_census"
COLLECTIVE_WORDS = ("all_gather", "allgather", "all_reduce", "allreduce", "reduce_scatter")


def _tiny(layers: int, folder: str):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=4, vocab_size=128,
                      max_position_embeddings=256)
    LlamaForCausalLM(cfg).save_pretrained(folder)


def _load(folder: str, tp: bool):
    from transformers import LlamaForCausalLM
    kw: dict[str, Any] = {}
    if tp:
        try:  # transformers >= 5.17 names it DistributedConfig; `tp_plan=` is the older alias
            from transformers import DistributedConfig
            kw = {"distributed_config": DistributedConfig(tp_plan="auto")}
        except ImportError:
            kw = {"tp_plan": "auto"}
    return LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                            attn_implementation="sdpa", **kw)


class _Boundaries:
    """Counts DTensor.from_local / to_local calls while installed."""

    def __init__(self) -> None:
        from torch.distributed.tensor import DTensor
        self.counts: Counter = Counter()
        self._cls, self._from, self._to = DTensor, DTensor.from_local, DTensor.to_local
        counts, from_local, to_local = self.counts, self._from, self._to

        def counted_from(*a, **k):
            counts["from_local"] += 1
            return from_local(*a, **k)

        def counted_to(self_, *a, **k):
            counts["to_local"] += 1
            return to_local(self_, *a, **k)
        DTensor.from_local = staticmethod(counted_from)
        DTensor.to_local = counted_to


def _forward_counts(model, ids, boundaries: _Boundaries, gen: int) -> dict[str, int]:
    from torch.profiler import ProfilerActivity, profile
    boundaries.counts.clear()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=gen,
                       min_new_tokens=gen, do_sample=False)
    out: Counter = Counter()
    for e in prof.events():
        name = e.name.lower()
        # the c10d op of each collective (not its gloo/nccl and functional wrappers)
        if name.startswith("c10d::") and any(w in name for w in COLLECTIVE_WORDS):
            out["allgather" if "gather" in name else "allreduce"] += 1
    return {**out, **boundaries.counts}


def _step_s(model, ids, steps: int = 16, repeats: int = 3) -> float:
    """Median host time of one decode step (a call of `steps` + 1 tokens less one of 1)."""
    def call(gen: int) -> float:
        t0 = clock.now()
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=gen,
                       min_new_tokens=gen, do_sample=False)
        return clock.now() - t0
    call(steps + 1)  # warm-up
    times = sorted((call(steps + 1) - call(1)) / steps for _ in range(repeats))
    return times[len(times) // 2]


def census(layers: tuple[int, int], gen: int = 5) -> dict[str, Any] | None:
    """The census at `layers` (a, b); rank 0 returns it, the others None."""
    rank = dist.get_rank()
    ids = torch.randint(0, 100, (2, 16), generator=torch.Generator().manual_seed(0))
    per: dict[int, dict[str, Any]] = {}
    for n in layers:
        folder = os.path.join(tempfile.gettempdir(), f"piep_tp_census_{n}")
        if rank == 0:
            _tiny(n, folder)
        dist.barrier()
        model = _load(folder, tp=True)
        boundaries = _Boundaries()
        # per forward pass: a call of gen tokens less a call of one, over gen - 1
        one = _forward_counts(model, ids, boundaries, 1)
        many = _forward_counts(model, ids, boundaries, gen)
        counts = {k: (many.get(k, 0) - one.get(k, 0)) / (gen - 1) for k in set(one) | set(many)}
        tp_step = _step_s(model, ids)
        plain_step = _step_s(_load(folder, tp=False), ids) if rank == 0 else None
        per[n] = {"per_forward": counts, "step_s_tp": tp_step, "step_s_tp1": plain_step}
    if rank:
        return None
    a, b = layers
    keys = sorted(set(per[a]["per_forward"]) | set(per[b]["per_forward"]))
    layer = {k: (per[b]["per_forward"].get(k, 0) - per[a]["per_forward"].get(k, 0)) / (b - a)
             for k in keys}
    outside = {k: per[a]["per_forward"].get(k, 0) - a * layer[k] for k in keys}
    sharded = {n: layer.get("to_local", 0) * n + outside.get("to_local", 0) for n in layers}
    return {"schema": SCHEMA, "schema_version": 1, "layers": list(layers),
            "world_size": dist.get_world_size(), "backend": dist.get_backend(),
            "per_layer": layer, "outside_layers": outside,
            "host_step_s": {str(n): {"tp": per[n]["step_s_tp"], "tp1": per[n]["step_s_tp1"]}
                            for n in layers},
            "host_s_per_sharded_call": {
                str(n): (per[n]["step_s_tp"] - per[n]["step_s_tp1"]) / sharded[n]
                for n in layers},
            "torch": torch.__version__, "transformers": __import__("transformers").__version__}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m piep.sampling.tp_census", description=__doc__)
    p.add_argument("--layers", type=int, nargs=2, default=(2, 4))
    p.add_argument("--out", default=None, help="write the census here (rank 0)")
    args = p.parse_args(argv)
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    try:
        doc = census(tuple(args.layers))
    finally:
        dist.destroy_process_group()
    if doc is not None:
        text = json.dumps(doc, indent=2) + "\n"
        if args.out:
            from piep.core.artifacts import write_text
            write_text(args.out, text)
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
