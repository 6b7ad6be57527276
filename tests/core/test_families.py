"""Families as data: each priced family's row says what transformers' own modeling code
runs (checked against the model transformers builds from the config piep writes), and
the tree holds those modules, each layer kind apart."""

from dataclasses import replace
import json

import pytest

from piep.core.config import TEXT_TYPES, ModelSpec, Parallel, Workload
from piep.core.errors import ConfigError
from piep.core.families import FAMILIES, FIRST_DENSE, MOE_TYPES, PRICED
from piep.core.layout import validate
from piep.tree import build_tree
from _paths import ROOT  # noqa: E402
from _families import OWN_KEYS, SMALL, small  # noqa: E402

pytestmark = pytest.mark.pure

CONFIGS = ROOT / "calibration" / "h200" / "families" / \
    "configs"
OUTER = {text: outer for outer, text in TEXT_TYPES.items()}  # text decoder -> its model
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
           "qkv_proj", "gate_up_proj")  # (kinds; a leaf is named as its module)


def layer_leaves(spec: ModelSpec, engine: str | None = "hf-eager") -> dict[str, list]:
    """Per layer node of the prefill's stage: the leaves under it (name, kind)."""
    dep = validate(spec, Parallel(), Workload(batch=1, prompt_len=8, gen_len=2), _gpu(),
                   engine=engine, check_memory=False)
    stage = build_tree(dep).children[0].children[0].children[0]
    return {layer.name: [(n.name, n.kind) for _, _, n in layer.leaves()]
            for layer in stage.children if layer.kind == "layer"}


def _gpu():
    from piep.core.gpus import load_gpu
    return load_gpu("h200")


@pytest.mark.parametrize("model_type", PRICED)
def test_each_family_layer_holds_what_its_row_says(model_type):
    spec = small(model_type)
    fam = FAMILIES[model_type]
    for layer, leaves in layer_leaves(spec).items():
        names = [n for n, _ in leaves]
        assert ("qkv_proj" in names) == fam.fused_qkv
        assert ("gate_up_proj" in names) == fam.fused_gate_up
        nope = fam.nope_split and "rope" not in names  # (Llama 4's NoPE layers: no norms)
        assert ("q_norm" in names and "k_norm" in names) == (spec.qk_norm is not None
                                                              and not nope), layer
        assert ("query_scale" in names) == (fam.query_scale and (nope or not fam.nope_split))
        assert spec.qk_norm == fam.qk_norm or model_type == "cohere"  # (its use_qk_norm)
        assert ("input_norm" in names) == fam.pre_norms
        assert ("post_norm" in names) == (fam.pre_norms and not fam.parallel_block)
        assert ("post_mlp_norm" in names) == fam.post_norms
        assert ("gate_proj" in names or "gate_up_proj" in names) == \
            (fam.gated_mlp and not spec.is_moe)
        assert ("experts_gate_up" in names and "router" in names) == spec.is_moe
        assert names.count("attn_residual_scale") == int(fam.residual_scale)
        kinds = [k for _, k in leaves]
        assert ("geglu" in kinds) == (spec.activation == "gelu_tanh" and spec.gated_mlp)


def test_layer_kinds_stand_apart_with_their_counts():
    gemma = small("gemma3_text")  # every third layer global
    assert gemma.sliding_layers == (0, 1, 3, 4)
    assert gemma.layer_kinds() == [((True, True, False), 4), ((False, True, False), 2)]
    assert set(layer_leaves(gemma)) == {"layer_sliding", "layer_global"}
    smol = small("smollm3")  # every third layer without RoPE
    assert smol.nope_layers == (2, 5)
    leaves = layer_leaves(smol)
    assert set(leaves) == {"layer_rope", "layer_nope"}
    assert "rope" not in [n for n, _ in leaves["layer_nope"]]
    # a model whose layers are alike keeps the one layer node of before
    assert set(layer_leaves(small("qwen3"))) == {"layer"}


def test_a_global_layer_beside_sliding_ones_decodes_over_every_key():
    spec = ModelSpec.from_hf_config({"model_type": "gemma3_text", **SMALL,
                                     "sliding_window": 64, "sliding_window_pattern": 3},
                                    name="g")
    dep = validate(spec, Parallel(), Workload(batch=2, prompt_len=300, gen_len=50, mode="eager"),
                   _gpu(), engine="hf-eager", check_memory=False)
    step = build_tree(dep).children[0].children[1].children[0]
    ctx = {path.split("/")[-2] if "window" not in path else "sliding": n.context_len
           for path, _, n in step.walk() if n.kind in ("attention", "sdpa_masked")}
    assert ctx["layer_global"] == 300 + 25  # the prompt and half the generation
    assert ctx["sliding"] == 64             # the window
    # and the memory check holds the window in the sliding layers' cache
    slots = dep.kv_slots()
    assert slots == 4 * 64 + 2 * 350


def test_soft_capped_scores_run_sdpa_as_transformers_runs_gemma2():
    """Gemma 2 caps its attention scores and its logits (its config class); transformers
    5.17 builds it with SDPA (`_supports_sdpa`), whose interface drops the score cap, so
    its attention is SDPA's, no pass over materialized scores; the logits' cap runs. A
    config that nulls the caps caps nothing."""
    gemma2 = small("gemma2")
    assert gemma2.score_cap and gemma2.logit_cap
    dep = validate(gemma2, Parallel(), Workload(batch=2, prompt_len=8, gen_len=2), _gpu(),
                   engine="hf-eager", check_memory=False)
    prefill = [n for _, _, n in build_tree(dep).leaves() if n.phase == "prefill"]
    assert not [n for n in prefill if n.kind == "scores"]
    assert {n.kind for n in prefill if n.name == "attention"} == {"attention"}
    assert [n.name for n in prefill if n.name == "logit_softcap"] == ["logit_softcap"]
    plain = ModelSpec.from_hf_config({"model_type": "gemma2", **SMALL,
                                      "attn_logit_softcapping": None,
                                      "final_logit_softcapping": None}, name="g")
    assert not plain.score_cap and not plain.logit_cap
    assert not small("gemma3_text").score_cap  # (its config class caps nothing)


