import pytest

from piep.core.config import Parallel, Workload
from piep.core.errors import ConfigError, FitError
from piep.core.layout import GIB, validate

pytestmark = pytest.mark.pure


def test_tp_must_divide_heads(make_dep):
    with pytest.raises(ConfigError, match=r"tp=3 does not divide num_attention_heads=32; use tp in"):
        make_dep("llama-2-7b", tp=3)


def test_kv_heads_replicated_when_tp_exceeds_them(make_dep):
    dep = make_dep("llama-3-8b", tp=16)
    assert dep.kv_heads_per_rank == 1
    assert any("replicated on 2 ranks" in n for n in dep.notes)


def test_pp_must_balance_layers(make_dep):
    with pytest.raises(ConfigError, match="pp=3 does not split num_hidden_layers=32"):
        make_dep("llama-2-7b", pp=3)


def test_batch_must_divide_dp(make_dep):
    with pytest.raises(ConfigError, match="not divisible by dp=2"):
        make_dep("llama-2-7b", dp=2, batch=3)


def test_bad_scalars():
    with pytest.raises(ConfigError, match="batch=-1"):
        Workload(batch=-1)
    with pytest.raises(ConfigError, match="tp=0"):
        Parallel(tp=0)
    with pytest.raises(ConfigError, match="mode"):
        Workload(mode="jit")


def test_a_mixture_of_experts_holds_every_expert(make_dep):
    """Mixtral 8x7B: its weights, every expert resident, are its 46.7 B parameters."""
    dep = make_dep("mixtral-8x7b", batch=1, prompt_len=128, gen_len=16)
    items = dep.memory_items_gib()["all"]
    assert items["weights"] * GIB == pytest.approx(dep.model.num_params() * 2, rel=1e-9)
    assert dep.model.num_params() == pytest.approx(46.7e9, rel=0.01)


def test_generate_decode_copies_each_pairs_experts(make_dep):
    """transformers' `batched_mm` (generate()'s decode steps) copies the gate_up and down
    weights of every (token, expert) pair: Mixtral at batch 128 needs 84 GiB for them alone,
    so one H200 refuses it under hf-eager and says why; the reference runner and a serving
    engine run the experts grouped and copy none."""
    def dep(engine, batch, check_memory=True):
        return make_dep("mixtral-8x7b", batch=batch, mode="eager", engine=engine,
                        check_memory=check_memory)
    m = dep("hf-eager", 1).model
    pairs = 128 * m.experts_per_token
    assert dep("hf-eager", 128, False).gathered_experts_bytes() == \
        pairs * 3 * m.ffn_of_experts * m.hidden_size * 2
    for engine in ("piep-eager", "hf-cb"):
        assert dep(engine, 128, False).gathered_experts_bytes() == 0
    dep("hf-eager", 64)  # (34 GiB of copies: fits)
    with pytest.raises(FitError, match=r"needs tp >= 2 \(activations: generate\(\)'s decode "
                                       r"copies each \(token, expert\) pair's expert weights, "
                                       r"84\.0 GiB"):
        dep("hf-eager", 128)
    dep("piep-eager", 128)


def test_eager_sinks_attention_holds_its_scores(make_dep):
    """gpt-oss's eager attention (transformers, its sinks) writes every prompt token's score
    of every key, two copies alive at once: at batch 8 of 8,192-token prompts 128 GiB,
    refused on one H200 without suggesting a tp transformers has no plan for; vLLM's flash
    kernel keeps none."""
    def dep(engine, batch, check_memory=True):
        return make_dep("openai/gpt-oss-20b", batch=batch, prompt_len=8192, gen_len=64,
                        mode="eager", engine=engine, check_memory=check_memory)
    m = dep("hf-eager", 1).model
    assert dep("hf-eager", 8, False).eager_scores_bytes() == \
        2 * 8 * m.num_heads * 8192 * 8193 * 2
    assert dep("vllm", 8, False).eager_scores_bytes() == 0
    dep("hf-eager", 2)
    with pytest.raises(FitError) as err:
        dep("hf-eager", 8)
    assert "needs tp" not in str(err.value)
    assert "the eager attention's scores of every prompt token's every key, 128.0 GiB" \
        in str(err.value)


def test_memory_items_llama2_7b_tp1(make_dep):
    dep = make_dep("llama-2-7b", batch=8, prompt_len=1024, gen_len=1024)
    items = dep.memory_items_gib()["all"]
    assert items["weights"] * GIB == pytest.approx(dep.model.num_params() * 2, rel=1e-9)
    # KV: 32 layers x 2 (k, v) x 8 seqs x 2048 positions x 4096 x 2 bytes = 8 GiB
    assert items["kv_cache"] == pytest.approx(8.0)
    # prefill MLP intermediate batch*prompt*ffn is in the activations
    assert items["activations"] * GIB > 3 * 8 * 1024 * 11008 * 2
    assert items["total"] == pytest.approx(sum(v for k, v in items.items() if k != "total"))


def test_kv_replication_counts_in_memory(make_dep):
    # llama-3-8b has 8 kv heads: tp=16 keeps one (replicated) kv head per rank, not 0.5
    dep = make_dep("llama-3-8b", tp=16, batch=1, prompt_len=1000, gen_len=24)
    kv = dep.memory_items_gib()["all"]["kv_cache"] * GIB
    assert kv == 32 * 2 * 1 * 1024 * 1 * 128 * 2


def test_70b_with_a_big_batch_does_not_fit_one_gpu_and_says_what_to_do(make_dep):
    # 131 GiB of weights fit a 140 GiB H200 alone; 64 x 2176 tokens of KV (~42 GiB) do not
    with pytest.raises(FitError) as err:
        make_dep("llama-3-70b", batch=64, prompt_len=2048)
    msg = str(err.value)
    assert "weights" in msg and "needs tp >= 2" in msg


def test_70b_fits_tp2(make_dep):
    dep = make_dep("llama-3-70b", tp=2)
    assert dep.peak_memory_gib() < dep.gpu.memory_gib


def test_every_designed_run_fits_its_board():
    """The runs piep's designs measured (or wait to) ran on their boards: the memory check
    refuses none of them (a check that held too much would refuse real runs)."""
    import json

    from piep.core.config import ModelSpec
    from piep.core.models import load_model
    from piep.core.scenario import gpu_profile
    from tests._paths import ROOT
    designs = sorted((ROOT / "calibration").glob("*/*/design*.jsonl"))
    assert len(designs) >= 20
    checked = 0
    for path in designs:
        gpu, _ = gpu_profile(path.parts[-3], allow_uncalibrated=True)
        for line in path.read_text().splitlines():
            row = json.loads(line)
            spec = ModelSpec.from_hf_config(row["config"], name=row["model"]) \
                if "config" in row else load_model(row["model"])
            validate(spec, Parallel(tp=row["tp"], pp=row["pp"], dp=row["dp"],
                                    ep=row.get("ep", 1)),
                     Workload(batch=row["batch"], prompt_len=row["prompt_len"],
                              gen_len=row["gen_len"], mode=row.get("mode", "graph")),
                     gpu, engine=row.get("engine"))
            checked += 1
    assert checked >= 400, checked
