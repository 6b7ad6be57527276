"""vLLM in the engine registry: a stream (and a batch, which is a stream arriving at once)
priced iteration by iteration from the steady state's parts and profile."""

import numpy as np
import pytest

from piep import api
from piep.core.errors import ConfigError
from piep.serving import paged, steady as st
from piep.serving.serve import served
from piep.serving.simulate import SchedulerPolicy, simulate
from piep.core.trace import make_trace

pytestmark = pytest.mark.replay


def _resolved(model="llama-3-8b", tp=1, gpu="h100", **kw):
    return api.resolve(api.scenario(model, gpu=gpu, tp=tp, engine="vllm", batch=1,
                                    prompt_len=16, gen_len=2, **kw))


@pytest.mark.parametrize("model,tp", [("llama-3-8b", 1), ("llama-3-70b", 4)])
def test_an_iteration_costs_what_the_steady_state_prices(model, tp):
    """The iteration of b decoding requests and k new prompts costs, under the profile,
    what the steady state's closed form gives for it (the same parts, interpolated)."""
    res = _resolved(model, tp)
    dep = res.scenario.deployment
    server = st.PagedServer.defaults(dep.gpu.name, dep.gpu.memory_gib)
    lengths = st.Lengths.fixed(512, 512)
    occ = st.steady_occupancy(lengths, st.concurrency(dep, server, lengths)["running"])
    parts = st.parts(dep, res.cost_model, server, 512, occ)
    profile = res.steady[0]
    scale = np.array([profile.time_scale[g] for g in st.GROUPS])
    _, _, costs = paged.priced(res)
    b, ctx = round(occ.running), occ.context_mean
    for k in range(3):
        t, ek, eg = costs.cost_one(b + 512 * k, b + k, b * ctx + 512 * k, b, 512 * k,
                                   k * 512 * 513 / 2)
        closed_t = parts.time_s[k] @ scale + profile.step_host_s
        assert t == pytest.approx(closed_t, rel=0.02)
        # both held under the boards' limit
        assert ek + eg == pytest.approx(min((parts.energy_j[k] @ scale) * profile.power_scale
                                            + profile.step_host_s * parts.idle_w,
                                            parts.limit_w * closed_t), rel=0.03)


def test_a_server_held_full_as_a_stream_is_the_steady_state():
    """Far more requests than slots, sent at once: over the middle of the run the stream
    costs per output token what `piep steady` says of the same server."""
    server = dict(max_num_seqs=64)
    doc = api.steady("llama-3-8b", gpu="h100", prompt_len=512, output_len=256, **server)
    assert not doc["kv_limited"]
    res = _resolved()
    dep = res.scenario.deployment
    n = 2000
    trace = make_trace(np.zeros(n), np.full(n, 512), np.full(n, 256))
    _, pol, costs = paged.priced(res, st.PagedServer.defaults(
        dep.gpu.name, dep.gpu.memory_gib, **server))
    sim = simulate(trace, costs, pol)
    mid = (sim.it_start_s > 0.25 * sim.end_s) & (sim.it_start_s < 0.75 * sim.end_s)
    j_per_token = (sim.it_kernel_j + sim.it_gap_j)[mid].sum() / sim.it_decode_tokens[mid].sum()
    assert j_per_token == pytest.approx(doc["j_per_output_token"], rel=0.05)
    assert sim.it_requests[mid].mean() == pytest.approx(64, rel=0.03)
    assert sim.preempted == 0


class _Flat:
    """Costs of one millisecond and one joule an iteration, whatever it holds."""
    reads_prefill = False

    def cost_one(self, tokens, requests, keys, *rest):
        return 1e-3, 1.0, 0.0


def test_preemption_recomputes_and_every_request_ends():
    """A cache too small for every request's growth: with preemption every request still
    gets all its tokens (first token once, last after it), blocks are all returned; without
    it, the scheduler stalls and says so."""
    n, prompt, gen = 12, 40, 60
    trace = make_trace(np.zeros(n), np.full(n, prompt), np.full(n, gen))
    pol = SchedulerPolicy(block_size=16, num_blocks=30, max_batch_tokens=512,
                          max_requests_per_batch=64, safety_margin=0.0, preempt=True)
    sim = simulate(trace, _Flat(), pol)
    assert sim.preempted > 0
    assert np.all(np.isfinite(sim.first_token_s)) and np.all(sim.last_token_s >
                                                               sim.first_token_s)
    # each request decodes gen - 1 tokens after its first, recomputed ones too (a
    # recomputed prefill also makes one of its tokens)
    made = sim.it_decode_tokens.sum() + sim.preempted
    assert made == n * (gen - 1)
    with pytest.raises(ConfigError, match="stalls"):
        simulate(trace, _Flat(), SchedulerPolicy(
            block_size=16, num_blocks=30, max_batch_tokens=512, max_requests_per_batch=64,
            safety_margin=0.0))


def test_a_vllm_batch_is_its_stream_and_flags_what_it_is():
    """`predict --engine vllm` is `serve` of the same requests arriving at once; on H100
    (its profile fitted there) no spec-sheet flag, on A100 (none fitted) both."""
    doc = api.predict("llama-3-8b", gpu="h100", engine="vllm", batch=32, prompt_len=512,
                      gen_len=128, hosts=False)
    trace = make_trace(np.zeros(32), np.full(32, 512), np.full(32, 128))
    result, _ = served(api.scenario("llama-3-8b", gpu="h100", engine="vllm", trace=trace))
    assert doc["energy_j"] == pytest.approx(result.outcome.energy_j, rel=1e-9)
    assert doc["time_s"] == pytest.approx(result.outcome.time_s, rel=1e-9)
    assert "supplied_profile" in doc["flags"] and "uncalibrated_gpu" not in doc["flags"]
    lo, hi = doc["interval"]["energy_j"]
    assert lo < doc["energy_j"] < hi
    other = api.predict("llama-3-8b", gpu="a100", engine="vllm", batch=32, prompt_len=512,
                        gen_len=128, hosts=False)
    assert {"steady_profile_other_gpu", "uncalibrated_gpu"} <= set(other["flags"])


