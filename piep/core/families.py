"""Decoder families as data: what each family's layer runs beyond Llama's.

One `Family` row per Hugging Face `model_type`, read from transformers' own modeling code
(`transformers/models/<type>/modeling_<type>.py`, 5.x): the tree builder reads these
facts, and the facts a config states per model (which layers slide, which skip RoPE, the
rotary share of a head) are read by `sliding_layers`, `nope_layers` and `rotary_share`
(the activation by `ACTIVATIONS`). A new family is a row and its test, not a new code
path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Family:
    """What one family's decoder layer runs (Llama's layer where a field is left as is)."""
    # bias of q/k/v: None where `attention_bias` says (and o_proj's follows it unless
    # `o_bias_follows` is off), a bool where the family fixes it whatever the config says
    qkv_bias: bool | None = None
    o_bias_follows: bool = True
    # RMSNorm of queries and keys before RoPE: "head" (over each head's head_dim: Qwen3,
    # Gemma 3), "whole" (over all heads' width at once: OLMo 2)
    qk_norm: str | None = None
    # RMSNorm before attention and before the MLP (Llama's input / post_attention norms)
    pre_norms: bool = True
    # RMSNorm of the attention's and of the MLP's output before its residual add
    # (Gemma 2/3, GLM-4: with the pre-norms, "sandwich"; OLMo 2: in their place)
    post_norms: bool = False
    # one GEMM for q, k and v (Phi-3: qkv_proj), one for gate and up (Phi-3, GLM-4)
    fused_qkv: bool = False
    fused_gate_up: bool = False
    # a plain MLP: up (c_fc), the activation, down (c_proj), no gate (StarCoder 2)
    gated_mlp: bool = True
    # attention and the MLP both read the one pre-norm's output and add to the residual
    # together (Cohere: no norm before the MLP)
    parallel_block: bool = False
    # LayerNorm (mean and variance) where Llama has RMSNorm: priced as the RMSNorm's pass
    # over the same bytes (StarCoder 2 with a bias, Cohere without)
    layer_norm: bool = False
    # the kernels one of its norms launches: Llama's RMSNorm, written in Python, seven;
    # torch's LayerNorm (`nn.LayerNorm`: StarCoder 2, Phi-3.5-MoE) one; an RMSNorm that
    # scales by (1 + weight), the weight cast to float and one added at every call (Gemma,
    # Gemma 2, Gemma 3), and Cohere's LayerNorm in Python (its mean subtracted), nine
    norm_kernels: int = 7
    # the kernels its RoPE launches for q and k: Llama's rotate_half ten; Llama 4's complex
    # products six; an interleaved RoPE (cos and sin repeated, a stack, float casts: ERNIE
    # 4.5, Cohere) twenty (a GPU census of each, reports/launches.md)
    rope_kernels: int = 10
    # embeddings multiplied by a scalar (Gemma: sqrt(hidden); Granite: its multiplier)
    scaled_embeddings: bool = False
    # Granite's residual multiplier (one more kernel per residual add) and logits scaling
    residual_scale: bool = False
    logit_scale: bool = False
    # queries multiplied by a factor of their positions after RoPE (Ministral 3: Llama 4's
    # attention scale, computed in each layer from the position ids)
    query_scale: bool = False
    # Llama 4's split by layer kind: the q/k norms (L2) on its RoPE layers only, the
    # queries' position scale on its NoPE layers only
    nope_split: bool = False
    # the input and output embeddings share their weights where a config does not say
    tied: bool = False
    # attention scores and final logits soft-capped (tanh) where a config does not say
    # otherwise (Gemma 2's config class sets both); transformers 5.17 runs its attention
    # under SDPA by default, which drops the scores' cap: only the logits' cap runs
    softcaps: bool = False
    # eager attention with a learned sink logit per head beside every query's scores
    # (gpt-oss: its modeling code runs no SDPA; scale, mask, the sinks concatenated, the
    # max subtracted, softmax, the sinks dropped)
    sinks: bool = False
    # the experts' GEMMs add a bias per expert and gate with a clamped SwiGLU; the router
    # adds a bias (gpt-oss)
    expert_bias: bool = False
    # every expert runs every token, scaled by its router score, as one bmm per projection
    # over all experts, beside an ungated shared expert (Llama 4's Llama4TextMoe)
    dense_experts: bool = False
    # multi-head latent attention (DeepSeek V2/V3: `kv_lora_rank`, `q_lora_rank`,
    # `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`), the router's GEMM in float32
    # and a shared expert added without a gate (`n_shared_experts`)
    latent_attention: bool = False
    router_fp32: bool = False
    shared_expert_gate: bool = True
    # DeepSeek-V3's router: sigmoid scores plus a bias, the experts picked within the best
    # groups (`n_group`, `topk_group`), run whatever the group count (GLM-4.5 runs its code)
    grouped_router: bool = False
    # the config key that counts shared experts as wide as the routed ones (DeepSeek's and
    # GLM-4.5's `n_shared_experts`), added without a gate
    shared_count_key: str | None = None
    # one shared MLP of `intermediate_size` beside the routed experts, which are as wide
    # (Hunyuan MoE: transformers reads neither `moe_intermediate_size` nor
    # `num_shared_expert`), added without a gate
    shared_mlp: bool = False
    # Phi-3.5-MoE's sparsemixer: top-1 twice, each a max, a mask of the scores far from it,
    # a softmax and a gather (about sixteen kernels more than a top-k softmax)
    sparse_mixer: bool = False
    # transformers has a tensor-parallel plan for the family (its config class's
    # `base_model_tp_plan`); without one, `tp_plan="auto"` leaves every layer whole on
    # every rank (gpt-oss and Granite MoE in transformers 5.17)
    hf_tp_plan: bool = True
    # its plan shards the routed experts (Qwen2-MoE's shards only the attention and the
    # shared expert: each rank runs every routed expert whole)
    hf_tp_experts: bool = True
    # its plan shards the attention (DeepSeek-V3's shards only the MLP and the experts:
    # each rank runs every head, and no all-reduce follows the attention)
    hf_tp_attention: bool = True
    # a mixture of experts with an expert-parallel plan (`base_model_ep_plan`: the routed
    # experts sharded whole, the rest whole on every rank; every MoE family piep prices in
    # transformers 5.17 but Granite MoE)
    hf_ep_plan: bool = True
    # transformers ships no modeling code for it: the model repo's own runs
    # (`trust_remote_code`); priced as the row says, not built by piep's sampler
    remote_code: bool = False
    # transformers has no CausalLM of the family's own (a vision-language model's text
    # decoder): its runs build this family's, whose decoder layer holds the same weights
    # module for module (tests/core/test_families.py builds both and compares them); the
    # tree prices the family's own launches
    runs_as: str | None = None
    # what the family's configs state per model beyond the shape, in words (docs)
    per_model: str | None = None
    # what the tree lacks to price it (None: priced), said when a config of it is refused
    missing: str | None = None


MROPE = ("M-RoPE: positions in three sections (`mrope_section`) recomposed once a forward, "
         "priced as RoPE; images' tokens count only as the prompt tokens given")
# model_type -> its family. Sources: transformers 5.x modeling_<type>.py (the decoder
# layer's forward and the attention's __init__/forward)
FAMILIES: dict[str, Family] = {
    "llama": Family(),
    "mistral": Family(qkv_bias=False),
    "qwen2": Family(qkv_bias=True),  # q/k/v bias always, and no key that says so
    "ministral": Family(qkv_bias=False,
                        per_model="local and global layers (`layer_types`)"),
    "ministral3": Family(qkv_bias=False, query_scale=True),
    "qwen3": Family(qk_norm="head"),
    "olmo2": Family(qk_norm="whole", pre_norms=False, post_norms=True),
    "gemma": Family(scaled_embeddings=True, tied=True, norm_kernels=9),
    "gemma3_text": Family(qk_norm="head", post_norms=True, scaled_embeddings=True, tied=True,
                          norm_kernels=9,
                          per_model="local and global layers (`layer_types`, "
                                    "`sliding_window_pattern`), GeGLU"),
    "phi3": Family(fused_qkv=True, fused_gate_up=True),
    "glm4": Family(o_bias_follows=False, post_norms=True, fused_gate_up=True,
                   per_model="RoPE over part of each head (`partial_rotary_factor`)"),
    "granite": Family(scaled_embeddings=True, residual_scale=True, logit_scale=True),
    "smollm3": Family(tied=True, per_model="layers without RoPE (`no_rope_layers`)"),
    "olmo3": Family(qk_norm="whole", pre_norms=False, post_norms=True,
                    per_model="local and global layers (`layer_types`; by default every "
                              "fourth full)"),
    "ernie4_5": Family(tied=True, rope_kernels=20,
                       per_model="biases of every projection where `use_bias`; RoPE "
                                 "interleaved, in float32 (priced as RoPE)"),
    "exaone4": Family(qk_norm="head", pre_norms=False, post_norms=True,
                      per_model="local and global layers (`layer_types`, by default every "
                                "fourth global), RoPE on the local ones only"),
    "hunyuan_v1_dense": Family(qk_norm="head"),  # (normed after RoPE: the same passes)
    "seed_oss": Family(o_bias_follows=False,
                       per_model="q/k/v biases where `attention_bias`, o_proj's where "
                                 "`attention_out_bias` (priced as none)"),
    # mixtures of experts priced: a top-k router over routed experts (transformers 5.x runs
    # them as grouped GEMMs over the tokens sorted by expert: `grouped_mm`)
    "mixtral": Family(qkv_bias=False),
    "qwen3_moe": Family(qk_norm="head"),
    # (OLMoE: OLMo's q/k RMSNorms over all heads, Llama's pre-norms; Granite MoE:
    # Granite's multipliers)
    "olmoe": Family(qk_norm="whole",
                    per_model="queries and keys clamped where `clip_qkv` (priced as nothing)"),
    "granitemoe": Family(scaled_embeddings=True, residual_scale=True, logit_scale=True,
                         hf_tp_plan=False, hf_ep_plan=False),
    "qwen2_moe": Family(qkv_bias=True, hf_tp_experts=False,
                        per_model="a shared expert beside the routed ones "
                                  "(`shared_expert_intermediate_size`), gated"),
    "gpt_oss": Family(sinks=True, expert_bias=True, hf_tp_plan=False,
                      per_model="local and global layers (`layer_types`), q/k/v/o biases "
                                "where `attention_bias`; MXFP4 checkpoints priced as "
                                "transformers loads them without the `kernels` package: "
                                "dequantized to bf16 (`mxfp4_dequantized`); under vLLM "
                                "as stored, and its attention's sinks inside its flash "
                                "kernel (`mxfp4_unsampled`)"),
    "llama4_text": Family(qkv_bias=False, qk_norm="head", query_scale=True, nope_split=True,
                          rope_kernels=6,
                          dense_experts=True, shared_expert_gate=False,
                          per_model="layers without RoPE (`no_rope_layers`, by default every "
                                    "fourth), whose queries are scaled by position, the others' "
                                    "q and k L2-normed after RoPE (complex products); chunked "
                                    "attention "
                                    "(`attention_chunk_size`) priced as full attention (long "
                                    "contexts priced high); dense layers among the sparse "
                                    "ones (`interleave_moe_layer_step`, `moe_layers`) at "
                                    "`intermediate_size_mlp`"),
    # DeepSeek: latent attention, experts within the best groups (V3: sigmoid scores, a
    # bias, always grouped; V2: softmax, grouped where `topk_method` says), shared experts
    "deepseek_v2": Family(latent_attention=True, router_fp32=True, shared_expert_gate=False,
                          shared_count_key="n_shared_experts",
                          per_model="dense MLPs in the first layers (`first_k_dense_replace`), "
                                    "grouped routing where `topk_method` is "
                                    "group_limited_greedy"),
    "deepseek_v3": Family(latent_attention=True, router_fp32=True, shared_expert_gate=False,
                          grouped_router=True, shared_count_key="n_shared_experts",
                          hf_tp_attention=False,
                          per_model="dense MLPs in the first layers (`first_k_dense_replace`); "
                                    "experts picked within the best groups (`n_group`, "
                                    "`topk_group`: sigmoid scores and a bias, more routing "
                                    "kernels)"),
    # GLM-4.5 / 4.6 / 4.7: GLM-4's attention (q/k/v biased where `attention_bias`, half of
    # each head rotated) without its sandwich norms, q/k RMSNorms per head where
    # `use_qk_norm`; DeepSeek-V3's router, shared and dense-first layers
    "glm4_moe": Family(o_bias_follows=False, router_fp32=True, shared_expert_gate=False,
                       grouped_router=True, shared_count_key="n_shared_experts",
                       per_model="q/k RMSNorms per head where `use_qk_norm`; dense MLPs in "
                                 "the first layers (`first_k_dense_replace`); experts picked "
                                 "within the best groups (`n_group`, `topk_group`) from "
                                 "sigmoid scores and a bias; the multi-token-prediction "
                                 "layer (`num_nextn_predict_layers`) is not run by generate() "
                                 "and not priced"),
    # dots.llm1 (rednote): Qwen3's attention (q/k RMSNorms per head; biases of q/k/v/o where
    # `attention_bias`) and DeepSeek-V3's router, shared and dense-first layers
    "dots1": Family(qk_norm="head", router_fp32=True, shared_expert_gate=False,
                    grouped_router=True, shared_count_key="n_shared_experts",
                    per_model="dense MLPs in the first layers (`first_k_dense_replace`); "
                              "experts picked within the best groups (`n_group`, "
                              "`topk_group`) from sigmoid scores and a bias; layers from "
                              "`max_window_layers` on slide where `sliding_window` is set"),
    # ERNIE 4.5 MoE (21B-A3B, 300B-A47B): ERNIE 4.5's layer; a router in float32 (softmax,
    # top-k over scores plus a bias), ungated shared experts, dense layers outside
    # `moe_layer_start_index`..`moe_layer_end_index` and off every `moe_layer_interval`-th
    "ernie4_5_moe": Family(router_fp32=True, shared_expert_gate=False, rope_kernels=20,
                           shared_count_key="moe_num_shared_experts", tied=True,
                           per_model="biases of q/k/v/o where `use_bias`; dense MLPs outside "
                                     "the sparse layers (`moe_layer_start_index`, "
                                     "`moe_layer_end_index`, `moe_layer_interval`)"),
    # Phi-3.5-MoE: Mixtral's layer with LayerNorms and biased projections, a sparsemixer
    # router; no tensor-parallel plan in transformers 5.17
    "phimoe": Family(layer_norm=True, norm_kernels=1, sparse_mixer=True,
                     hf_tp_plan=False,
                     per_model="q/k/v/o biases where `attention_bias`; the LM head's bias "
                               "where `lm_head_bias` (priced as none)"),
    # MiniMax-M2: q and k RMSNorms over all heads' width (OLMo 2's), sigmoid scores plus a
    # bias for the top-k, experts as wide as `intermediate_size`
    "minimax_m2": Family(qk_norm="whole",
                         per_model="RoPE over `partial_rotary_factor` of each head (its Hub "
                                   "config's `rotary_dim` is read by no transformers 5.17 "
                                   "class: all of each head rotated); transformers' plan "
                                   "gathers q, k and v after their sharded GEMMs and runs every "
                                   "head on every rank, priced as heads sharded"),
    # Hunyuan-A13B: q/k RMSNorms per head (after RoPE), a float32 router, one ungated shared
    # MLP; per-layer lists of `moe_topk` and `num_experts` read where every layer's is alike
    "hunyuan_v1_moe": Family(qk_norm="head", router_fp32=True, shared_expert_gate=False,
                             shared_mlp=True, hf_tp_plan=False,
                             per_model="experts and the shared MLP as wide as "
                                       "`intermediate_size` (transformers 5.17 reads no "
                                       "`moe_intermediate_size`); `moe_topk` and "
                                       "`num_experts` per layer where they are lists"),
    "gemma2": Family(post_norms=True, scaled_embeddings=True, tied=True, softcaps=True,
                     norm_kernels=9,
                     per_model="local and global layers, soft-capped attention scores and "
                               "logits (`attn_logit_softcapping`, "
                               "`final_logit_softcapping`), GeGLU"),
    "cohere": Family(parallel_block=True, layer_norm=True, logit_scale=True, tied=True,
                     norm_kernels=9, rope_kernels=20,
                     per_model="q/k LayerNorms where `use_qk_norm`"),
    "cohere2": Family(parallel_block=True, layer_norm=True, logit_scale=True, tied=True,
                      norm_kernels=9, rope_kernels=20,
                      per_model="local and global layers (`layer_types`, by default every "
                                "fourth global), RoPE on the local ones only"),
    "starcoder2": Family(gated_mlp=False, layer_norm=True, norm_kernels=1, tied=True,
                         per_model="biases of every projection (`use_bias`)"),
    # (InternLM 2 / 2.5, from the model repo's modeling_internlm2.py and vLLM's
    # internlm2.py: one wqkv GEMM, biased where the config's `bias` says, Llama's SwiGLU
    # as w1/w3/w2; the copy regrouping the queries out of wqkv is not priced)
    "internlm2": Family(fused_qkv=True, remote_code=True, hf_tp_plan=False,
                        per_model="RoPE scaled where `rope_scaling` (priced as RoPE)"),
    "exaone": Family(missing="attention layout of its own"),
    # families transformers 5.17 runs with layers the tree has no kinds for (their modeling
    # files' classes), refused saying which: linear attention, state-space mixers, short
    # convolutions, sparse-attention indexers, Gemma's per-layer blocks, other activations
    **{t: Family(missing="Gated DeltaNet linear-attention layers beside its attention")
       for t in ("qwen3_5_text", "qwen3_5_moe_text", "qwen3_next", "olmo_hybrid")},
    "kimi_linear": Family(missing="Kimi Delta Attention (linear-attention) layers"),
    "minimax": Family(missing="lightning (linear) attention layers"),
    **{t: Family(missing="Mamba (state-space) mixers beside or in place of attention")
       for t in ("jamba", "bamba", "zamba", "zamba2", "falcon_h1", "granitemoehybrid",
                 "nemotron_h", "mamba", "mamba2", "falcon_mamba")},
    **{t: Family(missing="short-convolution layers beside its attention")
       for t in ("lfm2", "lfm2_moe")},
    **{t: Family(missing="sparse attention's indexer (DeepSeek Sparse Attention)")
       for t in ("deepseek_v32", "glm_moe_dsa")},
    "gemma3n_text": Family(missing="AltUp, Laurel and per-layer-input blocks, and KV sharing"),
    "gemma4_text": Family(missing="per-layer configurations and KV sharing"),
    "apertus": Family(missing="xIELU activation (in a plain MLP)"),
    **{t: Family(missing="ReLU-squared activation (in a plain MLP)")
       for t in ("arcee", "nemotron")},
    # vision-language models' text decoders, priced on text prompts (their encoders are
    # not: flag `text_decoder_only`): Qwen2-VL and Qwen2.5-VL run Qwen2's layer, Qwen3-VL
    # Qwen3's (no tensor-parallel plan in transformers 5.17), GLM-4.1V GLM-4's (q/k/v
    # always biased), each with M-RoPE
    "qwen2_vl_text": Family(qkv_bias=True, runs_as="qwen2", per_model=MROPE),
    "qwen2_5_vl_text": Family(qkv_bias=True, runs_as="qwen2", per_model=MROPE),
    "qwen3_vl_text": Family(qk_norm="head", hf_tp_plan=False, runs_as="qwen3",
                            per_model=MROPE),
    # (GLM-4.1V's RoPE: GLM-4's less the two repeat_interleaves of cos and sin, which its
    # rotary embedding runs once a forward: a CPU census of both, benchmarks/vl_text_ab.py)
    "glm4v_text": Family(qkv_bias=True, post_norms=True, fused_gate_up=True, runs_as="glm4",
                         rope_kernels=8,
                         per_model="RoPE over part of each head (`partial_rotary_factor`); "
                                   + MROPE),
    # ... and their mixtures of experts: Qwen3-VL-MoE Qwen3-MoE's layer (top-k always
    # renormalized), GLM-4.5V GLM-4.5's (no q/k norms); transformers' plans shard neither's
    # experts (GLM-4.5V's shared experts neither)
    "qwen3_vl_moe_text": Family(qk_norm="head", hf_tp_experts=False,
                                runs_as="qwen3_moe", per_model=MROPE),
    "glm4v_moe_text": Family(o_bias_follows=False, router_fp32=True, shared_expert_gate=False,
                             grouped_router=True, shared_count_key="n_shared_experts",
                             hf_tp_experts=False, runs_as="glm4_moe",
                             per_model="dense MLPs in the first layers "
                                       "(`first_k_dense_replace`); experts picked within "
                                       "the best groups (`n_group`, `topk_group`); " + MROPE),
}
# mixtures of experts by model_type; those not in MOE_PRICED are refused by name, in one
# line, also where a config does not state its expert count (multi-head latent attention,
# chunked attention, grouped or sigmoid routing: not modelled yet)
MOE_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss", "deepseek_v2", "deepseek_v3",
             "llama4", "llama4_text", "olmoe", "granitemoe", "phimoe", "dbrx", "jamba",
             "minimax", "glm4_moe", "ernie4_5_moe", "hunyuan_v1_moe", "dots1", "minimax_m2",
             "qwen3_vl_moe_text", "glm4v_moe_text")
MOE_PRICED = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "granitemoe", "gpt_oss",
              "llama4_text", "deepseek_v2", "deepseek_v3", "glm4_moe", "ernie4_5_moe",
              "dots1", "phimoe", "minimax_m2", "hunyuan_v1_moe", "qwen3_vl_moe_text",
              "glm4v_moe_text")
PRICED = tuple(sorted(k for k, f in FAMILIES.items()
                      if f.missing is None and (k not in MOE_TYPES or k in MOE_PRICED)))
# the mixtures of experts whose first `first_k_dense_replace` layers are dense
FIRST_DENSE = ("deepseek_v2", "deepseek_v3", "glm4_moe", "dots1", "glm4v_moe_text")
# the activations of a gated MLP: silu (SwiGLU) and the GELUs of GeGLU (Gemma); tanh's
# approximation and erf's run one elementwise kernel each, priced alike
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu_pytorch_tanh": "gelu_tanh",
               "gelu_new": "gelu_tanh", "gelu_fast": "gelu_tanh", "gelu": "gelu_tanh"}


def dense_layers(config: Mapping[str, Any], model_type: str, layers: int) -> tuple[int, ...]:
    """The layers of a mixture of experts whose MLP is dense: DeepSeek's first
    `first_k_dense_replace`; Qwen MoE's `mlp_only_layers` and those off every
    `decoder_sparse_step`-th; Llama 4's not in `moe_layers` (by default every
    `interleave_moe_layer_step`-th from the step's last); ERNIE 4.5's outside
    `moe_layer_start_index`..`moe_layer_end_index` (-1: the last) or off every
    `moe_layer_interval`-th."""
    def whole(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)
    if model_type in FIRST_DENSE:
        k = config.get("first_k_dense_replace") or 0
        return tuple(range(min(k, layers))) if whole(k) else ()
    if model_type in ("qwen2_moe", "qwen3_moe", "qwen3_vl_moe_text"):
        only = config.get("mlp_only_layers") or []
        step = config.get("decoder_sparse_step") or 1
        step = step if whole(step) and step > 0 else 1
        return tuple(i for i in range(layers) if i in only or (i + 1) % step)
    if model_type == "ernie4_5_moe":
        step, start, end = (config.get(k) for k in ("moe_layer_interval",
                                                     "moe_layer_start_index",
                                                     "moe_layer_end_index"))
        step = step if whole(step) and step > 0 else 1
        start = start if whole(start) else 0
        end = end if whole(end) and end >= 0 else layers - 1
        return tuple(i for i in range(layers)
                     if (i + 1) % step or not start <= i <= end)
    if model_type == "llama4_text":
        sparse = config.get("moe_layers")
        if not isinstance(sparse, list):
            step = config.get("interleave_moe_layer_step") or 1
            step = step if whole(step) and step > 0 else 1
            sparse = range(step - 1, layers, step)
        return tuple(i for i in range(layers) if i not in set(sparse))
    return ()


def family(model_type: str) -> Family | None:
    return FAMILIES.get(model_type)


def _rope_value(config: Mapping[str, Any], key: str) -> Any:
    """`key` at the config's top level or in its RoPE dict (`rope_parameters` in
    transformers 5, `rope_scaling` before)."""
    if config.get(key) is not None:
        return config[key]
    for nest in ("rope_parameters", "rope_scaling"):
        if isinstance(config.get(nest), Mapping) and config[nest].get(key) is not None:
            return config[nest][key]
    return None


def softcapped(config: Mapping[str, Any], family: Family) -> tuple[bool, bool]:
    """(attention scores capped, final logits capped): a config's
    `attn_logit_softcapping` and `final_logit_softcapping` (null: not capped), the
    family's default where it states neither."""
    def capped(key: str) -> bool:
        return config[key] is not None if key in config else family.softcaps
    return capped("attn_logit_softcapping"), capped("final_logit_softcapping")


