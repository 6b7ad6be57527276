"""Module sampler: every compute node kind of the model tree, run in isolation on the GPU
at the shapes the trees of many deployments contain (and beyond), in the same mode as
inference (a CUDA graph of many calls, or eager calls).

Weights and inputs rotate over >= 4x the L2 size so nothing is read from cache that a
real run reads from HBM. Time per call from CUDA events; energy per call from a
tick-aligned window of back-to-back replays (SPEC §3); clocks and temperature recorded.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

from piep.sampling.protocol import capture, seconds
from piep.sampling.runner import _sync
from piep.sampling.model import (apply_rope, attention_block, eager_decode_ops,
                                 prefill_ops, split_heads, static_decode_ops)
from piep.core.samples import sampler_op_version
from piep.tree.builder import (APPENDS, GROUPED_KINDS, LINEAR_KINDS,  # noqa: F401
                               shape_key)
from piep.tree.nodes import COMPUTE_KINDS, COPY_KINDS  # noqa: F401  (re-exported)

L2_BYTES = 60 * 2 ** 20
ROTATE_BYTES = 4 * L2_BYTES


@dataclass
class Op:
    fn: Callable[[int], None]   # run call i (rotating buffers)
    n_rot: int
    bytes_per_call: float


def _copies(nbytes: float, cap: int = 64) -> int:
    return max(1, min(cap, math.ceil(ROTATE_BYTES / max(nbytes, 1))))


def build_op(s: dict[str, Any], mode: str, device, dtype=torch.bfloat16,
             gen: torch.Generator | None = None) -> Op:
    """A callable reproducing the kernel(s) of one leaf at shape `s`."""
    kind, t = s["kind"], s["tokens"]

    def rnd(*shape):
        x = torch.empty(*shape, device=device, dtype=dtype)
        return x.normal_(0, 0.02, generator=gen)
    if kind in GROUPED_KINDS:  # (vLLM's experts_fused too: its Triton kernel is not here)
        return _grouped_op(s, device, rnd)
    if kind == "experts_batched":
        return _batched_op(s, device, rnd, gen)
    if kind == "experts_bmm":
        return _bmm_op(s, rnd)
    if kind == "fp8_linear":
        return _fp8_op(s, rnd)
    if kind in LINEAR_KINDS:
        w_bytes = s["d_in"] * s["d_out"] * 2
        n = _copies(w_bytes + t * s["d_in"] * 2, 16)
        ws = [rnd(s["d_out"], s["d_in"]) for _ in range(n)]
        xs = [rnd(t, s["d_in"]) for _ in range(n)]
        return Op(lambda i: F.linear(xs[i], ws[i]), n, w_bytes)
    if kind == "attention":
        return _attention_op(s, mode, rnd)
    if kind == "sdpa_masked":
        return _masked_sdpa_op(s, rnd)
    if kind == "sinks_attention":
        return _sinks_op(s, rnd)
    if kind == "sdpa_paged":
        return _paged_sdpa_op(s, rnd)
    if kind in COPY_KINDS:
        return _kv_copy_op(s, mode, rnd)
    w = s.get("width", 0)
    if kind in ("rmsnorm", "final_norm"):
        n = _copies(t * w * 2)
        xs = [rnd(t, w) for _ in range(n)]
        g = torch.ones(w, device=device, dtype=dtype)

        def norm(i):
            x = xs[i]
            var = x.float().pow(2).mean(-1, keepdim=True)
            return g * (x.float() * torch.rsqrt(var + 1e-5)).to(x.dtype)
        return Op(norm, n, 0)
    if kind == "residual":
        n = _copies(t * w * 4)
        xs = [rnd(t, w) for _ in range(n)]
        ys = [rnd(t, w) for _ in range(n)]
        return Op(lambda i: xs[i] + ys[i], n, 0)
    if kind in ("activation", "geglu"):  # SwiGLU's or GeGLU's gate times up
        n = _copies(t * w * 4)
        xs = [rnd(t, w) for _ in range(n)]
        ys = [rnd(t, w) for _ in range(n)]
        if kind == "geglu":
            return Op(lambda i: F.gelu(xs[i], approximate="tanh") * ys[i], n, 0)
        return Op(lambda i: F.silu(xs[i]) * ys[i], n, 0)
    if kind == "scale":
        n = _copies(t * w * 2)
        xs = [rnd(t, w) for _ in range(n)]
        return Op(lambda i: xs[i] * 0.5, n, 0)
    if kind == "routing":  # softmax over the experts, the top 2 of them
        n = _copies(t * w * 2)
        xs = [rnd(t, w) for _ in range(n)]
        return Op(lambda i: torch.topk(torch.softmax(xs[i].float(), -1), min(2, w), -1), n, 0)
    if kind == "moe_copy":  # hidden states gathered in another order
        n = _copies(t * w * 4)
        xs = [rnd(t, w) for _ in range(n)]
        order = torch.randperm(t, device=device, generator=gen)
        return Op(lambda i: xs[i][order], n, 0)
    if kind == "moe_mask":  # transformers' mask of the rows past the routed ones
        n = _copies(t * w * 4)
        xs = [rnd(t, w) for _ in range(n)]
        mask = torch.zeros(t, 1, device=device, dtype=torch.bool)
        return Op(lambda i: xs[i].masked_fill(mask, 0.0), n, 0)
    if kind == "scores":  # one pass over eager attention's scores: the cap's tanh
        n = _copies(t * w * 2)
        xs = [rnd(t, w) for _ in range(n)]
        return Op(lambda i: torch.tanh(xs[i]), n, 0)
    if kind == "rope":
        return _rope_op(s, rnd)
    if kind == "embedding":
        vocab = 32000
        table = rnd(vocab, w)
        n = _copies(t * w * 2)
        ids = [torch.randint(0, vocab, (t,), device=device, generator=gen) for _ in range(n)]
        return Op(lambda i: F.embedding(ids[i], table), n, 0)
    if kind == "sampling":
        n = _copies(t * s["vocab"] * 2)
        xs = [rnd(t, s["vocab"]) for _ in range(n)]
        return Op(lambda i: xs[i].argmax(-1), n, 0)
    raise KeyError(kind)


def _grouped_op(s: dict[str, Any], device, rnd) -> Op:
    """The experts' grouped GEMM of a mixture of experts: `tokens` rows split evenly over
    `experts` experts, each through its own weights (torch._grouped_mm where this torch
    and GPU run it, as transformers' grouped_mm path does; else a GEMM per expert). The
    weights lie as transformers holds them, (experts, d_out, d_in), and are passed
    transposed as its `_grouped_linear` passes them (op version 2; version 1 held them
    as (experts, d_in, d_out))."""
    t, e, d_in, d_out = s["tokens"], s["experts"], s["d_in"], s["d_out"]
    w_bytes = e * d_in * d_out * 2
    n = _copies(w_bytes + t * d_in * 2, 8)
    ws = [rnd(e, d_out, d_in).transpose(-2, -1) for _ in range(n)]
    xs = [rnd(t, d_in) for _ in range(n)]
    ends = [round(t * (i + 1) / e) for i in range(e)]
    grouped = getattr(torch, "_grouped_mm", None)
    if grouped is not None and torch.device(device).type == "cuda":
        offs = torch.tensor(ends, device=device, dtype=torch.int32)
        try:
            grouped(xs[0], ws[0], offs=offs)
            return Op(lambda i: grouped(xs[i], ws[i], offs=offs), n, w_bytes)
        except RuntimeError:  # (a GPU or dtype its kernel does not take)
            pass
    starts = [0] + ends[:-1]

    def loop(i):
        return torch.cat([xs[i][a:b] @ ws[i][j] for j, (a, b) in enumerate(zip(starts, ends))])
    return Op(loop, n, w_bytes)


def _batched_op(s: dict[str, Any], device, rnd, gen) -> Op:
    """transformers' `batched_mm` experts path (generate()'s decode steps): the weights of
    `tokens` (token, expert) pairs gathered from a table of experts laid out as
    transformers holds them (experts x d_out x d_in), then one `torch.bmm` of each pair's
    row through its copy. The table holds 8 experts whatever the model's count: each pair
    moves one expert's whole matrix either way, but a larger table gathers slower (device
    calls 94 and 97's A/Bs), which pricing applies on top (`module_models.BATCHED_TABLE_TIME`)."""
    t, d_in, d_out = s["tokens"], s["d_in"], s["d_out"]
    table = 8
    n = _copies(table * d_in * d_out * 2, 4)
    ws = [rnd(table, d_out, d_in) for _ in range(n)]
    xs = [rnd(t, d_in, 1) for _ in range(n)]
    ids = [torch.randint(0, table, (t,), device=device, generator=gen) for _ in range(n)]
    return Op(lambda i: torch.bmm(ws[i][ids[i]], xs[i]), n, t * d_in * d_out * 2)