@pytest.mark.slow  # (seconds: the default tier's budget, reports/speed.md)
@pytest.mark.gloo  # (torch and transformers on the CPU)
def test_transformers_builds_gemma2_with_sdpa_which_takes_no_score_cap():
    """What the test above stands on: the model transformers builds from the config piep
    writes attends through SDPA, and SDPA's interface has no soft cap."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import inspect

    from transformers import AutoModelForCausalLM
    from transformers.integrations import sdpa_attention

    from piep.sampling.hf import _hf_config
    model = AutoModelForCausalLM.from_config(_hf_config(small("gemma2")))
    assert model.config.attn_logit_softcapping and model.config._attn_implementation == "sdpa"
    assert "softcap" not in inspect.signature(sdpa_attention.sdpa_attention_forward).parameters


def test_partial_rotary_rotates_its_share_and_copies_the_rest():
    glm = small("glm4")
    assert glm.rotary_dim == 16
    rope = [n for _, _, n in build_tree(validate(
        glm, Parallel(), Workload(batch=1, prompt_len=8, gen_len=2), _gpu(),
        check_memory=False)).leaves() if n.kind == "rope"][0]
    assert rope.attrs["width"] == (4 + 2) * 16 and rope.launches == 12


def test_a_family_round_trips_through_its_config_and_a_record_shape():
    from piep.sampling.meter import model_shape
    from piep.core.records import spec_of_shape
    for model_type in PRICED:
        spec = small(model_type)
        assert ModelSpec.from_hf_config(spec.to_hf_config(), name=model_type) == spec
        back = spec_of_shape(model_type, model_shape(spec))
        assert back.facts() == spec.facts()
        if spec.facts():  # (Llama's layer: priced alike, named llama, as before)
            assert back.model_type == model_type


def test_llama_hashes_and_shapes_are_as_before():
    """A Llama-family record's hash and shape carry nothing of the families (records
    written before the families were data still name their model)."""
    from piep.sampling.meter import model_shape
    from piep.core.models import load_model
    spec = load_model("llama-2-7b")
    assert spec.facts() == {} and "family" not in model_shape(spec)
    assert spec.config_hash() == "3ecfcc32bedcdf7d"


@pytest.mark.parametrize("model_type", [t for t, f in FAMILIES.items() if f.missing])
def test_families_not_priced_yet_say_what_the_tree_lacks(model_type):
    with pytest.raises(ConfigError, match=f"{model_type!r}.*the tree lacks its "):
        small(model_type)


def test_the_priced_mixtures_of_experts_are_those_named():
    from piep.core.families import MOE_PRICED
    assert set(MOE_TYPES) & set(PRICED) == set(MOE_PRICED)


def test_a_mixture_of_experts_layer_by_hand():
    """A decode step of 4 requests of a model of 8 experts, 2 per token: 8 (token, expert)
    pairs reach 8 (1 - (3/4)^4) = 5.47 experts; one grouped GEMM of the 8 rows reads those
    experts' weights; the memory holds every expert."""
    from piep.tree.builder import experts_hit
    assert experts_hit(8, 2, 1) == pytest.approx(2.0)
    assert experts_hit(128, 8, 10_000) == pytest.approx(128.0)
    spec = small("qwen3_moe")
    assert (spec.num_experts, spec.experts_per_token, spec.expert_ffn) == (8, 2, 64)
    dep = validate(spec, Parallel(), Workload(batch=4, prompt_len=8, gen_len=2), _gpu(),
                   check_memory=False)
    step = build_tree(dep).children[0].children[1].children[0]
    leaves = {n.name: n for _, _, n in step.leaves()}
    gate_up, down = leaves["experts_gate_up"], leaves["experts_down"]
    hit = 8 * (1 - 0.75 ** 4)
    assert gate_up.tokens == 8 and gate_up.attrs["d_out"] == 2 * 64
    assert gate_up.bytes_read == pytest.approx((hit * 128 * 128 + 8 * 128) * 2)
    assert gate_up.flops == 2 * 8 * 128 * 128 and down.attrs["d_in"] == 64
    assert leaves["router"].attrs["d_out"] == 8 and leaves["moe_permute"].tokens == 8
    # every expert resident: 8 x (gate, up, down) of 128 x 64, and the router's 128 x 8
    dense = small("qwen3")
    assert spec.layer_params() - dense.layer_params() == \
        8 * 3 * 128 * 64 + 128 * 8 - 3 * 128 * 256
    shared = small("qwen2_moe")
    names = {n.name for _, _, n in build_tree(validate(
        shared, Parallel(), Workload(batch=1, prompt_len=8, gen_len=2), _gpu(),
        check_memory=False)).leaves()}
    assert {"shared_gate_proj", "shared_expert_gate", "shared_add"} <= names


def test_generate_decodes_experts_by_batched_mm_and_prefills_by_grouped_mm():
    """transformers' generate() switches a mixture of experts to `batched_mm` for its decode
    steps on a GPU (`_optimize_model_for_decode`): each (token, expert) pair's weights are
    gathered (read and written) and read again by one batched GEMV, so a step moves its
    pairs' whole matrices; the prefill, continuous batching and the reference runner's
    tree keep the grouped GEMMs, with their masking and unpermuting passes."""
    spec = small("qwen3_moe")
    wl = Workload(batch=4, prompt_len=8, gen_len=2)

    def leaves(engine, phase):
        dep = validate(spec, Parallel(), wl, _gpu(), check_memory=False, engine=engine)
        return {n.name: n for _, _, n in build_tree(dep).leaves() if n.phase == phase}
    step = leaves("hf-eager", "decode")
    gate_up, down = step["experts_gate_up"], step["experts_down"]
    assert gate_up.kind == down.kind == "experts_batched" and gate_up.tokens == 8
    w = 8 * 128 * 128  # 8 pairs of (hidden 128) x (2 x 64)
    assert gate_up.bytes_read == (2 * w + 8 * 128) * 2
    assert gate_up.bytes_written == (w + 8 * 128) * 2 and gate_up.flops == 2 * w
    assert "moe_repeat" in step and "moe_mask_in" not in step
    for engine, phase in (("hf-eager", "prefill"), ("hf-cb", "decode"), (None, "decode")):
        grouped = leaves(engine, phase)
        assert grouped["experts_gate_up"].kind == "experts_gate_up", (engine, phase)
        assert {"moe_mask_in", "moe_mask_gate_up", "moe_mask_down", "moe_unpermute"} <= \
            set(grouped)
        assert grouped["moe_mask_gate_up"].attrs["width"] == 2 * 64


def test_the_measured_shapes_read_as_their_families():
    types = {json.loads(p.read_text())["model_type"] for p in CONFIGS.glob("*.json")}
    assert types <= set(PRICED) and len(types) >= 7


