import json

import pytest

from piep.config import ModelSpec
from piep.errors import ConfigError
from piep.models import load_model, shipped_models

REQUIRED = {"vicuna-7b", "vicuna-13b", "vicuna-33b", "llama-2-7b", "llama-2-13b", "llama-2-70b",
            "llama-3-8b", "llama-3-70b", "mistral-7b", "mistral-small-24b", "mixtral-8x7b",
            "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b"}


def test_required_models_are_shipped_with_sources():
    shipped = {m.name: m for m in shipped_models()}
    assert REQUIRED <= set(shipped)
    for name in REQUIRED:
        src = shipped[name].source
        assert src["url"].startswith("https://huggingface.co/"), name
        assert src["revision"] and src["published_params"] > 1e9, name


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_parameter_count_matches_published(name):
    published = next(m for m in shipped_models() if m.name == name).source["published_params"]
    assert load_model(name).num_params() == pytest.approx(published, rel=0.005)


def test_anchor_parameter_counts():
    # figures quoted in the issue, independent of the source.json files
    assert load_model("llama-2-7b").num_params() == pytest.approx(6.74e9, rel=0.005)
    assert load_model("llama-3-70b").num_params() == pytest.approx(70.6e9, rel=0.005)


def test_mistral_small_reads_explicit_head_dim():
    spec = load_model("mistral-small-24b")
    assert spec.head_dim == 128 and spec.hidden_size // spec.num_heads == 160
    assert spec.q_size == 4096


def test_qwen_has_qkv_bias_without_a_key():
    spec = load_model("qwen2.5-7b")
    assert spec.qkv_bias and not spec.o_bias
    assert spec.sliding_window is None  # use_sliding_window: false
    assert not load_model("llama-2-7b").qkv_bias


def test_llama_attention_bias_covers_o_proj():
    cfg = load_model("llama-2-7b").to_hf_config() | {"attention_bias": True}
    spec = ModelSpec.from_hf_config(cfg, name="x")
    assert spec.qkv_bias and spec.o_bias


def test_mistral_sliding_window_and_tied_embeddings():
    assert load_model("mistral-7b").sliding_window == 4096
    cfg = load_model("llama-2-7b").to_hf_config() | {"tie_word_embeddings": True}
    tied = ModelSpec.from_hf_config(cfg, name="tied")
    assert tied.num_params() == load_model("llama-2-7b").num_params() - 32000 * 4096


def test_missing_and_invalid_keys_are_listed_together():
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_hf_config({"model_type": "llama", "hidden_size": 64,
                                  "hidden_act": "gelu"}, name="broken")
    msg = str(err.value)
    for key in ("num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
                "gelu"):
        assert key in msg


def test_non_llama_family_is_refused():
    with pytest.raises(ConfigError, match="not Llama-family"):
        ModelSpec.from_hf_config({"model_type": "gpt2", "n_embd": 768, "n_layer": 12,
                                  "n_head": 12, "vocab_size": 50257}, name="gpt2")


def test_config_roundtrip(tmp_path):
    spec = load_model("qwen2.5-14b")
    path = tmp_path / "my-model" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(spec.to_hf_config() | {"model_type": "qwen2"}))
    again = load_model(str(path.parent))
    assert again.num_params() == spec.num_params()
    assert again.name == "my-model"


def test_unknown_model_suggests_names():
    with pytest.raises(ConfigError, match="piep models"):
        load_model("llama-9-1b")