def _bmm_op(s: dict[str, Any], rnd) -> Op:
    """Llama 4's experts (Llama4TextExperts): `torch.bmm` of every token's row through every
    expert's weights, held as transformers holds them (experts x d_in x d_out)."""
    t, e, d_in, d_out = s["tokens"], s["experts"], s["d_in"], s["d_out"]
    w_bytes = e * d_in * d_out * 2
    n = _copies(w_bytes + e * t * d_in * 2, 4)
    ws = [rnd(e, d_in, d_out) for _ in range(n)]
    xs = [rnd(e, t, d_in) for _ in range(n)]
    return Op(lambda i: torch.bmm(xs[i], ws[i]), n, w_bytes)


def _fp8_op(s: dict[str, Any], rnd) -> Op:
    """A projection of FP8 weights as the reference runner runs it (piep.sampling.fp8):
    the input's rows quantized at run time, one row-wise scaled FP8 GEMM."""
    from piep.sampling.fp8 import Fp8Linear
    t, d_in, d_out = s["tokens"], s["d_in"], s["d_out"]
    n = _copies(d_in * d_out + t * d_in * 2, 16)
    layers = [Fp8Linear(rnd(d_out, d_in), rnd(d_out) if s.get("bias") else None)
              for _ in range(n)]
    xs = [rnd(t, d_in) for _ in range(n)]
    return Op(lambda i: layers[i](xs[i]), n, d_in * d_out)