@pytest.mark.gloo  # (torch and transformers on the CPU)
@pytest.mark.parametrize("model_type", PRICED)
def test_transformers_builds_what_the_row_says(model_type):
    """The model transformers builds from the config piep writes has the modules the
    family's row and the spec say: linear layers by name, RMSNorms a layer, the rotated
    share of a head, the layer types and NoPE layers."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM

    from piep.sampling.hf import _hf_config
    if FAMILIES[model_type].remote_code:  # (refused by name: the next test)
        pytest.skip(f"transformers ships no {model_type}")
    spec = small(model_type)
    model = AutoModelForCausalLM.from_config(_hf_config(spec))
    layer = model.model.layers[0]
    linears = {name.split(".")[-1] for name, mod in layer.named_modules()
               if type(mod).__name__ == "Linear"}
    tree = next(iter(layer_leaves(spec).values()))
    if spec.is_moe:  # experts and router are parameters (grouped GEMMs), not Linear
        experts = (getattr(layer, "mlp", None) or getattr(layer, "feed_forward", None)
                   or layer.block_sparse_moe)  # (Llama 4, Granite MoE)
        experts = experts.experts
        shape = (2 * spec.ffn_of_experts, spec.hidden_size)
        if getattr(experts, "is_transposed", False) or spec.dense_experts:
            shape = shape[::-1]  # (gpt-oss and Llama 4 hold them transposed)
        assert tuple(experts.gate_up_proj.shape) == (spec.num_experts, *shape)
        assert hasattr(experts, "gate_up_proj_bias") == spec.expert_bias
        shared = {"gate_proj", "up_proj", "down_proj"} | (  # (Llama 4's, DeepSeek's: ungated)
            {"shared_expert_gate"} if spec.shared_expert_gate and not spec.dense_experts
            else set())
        linears -= {"wg"}  # (Hunyuan's router is a Linear: the tree's `router`)
        assert linears - shared == {n for n, k in tree if k in LINEARS} - {
            "router", "experts_gate_up", "experts_down", "shared_gate_proj", "shared_up_proj",
            "shared_down_proj", "shared_expert_gate"}
        assert (linears & shared == shared) == bool(spec.shared_expert_ffn)
    else:
        assert linears == {n for n, k in tree if k in LINEARS}
    norms = [name for name, mod in layer.named_modules() if "Norm" in type(mod).__name__]
    # (Llama 4's one qk_norm module normalizes q and k: two passes)
    assert len(norms) + sum(n.endswith(".qk_norm") for n in norms) == \
        sum(k == "rmsnorm" for _, k in tree)
    cfg = model.config
    if spec.sliding_layers is not None:
        assert [i for i, t in enumerate(cfg.layer_types) if t == "sliding_attention"] == \
            list(spec.sliding_layers)
    if model_type == "smollm3":
        assert [i for i, use in enumerate(cfg.no_rope_layers) if not use] == \
            list(spec.nope_layers)
    for name, buf in model.model.rotary_emb.named_buffers():
        if name.endswith("inv_freq"):  # (Gemma 3: one per layer type)
            assert 2 * buf.numel() == (spec.rotary_dim or spec.head_dim), name
    act = getattr(cfg, "hidden_activation", None) or cfg.hidden_act
    assert ("gelu" in act) == (spec.activation == "gelu_tanh")


@pytest.mark.parametrize("model_type", ["exaone4", "cohere2"])
def test_global_layers_among_sliding_ones_skip_rope_where_the_family_says(model_type):
    """EXAONE 4 and Command A rotate the local layers' q and k only: every fourth layer
    (their default pattern) is global, without RoPE; without a window (null), every layer
    rotates; a config leaving the window out has their class's (4096)."""
    spec = small(model_type)
    assert spec.sliding_layers == (0, 1, 2, 4, 5) and spec.nope_layers == (3,)
    rope = {name: sum(k == "rope" for _, k in leaves)
            for name, leaves in layer_leaves(spec).items()}
    assert len(set(rope.values())) == 2 and min(rope.values()) == 0
    plain = ModelSpec.from_hf_config({"model_type": model_type, **SMALL,
                                      "sliding_window": None}, name=model_type)
    assert plain.sliding_layers is None and plain.nope_layers == ()
    unsaid = ModelSpec.from_hf_config({"model_type": model_type, **SMALL}, name=model_type)
    assert unsaid.sliding_window == 4096 and unsaid.nope_layers == (3,)
    lettered = ModelSpec.from_hf_config({"model_type": model_type, **SMALL,
                                         "sliding_window_pattern": "LLG"}, name=model_type)
    assert lettered.sliding_layers == (0, 1, 3, 4) and lettered.nope_layers == (2, 5)


@pytest.mark.gloo  # (transformers on the CPU)
def test_a_key_a_config_leaves_out_takes_its_config_classes_default():
    """Where transformers' config class defaults a key piep reads to a bias, a rotary share
    or a window, piep reads the same (`CONFIG_DEFAULTS`): GLM-4 rotates half of each head
    and biases q/k/v, Seed-OSS and gpt-oss bias them, the sliding families slide; DeepSeek
    and GLM-4.5 have shared experts and dense first layers; the tied embeddings."""
    pytest.importorskip("transformers")
    from transformers import AutoConfig

    from piep.core.families import CONFIG_DEFAULTS
    for model_type, fam in FAMILIES.items():
        if fam.remote_code or fam.missing:
            continue
        cfg = AutoConfig.for_model(model_type)
        rope = getattr(cfg, "rope_parameters", None) or {}
        for key in ("attention_bias", "use_bias", "partial_rotary_factor", "sliding_window"):
            got = getattr(cfg, key, None) or rope.get(key)
            if not got or (key == "partial_rotary_factor" and got == 1.0):
                got = None  # (what piep reads from an absent key: no bias, window, share)
            want = CONFIG_DEFAULTS.get(model_type, {}).get(key)
            assert got == want, (model_type, key, got, want)
        # (a vision-language model's text decoder: tied as its outer config says)
        tying = AutoConfig.for_model(OUTER[model_type]) if fam.runs_as else cfg
        assert bool(tying.tie_word_embeddings) == fam.tied, model_type
        if getattr(cfg, "use_sliding_window", None) is not None:  # (absent: piep's is on)
            assert CONFIG_DEFAULTS[model_type]["use_sliding_window"] == cfg.use_sliding_window
        # (a mixture's dense first layers and shared experts: an absent key reads as none)
        moe_keys = ([fam.shared_count_key] if fam.shared_count_key else []) + (
            ["first_k_dense_replace"] if model_type in FIRST_DENSE else [])
        for key in moe_keys:
            want = CONFIG_DEFAULTS.get(model_type, {}).get(key, 0)
            assert (getattr(cfg, key) or 0) == want, (model_type, key, getattr(cfg, key), want)


