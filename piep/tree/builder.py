"""Build the model tree of a deployment (SPEC §2).

deployment -> replica (x dp) -> phase (prefill | decode) -> [decode step x (gen-1)]
-> stage (x1 each, `ranks`=tp) -> layer (x layers per stage) -> modules,
with communication nodes injected by the layout.
"""

from __future__ import annotations

from piep.core.config import BF16_BYTES
from piep.core.layout import Deployment
from piep.tree.nodes import COPY_KINDS, Node

TOKEN_BYTES = 8  # int64 token ids

# Kernel launches per module call in the reference runner (eager PyTorch ops).
LAUNCHES = {
    "embedding": 1, "rmsnorm": 7, "final_norm": 7, "q_proj": 1, "k_proj": 1, "v_proj": 1,
    "rope": 10, "attention": 4, "o_proj": 1, "gate_proj": 1, "up_proj": 1, "activation": 2,
    "down_proj": 1, "lm_head": 1, "sampling": 2, "residual": 1, "allreduce": 1,
    "allgather": 2, "p2p": 1, "kv_append": 2, "kv_expand": 2, "kv_gather": 2,
    "kv_slide": 2, "sdpa_masked": 4, "qkv_proj": 1, "gate_up_proj": 1, "geglu": 2,
    "scale": 1, "scores": 1,
    # a mixture of experts' layer (transformers' grouped_mm path): the router's GEMM, its
    # softmax, top-k and renormalization with the sort, histogram and offsets of the
    # tokens by expert, a gather or scatter of hidden states, the experts' grouped GEMMs
    "router": 1, "routing": 8, "moe_copy": 1, "moe_mask": 1, "experts_gate_up": 1,
    "experts_down": 1,
    # generate()'s decode steps (batched_mm): each (token, expert) pair's weights gathered,
    # then one batched matrix-vector product over the pairs
    "experts_batched": 2,
    # Llama 4's experts: one torch.bmm over every expert, each through every token
    "experts_bmm": 1,
    # transformers' eager attention with sinks (gpt-oss), whole: K and V repeated to every
    # head, QK^T, scale, mask, the sinks concatenated, their max, subtracted, softmax, PV
    # over the strided slice without the sinks, the output transposed
    "sinks_attention": 12,
    # vLLM's fused_moe: one Triton GEMM over every expert reached, gathers inside
    "experts_fused": 1,
    # an FP8 projection (row-wise, piep.sampling.fp8.quantize_rows): |x|, the rows' max,
    # its cast, clamp and scale, x in float, divided, cast to e4m3; the FP8 GEMM
    "fp8_linear": 9,
}
# attention-like leaves: their kernel is set by batch, heads, KV heads, head dim, query
# length and context (SDPA; the masked SDPA over a static or a gathered paged cache)
ATTENTION_LIKE = ("attention", "sdpa_masked", "sinks_attention")
PAGED_ATTENTION = "sdpa_paged"  # continuous batching's packed iteration under its mask
# the two forms of a windowed engine's attention: before the keys reach the window, and
# after (a leaf's `attrs["window"]`; a layer holds both, weighted by `Deployment.window_weights`)
FULL_CONTEXT, SLIDING = 1, 2


def _linear(name: str, kind: str, phase: str, tokens: int, d_in: int, d_out: int,
            bias: bool = False) -> Node:
    weights = d_in * d_out + (d_out if bias else 0)
    return Node(name, kind, phase, flops=2.0 * tokens * d_in * d_out,
                bytes_read=(weights + tokens * d_in) * BF16_BYTES,
                bytes_written=tokens * d_out * BF16_BYTES, tokens=tokens,
                launches=LAUNCHES[kind],
                attrs={"d_in": d_in, "d_out": d_out, **({"bias": True} if bias else {})})


def _elementwise(name: str, kind: str, phase: str, tokens: int, width: int, *,
                 reads: int, writes: int, flops_per: float) -> Node:
    return Node(name, kind, phase, flops=flops_per * tokens * width,
                bytes_read=reads * tokens * width * BF16_BYTES,
                bytes_written=writes * tokens * width * BF16_BYTES, tokens=tokens,
                launches=LAUNCHES[kind], attrs={"width": width})


def _rope(phase: str, t: int, q_out: int, kv_out: int, batch: int, head_dim: int,
          kernels: int) -> Node:
    """RoPE over q and k, launching its family's `kernels` (`rope_kernels`)."""
    node = _elementwise("rope", "rope", phase, t, q_out + kv_out, reads=2, writes=1,
                        flops_per=3)
    node.launches = kernels
    # how the runner lays q and k out: the module sampler's op needs it, features do not
    node.attrs["layout"] = {"kv_width": kv_out, "batch": batch, "head_dim": head_dim}
    return node


def _attention(phase: str, batch: int, q_len: int, ctx: int, hq: int, hkv: int,
               d: int, *, masked_cache: bool = False, kind: str | None = None,
               packed_mask: bool = False) -> Node:
    """SDPA. `masked_cache`: every query attends the whole static cache of `ctx` slots
    under a mask (transformers' static cache), K/V already expanded to all heads: SDPA
    with a mask runs other kernels than the unmasked one, so it is its own kind (`kind`
    overrides it). `packed_mask`: continuous batching's additive float mask over a paged
    cache, queries x keys, read besides."""
    kv_heads = hq if masked_cache else hkv
    if phase == "prefill" and not masked_cache:
        # causal: each query sees half the prompt on average (QK^T and PV, 2 FLOPs a MAC)
        flops = 2.0 * batch * hq * q_len * q_len * d
        kv_read = batch * q_len * hkv * d * 2
    else:
        flops = 4.0 * batch * hq * q_len * ctx * d
        kv_read = batch * ctx * kv_heads * d * 2
    q_io = batch * q_len * hq * d
    mask = batch * q_len * ctx if packed_mask else 0
    kind = kind or ("sdpa_masked" if masked_cache else "attention")
    return Node("attention", kind, phase, flops=flops,
                bytes_read=(q_io + kv_read + mask) * BF16_BYTES,
                bytes_written=(q_io + batch * q_len * hkv * d * 2) * BF16_BYTES,
                tokens=batch * q_len, context_len=ctx, launches=LAUNCHES["attention"],
                attrs={"heads": hq, "kv_heads": kv_heads, "head_dim": d, "batch": batch})


def _sinks_attention(phase: str, batch: int, q_len: int, ctx: int, hq: int, hkv: int,
                     d: int) -> Node:
    """gpt-oss's eager attention (its eager_attention_forward) as one leaf, sampled whole:
    K and V repeated to every head, every query's score over every key materialized,
    scaled, masked, the sink logits concatenated (rows of ctx + 1: unaligned, slower
    kernels than a pass over ctx), their max subtracted, softmax, PV over the slice
    without the sinks (a GEMM over unaligned rows), the output transposed. Scores:
    written by QK^T and read by PV, with 8 reads and 5 writes between."""
    scores = batch * hq * q_len * ctx
    kv = batch * ctx * d * 2  # K and V, one head
    q_io = batch * q_len * hq * d
    return Node("attention", "sinks_attention", phase,
                flops=4.0 * scores * d + 10.0 * scores,
                bytes_read=(q_io + kv * (hkv + hq) + 9 * scores + q_io) * BF16_BYTES,
                bytes_written=(kv * hq + 6 * scores + 2 * q_io) * BF16_BYTES,
                tokens=batch * q_len, context_len=ctx, launches=LAUNCHES["sinks_attention"],
                attrs={"heads": hq, "kv_heads": hkv, "head_dim": d, "batch": batch})


