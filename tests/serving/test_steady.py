"""A server held full (piep.serving.steady), its fit (piep.fit.steady) and `piep steady`."""

import json
from dataclasses import replace

import numpy as np
import pytest

from piep.cli import main
from piep.core.errors import ConfigError, FitError
from piep.fit import steady as fs
from piep.serving import steady as st
from _paths import ROOT  # noqa: E402

pytestmark = pytest.mark.replay

ROWS = ROOT / "calibration" / "public" / "mlenergy-v3" / "rows.jsonl"
CENSUS = ROOT / "model_trees" / "public"


@pytest.mark.pure
def test_vllm_defaults_follow_its_rule():
    big = st.PagedServer.defaults("h100", 79.7)
    assert (big.max_num_batched_tokens, big.max_num_seqs) == (8192, 1024)
    a100 = st.PagedServer.defaults("a100", 79.2)  # big, but an A100: the small defaults
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    assert st.PagedServer.defaults("h100", 79.7, max_num_seqs=64,
                                   max_num_batched_tokens=None).max_num_seqs == 64
    with pytest.raises(ConfigError, match="max_num_seqs=0 must be >= 1"):
        st.PagedServer(max_num_seqs=0, max_num_batched_tokens=8)
    with pytest.raises(ConfigError, match="gpu_memory_utilization=1.5"):
        st.PagedServer(max_num_seqs=1, max_num_batched_tokens=8, gpu_memory_utilization=1.5)


@pytest.mark.pure
def test_lengths_moments_by_hand():
    one_bin = st.Lengths.histogram(10, [0, 2], [1])  # uniform on 0..2: mean 1, E[L^2] 4/3
    assert one_bin.output_mean == pytest.approx(1.0)
    assert one_bin.output_sq_mean == pytest.approx(4 / 3)
    fixed = st.Lengths.fixed(100, 50)
    assert fixed.position_mean == 25 and fixed.context_mean == 125
    # a spread of lengths: slots hold long requests longer, so the mean position is more
    # than half the mean length
    spread = st.Lengths.drawn([10, 30], [100, 300])
    assert spread.prompt_len == 20 and spread.output_mean == 200
    assert spread.position_mean == pytest.approx((100 ** 2 + 300 ** 2) / 2 / (2 * 200))
    with pytest.raises(ConfigError, match="n\\+1 ascending edges"):
        st.Lengths.histogram(10, [0, 1, 2], [1])
    with pytest.raises(ConfigError, match=">= 1 token"):
        st.Lengths.fixed(0, 10)


@pytest.mark.pure
def test_window_occupancy_by_hand():
    # 5 requests of 10 tokens to 2 slots: two start at 0 and end at 10; the window ends
    # when all but 3 have finished (the 2nd end, at 10): 2 running, positions 0..10 (mean
    # 5), and the 2 that start at 10 join within it
    occ = st.window_occupancy(st.Lengths.fixed(7, 10), 2, 5)
    assert occ.running == pytest.approx(2.0)
    assert occ.context_mean == pytest.approx(7 + 5)
    assert occ.new_per_iteration == pytest.approx(0.2)
    with pytest.raises(ConfigError, match="no steady window"):
        st.window_occupancy(st.Lengths.fixed(7, 10), 4, 5)
    endless = st.steady_occupancy(st.Lengths.fixed(7, 10), 2)
    assert endless.new_per_iteration == pytest.approx(0.2) and endless.context_mean == 12


@pytest.mark.pure
def test_new_prompt_weights_are_poisson():
    w = st.new_prompt_weights(2.5)
    k = np.arange(len(w))
    assert w.sum() == pytest.approx(1.0)
    assert w @ k == pytest.approx(2.5, rel=1e-3)
    assert st.new_prompt_weights(0.0).tolist() == [1.0]


def _dep(model="Llama-3.1-8B-Instruct", tp=1, gpu="h100", ep=1):
    from piep.api import resolve, scenario
    res = resolve(scenario(str(CENSUS / f"{model}.json"), gpu=gpu, tp=tp, ep=ep,
                           engine="vllm", batch=1, prompt_len=16, gen_len=2,
                           allow_uncalibrated=True))
    return res.scenario.deployment, res.cost_model


