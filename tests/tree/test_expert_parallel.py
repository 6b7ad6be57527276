"""Experts sharded whole over the tensor-parallel ranks (ep = tp): each rank holds 1/ep of
the experts at their full width, its grouped GEMMs run the busiest rank's pairs, and
generate()'s batched decode runs every pair on every rank; the layout, its grammar, its
records and its flags say so."""

import json

import numpy as np
import pytest

from piep import api
from piep.core.config import ModelSpec, Parallel, Workload
from piep.core.errors import ConfigError
from piep.core.layout import validate
from piep.tree import build_tree
from piep.tree.builder import rank_pairs

pytestmark = pytest.mark.pure

MOE = {"model_type": "qwen3_moe", "hidden_size": 256, "num_hidden_layers": 4,
       "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32,
       "intermediate_size": 512, "moe_intermediate_size": 128, "num_experts": 16,
       "num_experts_per_tok": 4, "vocab_size": 1024}


def _gpu():
    from piep.core.gpus import load_gpu
    return load_gpu("h200")


def _leaves(spec, tp, ep, engine=None, phase=0):
    dep = validate(spec, Parallel(tp=tp, ep=ep), Workload(batch=8, prompt_len=64, gen_len=4,
                                                          mode="eager"), _gpu(),
                   engine=engine, check_memory=False)
    return dep, {n.name: n for _, _, n in build_tree(dep).children[0].children[phase].leaves()}