# what a family's transformers config class sets where a config.json leaves a key out, for
# the keys piep reads whose absence would otherwise mean no bias, the whole head rotated,
# no window (tests/core/test_families.py holds them to transformers' classes)
CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {
    "glm4": {"attention_bias": True, "partial_rotary_factor": 0.5},
    "glm4_moe": {"partial_rotary_factor": 0.5, "first_k_dense_replace": 1,
                 "n_shared_experts": 1},
    "glm4v_moe_text": {"attention_bias": True, "partial_rotary_factor": 0.5,
                       "first_k_dense_replace": 1, "n_shared_experts": 1},
    "deepseek_v2": {"n_shared_experts": 2},
    "ernie4_5_moe": {"moe_num_shared_experts": 2, "moe_layer_start_index": 1},
    "dots1": {"sliding_window": 4096, "max_window_layers": 62},
    "deepseek_v3": {"first_k_dense_replace": 3, "n_shared_experts": 1},
    "seed_oss": {"attention_bias": True},
    "gpt_oss": {"attention_bias": True, "sliding_window": 128},
    "starcoder2": {"use_bias": True},
    # (a window is off unless the config turns it on)
    **{t: {"use_sliding_window": False} for t in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe",
                                                  "smollm3", "qwen2_vl_text",
                                                  "qwen2_5_vl_text")},
    **{t: {"sliding_window": 4096} for t in ("mistral", "ministral", "gemma3_text", "gemma2",
                                             "olmo3", "exaone4", "cohere2")},
}


