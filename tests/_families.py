"""The small decoder every family test reads, and what each family's config states beyond
it (shared by tests/core/test_families.py and benchmarks/family_launches.py)."""

from piep.core.config import ModelSpec

# a small decoder every family reads (its own keys added per family below)
SMALL = {"hidden_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 256,
         "vocab_size": 512}
OWN_KEYS = {  # what a family's config states beyond the small shape
    "gemma": {"hidden_act": "gelu"},
    "gemma3_text": {"sliding_window": 16, "sliding_window_pattern": 3,
                    "hidden_activation": "gelu_pytorch_tanh"},
    "gemma2": {"sliding_window": 16, "hidden_activation": "gelu_pytorch_tanh"},
    "starcoder2": {"sliding_window": 16, "hidden_act": "gelu_pytorch_tanh", "use_bias": True},
    "cohere": {"use_qk_norm": True},
    "cohere2": {"sliding_window": 16},
    "exaone4": {"sliding_window": 16},
    "olmo3": {"sliding_window": 16},
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen3_moe": {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64},
    "qwen2_moe": {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
                  "shared_expert_intermediate_size": 128},
    "olmoe": {"num_experts": 8, "num_experts_per_tok": 2},
    "gpt_oss": {"num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 16,
                "attention_bias": True},
    "llama4_text": {"num_local_experts": 4, "num_experts_per_tok": 1},
    "granitemoe": {"num_local_experts": 4, "num_experts_per_tok": 2,
                   "embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                   "logits_scaling": 8.0},
    "glm4": {"partial_rotary_factor": 0.5, "attention_bias": True},
    # (latent attention: head_dim is qk_nope + qk_rope; the dense first layers apart below)
    "deepseek_v2": {"n_routed_experts": 8, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 64, "n_shared_experts": 2,
                    "first_k_dense_replace": 0, "kv_lora_rank": 32, "q_lora_rank": None,
                    "qk_nope_head_dim": 16, "qk_rope_head_dim": 16, "v_head_dim": 24,
                    "topk_method": "greedy"},
    "deepseek_v3": {"n_routed_experts": 8, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 64, "n_shared_experts": 1,
                    "first_k_dense_replace": 0, "kv_lora_rank": 32, "q_lora_rank": 48,
                    "qk_nope_head_dim": 24, "qk_rope_head_dim": 8, "v_head_dim": 16,
                    "n_group": 2, "topk_group": 1},
    "ernie4_5_moe": {"moe_num_experts": 8, "moe_k": 2, "moe_intermediate_size": 64,
                     "moe_num_shared_experts": 1, "moe_layer_start_index": 0},
    "dots1": {"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
              "n_shared_experts": 2, "first_k_dense_replace": 0, "attention_bias": True},
    "glm4_moe": {"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
                 "n_shared_experts": 1, "first_k_dense_replace": 0, "attention_bias": True},
    "smollm3": {"no_rope_layer_interval": 3},
    "phimoe": {"num_local_experts": 4, "num_experts_per_tok": 2, "attention_bias": True},
    "minimax_m2": {"num_local_experts": 8, "num_experts_per_tok": 2},
    "hunyuan_v1_moe": {"num_experts": 8, "moe_topk": 2},
    "glm4v_text": {"partial_rotary_factor": 0.5},
    "qwen3_vl_moe_text": {"num_experts": 8, "num_experts_per_tok": 2,
                          "moe_intermediate_size": 64},
    "glm4v_moe_text": {"n_routed_experts": 8, "num_experts_per_tok": 2,
                       "moe_intermediate_size": 64, "n_shared_experts": 1,
                       "first_k_dense_replace": 0},
}


def small(model_type: str) -> ModelSpec:
    """The small decoder of `model_type`, with its family's own keys."""
    return ModelSpec.from_hf_config({"model_type": model_type, **SMALL,
                                     **OWN_KEYS.get(model_type, {})}, name=model_type)
