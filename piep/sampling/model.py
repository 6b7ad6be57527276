"""The reference decoder of SPEC §3: Llama family (RMSNorm, RoPE, GQA through SDPA, SwiGLU),
static KV cache, Megatron-style tensor parallelism and contiguous pipeline stages.

One `StageModel` per process: the layers of its pipeline stage, sharded for its TP rank.
Weights are either created on the device (random normal, never staged through host RAM)
or sliced from a full Hugging Face state dict (tests, real checkpoints).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Mapping

import torch
import torch.distributed as dist
import torch.nn.functional as F

from piep.core.config import ModelSpec


@dataclass
class Topology:
    """Where this process sits: rank = dp_idx*(pp*tp) + pp_idx*tp + tp_idx."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    rank: int = 0
    tp_group: object | None = None

    @property
    def tp_rank(self) -> int:
        return self.rank % self.tp

    @property
    def pp_rank(self) -> int:
        return (self.rank // self.tp) % self.pp

    @property
    def dp_rank(self) -> int:
        return self.rank // (self.tp * self.pp)

    def peer(self, pp_rank: int) -> int:
        """Global rank of the same TP rank in another stage of this replica."""
        return self.dp_rank * self.tp * self.pp + pp_rank * self.tp + self.tp_rank

    @property
    def first(self) -> bool:
        return self.pp_rank == 0

    @property
    def last(self) -> bool:
        return self.pp_rank == self.pp - 1


def make_tp_groups(topo: Topology, world: int) -> None:
    """Every process creates every TP group (torch.distributed requires it), keeps its own."""
    if topo.tp == 1:
        return
    for start in range(0, world, topo.tp):
        ranks = list(range(start, start + topo.tp))
        group = dist.new_group(ranks)
        if topo.rank in ranks:
            topo.tp_group = group


class WeightSource:
    """Random normal weights made on the device, or slices of a full state dict."""

    def __init__(self, spec: ModelSpec, device, dtype, *, state: Mapping | None = None,
                 seed: int = 0):
        self.spec, self.device, self.dtype, self.state = spec, device, dtype, state
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed)

    def get(self, name: str, shape: tuple[int, ...], rows: slice | None = None,
            cols: slice | None = None, *, norm: bool = False) -> torch.Tensor:
        if self.state is not None:
            full = self.state[name]
            if rows is not None:
                full = full[rows]
            if cols is not None:
                full = full[:, cols]
            return full.to(device=self.device, dtype=self.dtype).contiguous()
        if norm:
            return torch.ones(shape, device=self.device, dtype=self.dtype)
        t = torch.empty(shape, device=self.device, dtype=self.dtype)
        t.normal_(0.0, self.spec.initializer_range, generator=self.gen)
        return t


PROFILE_SPANS = False  # the in-situ check turns on named ranges for torch.profiler


def _span(name: str):
    if PROFILE_SPANS:
        return torch.profiler.record_function(f"piep:{name}")
    return nullcontext()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    var = x.float().pow(2).mean(-1, keepdim=True)
    return weight * (x.float() * torch.rsqrt(var + eps)).to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def split_heads(x: torch.Tensor, heads: int, head_dim: int) -> torch.Tensor:
    """(b, t, heads*d) projection output -> (b, heads, t, d) view."""
    b, t, _ = x.shape
    return x.view(b, t, heads, head_dim).transpose(1, 2)


def apply_rope(q, k, cos, sin):
    """Rotary embedding of q and k (the kernels of the tree's `rope` leaf)."""
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def attention_block(q, k, v, k_cache, v_cache, write_pos, attend) -> torch.Tensor:
    """KV-cache write, attention and the output reshape (the tree's `attention` leaf)."""
    b, hq, t, d = q.shape
    write_pos(k_cache, k)
    write_pos(v_cache, v)
    o = attend(q, k, v, k_cache, v_cache)
    return o.transpose(1, 2).reshape(b, t, hq * d)


def prefill_ops(p: int):
    """(write, attend) of a prefill over `p` prompt positions."""
    def write(cache, new):
        cache[:, :, :p] = new

    def attend(q, k, v, kc, vc):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                              enable_gqa=q.shape[1] != k.shape[1])
    return write, attend


def static_decode_ops(pos: torch.Tensor, positions: torch.Tensor):
    """(write, attend) of a graph-mode decode step: `pos` a 1-element device tensor,
    attention over the whole static cache with a mask of live positions."""
    mask = (positions <= pos)[None, None, None, :]

    def write(cache, new):
        cache.index_copy_(2, pos, new)

    def attend(q, k, v, kc, vc):
        return F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask,
                                              enable_gqa=q.shape[1] != kc.shape[1])
    return write, attend


