"""Frozen, keyword-only, validated descriptions of what piep reasons about.

`ModelSpec` is read from a Hugging Face ``config.json`` through one alias table;
`Parallel` and `Workload` describe the layout and the work. Construction validates
and has no side effects.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, fields as dataclass_fields, replace
from functools import lru_cache
from typing import Any, Mapping

from piep.core.errors import ConfigError
from piep.core.families import (ACTIVATIONS, CONFIG_DEFAULTS, FAMILIES, FIRST_DENSE, MOE_PRICED,
                                MOE_TYPES, PRICED, dense_layers, nope_layers, rotary_share,
                                sliding_layers, softcapped)

BF16_BYTES = 2
# what a refused mixture of experts is told piep prices instead
MOE_WORDS = f"mixtures of experts priced: {', '.join(sorted(MOE_PRICED))}; docs/models.md"
MXFP4_BYTES = 4.25 / 8  # a 4-bit weight and its block's 8-bit scale (one per 32)

# canonical field -> config.json keys, first found wins. One table for every family.
ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "num_heads": ("num_attention_heads", "n_head"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv"),
    "head_dim": ("head_dim",),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size"),
    "vocab_size": ("vocab_size",),
    "max_position": ("max_position_embeddings", "n_positions"),
    "rms_norm_eps": ("rms_norm_eps", "layer_norm_epsilon"),
    "rope_theta": ("rope_theta",),
    "attention_bias": ("attention_bias", "use_bias", "bias"),
    "tie_word_embeddings": ("tie_word_embeddings",),
    "sliding_window": ("sliding_window",),
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "experts_per_token": ("num_experts_per_tok", "moe_k", "moe_topk"),
    "expert_ffn": ("moe_intermediate_size",),
    "shared_expert_ffn": ("shared_expert_intermediate_size",),
    "initializer_range": ("initializer_range",),
    "hidden_act": ("hidden_act", "hidden_activation"),
    "torch_dtype": ("torch_dtype", "dtype"),
}
REQUIRED = ("hidden_size", "num_layers", "num_heads", "intermediate_size", "vocab_size")
# quantization_config quant_method -> what its weights are, in words
QUANT_METHODS = {"fp8": "FP8", "compressed-tensors": "compressed-tensors", "awq": "AWQ",
                 "gptq": "GPTQ", "bitsandbytes": "bitsandbytes", "mxfp4": "MXFP4",
                 "fbgemm_fp8": "FP8", "hqq": "HQQ", "eetq": "EETQ", "quanto": "quanto",
                 "torchao": "torchao", "aqlm": "AQLM", "bitnet": "BitNet"}
# what a quantized model's GEMMs would need sampled (what transformers 5.x runs for them),
# and its bits per weight (scales included where they are one per group of 128 or 32)
QUANT_KERNELS = {
    "FP8": "FP8 GEMMs (transformers runs DeepGEMM, or the kernels-community finegrained-fp8 "
           "Triton kernel fetched from the Hub)",
    "AWQ": "AWQ's int4 GEMMs", "GPTQ": "GPTQ's int4 GEMMs",
    "bitsandbytes": "bitsandbytes' int8/int4 kernels", "MXFP4": "MXFP4 GEMMs"}
QUANT_BITS = (("int4", 4.125), ("int8", 8.0), ("int2", 2.125), ("int3", 3.125),
              ("MXFP4", 4.25), ("FP8", 8.0))
_FLOAT_KEYS = ("rms_norm_eps", "rope_theta", "initializer_range")
_BOOL_KEYS = ("attention_bias", "tie_word_embeddings")


# the largest value of each size piep takes: far beyond any model or run, and bounds that
# keep every size's arithmetic (divisors, memory, tables) small and exact
LIMITS = {"hidden_size": 1 << 20, "num_layers": 1 << 14, "num_heads": 1 << 16,
          "num_kv_heads": 1 << 16, "head_dim": 1 << 16, "intermediate_size": 1 << 24,
          "vocab_size": 1 << 24, "max_position": 1 << 30, "num_experts": 1 << 16,
          "expert_ffn": 1 << 24, "shared_expert_ffn": 1 << 24,
          "experts_per_token": 1 << 16, "tp": 1 << 16, "pp": 1 << 14, "dp": 1 << 16, "ep": 1 << 16,
          "batch": 1 << 24, "prompt_len": 1 << 30, "gen_len": 1 << 30, "cache_len": 1 << 31}


def _shown(value: Any) -> str:
    """A value as an error shows it (a number of many digits by its size)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 15:
        return f"a {len(str(abs(value)))}-digit number"
    return repr(value)


def size_problem(name: str, value: Any, *, key: str | None = None) -> str | None:
    """Why `value` is no valid size `name` (an integer from 1 up to its LIMITS entry),
    or None; `key`: the name the user gave it by."""
    top = LIMITS.get(name)
    shown = key or name
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"{shown}={_shown(value)} must be an integer >= 1"
    if top is not None and value > top:
        return f"{shown}={_shown(value)} is beyond what piep prices (at most {top:,})"
    return None


