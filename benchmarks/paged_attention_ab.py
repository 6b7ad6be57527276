"""Continuous batching's packed attention under its additive mask against the unmasked
SDPA of the same tensors, timed on one GPU, over the decoding iterations and prompt
chunks hf-cb runs (issue 53).

hf-cb's attention is priced as the unmasked SDPA's time times one fitted scale, and its
logged iterations drift from 0.92 to 1.30 of their price as queries x keys grow (python
benchmarks/serving_iterations.py). Whether the masked kernel's cost grows faster than the
unmasked one's is a property of the kernels any Hopper card shows: each pair runs in one
process on one card, CUDA events, the median of `--reps` calls each; the masked one is
the module sampler's `sdpa_paged` op (`piep.sampling.modules.packed_mask`). Runs on a CPU
too (tests, tiny shapes).

    python benchmarks/paged_attention_ab.py --out paged_attention_ab.jsonl
    python benchmarks/paged_attention_ab.py --fit calibration/h100/serving/paged_attention_ab_s81.jsonl

`--fit FILE`: the closed form `piep.predict.module_models.PackedKernel` fitted on a file's
masked times (the blocks at once, the cost per key and wave and per unit of head dim, the
floor; least squares in log time, the 64-query block fixed), beside the constants piep
ships and their mean error on the file (no torch needed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402

# (requests, queries, keys): decoding iterations (a query a request) over short to long
# contexts, then prompt chunks of up to hf-cb's 8192-token budget beside decoding requests
ITERATIONS = tuple((r, r, r * per) for r in (2, 8, 32, 96) for per in (512, 2048, 8192)
                   if r * per <= 131072) + (
    (1, 512, 512), (1, 2048, 2048), (1, 8192, 8192), (9, 520, 8704), (33, 2080, 34816),
    (17, 8192, 40960), (65, 8256, 73728))


def ab(requests: int, q_len: int, ctx: int, heads: int, head_dim: int, reps: int,
       device) -> dict:
    import torch
    import torch.nn.functional as F

    from moe_kernels_ab import timed_ms
    from piep.sampling.modules import packed_mask
    dt = torch.bfloat16 if device.type == "cuda" else torch.float32
    gen = torch.Generator(device=device).manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, device=device, dtype=dt, generator=gen)
    q, k, v = rnd(1, heads, q_len, head_dim), rnd(1, heads, ctx, head_dim), rnd(1, heads, ctx,
                                                                               head_dim)
    mask = packed_mask(q_len, ctx, requests, dt, device)
    masked = timed_ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), reps)
    plain = timed_ms(lambda: F.scaled_dot_product_attention(q, k, v), reps)
    out = {"requests": requests, "q_len": q_len, "context_len": ctx, "heads": heads,
           "head_dim": head_dim, "qk": q_len * ctx, "masked_ms": masked, "plain_ms": plain,
           "masked_over_plain": masked / plain}
    if q_len == requests and ctx % requests == 0:
        # a decoding iteration as an engine without packing runs it (and as the module
        # samples of `attention` ran it): each request's query over its own keys, batched
        qb = q.reshape(heads, requests, 1, head_dim).transpose(0, 1)
        kb, vb = (t.reshape(heads, requests, ctx // requests, head_dim).transpose(0, 1)
                  for t in (k, v))
        batched = timed_ms(lambda: F.scaled_dot_product_attention(qb, kb, vb), reps)
        out.update(batched_ms=batched, masked_over_batched=masked / batched)
    return out


def quantities(rows: list[dict]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A file's rows as the leaf-table quantities `PackedKernel` reads (queries, keys,
    heads, FLOPs), and their masked times in seconds."""
    q = {f: np.array([r[k] for r in rows], float)
         for f, k in (("tokens", "q_len"), ("context_len", "context_len"), ("heads", "heads"))}
    q["flops"] = 4.0 * q["tokens"] * q["context_len"] * q["heads"] \
        * np.array([r["head_dim"] for r in rows], float)
    return q, 1e-3 * np.array([r["masked_ms"] for r in rows])


def fit(path: str) -> int:
    """`PackedKernel` fitted on a file of this script's rows, beside the shipped one."""
    from dataclasses import replace

    from scipy.optimize import minimize

    from piep.core.artifacts import read_jsonl
    from piep.predict.module_models import PackedKernel
    rows = read_jsonl(Path(path))
    q, measured = quantities(rows)
    shipped = PackedKernel()
    names = ("blocks", "key_s", "key_dim_s", "floor_s")

    def kernel(theta):
        return replace(shipped, **dict(zip(names, np.exp(theta))))

    def error(theta):
        return float(np.mean(np.log(kernel(theta).time_s(q) / measured) ** 2))
    # from several block counts (the waves are steps in it), the best
    best = min((minimize(error, np.log([b, 8e-9, 1e-10, 1e-5]), method="Nelder-Mead",
                         options={"maxiter": 4000, "xatol": 1e-4, "fatol": 1e-12})
                for b in (132, 200, 264, 400)), key=lambda r: r.fun)
    for label, k in (("fitted", kernel(best.x)), ("shipped", shipped)):
        err = np.abs(k.time_s(q) / measured - 1)
        print(f"{label}: {k.blocks:.0f} blocks at once, {1e9 * k.key_s:.2f} ns a key and "
              f"wave + {1e12 * k.key_dim_s:.1f} ps a unit of head dim, floor "
              f"{1e6 * k.floor_s:.1f} us: mean error {100 * err.mean():.1f} %, largest "
              f"{100 * err.max():.0f} % ({len(rows)} iterations)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/paged_attention_ab.py")
    ap.add_argument("--heads", type=int, nargs="+", default=[32])
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--scale", type=float, default=1.0,
                    help="shrink every length by this factor (CPU tests)")
    ap.add_argument("--iterations", nargs="+", metavar="R:Q:K",
                    help="these iterations (requests:queries:keys) instead of the default set")
    ap.add_argument("--out")
    ap.add_argument("--fit", metavar="FILE.jsonl", help="fit `PackedKernel` on a file")
    args = ap.parse_args(argv)
    if args.fit:
        return fit(args.fit)
    if not args.out:
        ap.error("--out is needed to measure")
    try:
        iterations = [tuple(int(v) for v in it.split(":")) for it in args.iterations] \
            if args.iterations else ITERATIONS
        if any(len(it) != 3 or min(it) < 1 for it in iterations):
            raise ValueError
    except ValueError:
        ap.error("--iterations: each requests:queries:keys, three integers >= 1")
    import torch
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    card = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    with open(args.out, "a") as f:
        for heads in args.heads:
            for r, q, c in iterations:
                q, c = max(1, int(q * args.scale)), max(1, int(c * args.scale))
                rec = {"device": card, **ab(min(r, q), q, c, heads, args.head_dim,
                                            args.reps, device)}
                f.write(json.dumps(rec) + "\n")
                f.flush()
                print(f"heads {heads} requests {r} q {q} keys {c}: unmasked "
                      f"{rec['plain_ms']:.3f} -> masked {rec['masked_ms']:.3f} ms "
                      f"(x{rec['masked_over_plain']:.2f})", flush=True)
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