def test_the_busiest_rank_gets_more_than_its_share_and_at_most_every_token():
    tokens = np.array([1.0, 8.0, 64.0, 4096.0])
    assert not rank_pairs(16, 4, tokens, 0.0, 1).any()
    for ep in (2, 4, 8):
        busiest = rank_pairs(16, 4, tokens, 0.0, ep)
        assert np.all(busiest > tokens * 4 / ep)
        assert np.all(busiest <= tokens * min(4, 16 // ep) + 1e-9)
        assert np.all(np.diff(busiest / tokens) < 0)  # the share evens out with the tokens
    # a trained router's popular experts sit on the first rank: it gets more still
    assert np.all(rank_pairs(16, 4, tokens, 1.0, 4) > rank_pairs(16, 4, tokens, 0.0, 4))


def test_a_rank_holds_its_experts_whole_and_runs_the_busiest_ranks_pairs():
    spec = ModelSpec.from_hf_config(MOE, name="moe")
    split, by_width = _leaves(spec, 2, 1)
    whole, by_expert = _leaves(spec, 2, 2)
    t = 8 * 64
    g_split, g_whole = by_width["experts_gate_up"], by_expert["experts_gate_up"]
    assert g_split.attrs["d_out"] == 128 and g_whole.attrs["d_out"] == 256
    assert g_split.tokens == t * 4
    assert g_whole.tokens == pytest.approx(float(rank_pairs(16, 4, t, 0.0, 2)))
    assert t * 4 / 2 < g_whole.tokens < t * 4
    assert g_whole.attrs["experts"] == pytest.approx(g_split.attrs["experts"] / 2)
    # the same weights on a rank either way (half the experts whole, or all at half width)
    assert whole.memory_items_gib()["all"]["weights"] == pytest.approx(
        split.memory_items_gib()["all"]["weights"])
    # generate()'s decode: every pair on every rank, each at the expert's full width
    _, decode = _leaves(spec, 2, 2, engine="hf-eager", phase=1)
    _, decode_split = _leaves(spec, 2, 1, engine="hf-eager", phase=1)
    assert decode["experts_gate_up"].kind == "experts_batched"
    assert decode["experts_gate_up"].flops == pytest.approx(
        2 * decode_split["experts_gate_up"].flops)


def test_expert_parallel_layouts_are_checked_in_one_line():
    w = Workload(batch=8, prompt_len=64, gen_len=4)
    with pytest.raises(ConfigError, match="ep = tp"):
        Parallel(tp=2, ep=4)
    with pytest.raises(ConfigError, match="no experts to shard"):
        dense = {k: v for k, v in MOE.items() if k not in ("num_experts", "num_experts_per_tok")}
        validate(ModelSpec.from_hf_config({**dense, "model_type": "qwen3"}, name="d"),
                 Parallel(tp=2, ep=2), w, _gpu())
    with pytest.raises(ConfigError, match="equal shares"):
        validate(ModelSpec.from_hf_config({**MOE, "num_experts": 12}, name="m"),
                 Parallel(tp=8, ep=8), w, _gpu(), check_memory=False)
    assert Parallel(tp=2, ep=2).label() == "tp2pp1dp1ep2"
    assert Parallel(tp=2).label() == "tp2pp1dp1"


def test_llama4_experts_are_routed_under_vllm_and_every_one_under_transformers():
    """transformers runs Llama 4's experts as one bmm over all of them (no sharding by
    expert); vLLM's fused MoE kernel routes each token to its top k, so ep = tp prices."""
    spec = ModelSpec.from_hf_config({**MOE, "model_type": "llama4_text",
                                     "num_local_experts": 16, "num_experts_per_tok": 1,
                                     "intermediate_size_mlp": 512}, name="l4")
    assert spec.dense_experts
    with pytest.raises(ConfigError, match="an engine that routes them"):
        _leaves(spec, 2, 2)
    _, bmm = _leaves(spec, 2, 1)
    assert bmm["experts_gate_up"].kind == "experts_bmm"
    _, routed = _leaves(spec, 2, 2, engine="vllm")
    gate_up = routed["experts_gate_up"]
    assert gate_up.kind == "experts_fused" and gate_up.attrs["d_out"] == 2 * 128
    assert 8 * 64 / 2 < gate_up.tokens < 8 * 64  # top 1: the busiest rank's share
    assert "shared_gate_proj" in routed


def test_an_expert_parallel_answer_is_flagged_widened_and_reads_back(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MOE))
    split = api.predict(str(path), tp=2, batch=8, prompt_len=64, gen_len=8)
    doc = api.predict(str(path), tp=2, ep=2, batch=8, prompt_len=64, gen_len=8)
    assert "unmeasured_expert_parallel" in doc["flags"]
    assert "unmeasured_expert_parallel" not in split["flags"]
    width = lambda d: np.log(d["interval"]["energy_j"][1] / d["energy_j"])  # noqa: E731
    assert width(doc) > width(split)
    assert doc["scenario"]["layout"]["ep"] == 2 and "ep" not in split["scenario"]["layout"]
    from piep.core.scenario import Scenario
    again = Scenario.from_json(doc["scenario"])
    assert again.parallel.ep == 2 and again.label().endswith("@tp2pp1dp1ep2")
    assert again.replace(tp=4).parallel.ep == 4  # experts sharded keep following the group
    from piep.compare import parse_candidate
    assert parse_candidate("moe@tp2ep2")[1] == {"tp": 2, "pp": 1, "dp": 1, "ep": 2}
    assert "ep" not in parse_candidate("moe@tp2")[1]


def test_records_and_designs_carry_the_experts_ranks():
    from piep.core.records import run_key
    from piep.sampling.grid import parallel_workload
    row = {"model": "m", "tp": 2, "pp": 1, "dp": 1, "batch": 8, "prompt_len": 64,
           "gen_len": 4, "mode": "eager"}
    assert run_key(row) == "m|2|1|1|8|64|4|eager"
    assert run_key({**row, "ep": 2}) == "m|2|1|1|8|64|4|eager|ep2"
    assert parallel_workload({**row, "ep": 2})[0].ep == 2
    from _paths import ROOT
    design = [json.loads(line) for line in (ROOT / "calibration" / "h200" / "moe" /
                                            "design_eager_ep.jsonl").read_text().splitlines()]
    assert {(r["tp"], r["ep"]) for r in design} == {(2, 1), (2, 2), (4, 1), (4, 4), (8, 1),
                                                     (8, 8)}


def test_measure_refuses_expert_parallel_in_one_line(capsys):
    from piep.cli import main
    assert main(["measure", "--model", "llama-2-7b", "--ep", "2"]) == 2
    assert "--ep" in capsys.readouterr().err


def test_transformers_tp_hooks_the_experts_module_once_a_layer():
    """transformers' plan shards a mixture of experts' experts module (`moe_tp_experts`,
    one hooked call a layer, its host time `tp_call_host_s` at tp > 1) beside the
    projections; where its plan leaves them whole (Qwen2-MoE) no call is hooked."""
    spec = ModelSpec.from_hf_config(MOE, name="moe")
    for engine in (None, "hf-eager"):
        for phase in (0, 1):
            _, leaves = _leaves(spec, 2, 1, engine=engine, phase=phase)
            calls = {n: node.attrs.get("tp_calls", 0) for n, node in leaves.items()}
            assert calls["experts_down"] == 1 and calls["experts_gate_up"] == 0
            assert calls["q_proj"] == calls["o_proj"] == 1 and calls["router"] == 0
    qwen2 = ModelSpec.from_hf_config({**MOE, "model_type": "qwen2_moe",
                                      "shared_expert_intermediate_size": 128}, name="q2")
    _, leaves = _leaves(qwen2, 2, 1, engine="hf-eager")
    assert leaves["experts_down"].attrs.get("tp_calls", 0) == 0
    assert leaves["shared_down_proj"].attrs["tp_calls"] == 1


def test_transformers_expert_parallel_plan_shards_the_experts_only():
    """Under transformers' expert-parallel plan (`enable_expert_parallel`: the config's
    `base_model_ep_plan` in place of its tensor-parallel plan) the routed experts are
    sharded by expert and nothing else: every rank runs the whole attention, the dense
    layers and the LM head, and one all-reduce a sparse layer sums the experts; vLLM's
    expert parallelism keeps the attention split over the tensor-parallel ranks."""
    spec = ModelSpec.from_hf_config({**MOE, "mlp_only_layers": [0]}, name="moe")
    hf, hf_leaves = _leaves(spec, 2, 2, engine="hf-eager")
    vllm, vllm_leaves = _leaves(spec, 2, 2, engine="vllm")
    assert hf.hf_ep_plan and not vllm.hf_ep_plan
    assert hf.heads_per_rank == 8 and vllm.heads_per_rank == 4
    assert hf_leaves["q_proj"].attrs["d_out"] == 2 * vllm_leaves["q_proj"].attrs["d_out"]
    assert hf_leaves["lm_head"].attrs["d_out"] == 1024
    assert "allgather_logits" in vllm_leaves and "allgather_logits" not in hf_leaves
    assert "allreduce_attn" in vllm_leaves and "allreduce_attn" not in hf_leaves
    reduces = [(layer.name, [n.name for n in layer.children if n.kind == "allreduce"])
               for layer in build_tree(hf).children[0].children[0].children[0].children
               if layer.kind == "layer"]
    assert dict(reduces) == {"layer_dense": [], "layer_sparse": ["allreduce_mlp"]}
    # the dense layer's MLP whole; hooked calls: the router and the experts module only
    assert hf_leaves["down_proj"].attrs["d_in"] == 512
    calls = {n for n, node in hf_leaves.items() if node.attrs.get("tp_calls")}
    assert calls == {"router", "experts_down"}
    # the attention, dense MLP and head on every rank: more weights than vLLM's split
    assert hf.memory_items_gib()["all"]["weights"] > vllm.memory_items_gib()["all"]["weights"]
    assert hf.memory_items_gib()["all"]["kv_cache"] == pytest.approx(
        2 * vllm.memory_items_gib()["all"]["kv_cache"])


def test_a_family_without_a_tensor_parallel_plan_shards_by_its_expert_parallel_one(
        tmp_path):
    """gpt-oss has no tensor-parallel plan in transformers, only an expert-parallel one:
    tp > 1 is refused naming ep = tp, which answers; Granite MoE has neither."""
    oss = {**MOE, "model_type": "gpt_oss", "num_local_experts": 16,
           "intermediate_size": 128, "layer_types": ["full_attention"] * 4}
    oss.pop("num_experts")
    path = tmp_path / "oss.json"
    path.write_text(json.dumps(oss))
    with pytest.raises(ConfigError, match="ep=2 \\(its expert-parallel plan\\)"):
        api.predict(str(path), engine="hf-eager", tp=2, batch=8, prompt_len=64, gen_len=8)
    doc = api.predict(str(path), engine="hf-eager", tp=2, ep=2, batch=8, prompt_len=64,
                      gen_len=8)
    assert doc["energy_j"] > 0 and "unmeasured_expert_parallel" in doc["flags"]
    granite = ModelSpec.from_hf_config({**MOE, "model_type": "granitemoe",
                                        "num_local_experts": 16}, name="g")
    with pytest.raises(ConfigError, match="no expert-parallel plan"):
        _leaves(granite, 2, 2, engine="hf-eager")
