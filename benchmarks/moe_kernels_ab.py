"""Two A/Bs of what transformers' grouped-GEMM experts path runs, timed on one GPU at the
prefill token counts of the MoE designs:

* the experts' grouped GEMM in the layout the module sampler first ran (op version 1:
  weights (experts, d_in, d_out), contiguous) against the one transformers holds and
  passes (op version 2: (experts, d_out, d_in), passed transposed);
* its masks (`masked_fill` of the (token, expert) rows under a (rows, 1) boolean mask,
  three a layer) against the row gather of the same tensor the tree prices them as (the
  module sampler's `moe_copy` op).

and, with `--decode`, a third, of generate()'s decode-step experts (`batched_mm`: each
(token, expert) pair's weights gathered, then a batched GEMV) at decode batch sizes:

* the gather from a table of 8 experts, as the module sampler's `experts_batched` op runs
  it (op version 1), against the gather from every expert of the model, each token's
  experts distinct and drawn at random, as a router picks them (reports/moe.md: the
  census's decode steps stand above the tree's kernels by up to x1.21; whether the small
  table, which the L2 holds in part, is why).

Issue 52: the MoE prefills run 15-27 % longer than priced at batch 8 and 32 (python
benchmarks/heldout_accuracy.py moe --phases), priced from version-1 samples and from
copies. Whether these explain it is a property of the kernels, which any Hopper card
shows: each A and its B run in the same process on the same card, CUDA events, the median
of `--reps` calls each, the rows split evenly over every expert. Runs on a CPU too (a loop
of GEMMs: tests).

    python benchmarks/moe_kernels_ab.py --models calibration/h200/moe/configs/*.json \
        --out moe_kernels_ab.jsonl
    python benchmarks/moe_kernels_ab.py --decode --models ... --out experts_table_ab.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from piep.sampling.design import named_spec  # noqa: E402
from piep.sampling.protocol import seconds  # noqa: E402

WORKLOADS = ((8, 512), (32, 1024))  # (batch, prompt) of the MoE designs' larger runs
DECODE_BATCHES = (8, 32)  # the decode batch sizes of the same runs
SAMPLER_TABLE = 8  # experts in the module sampler's table (piep.sampling.modules)


def grouped(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor, ends: list[int]):
    """x (rows, d_in) through w (experts, d_in, d_out), the rows grouped by `offs`."""
    if x.is_cuda and hasattr(torch, "_grouped_mm"):
        return torch._grouped_mm(x, w, offs=offs)
    starts = [0] + ends[:-1]
    return torch.cat([x[a:b] @ w[j] for j, (a, b) in enumerate(zip(starts, ends))])


def timed_ms(call, reps: int) -> float:
    """Median milliseconds of one call over `reps` calls, each timed alone (the protocol's
    `seconds`: CUDA events on a GPU, the host clock on a CPU), after one to warm up."""
    cuda = torch.cuda.is_available()
    call()
    return statistics.median(1e3 * seconds(lambda i: call(), 1, cuda=cuda)
                             for _ in range(reps))


def ab(rows: int, experts: int, d_in: int, d_out: int, reps: int, device) -> dict:
    """Both layouts of one grouped GEMM: their median times and the ratio v2 / v1."""
    gen = torch.Generator(device=device).manual_seed(0)
    dt = torch.bfloat16

    def rnd(*shape):
        return torch.randn(*shape, device=device, dtype=dt, generator=gen) * 0.02
    ends = [round(rows * (i + 1) / experts) for i in range(experts)]
    offs = torch.tensor(ends, device=device, dtype=torch.int32)
    x = rnd(rows, d_in)
    w1 = rnd(experts, d_in, d_out)                  # op version 1
    w2 = rnd(experts, d_out, d_in).transpose(-2, -1)  # op version 2: transformers' layout
    v1 = timed_ms(lambda: grouped(x, w1, offs, ends), reps)
    v2 = timed_ms(lambda: grouped(x, w2, offs, ends), reps)
    return {"rows": rows, "experts": experts, "d_in": d_in, "d_out": d_out,
            "v1_ms": v1, "v2_ms": v2, "v2_over_v1": v2 / v1}


def mask_ab(rows: int, width: int, reps: int, device) -> dict:
    """transformers' mask of the rows past the routed ones (`masked_fill` under a (rows, 1)
    mask, out of place) against the `moe_copy` sample's row gather of the same tensor:
    their median times, the ratio."""
    x = torch.randn(rows, width, device=device, dtype=torch.bfloat16)
    mask = torch.zeros(rows, 1, device=device, dtype=torch.bool)
    mask[-1] = True  # (a sentinel row; the kernel reads the mask either way)
    order = torch.randperm(rows, device=device)
    fill = timed_ms(lambda: x.masked_fill(mask, 0.0), reps)
    gather = timed_ms(lambda: x[order], reps)
    return {"rows": rows, "width": width, "mask_ms": fill, "gather_ms": gather,
            "mask_over_gather": fill / gather}


def table_ab(batch: int, k: int, experts: int, d_in: int, d_out: int, reps: int,
             device) -> dict:
    """generate()'s decode-step experts for `batch` tokens of `k` experts each: the
    weights gathered from the sampler's table of 8 experts (random pairs) against from
    a table of all `experts` (each token's k distinct, in token order, as routed): the
    median times of gather + bmm, the ratio."""
    gen = torch.Generator(device=device).manual_seed(0)
    dt = torch.bfloat16
    x = torch.randn(batch * k, d_in, 1, device=device, dtype=dt, generator=gen)

    def one(table: int, ids: torch.Tensor) -> float:
        w = torch.randn(table, d_out, d_in, device=device, dtype=dt, generator=gen)
        return timed_ms(lambda: torch.bmm(w[ids], x), reps)  # (w freed on return)
    small = torch.randint(0, SAMPLER_TABLE, (batch * k,), device=device, generator=gen)
    routed = torch.stack([torch.randperm(experts, device=device, generator=gen)[:k]
                          for _ in range(batch)]).reshape(-1)
    eight, every = one(SAMPLER_TABLE, small), one(experts, routed)
    return {"pairs": batch * k, "experts": experts, "d_in": d_in, "d_out": d_out,
            "table8_ms": eight, "table_all_ms": every, "all_over_8": every / eight}


def decode_abs(spec, batches, reps: int, device, emit) -> None:
    """The decode-step experts' table A/B of one model at these batch sizes."""
    k, h, ffn = spec.experts_per_token, spec.hidden_size, spec.ffn_of_experts
    for batch in batches:
        for kind, d_in, d_out in (("gate_up", h, 2 * ffn), ("down", ffn, h)):
            rec = {"model": spec.name, "kind": f"experts_batched_{kind}", "batch": batch,
                   **table_ab(batch, k, spec.num_experts, d_in, d_out, reps, device)}
            emit(rec, f"{spec.name} {kind} b{batch}: table of {SAMPLER_TABLE} "
                      f"{rec['table8_ms']:.3f} -> of {spec.num_experts} "
                      f"{rec['table_all_ms']:.3f} ms (x{rec['all_over_8']:.2f})")


def prefill_abs(spec, loads, reps: int, device, emit) -> None:
    """The grouped GEMM's layout A/B and the masks' A/B of one model at `loads`."""
    k, h, ffn = spec.experts_per_token, spec.hidden_size, spec.ffn_of_experts
    for batch, prompt in loads:
        pairs, at = batch * prompt * k, {"batch": batch, "prompt_len": prompt}
        for kind, d_in, d_out in (("experts_gate_up", h, 2 * ffn), ("experts_down", ffn, h)):
            rec = {"model": spec.name, "kind": kind, **at,
                   **ab(pairs, spec.num_experts, d_in, d_out, reps, device)}
            emit(rec, f"{spec.name} {kind} b{batch} p{prompt}: {rec['v1_ms']:.3f} -> "
                      f"{rec['v2_ms']:.3f} ms (x{rec['v2_over_v1']:.2f})")
        for width in (h, 2 * ffn):
            rec = {"model": spec.name, "kind": "moe_mask", **at,
                   **mask_ab(pairs, width, reps, device)}
            emit(rec, f"{spec.name} mask w{width} b{batch} p{prompt}: gather "
                      f"{rec['gather_ms']:.3f} -> masked_fill {rec['mask_ms']:.3f} ms "
                      f"(x{rec['mask_over_gather']:.2f})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/moe_kernels_ab.py")
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--workloads", default=None,
                    help="batch:prompt,... (default: the MoE designs' 8:512,32:1024)")
    ap.add_argument("--decode", action="store_true",
                    help="the decode-step experts' table A/B only, at --batches")
    ap.add_argument("--batches", default=",".join(map(str, DECODE_BATCHES)),
                    help="with --decode: batch sizes, comma-separated (default: the MoE "
                         "designs' 8,32)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.decode:  # (a decode A/B's loads: its batch sizes)
        if args.workloads:
            ap.error("--workloads are the prefill A/B's; with --decode give --batches")
        loads = tuple(int(b) for b in args.batches.split(","))
    else:
        loads = WORKLOADS if not args.workloads else tuple(
            tuple(int(v) for v in w.split(":")) for w in args.workloads.split(","))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    card = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    with open(args.out, "a") as f:
        def emit(rec: dict, line: str) -> None:  # one record, kept as soon as it is timed
            f.write(json.dumps({**rec, "device": card}) + "\n")
            f.flush()
            print(line, flush=True)
        for name in args.models:
            spec = named_spec(name)[0]
            if spec.num_experts:
                (decode_abs if args.decode else prefill_abs)(spec, loads, args.reps, device,
                                                              emit)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