APPENDS = ("kv_append", "kv_slide")  # copies that add the new position to the cache


def _kv_copy(kind: str, phase: str, batch: int, ctx: int, heads_in: int, heads_out: int,
             d: int, extra_out: int = 0) -> Node:
    """A copy of the K and V caches: `kv_append` (transformers' DynamicCache concatenates
    the new token to the whole cache every step: read ctx, write ctx + 1 positions) or
    `kv_expand` (repeat_kv: kv heads copied out to every query head)."""
    read = 2 * batch * ctx * heads_in * d * BF16_BYTES
    written = 2 * batch * (ctx + extra_out) * heads_out * d * BF16_BYTES
    return Node(kind, kind, phase, bytes_read=read, bytes_written=written, tokens=batch,
                context_len=ctx, launches=LAUNCHES[kind],
                attrs={"heads": heads_out, "kv_heads": heads_in, "head_dim": d,
                       "batch": batch})


def expands_kv(heads: int, kv_heads: int) -> bool:
    """Whether repeat_kv copies: with one KV head its reshape is a view (no kernel)."""
    return heads != kv_heads and kv_heads > 1


def _embedding(phase: str, t: int, h: int) -> Node:
    return Node("embedding", "embedding", phase, bytes_read=t * h * BF16_BYTES + t * 8,
                bytes_written=t * h * BF16_BYTES, tokens=t, launches=1, attrs={"width": h})


def _sampling(phase: str, batch: int, vocab: int) -> Node:
    return Node("sampling", "sampling", phase, flops=batch * vocab,
                bytes_read=batch * vocab * BF16_BYTES, bytes_written=batch * 8, tokens=batch,
                launches=LAUNCHES["sampling"], attrs={"vocab": vocab})


ELEMENTWISE = {  # kind -> (reads, writes, flops per element)
    "rmsnorm": (1, 1, 4), "final_norm": (1, 1, 4), "residual": (2, 1, 1),
    "activation": (2, 1, 5), "rope": (2, 1, 3),
    # GeGLU's gate: tanh-approximated GELU times up; a multiply by a scalar (Gemma's and
    # Granite's embeddings, Granite's residuals and logits)
    "geglu": (2, 1, 12), "scale": (1, 1, 1),
    # one pass of eager attention over its scores (`SINK_PASSES` lists them)
    "scores": (1, 1, 1),
    # a mixture of experts' routing over (tokens, experts), a copy of hidden states, the
    # mask of the rows past the routed ones (masked_fill under a (rows, 1) mask: a slower
    # kernel path than a copy's, per call 79's census)
    "routing": (2, 2, 10), "moe_copy": (1, 1, 1), "moe_mask": (1, 1, 0),
}
# gpt-oss's eager attention with sinks (its eager_attention_forward): scale, mask, the
# sink logits concatenated (a copy of the scores), their max, subtracted, softmax, and the
# sinks dropped before PV (a strided slice PV copies)
SINK_PASSES = (("scores_scale", 1, 1, 1), ("scores_mask", 2, 1, 1), ("sinks_concat", 1, 1, 0),
               ("scores_max", 1, 0, 1), ("scores_shift", 2, 1, 1), ("softmax", 1, 1, 5),
               ("sinks_drop", 1, 1, 0))

LINEAR_KINDS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                "lm_head", "qkv_proj", "gate_up_proj",
                # a mixture of experts': the router, the experts' grouped GEMMs (one kernel
                # over every expert a step's tokens reach: priced as one GEMM of their
                # weights side by side and the tokens each expert gets)
                "router", "experts_gate_up", "experts_down")


def shape_key(node: Node) -> dict:
    """The shape that determines a compute leaf's kernel (what the module sampler runs)."""
    a = node.attrs
    base = {"kind": node.kind, "phase": node.phase, "tokens": node.tokens}
    if node.kind in GROUPED_KINDS:  # (the sampler runs the experts reached, rounded)
        return {**base, "d_in": a["d_in"], "d_out": a["d_out"],
                "experts": max(1, round(a["experts"]))}
    if node.kind == "experts_bmm":
        return {**base, "d_in": a["d_in"], "d_out": a["d_out"], "experts": a["experts"]}
    if node.kind in LINEAR_KINDS + ("experts_batched", "fp8_linear"):
        return {**base, "d_in": a["d_in"], "d_out": a["d_out"],
                **({"bias": True} if a.get("bias") else {})}
    if node.kind in ATTENTION_LIKE + (PAGED_ATTENTION,):
        packed = {"requests": a["batch"]} if node.kind == PAGED_ATTENTION else {}
        return {**base, "batch": a["batch"], "heads": a["heads"], "kv_heads": a["kv_heads"],
                "head_dim": a["head_dim"], "q_len": node.tokens // a["batch"],
                "context_len": node.context_len, **packed}
    if node.kind in COPY_KINDS:
        return {**base, "batch": a["batch"], "heads": a["heads"], "kv_heads": a["kv_heads"],
                "head_dim": a["head_dim"], "context_len": node.context_len}
    if node.kind in ELEMENTWISE or node.kind == "embedding":
        return {**base, "width": a["width"]}
    if node.kind == "sampling":
        return {**base, "vocab": a["vocab"]}
    raise KeyError(node.kind)


def leaf_from_shape(s: dict) -> Node:
    """The tree leaf a shape key stands for (inverse of `shape_key`)."""
    kind, phase, t = s["kind"], s["phase"], s["tokens"]
    if kind in GROUPED_KINDS:
        return _grouped(kind, kind, phase, t, s["experts"], s["d_in"], s["d_out"])
    if kind == "experts_batched":
        return _batched(kind, phase, t, s["d_in"], s["d_out"])
    if kind == "experts_bmm":
        return _experts_bmm(kind, phase, t, s["experts"], s["d_in"], s["d_out"])
    if kind == "fp8_linear":
        node = _linear(kind, "q_proj", phase, t, s["d_in"], s["d_out"], s.get("bias", False))
        _as_fp8(node)
        return node
    if kind in LINEAR_KINDS:
        return _linear(kind, kind, phase, t, s["d_in"], s["d_out"], s.get("bias", False))
    if kind == "sinks_attention":
        return _sinks_attention(phase, s["batch"], s["q_len"], s["context_len"], s["heads"],
                                s["kv_heads"], s["head_dim"])
    if kind in ATTENTION_LIKE:
        return _attention(phase, s["batch"], s["q_len"], s["context_len"], s["heads"],
                          s["kv_heads"], s["head_dim"], masked_cache=kind == "sdpa_masked")
    if kind == PAGED_ATTENTION:  # a packed iteration under its mask
        return _attention(phase, 1, s["q_len"], s["context_len"], s["heads"], s["heads"],
                          s["head_dim"], masked_cache=True, kind=kind, packed_mask=True)
    if kind in COPY_KINDS:  # only repeat_kv writes more heads than the cache holds
        return _kv_copy(kind, phase, s["batch"], s["context_len"], s["kv_heads"],
                        s["heads"] if kind == "kv_expand" else s["kv_heads"], s["head_dim"],
                        extra_out=1 if kind in APPENDS else 0)
    if kind in ELEMENTWISE:
        reads, writes, per = ELEMENTWISE[kind]
        return _elementwise(kind, kind, phase, t, s["width"], reads=reads, writes=writes,
                            flops_per=per)
    if kind == "embedding":
        return _embedding(phase, t, s["width"])
    if kind == "sampling":
        return _sampling(phase, t, s["vocab"])
    raise KeyError(kind)