def test_lower_load_costs_more_per_token():
    """The same requests arriving slower share fewer iterations: more J per output token
    (idle gaps and fewer rows per weight read)."""
    def j_per_token(rate):
        rng = np.random.default_rng(0)
        n = 300
        arrival = np.cumsum(rng.exponential(1 / rate, n))
        trace = make_trace(arrival - arrival[0], np.full(n, 256), np.full(n, 128))
        r, _ = served(api.scenario("llama-3-8b", gpu="h100", engine="vllm", trace=trace),
                      hosts=False)
        doc = r.to_json()
        # a slow stream idles between requests: active and generation-only figures leave
        # that out (and the prefill), each from the document's own blocks
        idle, pre = doc["no_request"]["energy_j"], doc["prefill"]["energy_j"]
        assert doc["j_per_output_token_active"] == pytest.approx(
            (doc["energy_j"] - idle) / doc["output_tokens"])
        assert doc["j_per_output_token_generation"] == pytest.approx(
            (doc["energy_j"] - idle - pre) / doc["output_tokens"])
        return r.outcome.energy_j / r.outcome.output_tokens, idle
    (slow, idle), (fast, _) = j_per_token(1.0), j_per_token(50.0)
    assert slow > 1.5 * fast and idle > 0


def test_a_policy_sets_the_vllm_server_and_nothing_else():
    """--policy's scheduler keys set vLLM's max_num_seqs, max_num_batched_tokens and block
    size (the profile still prices it: band kept, no unvalidated flag); hf-cb's host and
    memory keys are refused in one line."""
    from piep.serving.policy import UserPolicy
    trace = make_trace(np.zeros(64), np.full(64, 256), np.full(64, 64))
    scn = api.scenario("llama-3-8b", gpu="h100", engine="vllm", trace=trace)
    free, _ = served(scn, hosts=False)
    capped, _ = served(scn, hosts=False, user_policy=UserPolicy(
        name="eight", source="p.json", scheduler={"max_requests_per_batch": 8,
                                                  "max_batch_tokens": 2048}))
    assert capped.mean_requests_per_iteration <= 8 < free.mean_requests_per_iteration
    assert capped.outcome.time_s > free.outcome.time_s
    assert capped.interval is not None and "unvalidated_engine" not in capped.flags
    for bad in ({"scheduler": {"safety_margin": 0.1}}, {"host": {"step_host_s": 1e-3}}):
        with pytest.raises(ConfigError, match="belong.* to hf-cb"):
            served(scn, user_policy=UserPolicy(name="x", source="p.json", **bad))


def test_a_stream_held_full_has_its_steady_window():
    """Far more requests than slots at once: the window at the peak concurrency leaves the
    ramp-up and the drain out (the drain prefills nothing: cheap per output token), costing
    per token what `piep steady` says held full; a trickle without a plateau has none."""
    n = 2000
    trace = make_trace(np.zeros(n), np.full(n, 512), np.full(n, 256))
    r, _ = served(api.scenario("llama-3-8b", gpu="h100", engine="vllm", trace=trace),
                  user_policy=None, hosts=False)
    w = r.steady_window
    assert 0 < w["start_s"] < w["end_s"] < r.outcome.time_s
    steady = api.steady("llama-3-8b", gpu="h100", prompt_len=512, output_len=256)
    assert w["j_per_output_token"] == pytest.approx(steady["j_per_output_token"], rel=0.15)
    one = make_trace([0.0, 30.0], [64, 64], [4, 4])
    r1, _ = served(api.scenario("llama-3-8b", gpu="h100", engine="vllm", trace=one),
                   hosts=False)
    assert r1.steady_window is None


def test_sliding_layers_leave_the_cache_room_for_more_requests():
    """vLLM frees a sliding layer's blocks past its window: on Gemma 3 (five local layers
    to one global) the simulated server holds about the requests `piep steady` says its
    cache holds, not the fifth of them its tokens would; a model without sliding layers
    keeps its cache as it was."""
    from _paths import ROOT
    gemma = str(ROOT / "model_trees/public/gemma-3-12b-it.json")
    n = 1500
    trace = make_trace(np.zeros(n), np.full(n, 2048), np.full(n, 2048))
    res = api.resolve(api.scenario(gemma, gpu="h100", engine="vllm", trace=trace))
    dep = res.scenario.deployment
    _, pol, costs = paged.priced(res)
    mine = paged.for_trace(pol, dep, trace)
    assert mine.num_blocks > 2 * pol.num_blocks
    sim = simulate(trace, costs, mine)
    server = st.PagedServer.defaults(dep.gpu.name, dep.gpu.memory_gib)
    held = st.concurrency(dep, server, st.Lengths.fixed(2048, 2048))["running"]
    assert np.median(sim.it_requests) == pytest.approx(held, rel=0.2)
    llama = _resolved()
    _, plain, _ = paged.priced(llama)
    assert paged.for_trace(plain, llama.scenario.deployment, trace) is plain