def _attention_op(s: dict[str, Any], mode: str, rnd) -> Op:
    """The in-situ kernel sequence of the runner's attention span: heads split from
    projection outputs, KV-cache write, attention, output reshape (model.attention_block)."""
    b, hq, hkv, d = s["batch"], s["heads"], s["kv_heads"], s["head_dim"]
    if s["phase"] == "prefill":
        q_len = cache_len = s["q_len"]
        write, attend = prefill_ops(q_len)
    else:
        q_len, cache_len = 1, s["context_len"]
        if mode == "graph":
            positions = torch.arange(cache_len, device=rnd(1).device)
            write, attend = static_decode_ops(positions[-1:].clone(), positions)
        else:
            write, attend = eager_decode_ops(cache_len - 1)
    per_copy = 2 * b * q_len * (hq + 2 * hkv) * d + 4 * b * hkv * cache_len * d
    n = _copies(per_copy, 16)
    qs = [rnd(b, q_len, hq * d) for _ in range(n)]
    ks = [rnd(b, q_len, hkv * d) for _ in range(n)]
    vs = [rnd(b, q_len, hkv * d) for _ in range(n)]
    kcs = [rnd(b, hkv, cache_len, d) for _ in range(n)]
    vcs = [rnd(b, hkv, cache_len, d) for _ in range(n)]

    def run(i):
        return attention_block(split_heads(qs[i], hq, d), split_heads(ks[i], hkv, d),
                               split_heads(vs[i], hkv, d), kcs[i], vcs[i], write, attend)
    return Op(run, n, 0)


def _masked_sdpa_op(s: dict[str, Any], rnd) -> Op:
    """transformers' SDPA over a static (or gathered paged) cache: queries of `q_len`
    tokens attend all `context_len` slots under a boolean mask (causal over the filled
    slots, the rest masked out), K/V already expanded to every query head (repeat_kv)."""
    b, h, d, q_len, ctx = s["batch"], s["heads"], s["head_dim"], s["q_len"], s["context_len"]
    dev = rnd(1).device
    n = _copies(2 * b * h * d * (q_len + 2 * ctx) + b * q_len * ctx, 16)
    qs = [rnd(b, h, q_len, d) for _ in range(n)]
    ks = [rnd(b, h, ctx, d) for _ in range(n)]
    vs = [rnd(b, h, ctx, d) for _ in range(n)]
    mask = _causal_seen(s, dev)[None, None].expand(b, 1, q_len, ctx)
    return Op(lambda i: F.scaled_dot_product_attention(qs[i], ks[i], vs[i], attn_mask=mask),
              n, 0)