def _allreduce(phase: str, tokens: int, hidden: int, tp: int, where: str) -> Node:
    size = tokens * hidden * BF16_BYTES
    return Node(f"allreduce_{where}", "allreduce", phase, comm_bytes=size, bytes_read=size,
                bytes_written=size, group_size=tp, tokens=tokens, launches=LAUNCHES["allreduce"])


def _cache_attention(dep: Deployment, phase: str, batch: int, q_len: int, ctx: int,
                     masked: bool, append_ctx: int | None = None) -> list[Node]:
    """A layer's KV-cache handling and SDPA over `ctx` keys: `masked`, SDPA under a mask
    (K/V expanded to every query head); `append_ctx`, the keys a sliding DynamicCache step
    concatenates to past its window (a strided slice: `kv_slide`; default: every key)."""
    hq, hkv, d = dep.heads_per_rank, dep.kv_heads_per_rank, dep.model.head_dim
    # every key's score materialized, K/V repeated to each head (sinks). (Soft-capped scores
    # are not: transformers 5.17 runs Gemma 2 under SDPA by default, `_supports_sdpa`, whose
    # interface takes no cap; only eager or flex attention would cap them)
    # (a flash kernel takes the sinks inside it: vLLM's)
    eager = dep.model.attention_sinks and dep.engine_record.attention_kernel != "flash"
    masked = masked or eager
    out = []
    if dep.engine_record.dynamic_cache and phase == "decode":
        kind, keys = ("kv_append", ctx) if append_ctx is None else ("kv_slide", append_ctx)
        out.append(_kv_copy(kind, phase, batch, keys, hkv, hkv, d, extra_out=1))
    paged = dep.engine_record.paged_cache
    if eager and not paged:  # (its eager attention, one leaf)
        return [*out, _sinks_attention(phase, batch, q_len, ctx, hq, hkv, d)]
    if paged:  # the blocks of every request read out into one K and one V
        out.append(_kv_copy("kv_gather", phase, batch, ctx, hkv, hkv, d))
    if masked and expands_kv(hq, hkv):  # a mask over the cache turns SDPA's native GQA off
        out.append(_kv_copy("kv_expand", phase, batch, ctx, hkv, hq, d))
    # a paged cache's packed iteration under an additive float mask: other kernels than
    # the boolean-masked SDPA's (`sdpa_paged`)
    attention = _attention(phase, batch, q_len, ctx, hq, hkv, d, masked_cache=masked,
                           kind=PAGED_ATTENTION if paged else None, packed_mask=paged)
    out.append(attention)
    if eager:  # (QK^T and PV priced as the masked SDPA over the same keys)
        out += [_elementwise(name, "scores", phase, batch * hq * q_len, ctx, reads=reads,
                             writes=writes, flops_per=per)
                for name, reads, writes, per in SINK_PASSES]
    return out


PHASE_INDEX = {"prefill": 0, "decode": 1}


def _norm(name: str, phase: str, rows: int, width: int, kernels: int) -> Node:
    """A norm over `rows` of `width`, launching its family's `kernels` (`norm_kernels`:
    torch's LayerNorm one, a Python RMSNorm seven, ...)."""
    node = _elementwise(name, "rmsnorm", phase, rows, width, reads=1, writes=1, flops_per=4)
    node.launches = kernels
    return node


def _scale(name: str, phase: str, tokens: int, width: int) -> Node:
    return _elementwise(name, "scale", phase, tokens, width, reads=1, writes=1, flops_per=1)


def _qkv(dep: Deployment, phase: str, batch: int, t: int, rope: bool) -> list[Node]:
    """The projections of q, k and v (one fused GEMM, or three), their norms where the
    family has them, and RoPE where the layer applies it (over the rotated share of each
    head: the rest is concatenated back, one more copy of q and k)."""
    m = dep.model
    h, d = m.hidden_size, m.head_dim
    q_out, kv_out = dep.heads_per_rank * d, dep.kv_heads_per_rank * d
    if m.fused_qkv:
        out = [_linear("qkv_proj", "qkv_proj", phase, t, h, q_out + 2 * kv_out, m.qkv_bias)]
    else:
        out = [_linear("q_proj", "q_proj", phase, t, h, q_out, m.qkv_bias),
               _linear("k_proj", "k_proj", phase, t, h, kv_out, m.qkv_bias),
               _linear("v_proj", "v_proj", phase, t, h, kv_out, m.qkv_bias)]
    qk_norm = m.qk_norm if rope or not m.nope_split else None
    if qk_norm == "head":  # each head's head_dim: one row a token and head
        out += [_norm("q_norm", phase, t * dep.heads_per_rank, d, m.norm_kernels),
                _norm("k_norm", phase, t * dep.kv_heads_per_rank, d, m.norm_kernels)]
    elif qk_norm == "whole":
        out += [_norm("q_norm", phase, t, q_out, m.norm_kernels),
                _norm("k_norm", phase, t, kv_out, m.norm_kernels)]
    if rope:
        rotary = m.rotary_dim or d
        node = _rope(phase, t, q_out * rotary // d, kv_out * rotary // d, batch, rotary,
                     m.rope_kernels)
        if rotary < d:  # torch.cat of the rotated and the passed-through parts
            whole = t * (q_out + kv_out) * BF16_BYTES
            node.bytes_read += whole
            node.bytes_written += whole
            node.launches += 2
        out.append(node)
    if m.query_scale and not (rope and m.nope_split):  # the factor from the position ids
        # (log, floor, ...), then q times it
        node = _scale("query_scale", phase, t, q_out)
        node.launches = 7
        out.append(node)
    return out


def _latent_copy(name: str, kind: str, phase: str, batch: int, ctx: int, width: int,
                 extra_out: int = 0) -> Node:
    """A copy of a latent attention's cache (`width` elements a position: the compressed
    keys and values and the rotary key), of `ctx` positions (`extra_out` more written)."""
    return Node(name, kind, phase, bytes_read=batch * ctx * width * BF16_BYTES,
                bytes_written=batch * (ctx + extra_out) * width * BF16_BYTES, tokens=batch,
                context_len=ctx, launches=LAUNCHES[kind],
                attrs={"heads": 1, "kv_heads": 1, "head_dim": width, "batch": batch})