@pytest.mark.gloo  # (torch and transformers on the CPU)
def test_a_family_of_remote_code_is_priced_but_not_built():
    """InternLM 2 runs its model repo's own code: piep prices its row (one wqkv GEMM, the
    config's `bias` on q/k/v and o) and refuses to build it in one line."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoConfig

    from piep.sampling.hf import _hf_config
    with pytest.raises(ValueError):  # (what transformers says of it, when asked)
        AutoConfig.for_model("internlm2")
    spec = ModelSpec.from_hf_config({"model_type": "internlm2", **SMALL, "bias": True},
                                    name="internlm2")
    names = [n for leaves in layer_leaves(spec).values() for n, _ in leaves]
    assert "qkv_proj" in names and "gate_proj" in names and "q_proj" not in names
    assert spec.qkv_bias and spec.o_bias
    with pytest.raises(ConfigError, match="transformers ships no modeling code"):
        _hf_config(spec)


@pytest.mark.gloo  # (torch and transformers on the CPU)
@pytest.mark.parametrize("model_type, dense", [
    ("deepseek_v2", {"first_k_dense_replace": 2}), ("deepseek_v3", {"first_k_dense_replace": 2}),
    ("glm4_moe", {"first_k_dense_replace": 2, "use_qk_norm": True}),
    ("ernie4_5_moe", {"moe_layer_start_index": 1, "moe_layer_interval": 2}),
    ("dots1", {"first_k_dense_replace": 1, "sliding_window": 16, "max_window_layers": 4}),
    ("qwen3_moe", {"mlp_only_layers": [1]}), ("qwen2_moe", {"decoder_sparse_step": 2}),
    ("llama4_text", {"interleave_moe_layer_step": 2, "intermediate_size_mlp": 512})])
def test_transformers_counts_the_layer_weights_piep_counts(model_type, dense):
    """Latent attention, shared experts and dense layers among sparse ones: the layers'
    weights piep counts (its memory) are those of the model transformers builds."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM

    from piep.sampling.hf import _hf_config
    spec = ModelSpec.from_hf_config({"model_type": model_type, **SMALL, **OWN_KEYS[model_type],
                                     **dense}, name=model_type)
    assert spec.dense_layers
    model = AutoModelForCausalLM.from_config(_hf_config(spec))
    assert sum(p.numel() for name, p in model.named_parameters()
               if ".layers." in name) == spec.layers_params()


@pytest.mark.gloo  # (torch and transformers on the CPU)
@pytest.mark.parametrize("model_type", ["phimoe", "minimax_m2", "hunyuan_v1_moe"])
def test_transformers_counts_the_routed_layers_weights_piep_counts(model_type):
    """Phi-3.5-MoE (biased attention), MiniMax-M2 (q/k norms over every head) and Hunyuan
    MoE (experts as wide as intermediate_size, one shared MLP, a per-layer top-k list):
    the layers' weights piep counts are those transformers builds (less Phi's LayerNorm
    biases, which piep does not count)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM

    from piep.sampling.hf import _hf_config
    keys = {"model_type": model_type, **SMALL, **OWN_KEYS[model_type]}
    if model_type == "hunyuan_v1_moe":
        keys.update(moe_topk=[2] * SMALL["num_hidden_layers"],
                    moe_intermediate_size=[999] * SMALL["num_hidden_layers"])
    spec = ModelSpec.from_hf_config(keys, name=model_type)
    assert spec.is_moe and spec.experts_per_token == 2
    model = AutoModelForCausalLM.from_config(_hf_config(spec))
    norm_biases = sum(p.numel() for name, p in model.named_parameters()
                      if ".layers." in name and "layernorm.bias" in name)
    assert sum(p.numel() for name, p in model.named_parameters()
               if ".layers." in name) - norm_biases == spec.layers_params()
    assert (norm_biases > 0) == (model_type == "phimoe")


def test_hunyuan_reads_one_top_k_for_every_layer_or_says_why_not():
    """Hunyuan MoE's experts and shared MLP are `intermediate_size` wide (its
    `moe_intermediate_size` list is not read); a `moe_topk` list alike in every layer is
    its top-k, one that differs is refused in words."""
    keys = {"model_type": "hunyuan_v1_moe", **SMALL, "num_experts": 8,
            "moe_topk": [2] * 6, "moe_intermediate_size": [64] * 6}
    spec = ModelSpec.from_hf_config(keys, name="hy")
    assert (spec.experts_per_token, spec.ffn_of_experts, spec.shared_expert_ffn) == (2, 256, 256)
    assert not spec.shared_expert_gate and spec.router_fp32
    with pytest.raises(ConfigError, match=r"moe_topk=\[2, 2, 2, 2, 2, 4\] differs from layer"):
        ModelSpec.from_hf_config({**keys, "moe_topk": [2] * 5 + [4]}, name="hy")


def test_phi_moe_routes_by_sparsemixer_with_more_kernels_than_a_top_k_softmax():
    """Phi-3.5-MoE's routing is Mixtral's plus the sparsemixer's two masked top-1 passes."""
    def routing(model_type):
        spec = small(model_type)
        dep = validate(spec, Parallel(), Workload(batch=1, prompt_len=8, gen_len=2), _gpu(),
                       check_memory=False)
        return spec, {n.name: n for _, _, n in build_tree(dep).leaves()}["routing"]
    (phi, phi_routing), (mixtral, mixtral_routing) = routing("phimoe"), routing("mixtral")
    assert phi.sparse_mixer and not mixtral.sparse_mixer
    assert phi_routing.launches == mixtral_routing.launches + 16
    assert phi_routing.bytes_read == 4 * mixtral_routing.bytes_read


def test_a_norm_launches_the_kernels_its_familys_code_makes():
    """StarCoder 2 and Phi-3.5-MoE run nn.LayerNorm (one kernel a norm, the final one too);
    Llama's RMSNorm is seven in Python; Gemma's scales by (1 + weight) and Cohere's
    LayerNorm subtracts the mean: nine each."""
    def norm_launches(model_type):
        dep = validate(small(model_type), Parallel(), Workload(batch=1, prompt_len=8,
                                                                gen_len=2), _gpu(),
                       check_memory=False)
        return {n.launches for _, _, n in build_tree(dep).leaves()
                if n.kind in ("rmsnorm", "final_norm")}
    assert norm_launches("starcoder2") == norm_launches("phimoe") == {1}
    assert norm_launches("llama") == norm_launches("qwen3") == {7}
    assert norm_launches("gemma3_text") == norm_launches("cohere") == {9}


def test_llama4_splits_its_norms_rope_and_query_scale_by_layer_kind():
    """Llama 4 (Llama4TextAttention): a RoPE layer normalizes q and k (L2) after RoPE,
    which it runs as complex products (six kernels); a NoPE layer scales its queries by
    their positions and normalizes nothing. Ministral 3 scales every layer's queries."""
    layers = layer_leaves(small("llama4_text"))
    assert set(layers) == {"layer_rope", "layer_nope"}
    rope = {n: k for n, k in layers["layer_rope"]}
    nope = {n: k for n, k in layers["layer_nope"]}
    assert {"q_norm", "k_norm", "rope"} <= set(rope) and "query_scale" not in rope
    assert "query_scale" in nope and not {"q_norm", "k_norm", "rope"} & set(nope)
    dep = validate(small("llama4_text"), Parallel(), Workload(batch=1, prompt_len=8,
                                                             gen_len=2), _gpu(),
                   check_memory=False)
    assert {n.launches for _, _, n in build_tree(dep).leaves() if n.name == "rope"} == {6}
    assert all("query_scale" in [n for n, _ in leaves]
               for leaves in layer_leaves(small("ministral3")).values())


