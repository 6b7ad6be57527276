"""Serving: traces, the continuous-batching scheduler simulator, and `piep serve`."""

import json

import numpy as np
import pytest

from piep.cli import main
from piep.core.errors import ConfigError
from piep.serving.costs import Curve, IterationCosts
from piep.serving.simulate import SchedulerPolicy, simulate
from piep.core.trace import make_trace, parse_dist, poisson_trace, read_trace
from _paths import ROOT  # noqa: E402

pytestmark = pytest.mark.replay


def _flat(t_iter=0.01, e_iter=1.0, idle_w=100.0):
    """Iterations that cost a fixed time and energy whatever they hold."""
    x = np.log2(np.array([1.0, 2.0 ** 20]))
    def one(v):
        return Curve(x, None, np.full(2, v / 3), np.full(2, e_iter / 3), *np.zeros((3, 2)))
    att = Curve(x, x, np.full((2, 2), t_iter / 3), np.full((2, 2), e_iter / 3),
                *np.zeros((3, 2, 2)))
    return IterationCosts(one(t_iter), att, one(t_iter), idle_w, False)


def test_trace_files_and_draws(tmp_path):
    jl = tmp_path / "t.jsonl"
    jl.write_text('{"id": "b", "arrival_s": 5, "prompt_len": 3, "gen_len": 2, "x": 1}\n'
                  '{"id": "a", "arrival_s": 2.5, "prompt_len": 4, "gen_len": 1}\n')
    t = read_trace(jl)
    assert t.ids == ("a", "b") and list(t.arrival_s) == [0.0, 2.5] and t.gen_tokens == 3
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,prompt_len,gen_len\n0,10,5\n0,10,5\n")  # a burst: ties
    assert len(read_trace(csv)) == 2
    with pytest.raises(ConfigError, match="request 1: gen_len=0.0 must be an integer from 1 to"):
        make_trace([0, 1], [4, 4], [3, 0])
    (tmp_path / "bad.jsonl").write_text('{"arrival_s": 0, "prompt_len": 3}\n')
    with pytest.raises(ConfigError, match="row 1 lacks gen_len"):
        read_trace(tmp_path / "bad.jsonl")
    (tmp_path / "num.jsonl").write_text('5\n')  # a JSON line that is no object
    with pytest.raises(ConfigError, match="row 1 lacks fields"):
        read_trace(tmp_path / "num.jsonl")
    d = parse_dist("lognormal:100:0.5:150", "x")(np.random.default_rng(0), 1000)
    assert d.min() >= 1 and d.max() <= 150 and 80 < np.median(d) < 120
    for bad in ("lognormal:100", "uniform:5:2", "normal:3", "-4", "nan"):
        with pytest.raises(ConfigError):
            parse_dist(bad, "--gen-len")
    a = poisson_trace(rate_per_s=10, requests=2000, prompt_len="64", gen_len="8", seed=3)
    assert 180 < a.arrival_s[-1] < 220 and a.ids[0] == "0"
    b = poisson_trace(rate_per_s=10, requests=2000, prompt_len="64", gen_len="8", seed=3)
    assert np.array_equal(a.arrival_s, b.arrival_s)  # the seed draws the same stream


def test_every_token_is_generated_once_and_fifo_holds():
    trace = make_trace([0, 0, 0, 0.5], [300, 20, 9000, 10], [5, 1, 3, 7])
    sim = simulate(trace, _flat(), SchedulerPolicy(max_batch_tokens=512))
    # prefill tokens: every prompt once; decode tokens: gen - 1 per request
    assert sim.it_prefill_tokens.sum() == trace.prompt_len.sum()
    assert sim.it_decode_tokens.sum() == (trace.gen_len - 1).sum()
    assert ((sim.it_prefill_tokens + sim.it_decode_tokens) <= 512).all()
    # the 9000-token prompt is split over iterations; FIFO: it starts before the later one
    assert np.isfinite(sim.first_token_s).all() and (sim.last_token_s >= sim.first_token_s).all()
    assert sim.first_token_s[1] <= sim.first_token_s[2]
    # every iteration costs 10 ms: the window is their count
    assert sim.end_s == pytest.approx(0.01 * len(sim.it_time_s) + sim.idle_s)
    # attributed energy sums to the iterations' energy
    assert sim.request_j.sum() == pytest.approx(sim.it_kernel_j.sum() + sim.it_gap_j.sum())


def test_idle_gaps_are_idle_and_memory_queues():
    trace = make_trace([0, 10], [8, 8], [2, 2])
    sim = simulate(trace, _flat(), SchedulerPolicy())
    assert sim.idle_s == pytest.approx(10 - 0.02, abs=1e-9) and sim.end_s == pytest.approx(10.02)
    # two blocks: the second request waits for the first to free its block
    tight = simulate(make_trace([0, 0], [200, 200], [3, 3]), _flat(),
                     SchedulerPolicy(block_size=256, num_blocks=1, safety_margin=0.0))
    assert tight.first_token_s[1] > tight.last_token_s[0] - 1e-12
    with pytest.raises(ConfigError, match="needs 3 KV blocks"):
        simulate(make_trace([0], [300], [300]), _flat(),
                 SchedulerPolicy(block_size=256, num_blocks=1))


def test_an_idle_engine_picks_up_what_arrives_while_it_wakes():
    """A burst that arrives within the engine's pickup is one batch; without it the first
    request runs alone. The wake-up is idle time, once per idle start."""
    burst = make_trace([0.0, 2e-5, 4e-5, 5.0], [8, 8, 8, 8], [2, 2, 2, 2])
    alone = simulate(burst, _flat(), SchedulerPolicy())
    woken = simulate(burst, _flat(), SchedulerPolicy(pickup_s=1e-4))
    assert alone.it_requests[0] == 1 and woken.it_requests[0] == 3
    assert woken.first_token_s[:3] == pytest.approx([1e-4 + 0.01] * 3)
    assert woken.first_token_s[3] == pytest.approx(5.0 + 1e-4 + 0.01)
    busy = (woken.it_time_s.sum())
    assert woken.idle_s == pytest.approx(woken.end_s - busy, abs=1e-12)
    with pytest.raises(ConfigError, match="pickup_s"):
        SchedulerPolicy(pickup_s=-1.0)