def _latent_attention(dep: Deployment, phase: str, batch: int, q_len: int, ctx: int,
                      static: bool) -> list[Node]:
    """Multi-head latent attention as transformers 5.x runs it (DeepSeek V2/V3's
    attention): queries projected at once or through their low rank and its norm; keys
    and values compressed to one latent and a rotary key per token (`kv_a_proj`), the
    latent normed, RoPE on the rotary parts; the cache holds the compressed positions,
    and every step expands all of them again (`kv_b_proj` over every cached position,
    the keys assembled from the expanded and rotary parts, queries concatenated); SDPA
    over every head (its FLOPs and K/V bytes at the mean of the query/key and value head
    dims). Heads split over tensor-parallel ranks as vLLM and SGLang split them (the
    compressed projection on every rank), all on every rank where transformers' plan
    leaves the attention whole (`Deployment.attention_whole`). Under vLLM's flash
    attention a decode step reads the latents instead (`_absorbed_decode`)."""
    m, h, t = dep.model, dep.model.hidden_size, batch * q_len
    q_rank, rank, rope, v = m.mla
    heads, qk = dep.heads_per_rank, m.head_dim
    if q_rank:
        out = [_linear("q_a_proj", "q_proj", phase, t, h, q_rank, m.qkv_bias),
               _norm("q_a_norm", phase, t, q_rank, m.norm_kernels),
               _linear("q_b_proj", "q_proj", phase, t, q_rank, heads * qk)]
    else:
        out = [_linear("q_proj", "q_proj", phase, t, h, heads * qk)]
    out += [_linear("kv_a_proj_with_mqa", "k_proj", phase, t, h, rank + rope,
                    m.qkv_bias),
            _norm("kv_a_norm", phase, t, rank, m.norm_kernels),
            _rope(phase, t, heads * rope, rope, batch, rope, m.rope_kernels)]
    record = dep.engine_record
    if record.attention_kernel == "flash" and phase == "decode":
        return out + _absorbed_decode(batch, ctx, heads, qk - rope, rank, rope, v)
    if record.dynamic_cache and phase == "decode":
        out.append(_latent_copy("kv_append", "kv_append", phase, batch, ctx, rank + rope, 1))
    if record.paged_cache:
        out.append(_latent_copy("kv_gather", "kv_gather", phase, batch, ctx, rank + rope))
    keys = batch * ctx
    out += [_elementwise("q_concat", "moe_copy", phase, t, heads * qk, reads=1, writes=1,
                         flops_per=0),
            _linear("kv_b_proj", "v_proj", phase, keys, rank, heads * (qk - rope + v)),
            Node("key_assembly", "kv_expand", phase,
                 bytes_read=keys * (heads * (qk - rope) + rope) * BF16_BYTES,
                 bytes_written=keys * heads * qk * BF16_BYTES, tokens=batch, context_len=ctx,
                 launches=LAUNCHES["kv_expand"],
                 attrs={"heads": heads, "kv_heads": 1, "head_dim": qk, "batch": batch})]
    paged = record.paged_cache  # (priced as `_cache_attention` prices a paged SDPA)
    return out + [_attention(phase, batch, q_len, ctx, heads, heads, (qk + v) // 2,
                             masked_cache=static, kind=PAGED_ATTENTION if paged else None,
                             packed_mask=paged)]


def _absorbed_decode(batch: int, ctx: int, heads: int, nope: int, rank: int, rope: int,
                     v: int) -> list[Node]:
    """A latent attention's decode step as vLLM runs it (its MLA backends: FlashMLA,
    CUTLASS or Triton MLA): the key up-projection absorbed into each head's query (a bmm of
    the heads, nope -> rank), every head attending the cached latents themselves as one
    shared key and value head (keys of rank + rope, values the rank's latent: the cache
    read once for all heads, nothing expanded), the value up-projection absorbed into the
    output (a bmm, rank -> v). One query a request."""
    latents = batch * ctx * (rank + rope)
    scores = batch * heads * ctx
    return [_experts_bmm("q_absorb", "decode", batch, heads, nope, rank),
            Node("attention", "attention", "decode", flops=2.0 * scores * (2 * rank + rope),
                 bytes_read=(latents + batch * heads * (rank + rope)) * BF16_BYTES,
                 bytes_written=batch * heads * rank * BF16_BYTES, tokens=batch,
                 context_len=ctx, launches=LAUNCHES["attention"],
                 attrs={"heads": heads, "kv_heads": 1, "head_dim": rank + rope,
                        "batch": batch}),
            _experts_bmm("o_absorb", "decode", batch, heads, rank, v)]


def _residual(dep: Deployment, name: str, phase: str, t: int) -> list[Node]:
    """A residual add (after Granite's multiply of the branch by its scalar)."""
    h = dep.model.hidden_size
    scaled = [_scale(f"{name}_scale", phase, t, h)] if dep.model.residual_scale else []
    return scaled + [_elementwise(name, "residual", phase, t, h, reads=2, writes=1,
                                  flops_per=1)]


def experts_hit(experts: int, per_token: int, tokens, skew: float = 0.0):
    """The experts a step's `tokens` reach (a number, or an array of them), `per_token` of
    `experts` each: routed uniformly, E (1 - (1 - k/E)^T); with a trained router's `skew`
    (expert i chosen by a token with probability min(1, k p_i), p_i ~ i^-skew), the sum
    of 1 - (1 - k p_i)^T: fewer experts, more tokens each."""
    if not skew:
        return experts * (1.0 - (1.0 - per_token / experts) ** tokens)
    import numpy as np
    miss = (1.0 - _chosen(experts, per_token, skew)) ** np.asarray(tokens, dtype=float)[..., None]
    return np.maximum((1.0 - miss).sum(-1), per_token)  # (a token reaches k experts)


def _chosen(experts: int, per_token: int, skew: float):
    """Each expert's probability of being chosen by a token: min(1, k p_i), its
    popularity p_i ~ i^-skew (uniform at skew 0)."""
    import numpy as np
    popularity = np.arange(1, experts + 1, dtype=float) ** -skew
    return np.minimum(1.0, per_token * popularity / popularity.sum())