def test_a_shared_expert_counts_its_mlp_and_its_gate():
    """Qwen2-MoE's shared expert: gate, up and down of its width, and its gate of one
    output; the same in the parameter count and in the memory check's weights."""
    from piep.core.layout import GIB
    shared, routed = small("qwen2_moe"), replace(small("qwen2_moe"), shared_expert_ffn=0)
    assert shared.layer_params() - routed.layer_params() == 3 * 128 * 128 + 128
    dep = validate(shared, Parallel(), Workload(batch=1, prompt_len=8, gen_len=2), _gpu(),
                   check_memory=False)
    assert dep.memory_items_gib()["all"]["weights"] * GIB == pytest.approx(
        2 * shared.num_params(), rel=1e-12)


def test_gpt_oss_runs_eager_attention_with_sinks_and_biased_experts():
    """gpt-oss (transformers' modeling code: no SDPA, a sink logit per head; experts with
    biases and a clamped SwiGLU; a router with a bias; local and global layers by default
    alternating): its layers hold its eager attention with the sinks as one leaf (sampled
    whole: its passes run over unaligned rows of keys + 1), the experts' bias adds and the
    gate's extra passes; an MXFP4 checkpoint is priced as transformers
    loads it without the `kernels` package (dequantized to bf16: the same answer as the
    bf16 config's), and says so; MXFP4 of another family is still refused."""
    spec = small("gpt_oss")
    assert spec.attention_sinks and spec.expert_bias and spec.sliding_layers == (0, 2, 4)
    for leaves in layer_leaves(spec).values():
        names = dict(leaves)
        assert {"experts_gate_up_bias", "experts_down_bias", "gate_clamp_1"} <= set(names)
        assert names["attention"] == "sinks_attention"
        assert "softcap_tanh" not in names and "kv_expand" not in names
    cfg = {"model_type": "gpt_oss", **SMALL, **OWN_KEYS["gpt_oss"],
           "quantization_config": {"quant_method": "mxfp4"}}
    mxfp4 = ModelSpec.from_hf_config(cfg, name="gpt-oss")
    assert mxfp4.mxfp4_experts and mxfp4.weight_bytes == 2 and not mxfp4.unpriced
    assert "dequantized" in mxfp4.dtypes["weights"]
    w = Workload(batch=1, prompt_len=8, gen_len=2)
    loaded = validate(mxfp4, Parallel(), w, _gpu())
    assert loaded.dequantized and loaded.peak_memory_gib() == \
        validate(spec, Parallel(), w, _gpu()).peak_memory_gib()
    # vLLM keeps them MXFP4 (4.25 bits a weight), and its flash kernel takes the sinks
    served = validate(mxfp4, Parallel(), replace(w, mode="graph"), _gpu(), engine="vllm")
    experts = served.stage_expert_weights()
    assert not served.dequantized and "MXFP4" in served.dtypes["weights"]
    assert 0 < experts < served.stage_weights()
    assert served.memory_items_gib()["all"]["weights"] == pytest.approx(
        loaded.memory_items_gib()["all"]["weights"] - experts * (2 - 4.25 / 8) / 2 ** 30)
    leaves = {n.name: n for _, _, n in build_tree(served).children[0].children[1].leaves()}
    bf16 = {n.name: n for _, _, n in build_tree(validate(
        spec, Parallel(), replace(w, mode="graph"), _gpu(), engine="vllm"))
        .children[0].children[1].leaves()}
    assert leaves["attention"].kind == "attention" and "scores_mask" not in leaves
    gate_up = leaves["experts_gate_up"]
    weights = gate_up.attrs["experts"] * gate_up.attrs["d_in"] * gate_up.attrs["d_out"]
    assert bf16["experts_gate_up"].bytes_read - gate_up.bytes_read == pytest.approx(
        weights * (2 - 4.25 / 8))
    other = ModelSpec.from_hf_config({**cfg, "model_type": "qwen3_moe",
                                      **OWN_KEYS["qwen3_moe"]}, name="q")
    with pytest.raises(ConfigError, match="MXFP4"):
        validate(other, Parallel(), w, _gpu())


def test_an_mxfp4_answer_is_flagged(tmp_path):
    from piep import api
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gpt_oss", **SMALL, **OWN_KEYS["gpt_oss"],
                                "quantization_config": {"quant_method": "mxfp4"}}))
    doc = api.predict(model=str(path), batch=1, prompt_len=64, gen_len=8)
    assert "mxfp4_dequantized" in doc["flags"]


def test_llama4_runs_every_expert_on_every_token():
    """Llama 4 (Llama4TextMoe in transformers): the tokens repeated once per expert, each
    projection one bmm over all experts (every expert through every token, zero-scaled
    off the top k: `experts_bmm`, each expert's weights and its copy of the tokens read),
    an ungated shared expert beside them; every fourth
    layer without RoPE by default; a config nested under `text_config` reads the same; an
    interleaved one (Maverick: dense layers among the sparse ones) runs its dense layers
    at `intermediate_size_mlp`."""
    spec = small("llama4_text")
    assert spec.dense_experts and spec.shared_expert_ffn == 256 and spec.nope_layers == (3,)
    dep = validate(spec, Parallel(), Workload(batch=2, prompt_len=8, gen_len=2), _gpu(),
                   check_memory=False)
    prefill = {n.name: n for _, _, n in build_tree(dep).children[0].children[0].leaves()}
    gate_up, down = prefill["experts_gate_up"], prefill["experts_down"]
    assert gate_up.kind == down.kind == "experts_bmm"  # (equal problems: no grouped GEMM)
    f, h = spec.intermediate_size, spec.hidden_size
    assert gate_up.tokens == 16 and gate_up.attrs["experts"] == 4  # 4 experts x 16 tokens
    assert (gate_up.attrs["d_in"], gate_up.attrs["d_out"]) == (h, 2 * f)
    assert gate_up.flops == 2.0 * 4 * 16 * h * 2 * f
    assert gate_up.bytes_read == 2 * 4 * (h * 2 * f + 16 * h)
    assert (down.attrs["d_in"], down.attrs["d_out"]) == (f, h)
    assert prefill["moe_repeat"].tokens == 4 * 16
    assert {"moe_repeat", "moe_scale", "shared_gate_proj", "shared_add"} <= set(prefill)
    assert "shared_expert_gate" not in prefill
    nested = ModelSpec.from_hf_config({"model_type": "llama4", "text_config": {
        "model_type": "llama4_text", **SMALL, **OWN_KEYS["llama4_text"]}}, name="scout")
    assert nested.dense_experts and nested.num_experts == 4
    maverick = ModelSpec.from_hf_config({"model_type": "llama4_text", **SMALL, **OWN_KEYS[
        "llama4_text"], "interleave_moe_layer_step": 2, "intermediate_size_mlp": 512},
        name="maverick")
    assert maverick.dense_layers == (0, 2, 4) and maverick.dense_ffn == 512
    leaves = layer_leaves(maverick)
    assert set(leaves) == {"layer_rope_dense", "layer_rope_sparse", "layer_nope_sparse"}
    dense = validate(maverick, Parallel(), Workload(batch=1, prompt_len=8, gen_len=2), _gpu(),
                     check_memory=False)
    stage = build_tree(dense).children[0].children[0].children[0]
    gate = next(n for layer in stage.children if layer.name == "layer_rope_dense"
                for _, _, n in layer.leaves() if n.name == "gate_proj")
    assert gate.attrs["d_out"] == 512
    assert ModelSpec.from_hf_config(maverick.to_hf_config(), name="maverick") == maverick