def test_kv_cache_memory_by_hand():
    dep, _ = _dep()
    # Llama 3.1 8B: 32 layers x 8 KV heads x 128 x (K and V) x 2 bytes
    assert st.kv_bytes_per_token(dep) == 32 * 8 * 128 * 2 * 2
    dep2, _ = _dep(tp=2)
    assert st.kv_bytes_per_token(dep2) == st.kv_bytes_per_token(dep) / 2
    server = st.PagedServer.defaults("h100", dep.gpu.memory_gib, max_num_seqs=4096)
    mem = st.kv_memory_gib(dep, server)
    assert mem["budget"] == pytest.approx(0.9 * dep.gpu.memory_gib)
    assert mem["kv_cache"] == pytest.approx(mem["budget"] - mem["weights"] - mem["activations"]
                                            - mem["runtime"])
    lengths = st.Lengths.fixed(256, 400)
    c = st.concurrency(dep, server, lengths)
    assert c["kv_limited"] and c["running"] == pytest.approx(
        c["kv_tokens"] / (256 + 200 + 8))
    less = st.concurrency(dep, replace(server, gpu_memory_utilization=0.5), lengths)
    assert less["running"] < c["running"]
    few = st.concurrency(dep, replace(server, max_num_seqs=8), lengths)
    assert few["running"] == 8 and not few["kv_limited"]


def test_vllm_memory_refusals_name_the_fix():
    dep, _ = _dep("Qwen3-32B")
    server = st.PagedServer.defaults("h100", dep.gpu.memory_gib, max_num_seqs=8)
    with pytest.raises(FitError, match="less than one request .* use a larger tp"):
        st.concurrency(dep, server, st.Lengths.fixed(20000, 30000))
    with pytest.raises(FitError, match="leave no KV cache .* raise gpu_memory_utilization "
                                       "above 0.8"):
        st.kv_memory_gib(dep, replace(server, gpu_memory_utilization=0.5))


def test_parts_move_the_right_way():
    dep, model = _dep()
    server = st.PagedServer.defaults("h100", dep.gpu.memory_gib, max_num_seqs=256)
    ref = st.SteadyProfile.neutral("h100")

    def outcome(running, context, new=0.0):
        return st.parts(dep, model, server, 256, st.Occupancy(running, context, new)
                        ).outcome(ref)
    small, big = outcome(8, 600), outcome(128, 600)
    assert big["output_tokens_per_s"] > small["output_tokens_per_s"]
    assert big["j_per_output_token"] < small["j_per_output_token"]  # the weights shared
    assert outcome(64, 6000)["iteration_s"] > outcome(64, 600)["iteration_s"]  # keys
    assert outcome(64, 600, 1.0)["iteration_s"] > outcome(64, 600)["iteration_s"]  # prompts
    p = st.parts(dep, model, server, 256, st.Occupancy(64, 600, 0.5))
    assert p.weight.sum() == pytest.approx(1.0) and np.all(p.time_s >= 0)
    assert p.time_s[:, 3].sum() == 0  # one GPU: no collective
    # the profile's terms: a time scale on a group moves the time by that group's share
    fast = replace(ref, time_scale={**ref.time_scale, "fixed": 0.5})
    t_ref, _ = p.iteration(ref)
    t_fast, _ = p.iteration(fast)
    assert t_ref - t_fast == pytest.approx(0.5 * p.weight @ p.time_s[:, 0])


@pytest.mark.pure
def test_a_server_held_full_draws_no_more_than_its_boards_limit():
    """Each iteration kind is held under the boards' power limit, as a stream's iterations
    are: a profile that would price more power reads the limit."""
    dep, model = _dep()
    server = st.PagedServer.defaults("h100", dep.gpu.memory_gib, max_num_seqs=256)
    p = st.parts(dep, model, server, 256, st.Occupancy(128, 600, 1.0))
    assert p.limit_w == dep.gpu.max_power_w * dep.parallel.world_size
    hot = replace(st.SteadyProfile.neutral("h100"), power_scale=5.0)
    assert p.outcome(hot)["power_w"] == pytest.approx(p.limit_w)
    assert p.outcome(st.SteadyProfile.neutral("h100"))["power_w"] < p.limit_w