def _positive_int(key: str, value: Any, problems: list[str]) -> int:
    """`value` where it is a valid size `key` (a canonical field), else 1 with the problem
    (named by the config.json key users know) added to `problems`."""
    problem = size_problem(key, value, key=ALIASES.get(key, (key,))[0])
    if problem:
        problems.append(problem)
        return 1
    return value


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """Shape of a dense decoder: Llama's layer, and what its family runs beyond it
    (`piep.core.families`: q/k norms, post-norms, fused projections, GeGLU, partial RoPE,
    sliding and NoPE layers, scalar multiplies)."""

    name: str
    model_type: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position: int = 4096
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    qkv_bias: bool = False
    o_bias: bool = False
    tie_word_embeddings: bool = False
    sliding_window: int | None = None
    num_experts: int = 1
    experts_per_token: int = 1
    # a routed expert's MLP width where it is not intermediate_size (Qwen MoE's
    # moe_intermediate_size), and a shared expert's beside them (0: none)
    expert_ffn: int | None = None
    shared_expert_ffn: int = 0
    initializer_range: float = 0.02
    # the checkpoint's dtype as its config states it (`torch_dtype`); the weights are
    # priced in bf16 whatever it is (the engines piep models run bf16)
    checkpoint_dtype: str | None = None
    # quantized weights in words (`quantization_config`); None: not quantized
    quantization: str | None = None
    # the encoders a multimodal config holds beside the decoder ("vision", "audio"): not
    # priced (an answer prices the text decoder on the prompt tokens it is given)
    encoders: tuple[str, ...] = ()
    # --- what the family's layer runs beyond Llama's (piep.core.families; defaults: Llama) ---
    qk_norm: str | None = None         # "head" | "whole": RMSNorm of q and k before RoPE
    pre_norms: bool = True             # RMSNorm before attention and before the MLP
    post_norms: bool = False           # RMSNorm of attention's and the MLP's outputs
    fused_qkv: bool = False            # one GEMM for q, k, v
    fused_gate_up: bool = False        # one GEMM for gate and up
    gated_mlp: bool = True             # gate x up (False: up, activation, down)
    parallel_block: bool = False       # attention and MLP from one norm, added together
    activation: str = "silu"           # the gated MLP's: "silu" | "gelu_tanh"
    rotary_dim: int | None = None      # the dims of a head RoPE rotates (None: all)
    # the layers that attend a sliding window where only some do (None: every layer
    # alike, sliding where `sliding_window` is set); the layers without RoPE
    sliding_layers: tuple[int, ...] | None = None
    nope_layers: tuple[int, ...] = ()
    scaled_embeddings: bool = False    # one multiply of the embeddings
    residual_scale: bool = False       # one multiply before each residual add
    logit_scale: bool = False          # one multiply of the logits
    query_scale: bool = False          # queries scaled by their positions after RoPE
    score_cap: bool = False            # attention scores soft-capped: eager attention
    logit_cap: bool = False            # final logits soft-capped (tanh)
    attention_sinks: bool = False      # eager attention with a sink logit per head
    expert_bias: bool = False          # experts and router with biases, a clamped gate
    dense_experts: bool = False        # every expert runs every token (Llama 4)
    # a mixture of experts' layers whose MLP is dense (DeepSeek's `first_k_dense_replace`,
    # Qwen MoE's `mlp_only_layers` and `decoder_sparse_step`, Llama 4's `moe_layers`), and
    # those MLPs' width where it is not intermediate_size (Llama 4's intermediate_size_mlp)
    dense_layers: tuple[int, ...] = ()
    dense_ffn: int | None = None
    # multi-head latent attention (DeepSeek V2/V3): (q_lora_rank, 0 where queries are
    # projected at once; kv_lora_rank; qk_rope_head_dim; v_head_dim); head_dim is the
    # queries' and keys' (qk_nope_head_dim + qk_rope_head_dim). None: q/k/v projections
    mla: tuple[int, int, int, int] | None = None
    # the router picks experts within its best groups (DeepSeek's n_group / topk_group:
    # sigmoid or softmax scores, the groups' scores, a mask): more routing kernels
    group_routing: bool = False
    # the router's GEMM in float32, its weights cast from bf16 at every call (DeepSeek)
    router_fp32: bool = False
    # Phi-3.5-MoE's sparsemixer routing (two masked top-1 passes): more routing kernels
    sparse_mixer: bool = False
    # the kernels each of its norms launches (piep.core.families.Family.norm_kernels)
    norm_kernels: int = 7
    rope_kernels: int = 10             # ... and its RoPE (Family.rope_kernels)
    # q/k norms and RoPE on the RoPE layers only, the queries' scale on the NoPE layers only
    nope_split: bool = False
    # a shared expert's output gated by a sigmoid of one more projection (Qwen2-MoE; False:
    # added as it is, DeepSeek's `n_shared_experts`)
    shared_expert_gate: bool = True
    # how unevenly a trained router spreads tokens over the experts: the Zipf exponent of
    # their popularity (0: uniform, as random weights route); a config states it as
    # `piep_routing_skew` (no Hugging Face config has such a key)
    routing_skew: float = 0.0

    def __post_init__(self) -> None:
        problems: list[str] = []
        for key in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim",
                    "intermediate_size", "vocab_size", "max_position", "num_experts",
                    "experts_per_token"):
            _positive_int(key, getattr(self, key), problems)
        if not problems:
            if self.num_heads % self.num_kv_heads:
                problems.append(f"num_attention_heads={self.num_heads} is not a multiple of "
                                f"num_key_value_heads={self.num_kv_heads}")
            if self.qk_norm not in (None, "head", "whole"):
                problems.append(f"qk_norm={self.qk_norm!r} is not 'head' or 'whole'")
            if self.activation not in set(ACTIVATIONS.values()):
                problems.append(f"activation={self.activation!r} is not one of "
                                f"{', '.join(sorted(set(ACTIVATIONS.values())))}")
            if self.rotary_dim is not None and not 0 < self.rotary_dim <= self.head_dim:
                problems.append(f"rotary_dim={self.rotary_dim} is not within head_dim="
                                f"{self.head_dim}")
            outside = [i for i in (*(self.sliding_layers or ()), *self.nope_layers,
                                   *self.dense_layers) if not 0 <= i < self.num_layers]
            if outside:
                problems.append(f"layer indices {outside[:3]} are outside the "
                                f"{self.num_layers} layers")
            if self.mla is not None and not (
                    all(isinstance(v, int) and v >= 0 for v in self.mla)
                    and min(self.mla[1:]) >= 1 and self.mla[2] < self.head_dim):
                problems.append(f"latent attention {self.mla} needs kv_lora_rank, "
                                f"qk_rope_head_dim and v_head_dim >= 1, the rotary dims "
                                f"below the query/key head dim {self.head_dim}")
            if self.dense_layers and not self.is_moe:
                problems.append("dense_layers apply to a mixture of experts")
            if self.experts_per_token > self.num_experts:
                problems.append(f"num_experts_per_tok={self.experts_per_token} exceeds "
                                f"num_local_experts={self.num_experts}")
            skew = self.routing_skew
            if isinstance(skew, bool) or not isinstance(skew, (int, float)) \
                    or not 0 <= skew <= 4:
                problems.append(f"piep_routing_skew={skew!r} is not a number in [0, 4] "
                                f"(a Zipf exponent of the experts' popularity; 0: uniform)")
            elif skew and (not self.is_moe or self.dense_experts):
                problems.append("piep_routing_skew applies to a mixture of experts whose "
                                "tokens reach only their routed experts")
        if problems:
            raise ConfigError(f"{self.name}: invalid config: " + "; ".join(problems))

    # --- derived shape -------------------------------------------------------------
    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def unpriced(self) -> str | None:
        """Why piep cannot price this model yet (every command refuses it), or None."""
        if self.is_moe and self.model_type not in MOE_PRICED:
            return (f"a mixture of experts ({self.num_experts} experts, "
                    f"{self.experts_per_token} per token) of model_type {self.model_type!r}: "
                    f"its experts and router are not modelled yet ({MOE_WORDS})")
        if self.quantization and not self.fp8_weights and not self.mxfp4_experts:
            method = self.quantization.split(" (")[0]
            bits = next((b for word, b in QUANT_BITS if word in method), None)
            # the layers' GEMMs at the quantized bits; embeddings and LM head stay 16-bit
            gib = (self.layers_params() * bits / 8 + BF16_BYTES * (
                self.embedding_params() + self.lm_head_params())) / 2 ** 30
            size = (f"; its weights take about {gib:.1f} GiB (layers at {bits:g} bits per "
                    f"weight)" if bits else "")
            return (f"quantized weights ({self.quantization}): piep prices bf16 weights only "
                    f"so far; missing: module samples of "
                    f"{QUANT_KERNELS.get(method.split()[0], 'its kernels')}{size}")
        return None

    @property
    def fp8_weights(self) -> bool:
        """Whether the layers' projections hold FP8 weights (priced as row-wise FP8 GEMMs:
        the tree's `fp8_linear`; the LM head and embeddings stay bf16)."""
        return bool(self.quantization) and self.quantization.startswith("FP8")

    @property
    def mxfp4_experts(self) -> bool:
        """Whether the checkpoint stores its experts in MXFP4 (gpt-oss): transformers
        dequantizes them to bf16 as it loads them where the `kernels` package (the Hub's
        MXFP4 Triton kernels) is missing (transformers 5.x, quantizer_mxfp4); vLLM's fused
        MoE runs them as stored (`Deployment.dequantized` says which)."""
        return self.model_type == "gpt_oss" and (self.quantization or "").startswith("MXFP4")

    @property
    def weight_bytes(self) -> float:
        """Bytes per weight of the layers' projections."""
        return 1.0 if self.fp8_weights else float(BF16_BYTES)

    @property
    def dtypes(self) -> dict[str, str]:
        """What an answer prices its weights and KV cache in (bf16, or the layers' FP8
        e4m3 weights of an FP8 checkpoint), and the checkpoint's own dtype where its
        config states one; as transformers loads it (`Deployment.dtypes`: as its engine
        does)."""
        return self.dtypes_as(dequantized=True)

    def dtypes_as(self, *, dequantized: bool) -> dict[str, str]:
        """`dtypes`, MXFP4 experts `dequantized` at load or kept as stored."""
        scales = "block scales" if "blocks" in (self.quantization or "") else "row-wise scales"
        weights = (f"fp8 e4m3 layers ({scales}), bf16 embeddings and head"
                   if self.fp8_weights else "bf16 (the MXFP4 experts dequantized at load)"
                   if self.mxfp4_experts and dequantized else
                   "MXFP4 experts (4.25 bits a weight), bf16 elsewhere"
                   if self.mxfp4_experts else "bf16")
        return {"weights": weights, "kv_cache": "bf16",
                **({"checkpoint": self.checkpoint_dtype} if self.checkpoint_dtype else {}),
                **({"quantization": self.quantization} if self.quantization else {})}

    @property
    def attention(self) -> str:
        if self.mla is not None:
            return "MLA"
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        return "MQA" if self.num_kv_heads == 1 else "GQA"

    @property
    def v_head_dim(self) -> int:
        """A head's width of values (and of the attention's output per head)."""
        return self.head_dim if self.mla is None else self.mla[3]

    def attention_params(self, tp: int = 1) -> int:
        """The weights of one layer's attention on one of `tp` ranks (heads split; a latent
        attention's down-projection of keys and values, and its norm, on every rank)."""
        h, heads = self.hidden_size, self.num_heads // tp
        if self.mla is not None:
            q_rank, kv_rank, rope, v = self.mla
            nope = self.head_dim - rope
            q = h * q_rank + q_rank + q_rank * heads * self.head_dim if q_rank \
                else h * heads * self.head_dim
            return (q + h * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v)
                    + heads * v * h)
        q, kv = heads * self.head_dim, max(1, self.num_kv_heads // tp) * self.head_dim
        attn = 2 * h * q + 2 * h * kv
        if self.qkv_bias:
            attn += q + 2 * kv
        if self.o_bias:
            attn += h
        return attn

    def mlp_params(self, sparse: bool = True, tp: int = 1, ep: int | None = None) -> int:
        """The weights of one layer's MLP on one of `tp` ranks: a mixture of experts'
        (`sparse`; routed experts split by width, or `ep` given: 1/ep of them whole; the
        router on every rank, a shared expert and its gate) or a dense one."""
        h, gates = self.hidden_size, 3 if self.gated_mlp else 2
        if not (self.is_moe and sparse):
            return gates * h * ((self.dense_ffn or self.intermediate_size) // tp)
        experts = self.routed_expert_params(tp, ep)
        shared = 3 * h * (self.shared_expert_ffn // tp) + (
            h if self.shared_expert_ffn and self.shared_expert_gate else 0)
        # (ERNIE 4.5 keeps its router's score bias as a parameter, the others as a buffer)
        score_bias = self.num_experts if self.model_type == "ernie4_5_moe" else 0
        return experts + h * self.num_experts + score_bias + shared

    def routed_expert_params(self, tp: int = 1, ep: int | None = None) -> int:
        """The routed experts' weights of one layer on one of `tp` ranks (split by width,
        or `ep` given: 1/ep of them whole)."""
        gates = 3 if self.gated_mlp else 2
        return gates * self.hidden_size * self.ffn_of_experts * (self.num_experts // ep) \
            if ep else gates * self.hidden_size * max(1, self.ffn_of_experts // tp) \
            * self.num_experts

    def layer_params(self, sparse: bool = True) -> int:
        return self.attention_params() + self.mlp_params(sparse) + self.norm_params()

    def layers_params(self) -> int:
        """The weights of every layer (dense layers among sparse ones counted as theirs)."""
        dense = len(self.dense_layers)
        return ((self.num_layers - dense) * self.layer_params()
                + dense * self.layer_params(sparse=False))

    def kv_per_token(self, tp: int = 1) -> int:
        """Elements one layer caches per token on one of `tp` ranks: K and V of its KV
        heads (replicated where tp exceeds them), or a latent attention's compressed
        keys and values and its rotary key (on every rank)."""
        if self.mla is not None:
            return self.mla[1] + self.mla[2]
        return 2 * max(1, self.num_kv_heads // tp) * self.head_dim

    @property
    def ffn_of_experts(self) -> int:
        """A routed expert's MLP width (the MLP's for a dense model)."""
        return self.expert_ffn or self.intermediate_size

    def norm_params(self) -> int:
        """The RMSNorm weights of one layer (pre-norms, post-norms, q/k norms)."""
        qk = {None: 0, "head": 2 * self.head_dim,
              "whole": self.q_size + self.kv_size}[self.qk_norm]
        if self.dense_experts:  # (Llama 4's q/k norms: L2 norms without weights)
            qk = 0
        # (a latent attention's norms of the compressed queries and keys: attention_params)
        pre = 0 if not self.pre_norms else 1 if self.parallel_block else 2
        return self.hidden_size * (pre + 2 * self.post_norms) + qk

    def first_layers(self, n: int) -> "ModelSpec":
        """This model cut to its first `n` layers (its per-layer index lists cut to them)."""
        def first(ix):
            return None if ix is None else tuple(i for i in ix if i < n)
        return replace(self, num_layers=n, sliding_layers=first(self.sliding_layers),
                       nope_layers=first(self.nope_layers),
                       dense_layers=first(self.dense_layers))

    def layer_kinds(self, layers: range | None = None
                    ) -> list[tuple[tuple[bool, bool, bool], int]]:
        """The kinds of layer in `layers` (default: all) with how many of each, in order of
        first appearance: (sliding, rope, sparse) - whether it attends the sliding window
        (where the model has one), whether it applies RoPE, and whether its MLP is a
        mixture of experts."""
        layers = range(self.num_layers) if layers is None else layers
        if self.sliding_layers is None and not self.nope_layers \
                and not self.dense_layers:  # every layer alike
            return [((bool(self.sliding_window), True, self.is_moe), len(layers))] \
                if len(layers) else []
        sliding = set(range(self.num_layers) if self.sliding_layers is None
                      else self.sliding_layers) if self.sliding_window else set()
        nope, dense = set(self.nope_layers), set(self.dense_layers)
        counts: dict[tuple[bool, bool, bool], int] = {}
        for i in layers:
            key = (i in sliding, i not in nope, self.is_moe and i not in dense)
            counts[key] = counts.get(key, 0) + 1
        return list(counts.items())

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    def lm_head_params(self) -> int:
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    def num_params(self) -> int:
        return (self.layers_params() + self.embedding_params()
                + self.lm_head_params() + self.hidden_size)

    def config_hash(self) -> str:
        """A hash of what is priced (not the checkpoint's dtype, priced in bf16 whatever it
        is, nor a multimodal model's encoders, not priced; quantization and the family's
        facts only where they are not Llama's: a Llama record's hash still names its
        model)."""
        fields = {k: v for k, v in asdict(self).items()
                  if k not in ("checkpoint_dtype", "encoders")
                  and (k not in LLAMA_DEFAULTS or v != LLAMA_DEFAULTS[k])}
        blob = json.dumps(fields, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def facts(self) -> dict[str, Any]:
        """The family's facts where they are not Llama's (what a record's shape adds)."""
        out = {}
        for k in FAMILY_FIELDS:  # (no asdict: every prediction's flags ask it)
            v = getattr(self, k)
            if v != LLAMA_DEFAULTS[k]:
                out[k] = list(v) if isinstance(v, tuple) else v
        return out

    def to_hf_config(self) -> dict[str, Any]:
        """A config.json that reads back to this spec (used by the runner and tests): the
        keys its family's transformers config takes."""
        cfg: dict[str, Any] = {
            "model_type": self.model_type,
            **({"architectures": ["LlamaForCausalLM"]} if self.model_type in LLAMA_LIKE
               else {}),
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "intermediate_size": self.intermediate_size,
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "attention_bias": self.qkv_bias,
            "tie_word_embeddings": self.tie_word_embeddings,
            "hidden_act": "silu",
            "initializer_range": self.initializer_range,
        }
        if self.sliding_window:
            cfg["sliding_window"] = self.sliding_window
            if self.model_type not in ("llama", "mistral"):  # Qwen, SmolLM3: off unless said
                cfg["use_sliding_window"] = True
        if self.sliding_layers is not None:
            cfg["layer_types"] = ["sliding_attention" if i in self.sliding_layers
                                  else "full_attention" for i in range(self.num_layers)]
        elif self.model_type in ("gemma2", "gemma3_text", "gpt_oss"):  # theirs alternates
            cfg["layer_types"] = ["sliding_attention" if self.sliding_window
                                  else "full_attention"] * self.num_layers
        if self.nope_layers or self.model_type in ("smollm3", "llama4_text"):
            cfg["no_rope_layers"] = [int(i not in self.nope_layers)
                                     for i in range(self.num_layers)]
        if self.activation != "silu":
            cfg["hidden_act"] = cfg["hidden_activation"] = "gelu_pytorch_tanh"
        if self.rotary_dim is not None and self.mla is None:
            cfg["partial_rotary_factor"] = self.rotary_dim / self.head_dim
        if self.is_moe:
            cfg.update({"num_local_experts" if self.model_type in (
                "mixtral", "granitemoe", "gpt_oss", "llama4_text", "phimoe", "minimax_m2")
                        else "num_experts":
                        self.num_experts, "num_experts_per_tok": self.experts_per_token})
            if self.expert_ffn:
                cfg["moe_intermediate_size"] = self.expert_ffn
            if self.model_type == "qwen2_moe":
                cfg["shared_expert_intermediate_size"] = self.shared_expert_ffn
        if self.mla is not None:
            q_rank, rank, rope, v = self.mla
            cfg.update(kv_lora_rank=rank, q_lora_rank=q_rank or None, qk_rope_head_dim=rope,
                       qk_nope_head_dim=self.head_dim - rope, v_head_dim=v)
            cfg.pop("head_dim")
        if self.model_type in FIRST_DENSE and self.is_moe:
            cfg.update(n_routed_experts=cfg.pop("num_experts"),
                       n_shared_experts=self.shared_expert_ffn // self.ffn_of_experts,
                       first_k_dense_replace=len(self.dense_layers),
                       **({"n_group": 1, "topk_group": 1} if self.model_type != "deepseek_v2"
                          else {"topk_method": "group_limited_greedy", "n_group": 1,
                                "topk_group": 1} if self.group_routing
                          else {"topk_method": "greedy"}))
        elif self.model_type == "ernie4_5_moe" and self.is_moe:
            sparse = [i for i in range(self.num_layers) if i not in self.dense_layers]
            step = sparse[1] - sparse[0] if len(sparse) > 1 else 1
            cfg.update(moe_num_experts=cfg.pop("num_experts"),
                       moe_k=cfg.pop("num_experts_per_tok"),
                       moe_num_shared_experts=self.shared_expert_ffn // self.ffn_of_experts,
                       moe_layer_start_index=sparse[0], moe_layer_end_index=sparse[-1],
                       moe_layer_interval=step, use_bias=self.qkv_bias)
        elif self.dense_layers and self.model_type == "llama4_text":
            cfg["moe_layers"] = [i for i in range(self.num_layers)
                                 if i not in self.dense_layers]
        elif self.dense_layers:
            cfg["mlp_only_layers"] = list(self.dense_layers)
        if self.model_type == "qwen3_vl_moe_text":  # (its router renormalizes always)
            cfg["norm_topk_prob"] = True
        if self.model_type == "starcoder2":  # its one key for every projection's bias
            cfg["use_bias"] = self.qkv_bias
        if self.model_type in ("cohere", "llama4_text", "glm4_moe"):
            cfg["use_qk_norm"] = self.qk_norm is not None
        if self.routing_skew:
            cfg["piep_routing_skew"] = self.routing_skew
        if self.dense_experts:  # (Llama 4: the shared expert as wide as the experts)
            cfg.update(interleave_moe_layer_step=1,
                       intermediate_size_mlp=self.dense_ffn or self.intermediate_size)
        if self.score_cap or self.logit_cap or self.model_type == "gemma2":
            # (the caps' values do not change what runs; Gemma 2's defaults)
            cfg["attn_logit_softcapping"] = 50.0 if self.score_cap else None
            cfg["final_logit_softcapping"] = 30.0 if self.logit_cap else None
        return cfg

    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any], *, name: str) -> "ModelSpec":
        """Read a Hugging Face config dict; every problem is reported in one ConfigError."""
        if not isinstance(config, Mapping):
            raise ConfigError(f"{name}: config.json must hold a JSON object, got "
                              f"{type(config).__name__}")
        encoders = tuple(word for key, word in ENCODER_KEYS.items()
                         if isinstance(config.get(key), Mapping))
        # multimodal / nested configs keep the decoder under text_config (the tying at the
        # top level where it is stated: transformers 5 ties by the outer config's)
        if isinstance(config.get("text_config"), Mapping) and "hidden_size" not in config:
            inner = config["text_config"]
            config = {**inner, "model_type": inner.get("model_type")
                      or TEXT_TYPES.get(config.get("model_type"), config.get("model_type")),
                      **{k: config[k] for k in ("quantization_config", "torch_dtype",
                                                "tie_word_embeddings") if k in config}}
        elif config.get("model_type") in TEXT_TYPES:  # (Qwen2-VL's: the decoder's keys on top)
            config = {**config, "model_type": TEXT_TYPES[config["model_type"]]}
        model_type = str(config.get("model_type") or "llama")
        config = {**CONFIG_DEFAULTS.get(model_type, {}), **config}
        moe = _moe_words(config, model_type)
        fam = FAMILIES.get(model_type)
        if fam is None or fam.missing:  # (one line: what the tree lacks, if piep knows)
            lacks = f"the tree lacks its {fam.missing}" if fam is not None else None
            if moe is not None:
                why = lacks or "its experts and router are not modelled yet"
                raise ConfigError(f"{name}: a mixture of experts (model_type {model_type!r}"
                                  f"{moe}): {why} ({MOE_WORDS})")
            why = f"is not priced yet ({lacks})" if lacks else "is not a family piep prices"
            raise ConfigError(f"{name}: not a usable config.json: model_type={model_type!r} "
                              f"{why} (supported: {', '.join(PRICED)})")
        problems: list[str] = []
        values: dict[str, Any] = {}
        given: dict[str, str] = {}  # canonical -> the key the config names it by
        for canonical, keys in ALIASES.items():
            for key in keys:
                if key in config and config[key] is not None:
                    values[canonical], given[canonical] = config[key], key
                    break
        for key in ("num_experts", "experts_per_token"):  # (Hunyuan's: one a layer)
            if isinstance(values.get(key), list) and values[key]:
                per_layer = values[key]
                values[key] = per_layer[0]
                if any(v != per_layer[0] for v in per_layer):
                    problems.append(f"{given[key]}={_shown(per_layer)} differs from "
                                    f"layer to layer: piep prices one count for every layer")
        if fam is not None and fam.shared_mlp:  # (experts as wide as intermediate_size)
            values.pop("expert_ffn", None)
        missing = [ALIASES[k][0] for k in REQUIRED if k not in values]
        if missing:
            problems.append("missing keys: " + ", ".join(missing))
        act = values.get("hidden_act", "silu")
        if act not in ACTIVATIONS:
            problems.append(f"hidden_act={act!r}: only MLP activations of "
                            f"{', '.join(sorted(ACTIVATIONS))} are supported")
        for key in _FLOAT_KEYS:
            if key in values and (isinstance(values[key], bool)
                                  or not isinstance(values[key], (int, float))
                                  or not math.isfinite(values[key])):
                problems.append(f"{ALIASES[key][0]}={_shown(values[key])} must be a finite "
                                f"number")
        for key in _BOOL_KEYS:
            if key in values and not isinstance(values[key], bool):
                problems.append(f"{ALIASES[key][0]}={values[key]!r} must be true or false")
        window = values.get("sliding_window")
        if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                                   or window < 0):
            problems.append(f"sliding_window={window!r} must be a whole number of tokens >= 0 "
                            f"or null")
        if problems:
            raise ConfigError(f"{name}: not a usable config.json: " + "; ".join(problems))
        for key in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim",
                    "intermediate_size", "vocab_size", "max_position", "expert_ffn"):
            if key in values:
                _positive_int(key, values[key], problems)
        mla = _latent(config, problems) if fam.latent_attention else None
        problems += _moe_key_problems(config)
        if problems:
            raise ConfigError(f"{name}: not a usable config.json: " + "; ".join(problems))
        heads = values["num_heads"]
        hidden = values["hidden_size"]
        # (a latent attention's queries and keys: the unrotated and rotary dims)
        head_dim = config["qk_nope_head_dim"] + mla[2] if mla else values.get("head_dim")
        if head_dim is None:
            if not isinstance(heads, int) or heads <= 0 or not isinstance(hidden, int) \
                    or hidden % heads:
                raise ConfigError(f"{name}: hidden_size={hidden!r} is not divisible by "
                                  f"num_attention_heads={heads!r} and there is no head_dim key")
            head_dim = hidden // heads
        attention_bias = bool(values.get("attention_bias", False))
        if config.get("use_sliding_window") is False:
            window = None
        layers = values["num_layers"]
        rotary = rotary_share(config)
        sliding = sliding_layers(config, model_type, layers) if window else None
        if sliding == ():  # (a window no layer applies)
            window, sliding = None, None
        score_cap, logit_cap = softcapped(config, fam)
        moe = values.get("num_experts", 1) > 1
        dense = dense_layers(config, model_type, layers) if moe else ()
        if fam.shared_count_key:  # DeepSeek's shared experts: n of the routed ones' width
            shared = (config.get(fam.shared_count_key) or 0) * values.get("expert_ffn", 0)
        elif model_type == "qwen2_moe":
            shared = int(values.get("shared_expert_ffn") or 0)
        else:  # (Llama 4's and Hunyuan's shared expert: an MLP of intermediate_size)
            shared = values["intermediate_size"] \
                if (fam.dense_experts or fam.shared_mlp) and moe else 0
        return cls(
            name=name,
            model_type=model_type,
            hidden_size=hidden,
            num_layers=values["num_layers"],
            num_heads=heads,
            num_kv_heads=values.get("num_kv_heads", heads),
            head_dim=head_dim,
            intermediate_size=values["intermediate_size"],
            vocab_size=values["vocab_size"],
            max_position=values.get("max_position", 4096),
            rms_norm_eps=float(values.get("rms_norm_eps", 1e-5)),
            rope_theta=float(values.get("rope_theta", 10000.0)),
            qkv_bias=attention_bias if fam.qkv_bias is None else fam.qkv_bias,
            o_bias=attention_bias and fam.qkv_bias is None and fam.o_bias_follows,
            tie_word_embeddings=bool(values.get("tie_word_embeddings", fam.tied)),
            sliding_window=window if window and window > 0 else None,
            num_experts=values.get("num_experts", 1),
            experts_per_token=values.get("experts_per_token", 1),
            expert_ffn=values.get("expert_ffn") if moe else None,
            shared_expert_ffn=shared,
            dense_layers=dense,
            dense_ffn=config.get("intermediate_size_mlp")
            if dense and model_type == "llama4_text" else None,
            mla=mla,
            group_routing=fam.grouped_router or (
                model_type == "deepseek_v2"
                and config.get("topk_method") == "group_limited_greedy"),
            router_fp32=fam.router_fp32, shared_expert_gate=fam.shared_expert_gate,
            sparse_mixer=fam.sparse_mixer, norm_kernels=fam.norm_kernels,
            rope_kernels=fam.rope_kernels,
            nope_split=fam.nope_split,
            initializer_range=float(values.get("initializer_range", 0.02)),
            routing_skew=config.get("piep_routing_skew", 0.0),
            checkpoint_dtype=_dtype(values.get("torch_dtype")),
            quantization=quantization(config.get("quantization_config")),
            encoders=encoders,
            qk_norm=fam.qk_norm or ("head" if config.get("use_qk_norm") else None),
            pre_norms=fam.pre_norms, post_norms=fam.post_norms,
            fused_qkv=fam.fused_qkv, fused_gate_up=fam.fused_gate_up,
            gated_mlp=fam.gated_mlp, parallel_block=fam.parallel_block,
            activation=ACTIVATIONS[act],
            rotary_dim=mla[2] if mla else None if rotary is None
            else max(2, int(head_dim * rotary)),
            sliding_layers=sliding,
            nope_layers=nope_layers(config, model_type, layers, sliding),
            scaled_embeddings=fam.scaled_embeddings, residual_scale=fam.residual_scale,
            logit_scale=fam.logit_scale, query_scale=fam.query_scale,
            score_cap=score_cap, logit_cap=logit_cap, attention_sinks=fam.sinks,
            expert_bias=fam.expert_bias, dense_experts=fam.dense_experts,
        )


# a multimodal model_type -> its decoder's, where a text_config does not name it
TEXT_TYPES = {"gemma3": "gemma3_text", "llama4": "llama4_text", "mistral3": "ministral3",
              "qwen2_vl": "qwen2_vl_text", "qwen2_5_vl": "qwen2_5_vl_text",
              "qwen3_vl": "qwen3_vl_text", "qwen3_vl_moe": "qwen3_vl_moe_text",
              "glm4v": "glm4v_text", "glm4v_moe": "glm4v_moe_text"}
# a multimodal config's encoders beside its decoder (not priced: `text_decoder_only`)
ENCODER_KEYS = {"vision_config": "vision", "audio_config": "audio"}
# the families whose config.json piep wrote as Llama's before families were data
LLAMA_LIKE = ("llama", "mistral", "qwen2")
# the fields a family sets (piep.core.families), with Llama's values
FAMILY_FIELDS = ("qk_norm", "pre_norms", "post_norms", "fused_qkv", "fused_gate_up",
                 "gated_mlp", "parallel_block",
                 "activation", "rotary_dim", "sliding_layers", "nope_layers",
                 "scaled_embeddings", "residual_scale", "logit_scale", "query_scale",
                 "score_cap", "logit_cap", "attention_sinks", "expert_bias", "dense_experts",
                 "dense_layers", "dense_ffn", "mla", "group_routing", "router_fp32",
                 "shared_expert_gate", "sparse_mixer", "norm_kernels", "rope_kernels",
                 "nope_split")
# the facts that are its family's code, the same for every model of it (the launches its
# norms, RoPE and router make): a record's shape written before its family's row stated one
# takes the row's (`code_facts`)
CODE_FIELDS = ("sparse_mixer", "norm_kernels", "rope_kernels", "nope_split")
LLAMA_DEFAULTS = {f.name: f.default for f in dataclass_fields(ModelSpec)
                  if f.name in FAMILY_FIELDS
                  or f.name in ("quantization", "expert_ffn", "shared_expert_ffn",
                                "routing_skew")}


def code_facts(model_type: str, facts: Mapping[str, Any]) -> dict[str, Any]:
    """`facts` with each of CODE_FIELDS it leaves out taken from its family's row."""
    fam = FAMILIES.get(model_type)
    return {**{k: getattr(fam, k) for k in CODE_FIELDS if fam is not None}, **facts}


MLA_KEYS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# a mixture of experts' keys beyond its shape: which layers are dense (`dense_layers`:
# lists of layer indices, steps or counts of layers) and its shared experts (their count,
# Qwen2-MoE's width), and the dense layers' width (Llama 4's)
LAYER_LIST_KEYS = ("mlp_only_layers", "moe_layers")
MOE_COUNT_KEYS = ("decoder_sparse_step", "interleave_moe_layer_step", "first_k_dense_replace",
                  "n_shared_experts", "shared_expert_intermediate_size",
                  "intermediate_size_mlp", "moe_num_shared_experts", "moe_layer_start_index",
                  "moe_layer_interval")


def _moe_key_problems(config: Mapping[str, Any]) -> list[str]:
    """What is wrong with a config's keys of dense, sparse and shared experts' layers (one
    problem each)."""
    def whole(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0
    out = [f"{k}={_shown(config[k])} must be a list of layer indices (integers >= 0)"
           for k in LAYER_LIST_KEYS if config.get(k) is not None
           and not (isinstance(config[k], list) and all(whole(i) for i in config[k]))]
    return out + [f"{k}={_shown(config[k])} must be an integer >= 0" for k in MOE_COUNT_KEYS
                  if config.get(k) is not None and not whole(config[k])]


def _latent(config: Mapping[str, Any], problems: list[str]) -> tuple[int, int, int, int] | None:
    """A latent attention's (q_lora_rank or 0, kv_lora_rank, qk_rope_head_dim,
    v_head_dim) from a DeepSeek config (the problems added to `problems`)."""
    values = {k: config.get(k) for k in MLA_KEYS}
    bad = [f"{k}={_shown(v)}" for k, v in values.items()
           if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1 << 16]
    q_rank = config.get("q_lora_rank") or 0
    if isinstance(q_rank, bool) or not isinstance(q_rank, int) or not 0 <= q_rank <= 1 << 20:
        bad.append(f"q_lora_rank={_shown(q_rank)}")
    if bad:
        problems.append(f"multi-head latent attention needs {', '.join(MLA_KEYS)} as "
                        f"integers >= 1 and q_lora_rank as one or null: got {'; '.join(bad)}")
        return None
    return (q_rank, values["kv_lora_rank"], values["qk_rope_head_dim"], values["v_head_dim"])


def _moe_words(config: Mapping[str, Any], model_type: str) -> str | None:
    """', N experts, K per token' of a mixture of experts (what its config states), else
    ''; None for a dense model."""
    experts = next((config[k] for k in ALIASES["num_experts"]
                    if isinstance(config.get(k), int) and config[k] > 1), None)
    if experts is None and model_type not in MOE_TYPES:
        return None
    per = next((config[k] for k in ALIASES["experts_per_token"] if k in config), None)
    return (f", {experts} experts" if experts else "") + (f", {per} per token"
                                                           if isinstance(per, int) else "")


def _dtype(value: Any) -> str | None:
    """A config's `torch_dtype` as a name ('bfloat16', 'float16', ...), or None."""
    if value is None:
        return None
    return str(value).removeprefix("torch.")


def quantization(qc: Any) -> str | None:
    """A config's `quantization_config` in words ('FP8 (e4m3, 128x128 blocks, dynamic
    activations)', 'AWQ int4, groups of 128'), or None where there is none."""
    if not isinstance(qc, Mapping) or not qc:
        return None
    method = str(qc.get("quant_method") or qc.get("quantization_method") or "unknown")
    words = [QUANT_METHODS.get(method, method)]
    if qc.get("bits") or qc.get("w_bit"):
        words.append(f"int{qc.get('bits') or qc.get('w_bit')}")
    if qc.get("load_in_4bit") or qc.get("load_in_8bit"):
        words.append("int4" if qc.get("load_in_4bit") else "int8")
    details = [str(qc["fmt"]) if qc.get("fmt") else None,
               "x".join(str(b) for b in qc["weight_block_size"]) + " blocks"
               if isinstance(qc.get("weight_block_size"), list) else None,
               f"groups of {qc['group_size']}" if qc.get("group_size") else None,
               f"{qc['activation_scheme']} activations" if qc.get("activation_scheme")
               else None]
    if method == "compressed-tensors" and (fp8 := _compressed_fp8(qc)):
        words, details = ["FP8"], ["compressed-tensors", *fp8]
    elif method == "fbgemm_fp8":
        details.insert(0, "fbgemm, row-wise weights, dynamic per-token activations")
    details = [d for d in details if d]
    return " ".join(words) + (f" ({', '.join(details)})" if details else "")


def _compressed_fp8(qc: Mapping) -> list[str] | None:
    """A compressed-tensors config whose every group holds 8-bit float weights (the
    FP8-dynamic and FP8 checkpoints): its weight and activation schemes in words."""
    groups = [g for g in (qc.get("config_groups") or {}).values() if isinstance(g, Mapping)]
    weights = [g.get("weights") or {} for g in groups]
    if not groups or not all(w.get("num_bits") == 8 and w.get("type") == "float"
                             for w in weights):
        return None
    act = groups[0].get("input_activations") or {}
    return [f"{weights[0].get('strategy', 'tensor')}-wise weights",
            f"{'dynamic' if act.get('dynamic') else 'static'} "
            f"{act.get('strategy', 'tensor')} activations" if act else "16-bit activations"]


@dataclass(frozen=True, kw_only=True)
class Parallel:
    """Tensor x pipeline x data parallel degrees, and the ranks a mixture of experts'
    experts are sharded over whole (`ep`: 1, or the tensor-parallel group's tp: vLLM's
    `--enable-expert-parallel` at one data-parallel replica, transformers'
    `enable_expert_parallel`)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for key in ("tp", "pp", "dp", "ep"):
            if problem := size_problem(key, getattr(self, key)):
                raise ConfigError(problem)
        if self.ep not in (1, self.tp):
            raise ConfigError(f"ep={self.ep}: experts are sharded over the tensor-parallel "
                              f"group (ep = tp = {self.tp}) or not at all (ep = 1); across "
                              f"data-parallel replicas (all-to-all) is not modelled yet")

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp

    def label(self) -> str:
        return f"tp{self.tp}pp{self.pp}dp{self.dp}" + (f"ep{self.ep}" if self.ep > 1 else "")


MODES = ("graph", "eager")


@dataclass(frozen=True, kw_only=True)
class Workload:
    """Global batch of prompts of exactly `prompt_len` tokens, greedy `gen_len` new tokens."""

    batch: int = 1
    prompt_len: int = 512
    gen_len: int = 128
    mode: str = "graph"
    # slots of a static KV cache when larger than prompt + gen (an engine that keeps the
    # cache of an earlier, longer call); None: prompt + gen
    cache_len: int | None = None

    def __post_init__(self) -> None:
        for key in ("batch", "prompt_len", "gen_len"):
            if problem := size_problem(key, getattr(self, key)):
                raise ConfigError(problem)
        if self.mode not in MODES:
            raise ConfigError(f"mode={self.mode!r} is not one of {', '.join(MODES)}")
        if self.cache_len is not None and (
                isinstance(self.cache_len, bool) or not isinstance(self.cache_len, int)
                or not self.prompt_len + self.gen_len <= self.cache_len <= LIMITS["cache_len"]):
            raise ConfigError(f"cache_len={self.cache_len!r} must be an integer >= prompt_len "
                              f"+ gen_len = {self.prompt_len + self.gen_len}")

    @property
    def context_len(self) -> int:
        """KV-cache slots: prompt + gen, or the static cache's length where it is larger."""
        return self.cache_len or self.prompt_len + self.gen_len


@lru_cache(maxsize=1024)
def divisors(n: int) -> tuple[int, ...]:
    """The divisors of n, ascending (pairs d, n // d up to sqrt n)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(small + [n // d for d in reversed(small) if d * d != n])


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N`: every N-th item of a list (of configurations, of pending work) from the
    I-th: shard I of N."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ConfigError(f"--shard={text!r}: give I/N, e.g. 0/2") from None
    if n < 1 or not 0 <= i < n:
        raise ConfigError(f"--shard={text!r}: need 0 <= I < N")
    return i, n