def test_dense_layers_among_sparse_ones_count_as_theirs():
    """Qwen MoE's `mlp_only_layers` and `decoder_sparse_step`, DeepSeek's
    `first_k_dense_replace`: those layers run a dense MLP of intermediate_size (a layer
    node of their own), their weights count as a dense MLP's, and a config written back
    reads the same."""
    qwen = ModelSpec.from_hf_config({"model_type": "qwen3_moe", **SMALL, **OWN_KEYS[
        "qwen3_moe"], "mlp_only_layers": [0], "decoder_sparse_step": 2}, name="q")
    assert qwen.dense_layers == (0, 2, 4)
    assert qwen.layer_kinds() == [((False, True, False), 3), ((False, True, True), 3)]
    assert set(layer_leaves(qwen)) == {"layer_dense", "layer_sparse"}
    alike = small("qwen3_moe")
    assert qwen.num_params() == alike.num_params() - 3 * (
        alike.layer_params() - alike.layer_params(sparse=False))
    assert ModelSpec.from_hf_config(qwen.to_hf_config(), name="q") == qwen
    deep = ModelSpec.from_hf_config({"model_type": "deepseek_v3", **SMALL, **{
        **OWN_KEYS["deepseek_v3"], "first_k_dense_replace": 2}}, name="d")
    assert deep.dense_layers == (0, 1)
    assert ModelSpec.from_hf_config(deep.to_hf_config(), name="d") == deep
    leaves = layer_leaves(deep)
    assert "experts_gate_up" not in [n for n, _ in leaves["layer_dense"]]
    assert "gate_proj" in [n for n, _ in leaves["layer_dense"]]


def test_deepseek_latent_attention_by_hand():
    """DeepSeek's multi-head latent attention as transformers 5.x runs it: the cache holds
    kv_lora_rank + qk_rope_head_dim a token and layer (not K and V per head), every decode
    step expands all cached positions again (kv_b_proj over batch x context tokens), the
    attention runs every head; V3 routes within groups (more routing kernels) with an
    fp32 router; the shared experts are added ungated."""
    from piep.core.layout import Deployment
    v3 = ModelSpec.from_hf_config({"model_type": "deepseek_v3", **SMALL,
                                   **OWN_KEYS["deepseek_v3"]}, name="v3")
    assert v3.mla == (48, 32, 8, 16) and v3.head_dim == 32 and v3.attention == "MLA"
    assert v3.kv_per_token() == 40 and v3.kv_per_token(tp=2) == 40
    assert v3.group_routing and v3.router_fp32 and not v3.shared_expert_gate
    assert v3.shared_expert_ffn == 64
    w = Workload(batch=2, prompt_len=8, gen_len=5, mode="eager")
    dep = validate(v3, Parallel(), w, _gpu(), engine="hf-eager", check_memory=False)
    decode = {n.name: n for _, _, n in build_tree(dep).children[0].children[1].leaves()}
    ctx = 8 + 5 // 2  # eager decode: the live prefix's mean
    assert decode["kv_b_proj"].tokens == 2 * ctx
    assert decode["kv_b_proj"].attrs["d_out"] == 4 * (24 + 16)
    assert decode["kv_append"].bytes_read == 2 * ctx * 40 * 2
    assert decode["o_proj"].attrs["d_in"] == 4 * 16
    assert decode["attention"].flops == 4.0 * 2 * 4 * 1 * ctx * (32 + 16) / 2
    assert decode["routing"].launches > 8 and "shared_expert_gate" not in decode
    kv = Deployment(v3, Parallel(), Workload(batch=4, prompt_len=100, gen_len=28), _gpu())
    assert kv.memory_items_gib()["all"]["kv_cache"] == pytest.approx(
        6 * 128 * 4 * 40 * 2 / 2 ** 30)
    # vLLM's MLA decode: the up-projections absorbed (bmm over the heads), the cached
    # latents read once as one shared head, nothing expanded
    served = validate(v3, Parallel(), replace(w, mode="graph"), _gpu(), engine="vllm",
                      check_memory=False)
    absorbed = {n.name: n for _, _, n in build_tree(served).children[0].children[1].leaves()}
    ctx = served.workload.context_len
    assert "kv_b_proj" not in absorbed and "key_assembly" not in absorbed
    att = absorbed["attention"]
    assert att.attrs["kv_heads"] == 1 and att.bytes_read == (2 * ctx * 40 + 2 * 4 * 40) * 2
    assert att.flops == 2.0 * 2 * 4 * ctx * (2 * 32 + 8)
    assert absorbed["q_absorb"].flops == 2.0 * 4 * 2 * (32 - 8) * 32
    assert absorbed["o_absorb"].attrs["d_out"] == 16 and absorbed["o_absorb"].attrs["batch"] == 4
    v2 = small("deepseek_v2")
    assert v2.mla == (0, 32, 16, 24) and not v2.group_routing
    assert "q_proj" in [n for n, _ in next(iter(layer_leaves(v2).values()))]