def _causal_seen(s: dict[str, Any], dev) -> "torch.Tensor":
    """(q_len, context_len) bools: the cache slots each query of shape `s` sees (causal
    over the slots filled before the call, which a decode step has; the rest unseen)."""
    q_len, ctx = s["q_len"], s["context_len"]
    filled = ctx - q_len if s["phase"] == "decode" else 0  # slots written before the call
    pos = torch.arange(ctx, device=dev)
    return pos[None, :] <= filled + torch.arange(q_len, device=dev)[:, None]


def _repeat_kv(x: "torch.Tensor", heads: int) -> "torch.Tensor":
    """transformers' repeat_kv: (batch, kv heads, keys, d) expanded to `heads` heads and
    reshaped (a copy; with as many KV heads as heads, a view: no kernel)."""
    b, hkv, ctx, d = x.shape
    return x[:, :, None].expand(b, hkv, heads // hkv, ctx, d).reshape(b, heads, ctx, d)


def _sinks_op(s: dict[str, Any], rnd) -> Op:
    """gpt-oss's eager attention as transformers runs it (its eager_attention_forward):
    K and V repeated to every head, the scores materialized, scaled, under the additive
    causal mask (a decode step: over every cached key), the sink logit of each head
    concatenated, the row max subtracted, softmax, the sinks dropped (a strided view
    PV reads), the output transposed to (batch, q_len, heads, head_dim)."""
    b, hq, hkv, d = s["batch"], s["heads"], s["kv_heads"], s["head_dim"]
    q_len, ctx = s["q_len"], s["context_len"]
    probe = rnd(1)
    dev, dtype = probe.device, probe.dtype
    n = _copies(2 * (b * hq * q_len * d + 2 * b * hkv * ctx * d), 16)
    qs = [rnd(b, hq, q_len, d) for _ in range(n)]
    ks = [rnd(b, hkv, ctx, d) for _ in range(n)]
    vs = [rnd(b, hkv, ctx, d) for _ in range(n)]
    sinks = rnd(hq)
    mask = torch.zeros(q_len, ctx, device=dev, dtype=dtype).masked_fill(
        ~_causal_seen(s, dev), torch.finfo(dtype).min)[None, None].expand(b, 1, q_len, ctx)

    def attend(i):
        k, v = _repeat_kv(ks[i], hq), _repeat_kv(vs[i], hq)
        w = torch.matmul(qs[i], k.transpose(2, 3)) * d ** -0.5
        w = w + mask
        logits = torch.cat([w, sinks.reshape(1, -1, 1, 1).expand(b, -1, q_len, -1)], dim=-1)
        logits = logits - logits.max(dim=-1, keepdim=True).values
        probs = F.softmax(logits, dim=-1, dtype=logits.dtype)[..., :-1]
        return torch.matmul(probs, v).transpose(1, 2).contiguous()
    return Op(attend, n, 0)


def packed_mask(q_len: int, ctx: int, requests: int, dtype, device) -> "torch.Tensor":
    """Continuous batching's additive mask over one packed iteration: `requests` requests
    share the `q_len` queries and `ctx` gathered keys evenly (the remainder to the last);
    each query sees its own request's keys up to its position (0), none of the others'
    (the dtype's minimum), as transformers' continuous batching builds it."""
    r = max(1, min(requests, q_len, ctx))
    q_end = torch.tensor([q_len * (i + 1) // r for i in range(r)], device=device)
    k_end = torch.tensor([ctx * (i + 1) // r for i in range(r)], device=device)
    owner_q = torch.bucketize(torch.arange(q_len, device=device), q_end, right=True)
    owner_k = torch.bucketize(torch.arange(ctx, device=device), k_end, right=True)
    # the last key a query sees: its request's queries are its newest keys
    queries = torch.arange(q_len, device=device)
    last_key = k_end[owner_q] - 1 - (q_end[owner_q] - 1 - queries)
    keys = torch.arange(ctx, device=device)
    seen = (owner_k[None, :] == owner_q[:, None]) & (keys[None, :] <= last_key[:, None])
    mask = torch.zeros(q_len, ctx, dtype=dtype, device=device)
    return mask.masked_fill_(~seen, torch.finfo(dtype).min)[None, None]


def _paged_sdpa_op(s: dict[str, Any], rnd) -> Op:
    """transformers' continuous batching's attention over one packed iteration: `q_len`
    queries of `requests` requests over `context_len` keys gathered from the paged
    cache, K/V expanded to every query head, under the additive mask of the queries'
    dtype (`packed_mask`): SDPA runs other kernels under it than under a boolean mask."""
    h, d, q_len, ctx = s["heads"], s["head_dim"], s["q_len"], s["context_len"]
    probe = rnd(1)
    n = _copies(2 * h * d * (q_len + 2 * ctx) + 2 * q_len * ctx, 16)
    qs = [rnd(1, h, q_len, d) for _ in range(n)]
    ks = [rnd(1, h, ctx, d) for _ in range(n)]
    vs = [rnd(1, h, ctx, d) for _ in range(n)]
    mask = packed_mask(q_len, ctx, s["requests"], probe.dtype, probe.device)
    return Op(lambda i: F.scaled_dot_product_attention(qs[i], ks[i], vs[i], attn_mask=mask),
              n, 0)


def _kv_copy_op(s: dict[str, Any], mode: str, rnd) -> Op:
    """transformers' copies of the K and V caches, both tensors per call: `kv_expand`
    (repeat_kv: expand the KV heads to every query head, then reshape; a graph-mode
    decode step is compiled, as hf-static compiles its decode step: inductor writes its
    own copy kernel, several times faster than eager's strided copy), `kv_append`
    (DynamicCache: the new position concatenated to the whole cache), `kv_slide` (a
    sliding DynamicCache past its window: the new position concatenated to the last
    window - 1 keys, a strided slice of the previous step's concatenation), `kv_gather`
    (paged cache: `index_select` of every slot a batch reads from the block pool)."""
    b, hq, hkv, d, ctx = s["batch"], s["heads"], s["kv_heads"], s["head_dim"], s["context_len"]
    kind = s["kind"]
    n = _copies(2 * b * ctx * (hq + hkv) * d * 2, 16)
    if kind == "kv_gather":
        slots = b * ctx
        pool = [rnd(2 * slots, hkv, d) for _ in range(2)]  # K and V blocks, half used
        gen = torch.Generator(device=pool[0].device)
        gen.manual_seed(0)
        idx = [torch.randperm(2 * slots, device=pool[0].device, generator=gen)[:slots]
               for _ in range(n)]
        return Op(lambda i: [torch.index_select(c, 0, idx[i]) for c in pool], n, 0)
    if kind == "kv_slide":  # views of the last ctx positions of ctx + 1
        kv = [(rnd(b, hkv, ctx + 1, d)[:, :, 1:], rnd(b, hkv, ctx + 1, d)[:, :, 1:])
              for _ in range(n)]
    else:
        kv = [(rnd(b, hkv, ctx, d), rnd(b, hkv, ctx, d)) for _ in range(n)]
    if kind in APPENDS:
        new = [rnd(b, hkv, 1, d) for _ in range(2)]
        return Op(lambda i: [torch.cat([c, x], dim=-2) for c, x in zip(kv[i], new)], n, 0)
    def expand(k, v):
        return [_repeat_kv(x, hq) for x in (k, v)]
    if mode == "graph" and s["phase"] == "decode":
        # a fresh compile per shape: recompiles of one code object stop at dynamo's
        # cache limit and fall back to eager without a word
        torch._dynamo.reset()
        expand = torch.compile(expand, dynamic=False, fullgraph=True)
    return Op(lambda i: expand(*kv[i]), n, 0)


def _rope_op(s: dict[str, Any], rnd) -> Op:
    """The runner's rope span: q and k rotated separately, in the (b, heads, t, d) views
    of the projection outputs (model.apply_rope)."""
    t, w = s["tokens"], s["width"]
    d = s.get("head_dim", 128)
    kv = s.get("kv_width", w // 2)
    b = s.get("batch", 1)
    q_len = max(1, t // b)
    n = _copies(t * w * 2)
    qs = [rnd(b, q_len, w - kv) for _ in range(n)]
    ks = [rnd(b, q_len, kv) for _ in range(n)]
    cos = rnd(1, 1, q_len, d)
    sin = rnd(1, 1, q_len, d)
    return Op(lambda i: apply_rope(split_heads(qs[i], (w - kv) // d, d),
                                   split_heads(ks[i], kv // d, d), cos, sin), n, 0)


def time_op(op: Op, mode: str, *, target_s: float = 0.004,
            device=None) -> tuple[Callable[[], None], float, int]:
    """Returns (replay, seconds per call, calls per replay): enough calls captured in a
    CUDA graph that one replay lasts ~`target_s`. Eager-mode ops are captured too: their
    kernels are the eager ones, and the host's launch gaps are the predictor's own term
    (timing an eager loop here would count this sampler's Python overhead instead). On a
    CPU device (tests), a replay is a loop of eager calls timed on the host clock."""
    cuda = device is None or torch.device(device).type == "cuda"
    for i in range(min(op.n_rot, 3) if cuda else 1):  # warm-up
        op.fn(i)
    _sync(device or "cuda")
    rough = max(seconds(op.fn, op.n_rot, cuda=cuda), 1e-6)
    calls = max(op.n_rot, min(4096, int(target_s / rough)))
    calls = op.n_rot * max(1, round(calls / op.n_rot))

    def loop():
        for i in range(calls):
            op.fn(i % op.n_rot)
    if not cuda:
        return loop, seconds(lambda i: loop(), 1, cuda=False) / calls, calls
    replay = capture(loop, warm=lambda: op.fn(0)).replay
    replay()
    torch.cuda.synchronize()
    return replay, seconds(lambda i: replay(), 3) / calls, calls


TINY_KERNEL_S = 20e-6  # below this, a call's duration varies between graph captures


def sample_shape(s: dict[str, Any], mode: str, *, meter, idle_w: float, device,
                 min_window_s: float = 0.3, nvml=None, captures: int = 1) -> dict[str, Any]:
    """One shape: time per call (CUDA events) and energy per call (tick-aligned window).
    With `captures` > 1, calls shorter than TINY_KERNEL_S are measured on that many fresh
    builds (new buffers, new graph) and the median is kept: their duration depends on the
    capture, not only on the shape."""
    runs = [_sample_once(s, mode, meter=meter, idle_w=idle_w, device=device,
                         min_window_s=min_window_s, nvml=nvml, seed=0)]
    if captures > 1 and runs[0]["time_s"] < TINY_KERNEL_S:
        runs += [_sample_once(s, mode, meter=meter, idle_w=idle_w, device=device,
                              min_window_s=min_window_s, nvml=nvml, seed=k)
                 for k in range(1, captures)]
        runs.sort(key=lambda r: r["energy_j"])
        out = dict(runs[len(runs) // 2])
        out["captures"] = [{"time_s": r["time_s"], "energy_j": r["energy_j"]} for r in runs]
        return out
    return runs[0]


def _sample_once(s: dict[str, Any], mode: str, *, meter, idle_w: float, device,
                 min_window_s: float, nvml, seed: int) -> dict[str, Any]:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    op = build_op(s, mode, device, gen=gen)
    replay, per_call_s, calls = time_op(op, mode, device=device)
    reps = max(1, math.ceil(min_window_s / max(per_call_s * calls, 1e-6)))

    def work():
        for _ in range(reps):
            replay()
        _sync(device)
    w = meter.measure(work, idle_power_w=idle_w)
    snap = nvml.snapshot() if nvml is not None else {}
    n_calls = reps * calls
    out = {**s, "mode": mode, "time_s": per_call_s, "window_time_s_per_call": w.duration_s / n_calls,
           "energy_j": w.energy_j / n_calls, "power_w": w.energy_j / w.duration_s,
           "window_s": w.duration_s, "calls": n_calls, "bound_j": w.bound_j / n_calls,
           "sm_clock_mhz": snap.get("sm_clock_mhz"), "temperature_c": snap.get("temperature_c"),
           "rotating_copies": op.n_rot, "time_unix": time.time(),
           "op_version": sampler_op_version(s["kind"], mode)}
    op = replay = None  # free the buffers before the next shape
    return out