# the families whose layers slide by a default pattern where a config gives no
# `layer_types`: every layer but each pattern-th (Gemma 2: every other)
PATTERNS = {"gemma3_text": 6, "gemma2": 2, "gpt_oss": 2, "olmo3": 4, "exaone4": 4, "cohere2": 4}
# the families whose layers from `max_window_layers` on slide, where a window is on and
# a config gives no `layer_types` (their config classes' rule)
WINDOW_FROM_LAYER = ("qwen2", "qwen3", "dots1", "qwen2_vl_text", "qwen2_5_vl_text")
# ... and those whose global layers among sliding ones skip RoPE
NOPE_GLOBAL = ("exaone4", "cohere2")


def sliding_layers(config: Mapping[str, Any], model_type: str,
                   layers: int) -> tuple[int, ...] | None:
    """The indices of the layers that attend a sliding window, where a config says that
    only some do (`layer_types`, or Gemma's `sliding_window_pattern`: every layer but each
    pattern-th; Gemma 2: every other; EXAONE 4's "LLLG": local, local, local, global,
    repeated; Qwen's and dots.llm1's from `max_window_layers` on, () where that is past
    the last); None where every layer is alike (all sliding where there is a window)."""
    types = config.get("layer_types")
    top = config.get("max_window_layers")
    if isinstance(types, list) and len(types) == layers:
        sliding = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
    elif model_type in WINDOW_FROM_LAYER and isinstance(top, int) \
            and not isinstance(top, bool) and top >= 0:
        sliding = tuple(range(min(top, layers), layers))
    elif model_type in PATTERNS:  # (their configs' defaults)
        pattern = config.get("sliding_window_pattern") or PATTERNS[model_type]
        if isinstance(pattern, str) and pattern and set(pattern) <= {"L", "G"}:
            sliding = tuple(i for i in range(layers) if pattern[i % len(pattern)] == "L")
        elif not isinstance(pattern, int) or isinstance(pattern, bool) or pattern < 1:
            return None
        else:
            sliding = tuple(i for i in range(layers) if (i + 1) % pattern)
    else:
        return None
    return None if len(sliding) == layers else sliding


def nope_layers(config: Mapping[str, Any], model_type: str, layers: int,
                sliding: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """The layers that skip RoPE (SmolLM3's `no_rope_layers`: 1 uses RoPE, 0 does not;
    or `no_rope_layer_interval`: every interval-th layer skips it; EXAONE 4's and Command
    A's global layers among the `sliding` ones, as `sliding_layers` gave them)."""
    if model_type in NOPE_GLOBAL:
        return () if sliding is None else tuple(i for i in range(layers) if i not in sliding)
    flags = config.get("no_rope_layers")
    if isinstance(flags, list) and len(flags) == layers:
        return tuple(i for i, use in enumerate(flags) if not use)
    every = config.get("no_rope_layer_interval",
                       4 if model_type == "llama4_text" else None)  # (Llama 4's default)
    if isinstance(every, int) and not isinstance(every, bool) and every > 0 \
            and model_type in ("smollm3", "llama4_text"):
        return tuple(i for i in range(layers) if (i + 1) % every == 0)
    return ()


def rotary_share(config: Mapping[str, Any]) -> float | None:
    """The share of each head RoPE rotates (`partial_rotary_factor`), None for all of it."""
    factor = _rope_value(config, "partial_rotary_factor")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor < 1:
        return None
    return float(factor)