def test_the_pickup_is_read_off_the_iteration_logs():
    from piep.fit.engines import engine_records
    from piep.fit.serving import pickup_s
    records = engine_records("h200", "hf-cb")
    first = sorted(min(r.iterations.t_start_s) - min(q.arrival_s for q in r.requests)
                   for r in records if r.iterations is not None)
    assert pickup_s(records) == pytest.approx(first[len(first) // 2] if len(first) % 2
                                              else (first[len(first) // 2 - 1]
                                                    + first[len(first) // 2]) / 2)
    assert 1e-5 < pickup_s(records) < 5e-3  # the engine's loop wakes in well under 5 ms
    assert pickup_s([r for r in records if r.iterations is None]) == 0.0


def test_decoders_without_a_free_block_wait_and_finishers_leave_together():
    """A decoding request whose next token opens a KV block and finds none free waits (the
    first in scheduling order take the free blocks) and goes on once a finished request
    frees its blocks; requests that finish in one iteration leave together, the others
    keep their order. Every token is generated once."""
    trace = make_trace([0, 0, 0], [10, 10, 10], [20, 36, 52])
    sim = simulate(trace, _flat(), SchedulerPolicy(block_size=16, num_blocks=5,
                                                   safety_margin=0.0))
    decode = sim.it_decode_tokens.astype(int).tolist()
    # position 16 opens a second block for each: 2 free for 3 (the third waits until the
    # first ends, at iteration 20), then 2 decode until the second ends
    assert decode == [0] + [3] * 6 + [2] * 29 + [1] * 29
    assert sim.last_token_s.tolist() == pytest.approx([0.2, 0.36, 0.65])
    assert sim.it_decode_tokens.sum() == (trace.gen_len - 1).sum()
    assert sim.request_j.sum() == pytest.approx(sim.it_kernel_j.sum() + sim.it_gap_j.sum())
    together = simulate(make_trace([0] * 4, [10] * 4, [5, 5, 9, 5]), _flat(), SchedulerPolicy())
    assert together.it_decode_tokens.astype(int).tolist() == [0, 4, 4, 4, 4, 1, 1, 1, 1]
    assert together.last_token_s.tolist() == pytest.approx([0.05, 0.05, 0.09, 0.05])
    # 1 J an iteration, shared by its tokens: the prefill's 40, then 4 x 4, then 4 x 1
    assert together.request_j.tolist() == pytest.approx([1.25, 1.25, 5.25, 1.25])


def test_decode_only_iterations_run_together_as_one_at_a_time(monkeypatch):
    """Iterations that only decode run several at once (`_Decoding.decode_alone`): the
    simulation is the one of one iteration at a time, to the bit, where requests arrive
    mid-run, finish, open KV blocks, and where blocks run short."""
    import piep.serving.simulate as sim_module
    rng = np.random.default_rng(11)
    cases = [(poisson_trace(rate_per_s=3.0, requests=60, seed=2, prompt_len="lognormal:200:0.8:900",
                            gen_len="lognormal:90:0.8:600"), SchedulerPolicy(block_size=64)),
             (make_trace([0, 0, 0], [10, 10, 10], [20, 36, 52]),
              SchedulerPolicy(block_size=16, num_blocks=5, safety_margin=0.0))]
    for _ in range(30):  # small caches: decoders run short of blocks mid-run
        k = int(rng.integers(2, 6))
        prompt, gen = rng.integers(1, 30, k), rng.integers(2, 60, k)
        blocks = int(np.max(-(-(prompt + gen) // 8))) + int(rng.integers(1, 4))
        cases.append((make_trace(np.sort(rng.choice([0.0, 0.05], k)), prompt, gen),
                      SchedulerPolicy(block_size=8, num_blocks=blocks, safety_margin=0.0)))
    compared = 0
    for trace, policy in cases:
        try:
            together = simulate(trace, _flat(), policy)
        except ConfigError:  # a cache too small for them at once: no schedule to compare
            continue
        with monkeypatch.context() as m:
            m.setattr(sim_module, "DECODE_RUN", 10 ** 9)  # never together
            alone = simulate(trace, _flat(), policy)
        for field in together.__dataclass_fields__:
            assert np.array_equal(np.asarray(getattr(together, field)),
                                  np.asarray(getattr(alone, field)), equal_nan=True), field
        compared += 1
    assert compared >= 10


def test_serve_document_and_cli(tmp_path, capsys):
    trace = poisson_trace(rate_per_s=4, requests=40, prompt_len="lognormal:256:0.5:1024",
                          gen_len="uniform:16:64", seed=1)
    path = tmp_path / "t.jsonl"
    path.write_text(trace.to_jsonl())
    assert main(["serve", "--model", "llama-3-8b", "--trace", str(path), "--json",
                 "--out", str(tmp_path / "out"), "--plot", str(tmp_path / "p.png")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "piep.serving" and doc["requests"] == 40
    assert doc["engine_ref"]["name"] == "hf-cb"
    assert doc["energy_j"] == pytest.approx(sum(doc["breakdown_j"].values()))
    phases = ("prefill", "decode", "no_request")
    assert doc["energy_j"] == pytest.approx(sum(doc[k]["energy_j"] for k in phases))
    assert doc["time_s"] == pytest.approx(sum(doc[k]["time_s"] for k in phases))
    attributed = sum(r["energy_j"] for r in doc["per_request"])
    assert attributed == pytest.approx(doc["energy_j"] - doc["no_request"]["energy_j"])
    assert doc["j_per_output_token"] == pytest.approx(doc["energy_j"] / trace.gen_tokens)
    assert doc["j_per_request"] == pytest.approx(doc["energy_j"] / 40)
    lo, hi = doc["interval"]["energy_j"]
    assert lo < doc["energy_j"] < hi
    assert doc["ttft_s"]["p50"] <= doc["ttft_s"]["p99"] <= doc["e2e_s"]["p99"]
    assert (tmp_path / "out" / "serving.json").is_file() and (tmp_path / "p.png").is_file()

    # the same requests arriving 10x faster share iterations: less energy per token
    from piep.serving.serve import serve, serving_scenario
    slow = serve(serving_scenario("llama-3-8b", trace))
    fast_trace = make_trace(trace.arrival_s / 10, trace.prompt_len, trace.gen_len)
    fast = serve(serving_scenario("llama-3-8b", fast_trace))
    assert fast["j_per_output_token"] < slow["j_per_output_token"]
    assert fast["mean_requests_per_iteration"] > slow["mean_requests_per_iteration"]


def test_serving_at_an_unmeasured_tp_degree_has_a_wider_band():
    """hf-cb was replayed at tp=1 alone: at tp=2 the band widens x1.5 in log, flagged as a
    batch prediction at a tp degree its engine's runs never had is."""
    from piep.predict.learned import OUT_OF_RANGE_WIDENING
    from piep.serving.serve import serve, serving_scenario
    trace = poisson_trace(rate_per_s=2, requests=12, prompt_len="uniform:100:400",
                          gen_len="uniform:16:48", seed=3)
    half = {}
    for tp in (1, 2):
        doc = serve(serving_scenario("llama-3-8b", trace, tp=tp))
        lo, hi = doc["interval"]["energy_j"]
        assert lo < doc["energy_j"] < hi
        half[tp] = np.log(hi / doc["energy_j"])
        assert ("unmeasured_engine_layout" in doc["flags"]) == (tp == 2)
        assert ("tp=2, which none of its runs had" in doc["interval"]["level"]) == (tp == 2)
    assert half[2] == pytest.approx(OUT_OF_RANGE_WIDENING * half[1])


def test_serve_bad_input_is_one_line(capsys):
    assert main(["serve", "--model", "llama-3-8b"]) == 2
    assert "give --trace FILE or --rate R" in capsys.readouterr().err
    assert main(["serve", "--model", "llama-3-8b", "--rate", "nan"]) == 2
    assert "--rate=nan must be a positive number" in capsys.readouterr().err
    assert main(["serve", "--model", "llama-3-8b", "--rate", "2", "--gen-len", "lognormal:x"]) == 2
    assert "--gen-len" in capsys.readouterr().err


def test_a_user_policy_replaces_the_scheduler_and_host_time_and_is_flagged(tmp_path):
    from piep.serving.policy import read_policy
    from piep.serving.serve import serve, serving_scenario
    trace = poisson_trace(rate_per_s=20, requests=60, prompt_len="lognormal:512:0.5:2048",
                          gen_len="uniform:16:64", seed=3)
    scn = serving_scenario("llama-3-8b", trace)
    base = serve(scn)
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"name": "tight", "num_blocks": 200, "block_size": 16,
                                "max_batch_tokens": 512, "host": {"step_host_s": 0.0}}))
    doc = serve(scn, user_policy=read_policy(path))
    assert "unvalidated_engine" in doc["flags"] and "unvalidated_engine" not in base["flags"]
    assert "interval" not in doc and "interval" in base  # hf-cb's band says nothing here
    assert doc["scheduler"]["num_blocks"] == 200 and doc["scheduler"]["block_size"] == 16
    assert doc["scheduler"]["policy"]["name"] == "tight"
    assert "queueing_on_kv_memory" in doc["flags"]  # 3,200 KV slots hold few requests
    # no host time per step: decode steps are shorter than under hf-cb's profile
    free = serve(scn, user_policy=read_policy(_write(tmp_path, {"host": {
        "step_host_s": 0.0}})))
    assert free["tpot_s"]["p50"] < base["tpot_s"]["p50"]


def test_policy_host_terms_price_an_uncalibrated_gpu_and_the_roofline_says_why(tmp_path,
                                                                               capsys):
    """On a GPU priced by spec-sheet transfer, a policy's host terms replace its base's
    (serve refused them, naming --predictor learned even where it was given); the
    roofline, which has no host, is refused naming itself."""
    from piep.cli import main
    from piep.predict.table import KINDS
    trace = ROOT / "calibration" / "h200" / "engines" / \
        "hf-cb" / "traces" / "tiny.jsonl"
    argv = ["serve", "--model", "llama-3-8b", "--gpu", "h100", "--engine", "hf-cb",
            "--trace", str(trace), "--allow-uncalibrated", "--json", "--policy"]
    answers = []
    for host in ({"step_host_s": 0.0}, {"step_host_s": 0.01}):
        path = _write(tmp_path, {"max_batch_tokens": 4096, "host": host})
        assert main(argv + [str(path), "--predictor", "learned"]) == 0
        answers.append(json.loads(capsys.readouterr().out))
    assert answers[0]["time_s"] < answers[1]["time_s"]  # the host terms took effect
    assert {"uncalibrated_gpu", "unvalidated_engine"} <= set(answers[0]["flags"])
    # an out_of_range flag names its kinds in serve's answer too, as in predict's
    assert ("out_of_range" in answers[0]["flags"]) == bool(answers[0].get("out_of_range_kinds"))
    assert set(answers[0].get("out_of_range_kinds", ())) <= set(KINDS)
    h200 = [a for a in argv if a not in ("h100", "--allow-uncalibrated")]
    h200.insert(h200.index("--gpu") + 1, "h200")
    assert main(h200 + [str(path), "--predictor", "roofline"]) == 2
    err = capsys.readouterr().err
    assert "the roofline predictor has no host terms" in err and err.count("\n") == 1


def _write(tmp_path, doc, name="q.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("doc, needle", [
    ({"block": 16}, "unknown key(s) block"),
    ({"safety_margin": 2}, "safety_margin=2 must be between 0 and 0.99"),
    ({"num_blocks": 0}, "num_blocks=0 must be >= 1"),
    ({"max_batch_tokens": 8.5}, "must be an integer"),
    ({"num_blocks": 9, "kv_memory_share": 0.5}, "not both"),
    ({"host": {"cpu_s": 1}}, "unknown host key(s) cpu_s"),
    ({"host": {"step_host_s": -1}}, "host.step_host_s=-1 must be between 0 and 1"),
    ([1, 2], "give a JSON object"),
])
def test_bad_policy_files_are_one_line(tmp_path, capsys, doc, needle):
    path = _write(tmp_path, doc)
    assert main(["serve", "--model", "llama-3-8b", "--rate", "2", "--policy", str(path)]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err


def test_load_curve_rescales_the_same_requests():
    from piep.serving.serve import load_curve, serving_scenario
    trace = poisson_trace(rate_per_s=4, requests=40, prompt_len="lognormal:256:0.5:1024",
                          gen_len="uniform:16:64", seed=5)
    scn = serving_scenario("llama-3-8b", trace)
    curve = load_curve(scn, factors=(0.5, 1.0, 4.0))
    rates = [p["rate_per_s"] for p in curve]
    assert rates[1] == pytest.approx((len(trace) - 1) / trace.arrival_s.max())
    assert rates[0] == pytest.approx(rates[1] / 2) and rates[2] == pytest.approx(4 * rates[1])
    # more load shares iterations: more requests per iteration, fewer joules per token
    assert curve[2]["requests_per_iteration"] > curve[0]["requests_per_iteration"]
    assert curve[2]["j_per_output_token"] < curve[0]["j_per_output_token"]
    burst = make_trace([0, 0, 0], [64, 64, 64], [8, 8, 8])
    assert load_curve(serving_scenario("llama-3-8b", burst)) == []


def test_trace_rows_are_checked_one_by_one(tmp_path, capsys):
    with pytest.raises(ConfigError, match="request 1: arrival_s=-1.0 must be a finite number >= 0"):
        make_trace([0, -1], [4, 4], [3, 3])
    t = make_trace([3, 1, 1], [4, 5, 6], [2, 2, 2], ids=["a", "b", "c"])
    assert t.ids == ("b", "c", "a") and not t.was_sorted  # stable: b before c
    assert make_trace([0, 0, 1], [4, 4, 4], [2, 2, 2]).was_sorted
    from piep.serving.serve import serve, serving_scenario
    assert "unsorted_trace" in serve(serving_scenario("llama-2-7b", t))["flags"]
    # the longest prompt and the longest generation may sit in different requests
    ok = make_trace([0, 1], [3000, 30], [3, 2000])
    serving_scenario("llama-2-7b", ok)
    too_long = make_trace([0, 1], [30, 3000], [3, 2000], ids=["x", "y"])
    with pytest.raises(ConfigError, match="request y: prompt_len \\+ gen_len = 5000 exceeds"):
        serving_scenario("llama-2-7b", too_long)


def test_one_token_requests_have_no_tpot_and_the_json_stays_valid(capsys):
    assert main(["serve", "--model", "llama-3-8b", "--rate", "1", "--requests", "3",
                 "--gen-len", "1", "--json"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert doc["tpot_s"] == {"p50": None, "p90": None, "p99": None}
    assert doc["ttft_s"]["p50"] > 0


def test_the_engines_kv_blocks_are_those_its_replays_reported():
    """transformers' paged-cache memory handler as modelled reproduces the blocks the
    committed replays reported (MHA, GQA, biases, shapes in no public list) within 1 %,
    but for the largest model (mistral-small-24b, 44 GiB of weights: the engine found
    ~6 GiB less free memory than the model leaves, +8.9 % blocks), and a larger reserve or
    a smaller memory share leaves fewer blocks."""
    from piep.fit.engines import engine_records
    from piep.predict.engines import load_profile
    from piep.fit.serving import _scenario
    from piep.serving.serve import paged_cache, policy_of
    profile = load_profile("h200", "hf-cb")
    seen, off = {}, set()
    for rec in engine_records("h200", "hf-cb"):
        blocks = rec.cache_blocks
        scn = _scenario(rec, profile)
        got = policy_of(scn, profile).num_blocks
        assert got == pytest.approx(blocks, rel=0.1), rec.model
        if got != pytest.approx(blocks, rel=0.01):
            off.add(rec.model)
        seen[rec.model] = scn
    assert off <= {"mistral-small-24b"}
    assert len(seen) >= 10
    scn = seen["llama-2-7b"]
    full = paged_cache(scn, block_size=256, memory_percent=0.9, reserved_gib=1.0)
    assert paged_cache(scn, block_size=256, memory_percent=0.9, reserved_gib=3.0)[0] < full[0]
    assert paged_cache(scn, block_size=256, memory_percent=0.5, reserved_gib=1.0)[0] < full[0]
    assert full[1] == 8192  # the default token budget binds on an H200


def test_kind_time_scales_apply_to_their_rows_only():
    from piep.predict.host import HostTerms
    from piep.predict.table import KIND_ID
    host = HostTerms(time_scale={"prefill": 1.5, "decode": 1.0, "kind:attention": 2.0})
    kinds = np.array([KIND_ID["attention"], KIND_ID["lm_head"], KIND_ID["attention"]])
    t = host.kernel_time_s(np.ones(3), np.array([False, False, True]), np.ones(3), kinds)
    assert t.tolist() == [3.0, 1.5, 2.0]


def _replay_of(model, trace, base, name="llama-2-7b"):
    """A serving record as `piep measure --engine hf-cb` writes it (typed), made by simulating
    `trace` with `model` (what a replay on a GPU running exactly that model would log)."""
    from piep.core.models import load_model
    from piep.sampling.runner import model_shape
    from piep.fit.serving import SCHEDULER, _policy
    from piep.serving.serve import document, iteration_grid, serving_scenario
    spec = load_model(name)
    scn = serving_scenario(spec, trace, gpu=base.gpu, check_memory=False)
    policy = _policy(scn, 1.3)
    costs = iteration_grid(scn, policy).costs(model)
    sim = simulate(trace, costs, policy)
    doc = document(scn, trace, sim, costs, policy)
    q = sim.it_prefill_tokens + sim.it_decode_tokens
    from piep.core.records import ServingReplay
    return ServingReplay.from_json({
            "schema": "piep.serving_measurement", "schema_version": 1, "model": name,
            "config_hash": spec.config_hash(), "shape": model_shape(spec), "tp": 1,
            "engine": {"name": "hf-cb", "version": "test"}, "energy_j": doc["energy_j"],
            "time_s": doc["time_s"], "idle_power_w": 120.0, "trace": "synthetic",
            "cb_config": {"cache_num_blocks": policy.num_blocks,
                          "cache_block_size": SCHEDULER["block_size"]},
            "per_request": [{"id": r["id"], "arrival_s": float(a), "prompt_len": int(p),
                             "gen_len": int(g), "ttft_s": r["ttft_s"], "tpot_s": r["tpot_s"],
                             "e2e_s": r["e2e_s"]}
                            for r, a, p, g in zip(doc["per_request"], trace.arrival_s,
                                                  trace.prompt_len, trace.gen_len)],
            "iterations": {"t_start_s": sim.it_start_s.tolist(),
                           "t_end_s": (sim.it_start_s + sim.it_time_s).tolist(),
                           "q_tokens": q.tolist(), "kv_tokens": (sim.it_keys - q).tolist(),
                           "requests": sim.it_requests.tolist(),
                           "decode_requests": sim.it_decode_tokens.tolist()}})


@pytest.mark.slow
def test_the_serving_fit_recovers_an_engine_from_its_iteration_logs():
    """Replays simulated with known terms (slow attention, 30 ms per iteration, 90 W while
    waiting for the host) are fitted back: iteration times and window energies of a trace
    the fit never saw come out as the known engine gives them."""
    from piep.predict.store import load_learned
    from piep.fit.serving import _cases, _with_terms, case_row, fit_cb_profile
    base = load_learned("h200")
    truth = _with_terms(base, {"time_scale.kind:attention": 1.8,
                               "host_launch_s": 2e-5, "step_host_s": 0.03,
                               "request_host_s": 4e-4, "launch_gap_w": 90.0})
    train = [_replay_of(truth, poisson_trace(rate_per_s=r, requests=60, seed=s,
                                             prompt_len="lognormal:300:0.6:2000",
                                             gen_len="lognormal:60:0.5:200"), base)
             for r, s in ((2.0, 1), (20.0, 2))]
    test = _replay_of(truth, poisson_trace(rate_per_s=6.0, requests=80, seed=3,
                                           prompt_len="lognormal:500:0.5:2000",
                                           gen_len="lognormal:80:0.5:200"), base)
    profile = fit_cb_profile(base, train)
    assert profile.host.launch_gap_w == pytest.approx(90.0, abs=6.0)
    (case,) = _cases(base, [test], profile.meta.scheduler["reserved_gib"])
    row = case_row(case, profile.apply(base))
    assert row["pred_energy_j"] == pytest.approx(row["energy_j"], rel=0.03)
    assert row["pred_time_s"] == pytest.approx(row["time_s"], rel=0.03)
    assert row["pred_tpot_s"] == pytest.approx(row["tpot_s"], rel=0.05)


def test_a_stream_at_tp2_carries_its_collectives_and_waits():
    """The partition means what a batch prediction's does: a stream at tp=2 spends energy
    in collective transfers and in busy-waiting, on one GPU in neither; the parts add up to
    the energy; a burst's parts are a batch prediction's of the same requests."""
    from piep import api
    from piep.serving.serve import serve, serving_scenario
    burst = make_trace([0.0] * 16, [512] * 16, [128] * 16)
    for tp in (1, 2):
        doc = serve(serving_scenario("llama-2-13b", burst, tp=tp))
        parts = doc["breakdown_j"]
        assert sum(parts.values()) == pytest.approx(doc["energy_j"], rel=1e-12)
        if tp == 1:
            assert parts["communication"] == parts["wait"] == 0.0
            continue
        batch = api.predict("llama-2-13b", engine="hf-cb", tp=2, batch=16)["breakdown_j"]
        assert parts["communication"] > 0 and parts["wait"] > 0 and parts == batch


def test_the_default_requests_fit_the_models_context(capsys):
    """Drawn with the default lengths, 10,000 requests to a 4,096-token model all fit it
    (the defaults' cut-offs were 4,096 + 1,024 tokens: request 324 was refused)."""
    from piep.commands.serve import default_lengths
    assert default_lengths("llama-2-7b") == ("lognormal:512:0.6:3072", "lognormal:128:0.6:1024")
    assert default_lengths("qwen2.5-7b") == ("lognormal:512:0.6:4096", "lognormal:128:0.6:1024")
    assert default_lengths(None) == default_lengths("qwen2.5-7b")
    prompt, gen = default_lengths("llama-2-7b")
    trace = poisson_trace(rate_per_s=50.0, requests=10_000, prompt_len=prompt, gen_len=gen)
    assert int((trace.prompt_len + trace.gen_len).max()) <= 4096
    assert main(["serve", "--model", "llama-2-7b", "--rate", "50", "--requests", "2000",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 2000


def test_interp_reads_give_numpys_interpolation_to_the_bit():
    """The reads a serving fit fixes once (`interp_reads`) give what `np.interp` gives, to
    the bit: between points, at each point, before the first and past the last."""
    from piep.serving.costs import interp_reads
    rng = np.random.default_rng(3)
    axis = np.log2(2.0 ** np.arange(0.0, 6.01, 0.25))  # a grid's axis, as built
    x = np.concatenate([rng.uniform(-1.0, 7.0, 2000), axis, [axis[0] - 1e-12, axis[-1] + 1e-9]])
    lo, hi, offset, width = interp_reads(x, axis)
    for v in (rng.normal(size=len(axis)) * 30, np.log2(rng.uniform(1e-9, 1e3, len(axis)))):
        got = (v[hi] - v[lo]) / width * offset + v[lo]
        assert np.array_equal(got, np.interp(x, axis, v))


def test_iterations_priced_in_part_cost_what_the_whole_grid_gives():
    """What the serving fit prices to go fast is what the whole grid gives, to the bit:
    the logged iterations of several grids priced in one stack (`IterationTimes`), a
    grid priced at the points a known schedule reads, and a schedule re-priced at another
    gap power (the energies a simulation at that power gives; its times are refused
    changed)."""
    from piep.predict.store import load_learned
    from piep.serving.costs import IterationTimes
    from piep.serving.serve import iteration_grid, serving_scenario, with_host
    from piep.serving.simulate import repriced
    base = load_learned("h200")
    trace = poisson_trace(rate_per_s=20.0, requests=40, seed=5, prompt_len="lognormal:300:0.6:2000",
                          gen_len="lognormal:60:0.5:200")
    policy = SchedulerPolicy(num_blocks=400, max_batch_tokens=2048, max_requests_per_batch=64)
    items, sims = [], []
    for name, tp, probe in (("llama-2-7b", 1, None), ("llama-2-13b", 2, 2e-5)):
        grid = iteration_grid(serving_scenario(name, trace, tp=tp, gpu=base.gpu), policy)
        grid = grid.on_host(probe)
        sim = simulate(trace, grid.costs(base), policy)
        q = sim.it_prefill_tokens + sim.it_decode_tokens
        items.append((grid, q, sim.it_requests, sim.it_keys + 7.5))  # off the grid's points
        sims.append((grid, sim))
    model = with_host(base, host_launch_s=3e-5, request_host_s=4e-4)
    for host in (model, with_host(model, queue_ahead=True)):  # a gap shared by a stage
        for got, (grid, q, n, k) in zip(IterationTimes(items).times(host), items):
            assert np.array_equal(got, grid.costs(host, time_only=True).cost(q, n, k)[0])
    # times and energies at once (what a fit without iteration logs re-prices)
    for *got, (grid, q, n, k) in zip(*IterationTimes(items).costs(model), items):
        for a, b in zip(got, grid.costs(model).cost(q, n, k)):
            assert np.allclose(a, b, rtol=1e-12, atol=0) and b.any()
    hotter = with_host(base, launch_gap_w=base.host.launch_gap_w + 50.0)
    for grid, sim in sims:
        q = sim.it_prefill_tokens + sim.it_decode_tokens
        part = grid.costs(hotter, points=grid.read_points(q, sim.it_requests, sim.it_keys))
        whole = simulate(trace, grid.costs(hotter), policy)
        kernel_j, gap_j = repriced(sim, part)
        assert np.array_equal(kernel_j, whole.it_kernel_j)
        assert np.array_equal(gap_j, whole.it_gap_j)
        assert not np.array_equal(gap_j, sim.it_gap_j)
        with pytest.raises(ValueError, match="times"):
            repriced(sim, grid.costs(model))


def test_a_fit_without_iteration_logs_retimes_simulated_schedules():
    """A serving fit without iteration logs (an engine's benchmark) re-times the replays'
    simulated schedules at other terms: at the terms that simulated them it gives the
    simulations' own error; at others each iteration runs after the one before it and
    not before the requests it prefills arrive, and the error moves."""
    from piep.fit.engines import engine_records
    from piep.fit.serving import (START, _cases, _Frozen, _with_terms, back_to_back,
                                  predicted)
    from piep.serving.serve import run

    def simulated_error(model):  # the replays simulated at `model`, as `piep serve` does
        errs = []
        for c in cases:
            energy, tpot, e2e = predicted(c, *run(c.scn, c.trace, model, c.policy, c.grid))
            errs.append((np.log(tpot / c.meas[1]) ** 2 + np.log(e2e / c.meas[2]) ** 2
                         + np.log(energy / c.meas[0]) ** 2) / 3)
        return float(np.mean(errs))
    from piep.predict.store import load_learned
    base = load_learned("h200")
    reps = sorted(engine_records("h200", "hf-cb"), key=lambda r: len(r.requests))[:3]
    cases = _cases(base, reps, 1.3)
    at = _with_terms(base, {**START, "launch_gap_w": 90.0})
    frozen = _Frozen(cases, at)
    assert frozen.error(at) == pytest.approx(simulated_error(at), rel=1e-12)
    other = _with_terms(base, {**START, "step_host_s": 0.01, "time_scale.prefill": 0.6,
                               "launch_gap_w": 120.0})  # faster: requests would be early
    assert frozen.error(other) != pytest.approx(frozen.error(at), rel=1e-3)
    dt = frozen.costs.costs(other)[0][1]
    ready = frozen.ready[1, :len(dt)]
    first = frozen.first[frozen.by_case == 1] - frozen.ready.shape[1]
    end = back_to_back(dt, ready)
    start = end - dt
    assert (start >= ready - 1e-12).all() and (start[1:] >= end[:-1] - 1e-12).all()
    assert (start[first] >= cases[1].trace.arrival_s - 1e-12).all()
    assert np.isclose(start[1:], np.maximum(end[:-1], ready[1:]), rtol=1e-12).all()
    # the recurrence, step by step
    assert np.allclose(back_to_back(np.array([1.0, 2.0, 1.0, 1.0]), np.array([0.5, 0, 6, 0])),
                       [1.5, 3.5, 7.0, 8.0])


def test_the_fits_medians_are_numpys():
    """A fit's medians (two per replay at every step, every replay's at once) are numpy's
    to the bit: odd and even counts, ties, one value; NaN where there is none or one is
    NaN."""
    from piep.fit.serving import row_medians
    rng = np.random.default_rng(7)
    rows = [rng.lognormal(size=n) * rng.uniform(1e-3, 1e3)
            for n in (1, 2, 3, 4, 11, 100, 101, 1000) for _ in range(20)]
    rows += [np.array([2.0, 2.0, 5.0, 5.0]), np.array([]), np.array([1.0, np.nan])]
    got = row_medians(np.concatenate(rows), np.repeat(np.arange(len(rows)),
                                                      [len(r) for r in rows]), len(rows))
    assert got[-3] == 3.5 and np.isnan(got[-2]) and np.isnan(got[-1])
    assert all(g == float(np.median(r)) for g, r in zip(got[:-2], rows[:-2]))


def test_an_overloaded_stream_says_so_with_the_rate_the_engine_sustains(capsys):
    """400 requests at 10/s on llama-3-8b under hf-cb: the queue grows (TTFT from a
    fraction of a second to tens), flagged with the rate the engine took them in at; the
    same requests at 2/s, and at 80 % of that sustained rate, are not flagged."""
    from piep.serving.serve import serve
    from piep.core.scenario import Scenario

    def served(rate):
        trace = poisson_trace(rate_per_s=rate, requests=400, prompt_len="lognormal:512:0.6:4096",
                              gen_len="lognormal:128:0.6:1024", seed=0)
        return serve(Scenario.build("llama-3-8b", engine="hf-cb", trace=trace), hosts=False)
    fast = served(10.0)
    assert "overloaded" in fast["flags"] and fast["ttft_s"]["p99"] > 10
    load = fast["load"]
    assert 1.0 < load["sustainable_rate_per_s"] < 0.9 * load["arrival_rate_per_s"]
    for rate in (2.0, 0.8 * load["sustainable_rate_per_s"] * 10 / load["arrival_rate_per_s"]):
        calm = served(rate)
        assert "overloaded" not in calm["flags"], rate
        assert calm["load"]["sustainable_rate_per_s"] is None
    assert main(["serve", "--model", "llama-3-8b", "--rate", "10", "--requests", "400"]) == 0
    out = capsys.readouterr().out
    assert "overloaded: requests arrive at" in out and "the engine sustains about" in out


def test_held_out_folds_are_named_by_their_replays_and_the_engine_fitted(monkeypatch, caplog):
    """Progress named a replay's fold by its Python object id and called every engine
    fitted this way hf-cb."""
    from types import SimpleNamespace

    import piep.fit.serving as fs
    monkeypatch.setattr(fs, "fit_cb_profile", lambda base, recs, **kw: SimpleNamespace(
        apply=lambda b: b, meta=SimpleNamespace(scheduler={"reserved_gib": 1.0}, far_read={})))
    monkeypatch.setattr(fs, "_cases", lambda base, test, reserved, h, shared, pickup: test)
    monkeypatch.setattr(fs, "case_row", lambda c, model, far=None: {"model": c.model})
    monkeypatch.setattr(fs, "fold_map", lambda fn, groups: [fn(g) for g in groups])
    recs = [SimpleNamespace(energy_j=1.0, model="llama-3-8b", trace=f"traces/{t}.jsonl")
            for t in ("night", "burst", "night")]
    with caplog.at_level("INFO", logger="piep.train"):
        rows = fs.held_out_on_hosts(None, recs, by="trace", hosts=(False,), name="my-cb")
    assert len(rows[False]) == 3
    said = [r.getMessage() for r in caplog.records]
    assert [s.split(", ~")[0] for s in said] == [
        "my-cb leave-one-replay-out 1/3 (held out: llama-3-8b night.jsonl #1)",
        "my-cb leave-one-replay-out 2/3 (held out: llama-3-8b burst.jsonl #2)",
        "my-cb leave-one-replay-out 3/3 (held out: llama-3-8b night.jsonl #3)"]


def test_a_paged_engine_admits_a_batch_its_scheduler_queues(capsys):
    """hf-cb pages its KV cache: a batch whose static cache would not fit is priced (its
    scheduler queues what the blocks cannot hold yet); one that stalls the scheduler, and
    a model whose one request does not fit, are refused in one line saying why."""
    from piep.cli import main
    from piep.core.errors import FitError
    from piep.core.layout import validate
    from piep.core.config import Parallel, Workload
    from piep.core.gpus import load_gpu
    from piep.core.models import load_model
    w = Workload(batch=256, prompt_len=2000, gen_len=1000)
    with pytest.raises(FitError):  # a static batch needs ~180 GiB
        validate(load_model("llama-3-8b"), Parallel(), w, load_gpu("h200"), engine="hf-static")
    validate(load_model("llama-3-8b"), Parallel(), w, load_gpu("h200"), engine="hf-cb")
    argv = ["predict", "--model", "llama-3-8b", "--engine", "hf-cb", "--prompt-len", "2000",
            "--gen-len", "1000"]
    assert main(argv + ["--batch", "1024"]) == 2
    err = capsys.readouterr().err
    assert "the scheduler stalls" in err and "at most 254 of the longest" in err
    assert main(["predict", "--model", "llama-2-70b", "--engine", "hf-cb", "--gpu", "h100",
                 "--allow-uncalibrated"]) == 2
    assert "for one request" in capsys.readouterr().err


@pytest.mark.slow  # (seconds: the default tier's budget, reports/speed.md)
def test_a_sweep_prices_hf_cb_batches_as_predict_does():
    """A sweep shares a model and layout's iteration costs among its workloads and prices
    their batch trees in one table: every row is predict's answer of the point."""
    from piep import api
    from piep.sweep import grid, sweep
    configs = grid(models=["llama-3-8b"], tp=[1, 2], pp=[1], dp=[1], batch=[1, 6],
                   prompt_len=[100, 900], gen_len=[20, 70], engine=["hf-cb"])
    rows = sweep(configs)
    for cfg, row in zip(configs, rows):
        doc = api.predict(cfg["model"], **{k: v for k, v in cfg.items() if k != "model"},
                          hosts=False)
        assert row["energy_j"] == pytest.approx(doc["energy_j"], rel=1e-12)
        assert row["time_s"] == pytest.approx(doc["time_s"], rel=1e-12)
        assert row["flags"] == doc["flags"]


def test_the_api_takes_a_trace_file_by_its_path():
    """`api.serve(model, trace=PATH)`: the path is read as `piep serve --trace` reads it
    (it failed deep in the scenario on the string)."""
    from piep import api
    from _paths import ROOT
    path = ROOT / "calibration" / "h200" / "engines" / "hf-cb" / "traces" / "tiny.jsonl"
    by_path = api.serve("llama-2-7b", engine="hf-cb", trace=str(path), hosts=False)
    by_trace = api.serve("llama-2-7b", engine="hf-cb", trace=read_trace(path), hosts=False)
    assert by_path["energy_j"] == by_trace["energy_j"] and by_path["requests"] == 150


def test_a_stream_is_out_of_range_only_where_it_read():
    """The grid's rows far from the module samples name their kinds only where the
    stream's iterations read the grid: the corners of the cells their tokens, keys and
    requests fall in, the attention's by tokens and keys together."""
    from types import SimpleNamespace

    from piep.predict.table import KIND_ID
    costs = _flat()  # grids of 1 and 2 ** 20 on every axis (log2: 0 and 20)
    far = (np.array([0, 1, 1, 2]), np.array([0, 0, 1, 1]), np.array([0, 1, 0, 0]),
           np.array([KIND_ID[k] for k in ("q_proj", "attention", "rope", "sampling")]),
           np.array([1.2, 2.0, 2.0, 2.0]))
    costs = IterationCosts(costs.body, costs.attention, costs.head, costs.idle_power_w,
                           True, far=far, out_of_range_kinds=("attention", "q_proj",
                                                               "rope", "sampling"))
    one = SimpleNamespace(it_prefill_tokens=np.array([0]), it_decode_tokens=np.array([1]),
                          it_keys=np.array([1]), it_requests=np.array([1]))
    assert costs.within(one).out_of_range_kinds == ("q_proj",)
    more = SimpleNamespace(it_prefill_tokens=np.array([0, 3]), it_decode_tokens=np.array([1, 1]),
                           it_keys=np.array([9, 9]), it_requests=np.array([1, 2]))
    read = costs.within(more)
    assert read.out_of_range_kinds == ("attention", "q_proj", "rope", "sampling")
    # the farthest row of each kind read, and an engine whose replays read as far
    assert costs.farthest_read(more) == {"q_proj": 1.2, "attention": 2.0, "rope": 2.0,
                                         "sampling": 2.0}
    assert costs.within(more, allowance={"q_proj": 1.2, "rope": 2.5}).out_of_range_kinds \
        == ("attention", "sampling")
    assert costs.within(more, allowance={"q_proj": 1.1}).out_of_range_kinds \
        == ("attention", "q_proj", "rope", "sampling")
    # a prompt as long as its keys reads no point of more tokens than keys ("rope" sits at
    # the most tokens over one key) nor fewer tokens over the most keys ("attention")
    whole = SimpleNamespace(it_prefill_tokens=np.array([2 ** 20]), it_decode_tokens=np.array([0]),
                            it_keys=np.array([2 ** 20]), it_requests=np.array([1]))
    assert costs.within(whole).out_of_range_kinds == ()
    assert read.out_of_range and costs.within(one).out_of_range
    beyond = IterationCosts(costs.body, costs.attention, costs.head, 0.0, True,
                            far=tuple(v[1:] for v in far),
                            out_of_range_kinds=("attention", "rope", "sampling"))
    assert not beyond.within(one).out_of_range and beyond.within(one).out_of_range_kinds == ()
    none = IterationCosts(costs.body, costs.attention, costs.head, 0.0, False)
    assert none.within(one) is none


def _probed(time: str | None, probe_us: float, cpu: str = "cpu A", each=None):
    """A minimal replay begun at `time` on host `cpu`, its probe `probe_us` (and `each`: the
    single probes its median came from)."""
    from piep.core.records import ServingReplay
    doc = {"model": "llama-2-7b", "tp": 1, "time_s": 10.0, "energy_j": 1000.0,
           "host_cpu": cpu, "host_probe": {"launch_add_s": probe_us * 1e-6},
           "per_request": [{"id": "0", "arrival_s": 0.0, "prompt_len": 8, "gen_len": 8}]}
    if time:
        doc["provenance"] = {"time": time}
    if each:
        doc["host_probes"] = [{"launch_add_s": u * 1e-6} for u in each]
    return ServingReplay.from_json(doc)


def test_a_replays_host_is_the_median_probe_of_its_session():
    """Replays of one host CPU begun within ten minutes of each other share the median of
    their probes (each single probe where the record keeps them); a later session, another
    CPU and an undated replay keep their own."""
    from piep.fit.serving import pooled_host_probes
    reps = [_probed("2026-12-01T03:05:00+0000", 6.0),
            _probed("2026-12-01T03:09:00+0000", 9.5),
            _probed("2026-12-01T03:14:00+0000", 6.4, each=[6.2, 6.4, 6.6]),
            _probed("2026-12-01T03:30:00+0000", 8.0),     # 16 min later: a session apart
            _probed("2026-12-01T03:10:00+0000", 7.0, cpu="cpu B"),
            _probed(None, 9.9)]
    us = [round(r.host_probe_s * 1e6, 6) for r in pooled_host_probes(reps)]
    assert us == [6.4, 6.4, 6.4, 8.0, 7.0, 9.9]  # median of 6.0, 9.5, 6.2, 6.4, 6.6
    assert [round(r.host_probe_s * 1e6, 6) for r in reps][:2] == [6.0, 9.5]  # input as given


def test_host_time_per_key_lands_once_an_iteration_on_its_attention_group():
    """`key_host_s` (continuous batching's read indices, a Python list of every key an
    iteration reads) adds that much host time per key to each attention grid point, once
    however many layers gather the keys, at one gap power; the other groups and the
    kernels' energy are unchanged."""
    from piep.fit.serving import _cases, _with_terms, shipped_replays
    from piep.predict.store import load_learned
    base = load_learned("h200")
    rep = next(r for r in shipped_replays("h200") if r.model == "llama-2-7b")
    grid = _cases(base, [rep], 1.3)[0].grid.on_host(None)
    before = grid.costs(base)
    after = grid.costs(_with_terms(base, {"key_host_s": 1e-7}))
    keys = np.rint(np.exp2(before.attention.y))[None, :]
    assert after.attention.time_s - before.attention.time_s == pytest.approx(
        np.broadcast_to(1e-7 * keys, before.attention.time_s.shape), rel=1e-6, abs=1e-12)
    power = (after.attention.gap_j - before.attention.gap_j) \
        / (after.attention.time_s - before.attention.time_s)  # one gap power throughout
    assert power == pytest.approx(np.full(power.shape, power.flat[0]), rel=1e-6)
    assert np.array_equal(after.attention.kernel_j, before.attention.kernel_j)
    assert np.array_equal(after.body.time_s, before.body.time_s)
    assert np.array_equal(after.head.time_s, before.head.time_s)