def test_fp8_experts_read_a_byte_per_weight_and_say_so(tmp_path):
    """An FP8 mixture of experts (DeepSeek-V3's checkpoint): its grouped GEMMs read a byte
    per expert weight, priced from the bf16 samples, and the answer flags it."""
    from piep import api
    cfg = {"model_type": "qwen3_moe", **SMALL, **OWN_KEYS["qwen3_moe"]}
    fp8 = ModelSpec.from_hf_config({**cfg, "quantization_config": {
        "quant_method": "fp8", "weight_block_size": [128, 128]}}, name="f")
    bf16 = ModelSpec.from_hf_config(cfg, name="b")

    def gate_up(spec):
        dep = validate(spec, Parallel(), Workload(batch=2, prompt_len=8, gen_len=2), _gpu(),
                       check_memory=False)
        return next(n for _, _, n in build_tree(dep).leaves() if n.kind == "experts_gate_up")
    a, b = gate_up(fp8), gate_up(bf16)
    weights = b.attrs["experts"] * b.attrs["d_in"] * b.attrs["d_out"]
    assert b.bytes_read - a.bytes_read == pytest.approx(weights)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "quantization_config": {
        "quant_method": "fp8", "weight_block_size": [128, 128]}}))
    doc = api.predict(model=str(path), batch=2, prompt_len=64, gen_len=8)
    assert "fp8_experts_unsampled" in doc["flags"]


@pytest.mark.slow  # (seconds: the default tier's budget, reports/speed.md)
def test_a_trained_routers_skew_is_an_input_of_the_config():
    """`piep_routing_skew` (the Zipf exponent of the experts' popularity; 0: uniform, as
    random weights route): a step's tokens reach fewer experts, so a grouped GEMM reads
    fewer weights (continuous batching, vLLM, the reference runner); generate()'s decode
    (batched_mm: each pair copies its expert) does not change. Refused outside [0, 4] and
    for a dense model; written back by to_hf_config."""
    import numpy as np

    from piep import api
    from piep.tree.builder import experts_hit
    tokens = np.array([1, 4, 64, 4096])
    uniform = experts_hit(64, 4, tokens)
    assert np.allclose(experts_hit(64, 4, tokens, 1e-12), uniform)
    skewed = experts_hit(64, 4, tokens, 1.2)
    assert skewed[0] == 4 and np.all(skewed[1:] < uniform[1:]) and np.all(np.diff(skewed) > 0)
    cfg = {"model_type": "qwen3_moe", **SMALL, **OWN_KEYS["qwen3_moe"]}
    spec = ModelSpec.from_hf_config({**cfg, "piep_routing_skew": 1.2}, name="skewed")
    assert spec.routing_skew == 1.2
    assert ModelSpec.from_hf_config(spec.to_hf_config(), name="again").routing_skew == 1.2
    for bad, match in ((5, "not a number in"), ("x", "not a number in")):
        with pytest.raises(ConfigError, match=match):
            ModelSpec.from_hf_config({**cfg, "piep_routing_skew": bad}, name="bad")
    with pytest.raises(ConfigError, match="applies to a mixture of experts"):
        ModelSpec.from_hf_config({"model_type": "qwen3", **SMALL, "piep_routing_skew": 1.0},
                                 name="dense")
    plain = ModelSpec.from_hf_config(cfg, name="uniform")
    kw = dict(batch=8, prompt_len=64, gen_len=32, hosts=False)
    for engine, falls in (("hf-cb", True), ("hf-eager", False)):
        a, b = (api.predict(s, engine=engine, **kw)["decode"]["energy_j"] for s in (plain, spec))
        assert (b < a) == falls and (b == a) != falls, engine


# the 2025-26 mixtures of experts issue 52 names, by the shapes their model cards and
# configs state (the census holds the configs whose copies could be sourced)
LARGE_MOE = {
    "llama-4-scout": ({"model_type": "llama4", "text_config": {
        "model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48,
        "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 8192, "intermediate_size_mlp": 16384, "vocab_size": 202048,
        "num_local_experts": 16, "num_experts_per_tok": 1, "attention_chunk_size": 8192,
        "interleave_moe_layer_step": 1, "use_qk_norm": True}}, 2),
    "llama-4-maverick": ({"model_type": "llama4", "text_config": {
        "model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48,
        "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 8192, "intermediate_size_mlp": 16384, "vocab_size": 202048,
        "num_local_experts": 128, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2,
        "use_qk_norm": True}}, 8),
    "gpt-oss-120b": ({"model_type": "gpt_oss", "hidden_size": 2880, "num_hidden_layers": 36,
                      "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                      "intermediate_size": 2880, "num_local_experts": 128,
                      "num_experts_per_tok": 4, "vocab_size": 201088, "sliding_window": 128,
                      "attention_bias": True,
                      "quantization_config": {"quant_method": "mxfp4"}}, 2),
    "qwen3-235b-a22b": ({"model_type": "qwen3_moe", "hidden_size": 4096,
                         "num_hidden_layers": 94, "num_attention_heads": 64,
                         "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 12288,
                         "moe_intermediate_size": 1536, "num_experts": 128,
                         "num_experts_per_tok": 8, "vocab_size": 151936}, 4),
}


@pytest.mark.parametrize("name", LARGE_MOE)
def test_the_large_mixtures_answer_at_the_first_layout_that_fits(name, tmp_path):
    """Each answers at the smallest tensor-parallel degree whose weights fit H200s (bf16;
    gpt-oss's MXFP4 dequantized as transformers loads it without kernels), and is refused
    below it saying which degree it needs."""
    from piep import api
    config, tp = LARGE_MOE[name]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    engine = None if name.startswith("gpt-oss") else "hf-eager"  # (no transformers tp plan)
    doc = api.predict(str(path), engine=engine, tp=tp, batch=1, prompt_len=512, gen_len=128)
    assert doc["energy_j"] > 0 and doc["per_gpu"][0]["memory_gib"] < 141
    from piep.core.errors import FitError
    with pytest.raises(FitError, match=f"needs tp >= {tp}"):
        api.predict(str(path), engine=engine, tp=tp // 2, batch=1, prompt_len=512,
                    gen_len=128)


def test_transformers_engines_refuse_tp_where_transformers_has_no_plan(tmp_path):
    """gpt-oss and Granite MoE have no `base_model_tp_plan` in transformers 5.17: its
    engines at tp > 1 would run the whole model on every rank; refused in one line, the
    reference runner and tp=1 still answer."""
    from piep import api
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gpt_oss", **SMALL, **OWN_KEYS["gpt_oss"]}))
    with pytest.raises(ConfigError, match="no tensor-parallel plan for gpt_oss"):
        api.predict(str(path), engine="hf-eager", tp=2, batch=1, prompt_len=64, gen_len=8)
    assert api.predict(str(path), engine="hf-eager", batch=1, prompt_len=64, gen_len=8)
    assert api.predict(str(path), tp=2, batch=1, prompt_len=64, gen_len=8)
    assert not FAMILIES["granitemoe"].hf_tp_plan and FAMILIES["mixtral"].hf_tp_plan