def rank_pairs(experts: int, per_token: int, tokens, skew: float = 0.0, ep: int = 1):
    """The (token, expert) pairs the busiest of `ep` ranks gets, each rank holding a
    contiguous 1/ep of the experts (vLLM's and transformers' placement), a step's `tokens`
    choosing `per_token` each (a number, or an array of them): the largest rank mean (with
    a trained router's `skew`, the popular experts' rank) plus the expected maximum of
    `ep` normal deviations times the ranks' spread (each expert's count binomial), capped
    at every token on every expert of the rank. Zero for ep = 1 (no ranks to wait on)."""
    import numpy as np
    from statistics import NormalDist
    tokens = np.asarray(tokens, dtype=float)
    if ep <= 1:
        return np.zeros_like(tokens)
    ranks = _chosen(experts, per_token, skew).reshape(ep, experts // ep)
    mean = ranks.sum(1).max()
    spread = np.sqrt((ranks * (1.0 - ranks)).sum(1).max())
    blom = NormalDist().inv_cdf((ep - 0.375) / (ep + 0.25))  # E max of ep deviations
    busiest = tokens * mean + blom * spread * np.sqrt(tokens)
    return np.minimum(busiest, tokens * min(per_token, experts // ep))


def _grouped(name: str, kind: str, phase: str, pairs: int, hit: float, d_in: int,
             d_out: int) -> Node:
    """An experts' grouped GEMM: every (token, expert) pair's row through its expert's
    weights (d_in x d_out), one kernel reading the weights of the `hit` experts reached."""
    return Node(name, kind, phase, flops=2.0 * pairs * d_in * d_out,
                bytes_read=(hit * d_in * d_out + pairs * d_in) * BF16_BYTES,
                bytes_written=pairs * d_out * BF16_BYTES, tokens=pairs,
                launches=LAUNCHES[kind], attrs={"d_in": d_in, "d_out": d_out, "experts": hit})


GROUPED_KINDS = ("experts_gate_up", "experts_down", "experts_fused")


# torch._grouped_mm on Hopper (aten/src/ATen/native/cuda/GroupMM.cu) takes 64-row tiles
# where its rows per expert (all rows over all experts) or d_out is at most 128, else
# 128-row tiles, on clusters of 2 CTAs along the rows; CUTLASS's grouped tile scheduler
# rounds each expert's row tiles up to the cluster, so an expert's rows are computed in
# blocks of two tiles: routed rows one past a block cost a whole block more
def grouped_block_rows(pairs, experts, d_out):
    """The rows of one block of the grouped GEMM of `pairs` rows over `experts` experts."""
    import numpy as np
    small = (np.asarray(pairs, dtype=float) <= 128 * np.asarray(experts, dtype=float)) | (
        np.asarray(d_out) <= 128)
    return np.where(small, 128.0, 256.0)


def even_grouped_rows(pairs, experts, d_out):
    """The rows the grouped GEMM computes, `pairs` rows split as evenly as they go over
    `experts` experts (the module sampler's split)."""
    import numpy as np
    pairs, experts = np.asarray(pairs, dtype=float), np.asarray(experts, dtype=float)
    block = grouped_block_rows(pairs, experts, d_out)
    each, extra = np.floor(pairs / experts), pairs - np.floor(pairs / experts) * experts
    return block * (extra * np.ceil((each + 1) / block) + (experts - extra) * np.ceil(each / block))


def fused_block_rows(tokens, experts):
    """The rows of one block of vLLM's fused_moe Triton kernel without a tuned config
    (`get_default_config`): BLOCK_SIZE_M 16 where a call's tokens are at most its
    experts, else 64; each expert's rows are padded to whole blocks
    (`moe_align_block_size`)."""
    import numpy as np
    return np.where(np.asarray(tokens, dtype=float) <= np.asarray(experts), 16.0, 64.0)


def routed_grouped_rows(tokens, chosen, d_out, fused: bool = False):
    """The rows the grouped GEMM computes, expected over routing: `tokens` tokens (a
    number, or an array of them) each choosing expert i with probability `chosen[i]`
    (`_chosen`), every expert's rows n rounded up to whole blocks b (torch's grouped GEMM,
    or with `fused` vLLM's fused_moe): E ceil(n / b) b = b sum_j P(n > j b). P(n > 0) is
    the binomial's own; past it, n is taken as normal (continuity-corrected) over the
    blocks within 8 deviations of its mean, and where it spreads over more than two
    blocks a deviation, the rounding costs half a block."""
    import numpy as np
    from scipy.special import ndtr
    scalar = np.ndim(tokens) == 0
    tokens = np.rint(np.atleast_1d(np.asarray(tokens, dtype=float)))[:, None]
    chosen = np.asarray(chosen, dtype=float)
    probs, alike = np.unique(chosen, return_counts=True)
    block = fused_block_rows(tokens, len(chosen)) if fused else \
        grouped_block_rows(tokens * chosen.sum(), len(chosen), d_out)  # (rows, 1)
    mean = tokens * probs
    sd = np.sqrt(mean * (1.0 - probs))
    hit = 1.0 - (1.0 - probs) ** tokens  # P(n > 0)
    lo = np.maximum(1.0, np.floor((mean - 8.0 * sd) / block))
    hi = np.ceil((mean + 8.0 * sd) / block) + 1.0
    narrow = sd <= 2.0 * block
    span = int(np.where(narrow, hi - lo + 1.0, 0.0).max(initial=0.0))
    j = lo[..., None] + np.arange(max(span, 1))  # (rows, probs, blocks)
    over = ndtr((mean[..., None] - j * block[..., None] - 0.5) / np.maximum(sd, 1e-12)[..., None])
    blocks = hit + (lo - 1.0) + np.where(j <= hi[..., None], over, 0.0).sum(-1)
    rows = np.where(narrow, block * blocks, mean + 0.5 * block)
    out = np.where(tokens[:, 0] > 0, (rows * alike).sum(-1), 0.0)
    return float(out[0]) if scalar else out


def routed_padding(dep: Deployment, pairs, d_out):
    """Rows computed per routed row of a deployment's grouped GEMMs (`pairs`: each use's
    rows, the busiest rank's where experts are sharded): its tokens routed by the model's
    router (`_chosen`, the popular experts' rank), over even rows, which the module
    samples ran."""
    import numpy as np
    m, ep = dep.model, dep.parallel.ep
    chosen = _chosen(m.num_experts, m.experts_per_token, m.routing_skew)[
        :m.num_experts // max(ep, 1)]
    pairs, d_out = np.asarray(pairs, dtype=float), np.asarray(d_out, dtype=float)
    fused = dep.engine_record.moe_kernel == "fused_moe"
    out = np.ones(len(pairs))
    for width in np.unique(d_out):
        at = np.flatnonzero((d_out == width) & (pairs > 0))
        out[at] = routed_grouped_rows(pairs[at] / chosen.sum(), chosen, width,
                                      fused) / pairs[at]
    return out


def _batched(name: str, phase: str, pairs: int, d_in: int, d_out: int) -> Node:
    """transformers' `batched_mm` experts path, which `generate()` switches to for its decode
    steps on a GPU (`_optimize_model_for_decode`, transformers 5.x): the weights of every
    (token, expert) pair gathered into a copy (`weight[expert_ids]`: read and written),
    then `torch.bmm` of the pairs' rows through their copies (read again). Each pair moves
    its expert's whole weight matrix, however many pairs share the expert."""
    w = pairs * d_in * d_out
    return Node(name, "experts_batched", phase, flops=2.0 * w,
                bytes_read=(2 * w + pairs * d_in) * BF16_BYTES,
                bytes_written=(w + pairs * d_out) * BF16_BYTES, tokens=pairs,
                launches=LAUNCHES["experts_batched"], attrs={"d_in": d_in, "d_out": d_out})


def _experts_bmm(name: str, phase: str, tokens: int, experts: int, d_in: int,
                 d_out: int) -> Node:
    """Llama 4's experts (Llama4TextExperts): one `torch.bmm` of `experts` equal problems,
    every token through every expert's (d_in x d_out) weights; `batch` is the bmm's batch
    (its problems), a feature of the kernel's shape."""
    return Node(name, "experts_bmm", phase, flops=2.0 * experts * tokens * d_in * d_out,
                bytes_read=experts * (d_in * d_out + tokens * d_in) * BF16_BYTES,
                bytes_written=experts * tokens * d_out * BF16_BYTES, tokens=tokens,
                launches=LAUNCHES["experts_bmm"],
                attrs={"d_in": d_in, "d_out": d_out, "experts": experts, "batch": experts})


def batched_experts(dep: Deployment, phase: str) -> bool:
    """Whether a mixture of experts' layer runs `batched_mm` (generate()'s decode steps)
    rather than `grouped_mm` (its prefill, continuous batching, the reference runner)."""
    return phase == "decode" and dep.engine_record.runs_generate


def _moe(dep: Deployment, phase: str, t: int) -> list[Node]:
    """A mixture of experts' MLP as transformers 5.x runs it by default (`grouped_mm`):
    the router's GEMM and its routing, the hidden states gathered in expert order, the
    experts' gate_up and down grouped GEMMs over the experts the tokens reach
    (`experts_hit`: routed uniformly), the activation, the weighted scatter back
    (generate()'s decode steps: `batched_mm`, each pair's weights copied, `_batched`); and a
    shared expert beside them (Qwen2-MoE: its MLP, a sigmoid gate, the add)."""
    m, h, ep = dep.model, dep.model.hidden_size, dep.parallel.ep
    e, k, f = m.num_experts, m.experts_per_token, dep.expert_ffn_per_rank
    if dep.every_expert:
        return _dense_moe(dep, phase, t)
    pairs = t * k  # (token, expert) pairs
    hit = experts_hit(e, k, t, m.routing_skew)
    reads, writes, per_el = ELEMENTWISE["activation"]
    # experts sharded over the ranks (ep > 1): a rank's grouped GEMMs run the pairs of its
    # experts (the busiest rank's, which the others wait for at the all-reduce) over the
    # experts it holds that they reach; generate()'s batched_mm runs every pair on every
    # rank (transformers clamps the other ranks' experts to a local one and zeroes them)
    local = rank_pairs(e, k, t, m.routing_skew, ep) if ep > 1 else pairs
    if dep.engine_record.moe_kernel == "fused_moe":  # (vLLM: the gathers, the routing
        # weights and each expert's padding inside its two GEMMs)
        experts = [_grouped("experts_gate_up", "experts_fused", phase, local, hit / ep, h,
                            2 * f),
                   _elementwise("activation", "activation", phase, local, f, reads=reads,
                                writes=writes, flops_per=per_el),
                   _grouped("experts_down", "experts_fused", phase, local, hit / ep, f, h)]
    elif batched_experts(dep, phase):
        experts = [_elementwise("moe_repeat", "moe_copy", phase, pairs, h, reads=1,
                                writes=1, flops_per=0),
                   _batched("experts_gate_up", phase, pairs, h, 2 * f),
                   _elementwise("activation", "activation", phase, pairs, f, reads=reads,
                                writes=writes, flops_per=per_el),
                   _batched("experts_down", phase, pairs, f, h)]
    else:  # (each grouped GEMM's rows past the routed ones masked to zero before and
        # after it, and the weighted rows put back in token order: passes of their own)
        experts = [_elementwise("moe_permute", "moe_copy", phase, pairs, h, reads=1,
                                writes=1, flops_per=0),
                   _elementwise("moe_mask_in", "moe_mask", phase, pairs, h, reads=1,
                                writes=1, flops_per=0),
                   _grouped("experts_gate_up", "experts_gate_up", phase, local, hit / ep, h,
                            2 * f),
                   _elementwise("moe_mask_gate_up", "moe_mask", phase, pairs, 2 * f, reads=1,
                                writes=1, flops_per=0),
                   _elementwise("activation", "activation", phase, local, f, reads=reads,
                                writes=writes, flops_per=per_el),
                   _grouped("experts_down", "experts_down", phase, local, hit / ep, f, h),
                   _elementwise("moe_mask_down", "moe_mask", phase, pairs, h, reads=1,
                                writes=1, flops_per=0),
                   _elementwise("moe_unpermute", "moe_copy", phase, pairs, h, reads=1,
                                writes=1, flops_per=0)]
    if m.expert_bias:  # each GEMM's per-expert bias gathered and added; the clamped gate's
        # clamps, scaled sigmoid and (up + 1): two passes beyond SwiGLU's one
        bias = [_elementwise(f"{g.name}_bias", "moe_copy", phase, pairs, g.attrs["d_out"],
                             reads=2, writes=1, flops_per=1)
                for g in experts if g.name in ("experts_gate_up", "experts_down")]
        clamp = [_elementwise(f"gate_clamp_{i}", "activation", phase, pairs, f, reads=reads,
                              writes=writes, flops_per=per_el) for i in (1, 2)]
        experts = [*experts, *bias, *clamp]
    out = [*_router(dep, phase, t), *experts,
           _elementwise("moe_combine", "moe_copy", phase, pairs, h, reads=2, writes=1,
                        flops_per=2)]
    if m.shared_expert_ffn:
        out += _shared_expert(dep, phase, t, gated=m.shared_expert_gate)
    return out


def _router(dep: Deployment, phase: str, t: int) -> list[Node]:
    """The router's GEMM (in float32 with its weights cast at each call, DeepSeek's) and
    its routing: softmax or sigmoid, top-k, renormalized; within the best groups of
    experts (DeepSeek's `n_group`), the groups' scores, their top-k, a mask and its fill
    besides: two more passes over (tokens, experts) and about ten more kernels; Phi-3.5-MoE's
    sparsemixer, top-1 twice (a max, |scores| clamped, the gap divided and compared, the
    mask filled, softmax, gather; the first pick scattered out): six more passes and about
    sixteen more kernels than a top-k softmax (transformers' `sparsemixer`, eval)."""
    m, h, e = dep.model, dep.model.hidden_size, dep.model.num_experts
    router = _linear("router", "router", phase, t, h, e, bias=m.expert_bias)
    if m.router_fp32:  # weights read, written in fp32 and read again; fp32 in and out
        router.bytes_read += h * e * (BF16_BYTES + 4) + t * h * 4
        router.bytes_written += h * e * 4 + t * e * 2
        router.launches += 2
    passes = 4 if m.group_routing else 8 if m.sparse_mixer else 2
    routing = _elementwise("routing", "routing", phase, t, e, reads=passes, writes=passes,
                           flops_per=5 * passes)
    routing.launches += 10 if m.group_routing else 16 if m.sparse_mixer else 0
    return [router, routing]


def _shared_expert(dep: Deployment, phase: str, t: int, *, gated: bool) -> list[Node]:
    """A shared expert beside the routed ones: its gated MLP on every token, `gated` by a
    sigmoid of one output (Qwen2-MoE; Llama 4's is not), added to the experts' sum."""
    h, reads, writes, per_el = dep.model.hidden_size, *ELEMENTWISE["activation"]
    fs = max(1, dep.model.shared_expert_ffn // dep.dense_tp)
    gate = [_linear("shared_expert_gate", "router", phase, t, h, 1),
            _scale("shared_expert_scale", phase, t, h)] if gated else []
    return [_linear("shared_gate_proj", "gate_proj", phase, t, h, fs),
            _linear("shared_up_proj", "up_proj", phase, t, h, fs),
            _elementwise("shared_activation", "activation", phase, t, fs, reads=reads,
                         writes=writes, flops_per=per_el),
            _linear("shared_down_proj", "down_proj", phase, t, fs, h),
            *gate,
            _elementwise("shared_add", "moe_copy", phase, t, h, reads=2, writes=1,
                         flops_per=1)]


def _dense_moe(dep: Deployment, phase: str, t: int) -> list[Node]:
    """Llama 4's mixture of experts as transformers runs it (Llama4TextMoe): the router's
    GEMM, top-k and sigmoid scores over every expert (zero off the top k); the tokens
    repeated once per expert and scaled by their scores; each projection one torch.bmm
    over all experts, every expert through every token: equal problems, not a grouped
    GEMM's ragged ones (`experts_bmm`: a decode step streams every expert's weights); the
    experts' outputs summed; an ungated shared expert beside them, added."""
    m, h = dep.model, dep.model.hidden_size
    e, f = m.num_experts // dep.parallel.ep, dep.expert_ffn_per_rank  # (the rank's experts)
    rows = e * t
    reads, writes, per_el = ELEMENTWISE["activation"]
    return [*_router(dep, phase, t),
            _elementwise("moe_repeat", "moe_copy", phase, rows, h, reads=1, writes=1,
                         flops_per=0),
            _elementwise("moe_scale", "moe_copy", phase, rows, h, reads=2, writes=1,
                         flops_per=1),
            _experts_bmm("experts_gate_up", phase, t, e, h, 2 * f),
            _elementwise("activation", "activation", phase, rows, f, reads=reads,
                         writes=writes, flops_per=per_el),
            _experts_bmm("experts_down", phase, t, e, f, h),
            _elementwise("moe_combine", "moe_copy", phase, rows, h, reads=1, writes=1,
                         flops_per=1),
            *_shared_expert(dep, phase, t, gated=False)]


def _mlp(dep: Deployment, phase: str, t: int, sparse: bool = True) -> list[Node]:
    """Gate and up (one fused GEMM, or two), the gated activation, down; or a plain MLP:
    up (c_fc), the activation, down (c_proj); or a mixture of experts (`_moe`; `sparse`
    off: a dense layer of one, at its dense width)."""
    m, f, h = dep.model, dep.ffn_per_rank, dep.model.hidden_size
    if m.is_moe and sparse:
        return _moe(dep, phase, t)
    if m.dense_ffn:
        f = m.dense_ffn // dep.dense_tp
    if not m.gated_mlp:
        return [_linear("c_fc", "up_proj", phase, t, h, f, m.qkv_bias),
                _elementwise("activation", "activation", phase, t, f, reads=1, writes=1,
                             flops_per=8),
                _linear("c_proj", "down_proj", phase, t, f, h, m.qkv_bias)]
    if m.fused_gate_up:
        out = [_linear("gate_up_proj", "gate_up_proj", phase, t, h, 2 * f)]
    else:
        out = [_linear("gate_proj", "gate_proj", phase, t, h, f),
               _linear("up_proj", "up_proj", phase, t, h, f)]
    act = "geglu" if m.activation == "gelu_tanh" else "activation"
    reads, writes, per = ELEMENTWISE[act]
    return out + [_elementwise("activation", act, phase, t, f, reads=reads, writes=writes,
                               flops_per=per),
                  _linear("down_proj", "down_proj", phase, t, f, h)]


def _attention_forms(dep: Deployment, phase: str, batch: int, q_len: int, ctx: int,
                     static: bool, window: int | None, all_forms: bool) -> list[Node]:
    """A layer's cache handling and attention: over every key, or (a sliding layer of a
    windowed engine) its two forms, before and past the window, each weighted by its
    share (`Deployment.window_weights`; `all_forms`: both at weight 1)."""
    if window is None or (phase == "decode" and dep.engine_record.masked_cache):
        # (a static sliding cache is attended whole, masked, at every step: decode_context)
        return _cache_attention(dep, phase, batch, q_len, ctx, static)
    full, slide = (1, 1) if all_forms else dep.window_weights[PHASE_INDEX[phase]]
    # past the window: the prompt's keys (prefill) or the window's (a decode step, whose
    # DynamicCache concatenates the new key to the window's last window - 1)
    forms = ((FULL_CONTEXT, "full_context", full,
              _cache_attention(dep, phase, batch, q_len, ctx, static)),
             (SLIDING, "sliding_window", slide,
              _cache_attention(dep, phase, batch, q_len,
                               q_len if phase == "prefill" else window, True,
                               append_ctx=window - 1)))
    out = []
    for form, form_name, weight, nodes in forms:
        if weight or all_forms:
            for node in nodes:
                node.attrs["window"] = form
            out.append(Node(form_name, "window", phase, count=weight, children=nodes))
    return out


def _layer(dep: Deployment, phase: str, batch: int, q_len: int, ctx: int, count: int,
           all_forms: bool = False, kind: tuple[bool, bool, bool] = (True, True, True),
           name: str = "layer") -> Node:
    """`count` layers of one kind (sliding, rope, sparse): whether they attend the model's
    sliding window (where the engine applies one), apply RoPE and run a mixture of
    experts (`ModelSpec.layer_kinds`)."""
    m = dep.model
    h, t, tp = m.hidden_size, batch * q_len, dep.parallel.tp
    sliding, rope, sparse = kind
    engine_window = dep.window
    window = engine_window if sliding else None
    # a layer that attends every key in a model whose other layers slide: its decode
    # steps read the whole live prefix (`attrs["context"]`: the table's full context)
    full_in_windowed = not sliding and engine_window is not None
    if full_in_windowed and phase == "decode":
        ctx = decode_context(dep, full=True)
    static = dep.engine_record.masked_cache and (phase == "decode"
                                                or dep.engine_record.masked_prefill)
    layer = Node(name, "layer", phase, count=count, tokens=t, ranks=tp)
    if m.pre_norms:
        layer.add(_norm("input_norm", phase, t, h, m.norm_kernels))
    if m.mla is not None:
        layer.add(*_latent_attention(dep, phase, batch, q_len, ctx, static))
    else:
        layer.add(*_qkv(dep, phase, batch, t, rope),
                  *_attention_forms(dep, phase, batch, q_len, ctx, static, window, all_forms))
    layer.add(_linear("o_proj", "o_proj", phase, t, dep.heads_per_rank * m.v_head_dim, h,
                      m.o_bias))
    if tp > 1 and not dep.attention_whole:
        layer.add(_allreduce(phase, t, h, tp, "attn"))
    if m.post_norms:
        layer.add(_norm("post_attn_norm", phase, t, h, m.norm_kernels))
    layer.add(*_residual(dep, "attn_residual", phase, t))
    if m.pre_norms and not m.parallel_block:  # (a parallel block's MLP reads input_norm's)
        layer.add(_norm("post_norm", phase, t, h, m.norm_kernels))
    layer.add(*_mlp(dep, phase, t, sparse))
    if tp > 1 and (m.is_moe and sparse or dep.dense_tp > 1):  # (the experts' sum)
        layer.add(_allreduce(phase, t, h, tp, "mlp"))
    if m.post_norms:
        layer.add(_norm("post_mlp_norm", phase, t, h, m.norm_kernels))
    layer.add(*_residual(dep, "mlp_residual", phase, t))
    if full_in_windowed:
        for _, _, node in layer.walk():
            node.attrs["context"] = "full"
    per_weight = dep.expert_weight_bytes
    if m.fp8_weights or per_weight < BF16_BYTES:
        for _, _, node in layer.walk():
            if node.kind in FP8_LINEAR_OF and m.fp8_weights:
                _as_fp8(node)
            elif node.kind in GROUPED_KINDS + ("experts_batched",) \
                    and per_weight < BF16_BYTES:
                _quantized_experts(node, per_weight)
    return layer


# the projections an FP8 checkpoint stores in FP8 (the LM head, the router and the
# experts stay 16-bit: transformers' fbgemm_fp8 and finegrained FP8 skip `lm_head`)
FP8_LINEAR_OF = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                 "down_proj", "qkv_proj", "gate_up_proj")


def _as_fp8(node: Node) -> None:
    """A projection of FP8 weights (one byte each, a float scale per output row) run as
    row-wise FP8: each token's row scaled by its own max and cast to e4m3, one FP8 GEMM
    with both scales (`fp8_linear`; the module sampler's op)."""
    d_in, d_out, t = node.attrs["d_in"], node.attrs["d_out"], node.tokens
    node.kind = "fp8_linear"
    node.launches = LAUNCHES["fp8_linear"]
    node.bytes_read = d_in * d_out + 4 * d_out + 2 * t * d_in * BF16_BYTES
    node.bytes_written = t * d_in + t * d_out * BF16_BYTES


def _quantized_experts(node: Node, per_weight: float) -> None:
    """Experts stored at `per_weight` bytes a weight (an FP8 checkpoint's: 1; gpt-oss's
    MXFP4 under vLLM's fused MoE: 4.25 bits): their weights read at that (and, in
    generate()'s `batched_mm`, copied at that), priced as the bf16 grouped or batched GEMMs
    piep samples (no FP8 or MXFP4 grouped kernel is sampled: the answer says so)."""
    a = node.attrs
    weights = (a["experts"] if node.kind in GROUPED_KINDS else node.tokens) \
        * a["d_in"] * a["d_out"]
    copies = 2 if node.kind == "experts_batched" else 1  # (read, copied, read again)
    node.bytes_read -= copies * weights * (BF16_BYTES - per_weight)
    node.bytes_written -= (copies - 1) * weights * (BF16_BYTES - per_weight)


def _layer_name(kind: tuple[bool, bool, bool], kinds: list) -> str:
    """'layer' where a stage's layers are alike; else what sets these apart
    ('layer_sliding', 'layer_global', 'layer_nope', ...)."""
    if len(kinds) == 1:
        return "layer"
    sliding, rope, sparse = kind
    parts = []
    if len({k[0] for k, _ in kinds}) > 1:
        parts.append("sliding" if sliding else "global")
    if len({k[1] for k, _ in kinds}) > 1:
        parts.append("rope" if rope else "nope")
    if len({k[2] for k, _ in kinds}) > 1:
        parts.append("sparse" if sparse else "dense")
    return "layer_" + "_".join(parts)


def _stage(dep: Deployment, index: int, phase: str, batch: int, q_len: int, ctx: int,
           all_forms: bool = False) -> Node:
    m, p = dep.model, dep.parallel
    h, tp = m.hidden_size, p.tp
    layers = dep.stage_layers()[index]
    stage = Node(f"stage{index}", "stage", phase, ranks=tp, tokens=batch * q_len,
                 attrs={"layers": layers})
    if index == 0:
        t = batch * q_len
        stage.add(_embedding(phase, t, h))
        if m.scaled_embeddings:
            stage.add(_scale("embedding_scale", phase, t, h))
    first = sum(dep.stage_layers()[:index])
    kinds = m.layer_kinds(range(first, first + layers))
    for kind, count in kinds:
        stage.add(_layer(dep, phase, batch, q_len, ctx, count, all_forms, kind,
                         _layer_name(kind, kinds)))
    last = index == p.pp - 1
    if not last:
        size = batch * q_len * h * BF16_BYTES
        stage.add(Node(f"send_to_stage{index + 1}", "p2p", phase, comm_bytes=size,
                       bytes_read=size, group_size=2, tokens=batch * q_len, launches=1))
        return stage
    # LM head on the last position only (prefill) or the one new token (decode)
    v = dep.vocab_per_rank
    final = _elementwise("final_norm", "final_norm", phase, batch, h, reads=1, writes=1,
                         flops_per=4)
    final.launches = m.norm_kernels  # (the family's norm, as the layers')
    stage.add(final, _linear("lm_head", "lm_head", phase, batch, h, v))
    if m.logit_scale:
        stage.add(_scale("logit_scale", phase, batch, v))
    if m.logit_cap:  # divide, tanh, multiply
        cap = _elementwise("logit_softcap", "scale", phase, batch, v, reads=3, writes=3,
                           flops_per=10)
        cap.launches = 3
        stage.add(cap)
    if dep.dense_tp > 1:
        size = batch * m.vocab_size * BF16_BYTES
        stage.add(Node("allgather_logits", "allgather", phase, comm_bytes=size,
                       bytes_read=batch * v * BF16_BYTES, bytes_written=size, group_size=tp,
                       tokens=batch, launches=LAUNCHES["allgather"]))
    stage.add(_sampling(phase, batch, m.vocab_size))
    if p.pp > 1:
        stage.add(Node("send_tokens_to_stage0", "p2p", phase, comm_bytes=batch * TOKEN_BYTES,
                       bytes_read=batch * TOKEN_BYTES, group_size=2, tokens=batch, launches=1))
    return stage


def decode_context(dep: Deployment, full: bool = False) -> int:
    """Keys per query of a decode step: graph mode attends over the whole static cache
    (masked; a sliding window's cache holds the window); eager over the live prefix, whose
    mean over steps 1..gen-1 is prompt + gen/2 (attention cost is linear in it), over the
    steps before the window where the engine applies one. `full`: of a layer that attends
    every key in a model whose other layers slide."""
    w, window = dep.workload, None if full else dep.window
    if w.mode == "graph":
        return w.context_len if window is None else min(w.context_len, window)
    return w.prompt_len + (dep.full_context_steps(window) + 1) // 2


def _fuse_pointwise(step: Node) -> None:
    """A compiled step's pointwise leaves: one fused kernel each (`attrs["fused"]`), priced
    by the engine profile's fused-kernel time rather than by eager modules."""
    for _, _, node in step.walk():
        if node.is_leaf and node.kind in ELEMENTWISE:
            node.attrs["fused"] = True
            node.launches = 1


def _phase(dep: Deployment, phase: str, all_forms: bool = False) -> Node:
    w, p = dep.workload, dep.parallel
    b = dep.replica_batch
    if phase == "prefill":
        # a static cache is attended whole already in the prefill
        ctx = w.context_len if dep.engine_record.masked_cache else w.prompt_len
        node = Node("prefill", "phase", "prefill", tokens=b * w.prompt_len)
        node.add(*(_stage(dep, i, "prefill", b, w.prompt_len, ctx, all_forms)
                   for i in range(p.pp)))
        return node
    ctx = decode_context(dep)
    node = Node("decode", "phase", "decode", tokens=b * max(w.gen_len - 1, 0))
    step = Node("step", "step", "decode", count=max(w.gen_len - 1, 0), tokens=b,
                context_len=ctx)
    step.add(*(_stage(dep, i, "decode", b, 1, ctx, all_forms) for i in range(p.pp)))
    if dep.engine_record.compiled_decode:
        _fuse_pointwise(step)
    if step.count:
        node.add(step)
    return node


def build_tree(dep: Deployment, all_forms: bool = False) -> Node:
    """The model tree of `dep`. A windowed engine's layers hold the attention forms its
    workload runs, each weighted by its share (`Deployment.window_weights`); `all_forms`: both forms
    at weight 1, tagged in `attrs["window"]` (the leaf table's workload-free skeleton)."""
    p = dep.parallel
    root = Node("deployment", "deployment", ranks=p.world_size,
                attrs={"model": dep.model.name, "tp": p.tp, "pp": p.pp, "dp": p.dp,
                       "batch": dep.workload.batch, "prompt_len": dep.workload.prompt_len,
                       "gen_len": dep.workload.gen_len, "mode": dep.workload.mode,
                       "gpu": dep.gpu.name})
    replica = Node("replica", "replica", count=p.dp, ranks=p.tp * p.pp,
                   tokens=dep.replica_batch)
    replica.add(_phase(dep, "prefill", all_forms), _phase(dep, "decode", all_forms))
    _mark_sharded_calls(dep, replica)
    return root.add(replica)


# the modules transformers' tensor-parallel plan shards in a Llama-family model
# (LlamaConfig.base_model_tp_plan: q/k/v/gate/up colwise, o/down rowwise, each rowwise one
# followed by an all-reduce; LlamaForCausalLM._tp_plan: lm_head colwise with its logits
# gathered); counted by piep.sampling.tp_census: 7 a layer and one outside
SHARDED_KINDS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                 "lm_head", "qkv_proj", "gate_up_proj")


def _mark_sharded_calls(dep: Deployment, tree: Node) -> None:
    """Each leaf's calls of a module transformers' tensor-parallel plan hooks
    (`attrs["tp_calls"]`, the host time `tp_call_host_s` per call at tp > 1): a sharded
    projection, and a mixture of experts' experts module where the plan shards it
    (`moe_tp_experts`, one call a layer: counted on its down projection); under its
    expert-parallel plan, the router (`ep_router`) and the experts module only."""
    ep_plan = dep.hf_ep_plan
    experts = dep.model.is_moe and (ep_plan or not dep.experts_whole)
    for _, _, node in tree.walk():
        if node.is_leaf and ((node.kind in SHARDED_KINDS and not ep_plan)
                             or (experts and node.name == "experts_down")
                             or (ep_plan and node.name == "router")):
            node.attrs["tp_calls"] = 1