def test_fit_recovers_known_terms():
    dep, model = _dep()
    server = st.PagedServer.defaults("h100", dep.gpu.memory_gib)
    truth = st.SteadyProfile("x", "h100", {"fixed": 0.8, "tokens": 1.1, "keys": 0.9,
                                           "comm": 1.0}, 0.0005, 1.05)
    cases = []
    for running in (8, 32, 128, 256):
        for context, new in ((500, 0.0), (3000, 0.05), (8000, 0.01)):
            p = st.parts(dep, model, server, 256, st.Occupancy(running, context,
                                                              running * new))
            o = p.outcome(truth)
            cases.append(fs.SteadyCase(p, o["output_tokens_per_s"], o["j_per_output_token"],
                                       {"model": str(running)}))
    got, info = fs.fit(cases, name="x", gpu="h100", prior_log_sd=None)
    assert info["rms_log"] < 1e-3
    for g in ("fixed", "tokens", "keys"):
        assert got.time_scale[g] == pytest.approx(truth.time_scale[g], rel=0.02)
    assert got.power_scale == pytest.approx(1.05, rel=0.02)
    # the prior holds the scales nearer piep's own pricing than the cases alone would
    shrunk, _ = fs.fit(cases, name="x", gpu="h100")
    assert abs(np.log(shrunk.time_scale["fixed"])) < abs(np.log(got.time_scale["fixed"]))
    with pytest.raises(FitError, match="at least"):
        fs.fit(cases[:3], name="x", gpu="h100")
    # held out by group: each group's outcome from a fit without it
    out = fs.held_out(cases, lambda c: c.labels["model"], name="x", gpu="h100")
    ratios = fs.energy_ratios(cases, out)
    assert np.all(np.abs(ratios - 1) < 0.25)
    lo, hi = fs.interval(np.array([0.8, 0.9, 1.0, 1.1, 1.25]))
    assert lo < 1 < hi and lo == pytest.approx(1 / np.percentile([0.8, 0.9, 1.0, 1.1, 1.25], 95))


@pytest.mark.replay
def test_every_public_row_is_admitted():
    """vLLM ran every batch size of the public rows: the memory check admits each, and its
    concurrency is within 25 % of the running requests the H100 rows measured, but for
    one row in twenty at most (Qwen3-30B-A3B at tp = ep = 2 held 1,019 requests where its
    KV cache should hold 719: reports/public.md lists each row the cache limits)."""
    import sys
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from public_mlenergy import MODELS, PROMPT_LEN
    rows = [json.loads(line) for line in ROWS.read_text().splitlines()]
    deps, far = {}, []
    for r in rows:
        gpu = r["gpu_model"].lower()
        key = (r["model_id"], r["tp"], r.get("ep", 1), gpu)
        if key not in deps:
            deps[key] = _dep(MODELS[r["model_id"]].stem, r["tp"], gpu, r.get("ep", 1))[0]
        dep = deps[key]
        server = st.PagedServer.defaults(gpu, dep.gpu.memory_gib,
                                         max_num_seqs=r["max_num_seqs"])
        lengths = st.Lengths.histogram(PROMPT_LEN[r["task"]], r["output_len_bins"],
                                       r["output_len_counts"])
        running = st.concurrency(dep, server, lengths)["running"]  # admitted: no FitError
        if gpu == "h100":  # (B200's runs held more than their KV cache should: the report)
            if running != pytest.approx(r["avg_batch_size"], rel=0.25):
                far.append((r["model_id"], r["tp"], r["max_num_seqs"], round(running)))
    h100 = sum(r["gpu_model"] == "H100" for r in rows)
    assert len(far) <= h100 / 20, far


@pytest.mark.replay
def test_shipped_profile_and_its_flags():
    profile, flags = st.load_profile("vllm", "h100")
    assert flags == ("supplied_profile",) and profile.interval is not None
    lo, hi = profile.interval
    assert lo < 1 < hi
    assert st.load_profile("vllm", "b200")[0].gpu == "b200"
    nearest, other = st.load_profile("vllm", "h200")  # by bandwidth: H100's, not B200's
    assert other == ("supplied_profile", "steady_profile_other_gpu") and nearest.gpu == "h100"
    with pytest.raises(ConfigError, match="has no steady-state model"):
        st.load_profile("sglang", "h100")