def test_qwen2_moe_keeps_its_routed_experts_whole_under_transformers_tp():
    """Qwen2-MoE's tensor-parallel plan shards the attention and the shared expert, not the
    routed experts: under transformers' engines at tp=2 each rank runs them whole (and
    holds their weights); the reference runner splits them by width."""
    spec = small("qwen2_moe")
    w = Workload(batch=2, prompt_len=8, gen_len=2)

    def experts(engine):
        dep = validate(spec, Parallel(tp=2), w, _gpu(), engine=engine, check_memory=False)
        gate_up = next(n for _, _, n in build_tree(dep).children[0].children[0].leaves()
                       if n.name == "experts_gate_up")
        return gate_up.attrs["d_out"], dep.memory_items_gib()["all"]["weights"]
    (hf, hf_gib), (ref, ref_gib) = experts("hf-eager"), experts(None)
    assert hf == 2 * 64 and ref == 64 and hf_gib > ref_gib


def test_deepseek_v3_under_transformers_tp_runs_every_head_on_every_rank():
    """transformers' DeepSeek-V3 plan shards only the MLP and the experts: under its engines
    at tp=2 each rank projects and attends every head and no all-reduce follows the
    attention; the reference runner splits the heads (as vLLM and SGLang do)."""
    spec = ModelSpec.from_hf_config({"model_type": "deepseek_v3", **SMALL,
                                     **OWN_KEYS["deepseek_v3"]}, name="v3")
    w = Workload(batch=2, prompt_len=8, gen_len=2)

    def leaves(engine):
        dep = validate(spec, Parallel(tp=2), w, _gpu(), engine=engine, check_memory=False)
        return {n.name: n for _, _, n in build_tree(dep).children[0].children[0].leaves()}
    hf, ref = leaves("hf-eager"), leaves(None)
    assert hf["o_proj"].attrs["d_in"] == 2 * ref["o_proj"].attrs["d_in"] == 4 * 16
    assert "allreduce_attn" not in hf and "allreduce_attn" in ref and "allreduce_mlp" in hf


def test_ernie_names_its_experts_and_sparse_layers_in_keys_of_its_own():
    """ERNIE 4.5 MoE: `moe_num_experts` and `moe_k`; sparse layers from
    `moe_layer_start_index` to `moe_layer_end_index` (-1: the last), every
    `moe_layer_interval`-th; `moe_num_shared_experts` shared experts of the routed width."""
    keys = {"model_type": "ernie4_5_moe", **SMALL, "moe_num_experts": 8, "moe_k": 2,
            "moe_intermediate_size": 64, "moe_num_shared_experts": 2,
            "moe_layer_start_index": 1, "moe_layer_end_index": -1}
    spec = ModelSpec.from_hf_config(keys, name="ernie")
    assert (spec.num_experts, spec.experts_per_token) == (8, 2)
    assert spec.dense_layers == (0,) and spec.shared_expert_ffn == 128
    assert not spec.shared_expert_gate and spec.tie_word_embeddings
    cut = ModelSpec.from_hf_config({**keys, "moe_layer_end_index": 3, "moe_layer_interval": 2},
                                   name="ernie")
    assert cut.dense_layers == (0, 2, 4, 5)
    assert ModelSpec.from_hf_config(cut.to_hf_config(), name="ernie").dense_layers == \
        cut.dense_layers


@pytest.mark.gloo  # (transformers on the CPU)
def test_layers_from_max_window_layers_slide_where_the_family_says():
    """Qwen's and dots.llm1's config classes slide the layers from `max_window_layers`
    on (Qwen only where `use_sliding_window`, off unless said); piep reads the same
    layers, and no window where none of them is reached."""
    pytest.importorskip("transformers")
    from transformers import AutoConfig
    for model_type, keys in (("dots1", {**OWN_KEYS["dots1"]}),
                             ("qwen3", {"use_sliding_window": True})):
        cfg = {"model_type": model_type, **SMALL, **keys, "sliding_window": 16,
               "max_window_layers": 4}
        spec = ModelSpec.from_hf_config(cfg, name=model_type)
        theirs = AutoConfig.for_model(**cfg).layer_types
        assert spec.sliding_layers == (4, 5) == tuple(
            i for i, t in enumerate(theirs) if t == "sliding_attention")
    unsaid = ModelSpec.from_hf_config({"model_type": "qwen3", **SMALL, "sliding_window": 16},
                                      name="qwen3")
    past = ModelSpec.from_hf_config({"model_type": "dots1", **SMALL, **OWN_KEYS["dots1"],
                                     "sliding_window": 16, "max_window_layers": 6},
                                    name="dots1")
    assert unsaid.sliding_window is None and past.sliding_window is None


@pytest.mark.gloo  # (torch and transformers on the CPU)
@pytest.mark.parametrize("model_type", [t for t, f in FAMILIES.items() if f.runs_as])
def test_a_text_decoder_runs_as_a_family_whose_layers_are_its_own(model_type):
    """A vision-language model's text decoder has no CausalLM in transformers: its runs
    build the family its row names, whose layers hold the same weights, name for name and
    shape for shape, and rotate the same share of each head."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    from piep.sampling.hf import _hf_config
    spec = small(model_type)
    cfg = {k: v for k, v in spec.to_hf_config().items()
           if k not in ("model_type", "architectures")}
    own = AutoModel.from_config(AutoConfig.for_model(model_type, **cfg, pad_token_id=0))
    runs = AutoModelForCausalLM.from_config(_hf_config(spec)).model
    assert type(runs).__name__ != type(own).__name__

    def layers(model):
        return {(n, tuple(p.shape)) for n, p in model.named_parameters()
                if n.startswith("layers.")}
    assert layers(own) == layers(runs) and len(layers(own)) > 10 * SMALL["num_hidden_layers"]
    assert own.rotary_emb.inv_freq.numel() == runs.rotary_emb.inv_freq.numel()


def test_a_text_decoders_tree_launches_what_its_own_model_launches_beyond_its_stand_in(
        monkeypatch):
    """A decode step's operators a layer, in a CPU census of each VL model's generate()
    and its stand-in's (benchmarks/data/vl_census_cpu.jsonl, `python
    benchmarks/vl_text_ab.py --census`): the tree's launches differ between the two by as
    many (GLM-4.1V's layer two fewer than GLM-4's; the others none)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import family_launches
    from piep.core.artifacts import read_jsonl
    rows = list(read_jsonl(ROOT / "benchmarks" / "data" / "vl_census_cpu.jsonl"))[1:]
    layer = {(r["model_type"], r["kind"]): family_launches.kernels(
        r["decode_step_per_layer_by_name"]) for r in rows}
    types = {t for t, _ in layer}
    assert types == {t for t, f in FAMILIES.items() if f.runs_as}
    for t in types:
        census = layer[(t, "own")] - layer[(t, "runs_as")]
        tree = (family_launches.tree_launches(t)[1]
                - family_launches.tree_launches(FAMILIES[t].runs_as)[1])
        assert tree == census, (t, tree, census)
    assert layer[("glm4v_text", "own")] - layer[("glm4v_text", "runs_as")] == -2