def eager_decode_ops(pos: int):
    """(write, attend) of an eager decode step over the live prefix of the cache."""
    def write(cache, new):
        cache[:, :, pos:pos + 1] = new

    def attend(q, k, v, kc, vc):
        return F.scaled_dot_product_attention(q, kc[:, :, :pos + 1], vc[:, :, :pos + 1],
                                              enable_gqa=q.shape[1] != kc.shape[1])
    return write, attend


class Layer:
    def __init__(self, spec: ModelSpec, topo: Topology, ws: WeightSource, index: int):
        self.spec, self.topo = spec, topo
        tp, r = topo.tp, topo.tp_rank
        d = spec.head_dim
        self.hq = spec.num_heads // tp
        self.hkv = max(1, spec.num_kv_heads // tp)
        kv_first = (r * self.hq * spec.num_kv_heads) // spec.num_heads
        q_rows = slice(r * self.hq * d, (r + 1) * self.hq * d)
        kv_rows = slice(kv_first * d, (kv_first + self.hkv) * d)
        f = spec.intermediate_size // tp
        f_rows = slice(r * f, (r + 1) * f)
        h = spec.hidden_size
        p = f"model.layers.{index}."
        self.in_norm = ws.get(p + "input_layernorm.weight", (h,), norm=True)
        self.post_norm = ws.get(p + "post_attention_layernorm.weight", (h,), norm=True)
        self.wq = ws.get(p + "self_attn.q_proj.weight", (self.hq * d, h), rows=q_rows)
        self.wk = ws.get(p + "self_attn.k_proj.weight", (self.hkv * d, h), rows=kv_rows)
        self.wv = ws.get(p + "self_attn.v_proj.weight", (self.hkv * d, h), rows=kv_rows)
        self.wo = ws.get(p + "self_attn.o_proj.weight", (h, self.hq * d), cols=q_rows)
        self.bq = self.bk = self.bv = self.bo = None
        if spec.qkv_bias:
            self.bq = ws.get(p + "self_attn.q_proj.bias", (self.hq * d,), rows=q_rows)
            self.bk = ws.get(p + "self_attn.k_proj.bias", (self.hkv * d,), rows=kv_rows)
            self.bv = ws.get(p + "self_attn.v_proj.bias", (self.hkv * d,), rows=kv_rows)
        if spec.o_bias:  # row-parallel bias is added once, by rank 0, before the reduce
            bo = ws.get(p + "self_attn.o_proj.bias", (h,))
            self.bo = bo if r == 0 else torch.zeros_like(bo)
        self.wg = ws.get(p + "mlp.gate_proj.weight", (f, h), rows=f_rows)
        self.wu = ws.get(p + "mlp.up_proj.weight", (f, h), rows=f_rows)
        self.wd = ws.get(p + "mlp.down_proj.weight", (h, f), cols=f_rows)

    timer = None  # a CollectiveTimer while the waiting-time sampler runs

    def allreduce(self, x: torch.Tensor) -> torch.Tensor:
        if self.topo.tp > 1:
            if self.timer is not None:
                self.timer.start()
            dist.all_reduce(x, group=self.topo.tp_group)
            if self.timer is not None:
                self.timer.stop()
        return x

    def forward(self, x, cos, sin, k_cache, v_cache, write_pos, attend) -> torch.Tensor:
        b, t, _ = x.shape
        d = self.spec.head_dim
        with _span("rmsnorm"):
            h = rms_norm(x, self.in_norm, self.spec.rms_norm_eps)
        with _span("q_proj"):
            q = F.linear(h, self.wq, self.bq).view(b, t, self.hq, d).transpose(1, 2)
        with _span("k_proj"):
            k = F.linear(h, self.wk, self.bk).view(b, t, self.hkv, d).transpose(1, 2)
        with _span("v_proj"):
            v = F.linear(h, self.wv, self.bv).view(b, t, self.hkv, d).transpose(1, 2)
        with _span("rope"):
            q, k = apply_rope(q, k, cos, sin)
        with _span("attention"):
            o = attention_block(q, k, v, k_cache, v_cache, write_pos, attend)
        with _span("o_proj"):
            o = F.linear(o, self.wo, self.bo)
        x = x + self.allreduce(o)
        with _span("rmsnorm"):
            h = rms_norm(x, self.post_norm, self.spec.rms_norm_eps)
        with _span("gate_proj"):
            g = F.linear(h, self.wg)
        with _span("up_proj"):
            u = F.linear(h, self.wu)
        with _span("activation"):
            a = F.silu(g) * u
        with _span("down_proj"):
            y = F.linear(a, self.wd)
        return x + self.allreduce(y)


class StageModel:
    """The layers of one pipeline stage for one TP rank, with its static KV cache."""

    def __init__(self, spec: ModelSpec, topo: Topology, *, batch: int, max_len: int,
                 device, dtype=torch.bfloat16, state: Mapping | None = None, seed: int = 0):
        self.spec, self.topo, self.device, self.dtype = spec, topo, device, dtype
        self.batch, self.max_len = batch, max_len
        per = spec.num_layers // topo.pp
        first_layer = topo.pp_rank * per
        # a different stream of random weights per stage and TP rank
        ws = WeightSource(spec, device, dtype, state=state,
                          seed=seed * 1000 + topo.pp_rank * 64 + topo.tp_rank)
        h = spec.hidden_size
        self.embed = ws.get("model.embed_tokens.weight", (spec.vocab_size, h)) \
            if topo.first else None
        self.layers = [Layer(spec, topo, ws, first_layer + i) for i in range(per)]
        self.vocab_rank = -(-spec.vocab_size // topo.tp)
        if topo.last:
            self.norm = ws.get("model.norm.weight", (h,), norm=True)
            head_name = "model.embed_tokens.weight" if spec.tie_word_embeddings \
                else "lm_head.weight"
            v0 = topo.tp_rank * self.vocab_rank
            v1 = min(v0 + self.vocab_rank, spec.vocab_size)
            head = ws.get(head_name, (v1 - v0, h), rows=slice(v0, v1))
            if head.shape[0] < self.vocab_rank:  # pad the last shard; padding never wins argmax
                pad = torch.zeros(self.vocab_rank - head.shape[0], h, device=device, dtype=dtype)
                head = torch.cat([head, pad])
            self.lm_head = head
        hkv = self.layers[0].hkv if self.layers else max(1, spec.num_kv_heads // topo.tp)
        shape = (len(self.layers), batch, hkv, max_len, spec.head_dim)
        self.k_cache = torch.zeros(shape, device=device, dtype=dtype)
        self.v_cache = torch.zeros(shape, device=device, dtype=dtype)
        inv = 1.0 / (spec.rope_theta ** (torch.arange(0, spec.head_dim, 2, device=device,
                                                      dtype=torch.float32) / spec.head_dim))
        pos = torch.arange(max_len, device=device, dtype=torch.float32)
        freqs = torch.outer(pos, inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos_table = emb.cos().to(dtype)
        self.sin_table = emb.sin().to(dtype)
        self.positions = torch.arange(max_len, device=device)

    # --- phases ------------------------------------------------------------------------
    def _layers(self, x, cos, sin, write, attend) -> torch.Tensor:
        """Run every layer of the stage; phases differ only in how they write the cache
        and attend."""
        for i, layer in enumerate(self.layers):
            x = layer.forward(x, cos, sin, self.k_cache[i], self.v_cache[i], write, attend)
        return x

    def embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.embedding(tokens, self.embed)

    def prefill(self, x: torch.Tensor) -> torch.Tensor:
        """Hidden states of the prompt through this stage; fills cache[:, :, :, :P]."""
        p = x.shape[1]
        cos = self.cos_table[:p][None, None]
        sin = self.sin_table[:p][None, None]
        return self._layers(x, cos, sin, *prefill_ops(p))

    def decode_static(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """One decode step with static shapes (graph mode): `pos` is a 1-element device
        tensor; attention runs over the whole cache with a mask of live positions."""
        cos = self.cos_table.index_select(0, pos)[None, None]
        sin = self.sin_table.index_select(0, pos)[None, None]
        return self._layers(x, cos, sin, *static_decode_ops(pos, self.positions))

    def decode_eager(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        """One decode step over the live prefix of the cache only (eager mode)."""
        cos = self.cos_table[pos:pos + 1][None, None]
        sin = self.sin_table[pos:pos + 1][None, None]
        return self._layers(x, cos, sin, *eager_decode_ops(pos))

    def logits(self, x_last: torch.Tensor) -> torch.Tensor:
        """Full-vocabulary logits of the last position: column-parallel head + AllGather."""
        h = rms_norm(x_last, self.norm, self.spec.rms_norm_eps)
        local = F.linear(h, self.lm_head)
        if self.topo.tp == 1:
            return local[..., :self.spec.vocab_size]
        parts = [torch.empty_like(local) for _ in range(self.topo.tp)]
        dist.all_gather(parts, local, group=self.topo.tp_group)
        return torch.cat(parts, dim=-1)[..., :self.spec.vocab_size]

    def weight_bytes(self) -> int:
        tensors = [self.embed] if self.embed is not None else []
        for layer in self.layers:
            tensors += [t for t in vars(layer).values() if isinstance(t, torch.Tensor)]
        if self.topo.last:
            tensors += [self.norm, self.lm_head]
        return sum(t.numel() * t.element_size() for t in tensors)


def greedy(logits: torch.Tensor) -> torch.Tensor:
    return logits.argmax(dim=-1)


def full_state_from_hf(model) -> dict[str, torch.Tensor]:
    """A Hugging Face LlamaForCausalLM's weights under the names StageModel reads."""
    return {k: v.detach() for k, v in model.state_dict().items()}


def check_finite(t: torch.Tensor, what: str) -> None:
    if not torch.isfinite(t.float()).all():
        raise FloatingPointError(f"non-finite values in {what}")

