import json

import pytest

from piep.core.config import ModelSpec
from piep.core.errors import ConfigError
from piep.core.models import load_model, shipped_models

pytestmark = pytest.mark.pure

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
                                  "hidden_act": "relu2"}, name="broken")
    msg = str(err.value)
    for key in ("num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
                "relu2"):
        assert key in msg


def test_non_llama_family_is_refused():
    with pytest.raises(ConfigError, match="'gpt2' is not a family piep prices"):
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


def test_a_bare_name_suggests_the_model_id_piep_carries_first():
    # `qwen3-8b` is no shipped name; the carried ID of that name comes first, written
    # as the hub writes it, so that the suggestion can be pasted back
    with pytest.raises(ConfigError, match=r"closest: Qwen/Qwen3-8B, "):
        load_model("qwen3-8b")
    with pytest.raises(ConfigError, match=r"closest: llama-3-8b, "):
        load_model("llama3-8b")


QWEN2 = {"model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24,
         "num_attention_heads": 14, "num_key_value_heads": 2, "intermediate_size": 4864,
         "vocab_size": 151936, "max_position_embeddings": 32768, "hidden_act": "silu",
         "torch_dtype": "bfloat16", "tie_word_embeddings": True}


def test_a_model_id_is_read_from_the_hugging_face_cache(tmp_path, monkeypatch, capsys):
    """`--model ORG/NAME` finds config.json in the hub cache's layout (the snapshot its main
    ref names); without it, one line says how to get it."""
    import json

    from piep.cli import main
    repo = tmp_path / "hub" / "models--Qwen--Qwen2.5-0.5B"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "config.json").write_text(json.dumps(QWEN2))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    spec = load_model("Qwen/Qwen2.5-0.5B")
    assert spec.name == "Qwen/Qwen2.5-0.5B" and spec.hidden_size == 896 and spec.qkv_bias
    assert main(["predict", "--model", "Qwen/Qwen2.5-0.5B", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "Qwen/Qwen2.5-0.5B"
    assert main(["predict", "--model", "Qwen/Qwen9-1B"]) == 2
    err = capsys.readouterr().err
    assert "piep models add Qwen/Qwen9-1B" in err and err.count("\n") == 1


def test_the_public_configs_piep_carries_answer_their_model_ids_offline(tmp_path, monkeypatch,
                                                                         capsys):
    """With no Hugging Face cache and nothing added, the model IDs of `model_trees/public/`
    answer from piep's copies (any case); a copy in the cache comes first; `piep models`
    lists the IDs with their sources."""
    import json

    from piep.cli import main
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    spec = load_model("Qwen/Qwen3-8B")
    assert spec.model_type == "qwen3" and spec.name == "Qwen/Qwen3-8B"
    assert load_model("qwen/qwen3-8b").num_layers == spec.num_layers == 36
    assert load_model("zai-org/GLM-4.5-Air").model_type == "glm4_moe"
    repo = tmp_path / "hub" / "models--Qwen--Qwen3-8B"
    (repo / "snapshots" / "abc").mkdir(parents=True)
    (repo / "snapshots" / "abc" / "config.json").write_text(json.dumps(QWEN2))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert load_model("Qwen/Qwen3-8B").model_type == "qwen2"  # (the cache's copy)
    assert main(["models", "--json"]) == 0
    ids = {r["id"]: r for r in json.loads(capsys.readouterr().out)["model_ids"]}
    assert ids["Qwen/Qwen3-8B"]["model_type"] == "qwen3" and len(ids) >= 30
    assert "Megatron-LM arguments" in ids["zai-org/GLM-4.5"]["source"]


def test_models_add_fetches_one_config_json_and_nothing_else(tmp_path, monkeypatch, capsys):
    import io
    import json
    import urllib.error

    from piep.cli import main
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    asked = []

    def hub(request, timeout):
        asked.append(request.full_url)
        if "Missing" in request.full_url:
            raise urllib.error.HTTPError(request.full_url, 404, "not found", {}, None)
        return io.BytesIO(json.dumps(QWEN2).encode())
    monkeypatch.setattr("urllib.request.urlopen", hub)
    assert main(["models", "add", "Qwen/Qwen2.5-0.5B", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["answered"] and asked == [
        "https://huggingface.co/Qwen/Qwen2.5-0.5B/resolve/main/config.json"]
    assert sorted(p.name for p in (tmp_path / "data" / "models" / "Qwen--Qwen2.5-0.5B")
                  .iterdir()) == ["config.json", "source.json"]
    assert load_model("Qwen/Qwen2.5-0.5B").num_layers == 24  # offline now
    assert main(["models", "add", "Qwen/Missing-1B"]) == 2
    assert "no such model" in capsys.readouterr().err
    assert main(["models", "add", "not-an-id"]) == 2
    assert "ORG/NAME" in capsys.readouterr().err


@pytest.mark.parametrize("change, needle", [
    ({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}},
     "quantized weights (GPTQ int4 (groups of 128))"),
    ({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}},
     "quantized weights (AWQ int4 (groups of 128))"),
    ({"model_type": "jamba", "num_experts": 16, "num_experts_per_tok": 2},
     "a mixture of experts (model_type 'jamba', 16 experts, 2 per token)"),
    ({"model_type": "deepseek_v3"}, "multi-head latent attention needs kv_lora_rank"),
    ({"model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2,
      "mlp_only_layers": "0,1"}, "mlp_only_layers='0,1' must be a list of layer indices"),
    ({"model_type": "qwen2_moe", "num_experts": 8, "num_experts_per_tok": 2,
      "shared_expert_intermediate_size": -5},
     "shared_expert_intermediate_size=-5 must be an integer >= 0"),
    ({"model_type": "exaone"}, "'exaone' is not priced yet (the tree lacks its attention"),
])
def test_what_is_not_priced_yet_is_refused_by_name_in_one_line(change, needle, tmp_path,
                                                              capsys):
    """FP8 and AWQ checkpoints were priced as bf16 in silence; mixtures of experts and
    families whose modules the tree lacks are refused saying which."""
    import json

    from piep.cli import main
    (tmp_path / "config.json").write_text(json.dumps({**QWEN2, **change}))
    assert main(["predict", "--model", str(tmp_path / "config.json")]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err


def test_every_answer_names_its_dtypes_and_models_lists_only_what_it_answers(capsys):
    import json

    from piep.cli import main
    assert main(["predict", "--model", "llama-2-7b", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dtypes"] == {"weights": "bf16", "kv_cache": "bf16", "checkpoint": "float16"}
    assert main(["predict", "--model", "llama-2-7b"]) == 0
    assert "bf16 weights and KV cache (its float16 checkpoint priced in bf16)" in \
        capsys.readouterr().out
    assert main(["models", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    # (Mixtral was listed as not answered until mixtures of experts were priced)
    assert "mixtral-8x7b" in [m["name"] for m in listed["models"]]
    assert listed["not_answered"] == []
    assert {m["weights"] for m in listed["models"]} == {"bf16"}


def test_a_quantized_refusal_says_what_is_missing_and_what_its_weights_take():
    """int4 answers are refused, naming the kernels piep has not sampled and the weight
    memory at the checkpoint's bits (its layers quantized, embeddings and head in 16 bits)."""
    import re
    base = load_model("llama-3-8b").to_hf_config()
    awq = ModelSpec.from_hf_config({**base, "quantization_config": {
        "quant_method": "awq", "bits": 4, "group_size": 128}}, name="awq")
    gptq = ModelSpec.from_hf_config({**base, "quantization_config": {
        "quant_method": "gptq", "bits": 4, "group_size": 128}}, name="gptq")
    assert "AWQ's int4 GEMMs" in awq.unpriced and "GPTQ's int4 GEMMs" in gptq.unpriced
    gib = float(re.search(r"about ([\d.]+) GiB", awq.unpriced).group(1))
    bf16 = load_model("llama-3-8b").num_params() * 2 / 2 ** 30
    assert 0.2 < gib / bf16 < 0.45


@pytest.mark.parametrize("qc, words", [
    ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0},
     "FP8 (fbgemm, row-wise weights, dynamic per-token activations)"),
    ({"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {
        "group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                    "input_activations": {"num_bits": 8, "type": "float",
                                          "strategy": "token", "dynamic": True}}}},
     "FP8 (compressed-tensors, channel-wise weights, dynamic token activations)"),
    ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128],
      "activation_scheme": "dynamic"}, "FP8 (e4m3, 128x128 blocks, dynamic activations)"),
])
def test_fp8_checkpoints_are_priced_in_fp8_and_say_so(qc, words):
    """An FP8 checkpoint (fbgemm, compressed-tensors FP8-dynamic, fine-grained blocks) is
    priced with its projections in FP8: each becomes an `fp8_linear` leaf of a byte per
    weight, the LM head stays bf16, the weights' memory nearly halves, and the answer names
    the weight dtype and the quantization (it was priced as bf16 in silence)."""
    from piep.core.config import Parallel, Workload
    from piep.core.gpus import load_gpu
    from piep.core.layout import validate
    from piep.tree import build_tree
    base = load_model("llama-3-8b").to_hf_config()
    spec = ModelSpec.from_hf_config({**base, "quantization_config": qc}, name="fp8")
    assert spec.quantization == words and spec.fp8_weights and spec.unpriced is None
    assert spec.dtypes["weights"].startswith("fp8 e4m3 layers")
    assert spec.dtypes["quantization"] == words
    wl, gpu = Workload(batch=4, prompt_len=128, gen_len=8), load_gpu("h200")
    fp8, bf16 = (validate(s, Parallel(), wl, gpu, engine="hf-eager")
                 for s in (spec, load_model("llama-3-8b")))
    leaves = {(leaf.phase, leaf.name): leaf for _, _, leaf in build_tree(fp8).leaves()}
    ref = {(leaf.phase, leaf.name): leaf for _, _, leaf in build_tree(bf16).leaves()}
    for key, leaf in leaves.items():
        if ref[key].kind in ("q_proj", "o_proj", "gate_proj", "down_proj"):
            assert leaf.kind == "fp8_linear" and leaf.flops == ref[key].flops
            d_in, d_out = leaf.attrs["d_in"], leaf.attrs["d_out"]
            assert leaf.bytes_read == d_in * d_out + 4 * d_out + 4 * leaf.tokens * d_in
    assert leaves[("decode", "lm_head")].kind == "lm_head"
    w8, w16 = (d.memory_items_gib()["all"]["weights"] for d in (fp8, bf16))
    assert 0.5 < w8 / w16 < 0.65  # (the embeddings and the LM head stay bf16)