def test_steady_cli(capsys):
    model = str(CENSUS / "Llama-3.1-8B-Instruct.json")
    assert main(["steady", "--model", model, "--max-num-seqs", "64", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "piep.steady_state" and doc["running_requests"] == 64
    assert "uncalibrated_gpu" not in doc["flags"] and "supplied_profile" in doc["flags"]
    lo, hi = doc["interval"]["j_per_output_token"]
    assert lo < doc["j_per_output_token"] < hi
    assert doc["j_per_request"] == pytest.approx(doc["j_per_output_token"]
                                                 * doc["workload"]["output_len_mean"])
    assert main(["steady", "--model", model, "--max-num-seqs", "64"]) == 0
    assert "running requests" in capsys.readouterr().out
    for argv, msg in ((["--output-len", "abc"], "output_len='abc'"),
                      (["--max-num-seqs", "0"], "max_num_seqs=0"),
                      (["--gpu-memory-utilization", "0"], "gpu_memory_utilization=0"),
                      (["--output-len", "200000"], "beyond max_position_embeddings")):
        assert main(["steady", "--model", model, *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and len(err.splitlines()) == 1


def test_a_steady_states_experts_run_vllms_fused_kernel():
    """vLLM's fused_moe: the steady state's experts are one Triton GEMM each (gathers and
    routing weights inside: no permute, mask or unpermute passes), each expert's rows
    padded to the kernel's block (16 rows while a call's tokens are at most its experts,
    else 64), priced as GEMMs; transformers' engines keep their grouped GEMMs."""
    from piep.tree import build_tree
    from piep.tree.builder import routed_grouped_rows
    dep = st.work(_dep("Qwen3-30B-A3B")[0], 96, 1, 2)
    kinds = {n.kind for _, _, n in build_tree(dep).leaves()}
    assert "experts_fused" in kinds and not kinds & {"moe_mask", "experts_gate_up"}
    hf = replace(dep, engine="hf-cb")
    assert {"moe_mask", "experts_gate_up"} <= {n.kind for _, _, n in build_tree(hf).leaves()}
    one = np.full(128, 8 / 128)  # (tokens choosing 8 of 128 experts, evenly)
    assert routed_grouped_rows(96, one, 768, fused=True) == pytest.approx(
        128 * 16 * (1 - (1 - 1 / 16) ** 96), rel=1e-4)  # (6 rows an expert: one block,
    # a second rarely)
    assert routed_grouped_rows(96, one, 768) > routed_grouped_rows(96, one, 768, fused=True)
    from piep.predict.module_models import FALLBACK_GROUP, model_group
    assert FALLBACK_GROUP[model_group("experts_fused")] == "linear"


def test_a_steady_profile_knows_the_families_it_was_fitted_on():
    """The shipped vllm profiles name their runs' families: a steady answer of one of them
    carries no `unmeasured_family`; of another mixture of experts (GLM-4.5), it does."""
    from piep import api
    from piep.predict.steady import load_profile
    profile, _ = load_profile("vllm", "h100")
    assert {"llama", "qwen3", "qwen3_moe", "gemma3_text"} <= set(profile.families)
    qwen = api.steady(str(CENSUS / "Qwen3-30B-A3B.json"), gpu="h100")
    glm = api.steady(str(CENSUS / "GLM-4.5-Air.json"), gpu="h100", tp=4)
    assert "unmeasured_family" not in qwen["flags"] and "unmeasured_family" in glm["flags"]


@pytest.mark.slow
def test_the_shipped_vllm_profiles_refit_from_their_records():
    """Each shipped vllm profile is what `benchmarks/public_mlenergy.py --fit` fits on
    the committed steady states today: a change to the pricing under it (as the experts'
    models were, 87d397d) shows here, not in silence."""
    from piep.core.artifacts import read_jsonl
    from piep.predict.steady import load_profile
    records = read_jsonl(ROOT / "calibration" / "public" / "mlenergy-v3" / "steady.jsonl")
    for gpu in ("h100", "b200"):
        shipped, _ = load_profile("vllm", gpu)
        refit, _ = fs.fit_records(records, engine="vllm", gpu=gpu, source=shipped.source)
        assert refit.families == shipped.families
        for got, want in ((refit.time_scale, shipped.time_scale),
                          ({"power": refit.power_scale}, {"power": shipped.power_scale})):
            assert got == pytest.approx(want, rel=1e-6), gpu


@pytest.mark.replay
def test_experts_sharded_over_the_servers_gpus():
    """`piep steady --ep`: vLLM's --enable-expert-parallel, each GPU a share of the experts
    whole; the same weights a GPU, the busiest GPU's experts priced, flagged; a record
    carrying `ep` is priced at it."""
    from piep import api
    model = str(CENSUS / "Qwen3-30B-A3B.json")
    split = api.steady(model, tp=2, output_len=300)
    whole = api.steady(model, tp=2, ep=2, output_len=300)
    assert whole["layout"] == {"tp": 2, "ep": 2, "gpus": 2} and "ep" not in split["layout"]
    assert "unmeasured_expert_parallel" in whole["flags"]
    assert "unmeasured_expert_parallel" not in split["flags"]
    assert whole["memory_gib_per_gpu"] == split["memory_gib_per_gpu"]
    assert whole["j_per_output_token"] != pytest.approx(split["j_per_output_token"], rel=1e-3)
    rec = {"model": model, "gpu": "h100", "tp": 2, "engine": {"name": "vllm"},
           "server": {"max_num_seqs": 64}, "workload": {"prompt_len": 256,
                                                        "output_len_mean": 300},
           "requests": 500, "output_tokens_per_s": 1.0, "j_per_output_token": 1.0}
    cases = fs.cases_from_records([rec, {**rec, "ep": 2}])
    assert cases[0].parts.outcome(st.SteadyProfile.neutral("H100")) != \
        cases[1].parts.outcome(st.SteadyProfile.neutral("H100"))


@pytest.mark.replay
def test_public_rows_translate_their_layouts_and_the_fit_reads_the_kept_ones():
    """The leaderboard's expert-parallel label (tp 1, ep = its GPUs) is vLLM started at
    tp = its GPUs with --enable-expert-parallel; data parallel is not priced. The shipped
    fit reads exactly the rows `fitted_rows` keeps (bf16, no expert parallelism); the
    others are priced blind, each once."""
    import sys
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import public_mlenergy as pm
    assert pm.layout_of({"tensor_parallel": 1, "expert_parallel": 8, "data_parallel": 1},
                        8) == {"tp": 8, "ep": 8}
    assert pm.layout_of({"tensor_parallel": 4, "expert_parallel": 1}, 4) == {"tp": 4}
    assert pm.layout_of({"tensor_parallel": 1, "expert_parallel": 1, "data_parallel": 8},
                        8) is None
    assert pm._precision_of("deepseek-ai/DeepSeek-V3.1") == "FP8"
    assert pm._precision_of("openai/gpt-oss-20b") == "MXFP4"
    assert pm._precision_of("Qwen/Qwen3-8B") is None
    kept = pm.fitted_rows()
    assert all(r.get("ep", 1) == 1 and r["weight_precision"] == "bfloat16" for r in kept)
    shipped = [json.loads(line) for line in pm.STEADY.read_text().splitlines()]
    assert shipped == [pm.steady_record(r) for r in kept]
    fitted = {pm._row_key(r) for r in kept}
    blind = [pm._row_key(r) for r in pm.read_jsonl(pm.BLIND)]
    assert len(blind) == len(set(blind))
    held = {pm._row_key(r) for r in pm.read_jsonl(pm.ROWS)} - fitted
    assert held <= set(blind)  # (every row out of the fit was priced blind)


@pytest.mark.replay
def test_an_answer_of_what_no_run_had_widens_its_band():
    """Experts sharded over the GPUs, or MXFP4 experts, which no run of the profile had:
    the band's log half-widths x1.5, in `piep steady` and in a served stream alike."""
    from piep import api
    from piep.serving.serve import steady_interval
    profile, _ = st.load_profile("vllm", "h100")
    lo, hi = profile.interval
    band, words = st.answer_band(profile, ("unmeasured_expert_parallel", "out_of_range"))
    assert band == pytest.approx((lo ** 1.5, hi ** 1.5)) and "x1.5" in words
    assert st.answer_band(profile, ("out_of_range",)) == (profile.interval,
                                                          "held-out public rows")
    both, _ = st.answer_band(profile, ("unmeasured_expert_parallel", "mxfp4_unsampled"))
    assert both == pytest.approx((lo ** 2.25, hi ** 2.25))
    doc = api.steady(str(CENSUS / "gpt-oss-20b.json"), tp=1)
    assert "mxfp4_unsampled" in doc["flags"] and "x1.5" in doc["interval"]["from"]
    served = steady_interval(profile, 100.0, 10.0, ("unmeasured_expert_parallel",))
    assert served["energy_j"] == pytest.approx([100 * lo ** 1.5, 100 * hi ** 1.5])
    assert "widened" in served["level"]