def test_an_fp8_answer_says_its_weights_in_its_first_line(tmp_path, capsys):
    from piep.cli import main
    cfg = {**load_model("llama-3-8b").to_hf_config(),
           "quantization_config": {"quant_method": "fbgemm_fp8"}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert main(["predict", "--model", str(tmp_path / "config.json"), "--engine",
                 "hf-eager"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "weights fp8 e4m3 layers (row-wise scales), bf16 embeddings and head, bf16 KV " \
           "cache" in first


def test_the_census_reads_maxtexts_config_calls_without_running_them(monkeypatch):
    """benchmarks/model_census.py --import-py: MaxText's `transformers.XConfig(...)` calls
    read with ast (keyword arguments, a `**dict` literal), the model_type a bare call's
    class stands for, and a quantization_config its comment says MaxText removed put back
    as its quant_method."""
    import sys

    from _paths import ROOT
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import model_census
    text = '''import transformers
llama31_405b_config = transformers.LlamaConfig(hidden_size=16, num_hidden_layers=2)
# copy from https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json
# remove mxfp4 quantization_config, since we are using bf16
gpt_oss_20b_dict = {"model_type": "gpt_oss", "hidden_size": 8, "num_local_experts": 4}
gpt_oss_20b_config = transformers.GptOssConfig(**gpt_oss_20b_dict)
'''
    monkeypatch.setattr(model_census, "MAXTEXT", {
        "llama31_405b_config": "meta-llama/Llama-3.1-405B-Instruct",
        "gpt_oss_20b_config": "openai/gpt-oss-20b"})
    got = model_census.maxtext_configs(text)
    assert got["llama31_405b_config"] == ({"hidden_size": 16, "num_hidden_layers": 2,
                                           "model_type": "llama"}, "")
    cfg, restored = got["gpt_oss_20b_config"]
    assert cfg["quantization_config"] == {"quant_method": "mxfp4"} and "mxfp4" in restored
    assert cfg["num_local_experts"] == 4 and cfg["model_type"] == "gpt_oss"


# Qwen2.5-VL-7B's config.json as the Hub holds it (the decoder's keys on top) and a nested
# one of Qwen3-VL-MoE's shape (the decoder under text_config, the tying on top)
QWEN25_VL = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
             "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
             "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
             "max_position_embeddings": 128000, "max_window_layers": 28,
             "sliding_window": 32768, "use_sliding_window": False, "rms_norm_eps": 1e-6,
             "rope_theta": 1000000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
             "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
             "vision_config": {"depth": 32, "hidden_size": 1280, "out_hidden_size": 3584}}
QWEN3_VL_MOE = {"model_type": "qwen3_vl_moe", "tie_word_embeddings": False,
                "vision_config": {"depth": 27, "hidden_size": 1152},
                "text_config": {"model_type": "qwen3_vl_moe_text", "hidden_size": 2048,
                                "intermediate_size": 6144, "num_hidden_layers": 48,
                                "num_attention_heads": 32, "num_key_value_heads": 4,
                                "head_dim": 128, "moe_intermediate_size": 768,
                                "num_experts": 128, "num_experts_per_tok": 8,
                                "vocab_size": 151936, "tie_word_embeddings": True,
                                "rope_parameters": {"rope_type": "default",
                                                    "mrope_section": [24, 20, 20]}}}


@pytest.mark.parametrize("config, runs_as", [(QWEN25_VL, "qwen2"),
                                             (QWEN3_VL_MOE, "qwen3_moe")])
def test_a_vision_language_model_is_priced_as_its_text_decoder_and_says_so(config, runs_as,
                                                                          tmp_path):
    """Qwen2.5-VL and Qwen3-VL were refused ("not a family"); their text decoders run the
    layers of Qwen2 and Qwen3-MoE, priced alike, and every answer says that the vision
    encoder is not priced."""
    from piep import api
    (tmp_path / "vl").mkdir()
    (tmp_path / "vl" / "config.json").write_text(json.dumps(config))
    spec = load_model(str(tmp_path / "vl"))
    assert spec.model_type.endswith("_text") and spec.encoders == ("vision",)
    assert not spec.tie_word_embeddings  # (the outer config's, as transformers 5 ties)
    same = {**spec.to_hf_config(), "model_type": runs_as}
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "config.json").write_text(json.dumps(same))
    assert load_model(str(tmp_path / "text")).num_params() == spec.num_params()
    work = dict(batch=4, prompt_len=256, gen_len=32)
    vl, text = (api.predict(model=str(tmp_path / d), **work) for d in ("vl", "text"))
    assert vl["energy_j"] == pytest.approx(text["energy_j"], rel=1e-9)
    assert "text_decoder_only" in vl["flags"] and "text_decoder_only" not in text["flags"]


def test_a_config_json_with_an_infinity_reads_where_piep_does_not_read_it(tmp_path, capsys):
    """transformers writes a float it holds as infinity as `Infinity` (a state-space
    layer's `time_step_limit`): such a config was refused as "not JSON"; now a key piep
    does not read may hold one, a key it reads may not, and a hybrid family is refused
    by its family."""
    from piep.cli import main
    base = load_model("llama-2-7b").to_hf_config()

    def predict(text: str) -> int:
        (tmp_path / "config.json").write_text(text)
        return main(["predict", "--model", str(tmp_path / "config.json"), "--json"])
    body = json.dumps({**base, "time_step_limit": [0.0, 1.5]}).replace("1.5", "Infinity")
    assert predict(body) == 0
    capsys.readouterr()
    assert predict(json.dumps(base).replace('"rope_theta": 10000.0', '"rope_theta": NaN')) == 2
    assert "rope_theta='NaN' must be a finite number" in capsys.readouterr().err
    mamba = {"model_type": "mamba2", "hidden_size": 64, "num_hidden_layers": 2,
             "vocab_size": 128, "time_step_limit": [0.0, 1.5]}
    assert predict(json.dumps(mamba).replace("1.5", "Infinity")) == 2
    assert "'mamba2' is not priced yet (the tree lacks its Mamba (state-space) mixers" in \
        capsys.readouterr().err


def test_a_mixture_of_experts_not_priced_names_those_that_are():
    """The refusal said piep priced dense decoders only, long after it priced fifteen
    families of experts."""
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_hf_config({"model_type": "jamba", "hidden_size": 64, "num_experts": 16,
                                  "num_experts_per_tok": 2}, name="jamba")
    assert "dense decoders" not in str(err.value)
    assert "mixtures of experts priced: deepseek_v2, deepseek_v3" in str(err.value)
    assert "qwen3_vl_moe_text" in str(err.value)
