"""A serving engine piep cannot run, from its own benchmark: vLLM's and SGLang's result files
(fixtures written from the formats their code writes) read as replays, `piep meter
--serving-result` around the benchmark command, and an engine of one's own fitted `--like
hf-cb` on them that `piep serve --engine NAME` then answers for."""

import json
import sys

import pytest

from piep.sampling.bench_results import read_results, replay_record, requests_of
from piep.cli import main
from piep.core.errors import ConfigError
from piep.core.trace import poisson_trace
from _paths import ROOT  # noqa: E402

pytestmark = pytest.mark.replay

REQUESTS = {"input_lens": [100, 200, 50], "output_lens": [10, 0, 1],
            "ttfts": [0.05, 0.0, 0.04], "itls": [[0.01] * 9, [], []],
            "latencies": [0.14, 0.0, 0.04], "start_times": [1000.5, 1000.0, 1000.7],
            "errors": ["", "timeout", ""]}


def _vllm(**over):
    """A result as `vllm bench serve --save-result --save-detailed` writes it."""
    return {"date": "20261203-101500", "endpoint_type": "vllm", "backend": "vllm",
            "label": None, "model_id": "meta-llama/Llama-2-7b-hf", "num_prompts": 3,
            "request_rate": 2.0, "burstiness": 1.0, "max_concurrency": None,
            "duration": 0.9, "completed": 2, "failed": 1, "total_input_tokens": 150,
            "total_output_tokens": 11, "mean_ttft_ms": 45.0, **REQUESTS, **over}


def _sglang(**over):
    """A line as `python -m sglang.bench_serving --output-file F --output-details` writes."""
    rest = {k: v for k, v in REQUESTS.items() if k not in ("latencies", "start_times")}
    return {"backend": "sglang", "dataset_name": "random", "request_rate": float("inf"),
            "max_concurrency": None, "random_input_len": 128, "duration": 0.5,
            "completed": 2, "total_output_tokens_retokenized": 11, **rest, **over}


def test_a_vllm_result_is_read_as_a_replay():
    rows, failed, fmt = requests_of(_vllm(), "r.json")
    assert fmt == "vllm" and failed == 1
    assert [r["arrival_s"] for r in rows] == pytest.approx([0.5, 0.7])  # from the first sent
    first = rows[0]
    assert (first["prompt_len"], first["gen_len"], first["e2e_s"]) == (100, 10, 0.14)
    assert first["tpot_s"] == pytest.approx((0.14 - 0.05) / 9)
    assert rows[1]["tpot_s"] is None  # one token: no time per output token


def test_an_sglang_result_at_an_infinite_rate_is_a_burst(tmp_path):
    path = tmp_path / "sglang.jsonl"
    path.write_text(json.dumps(_sglang(request_rate=1.0)) + "\n" + json.dumps(_sglang()) + "\n")
    assert len(read_results(path)) == 2
    rec = replay_record(path, model="llama-2-7b", engine="sglang", engine_version="0.4",
                        energy_j=80.0)  # the last run
    assert [r["arrival_s"] for r in rec["per_request"]] == [0.0, 0.0]
    assert rec["per_request"][0]["e2e_s"] == pytest.approx(0.05 + 9 * 0.01)
    assert rec["trace"] == "sglang.jsonl#2" and rec["failed_requests"] == 1
    with pytest.raises(ConfigError, match=r"run 1 of 2\): sglang result without start_times"):
        replay_record(path, model="llama-2-7b", engine="sglang", engine_version="0.4",
                      energy_j=80.0, run_index=0)


@pytest.mark.parametrize("doc, needle", [
    ({k: v for k, v in _vllm().items() if k not in REQUESTS}, "run the benchmark with "
     "--save-detailed"),
    (_vllm(max_concurrency=8), "a steady state, not a stream of arrivals"),
    (_vllm(ttfts=[0.1]), "do not hold one entry per request"),
    (_vllm(errors=["x", "y", "z"]), "every request failed"),
    ({"duration": 1.0}, "neither a vLLM result"),
    (_vllm(), "no energy"),
    # what the file says is checked, not trusted (each was a traceback or was written)
    (_vllm(gpu_energy_j=80.0, input_lens=["100", 200, 50]), "input_lens='100' must be an"),
    (_vllm(gpu_energy_j=80.0, input_lens=[-100, 200, 50]), "input_lens=-100 must be an"),
    (_vllm(gpu_energy_j=80.0, input_lens=[], output_lens=[], ttfts=[], itls=[], latencies=[],
           start_times=[], errors=[]), "no requests"),
    (_vllm(gpu_energy_j=80.0, start_times=[float("nan"), 1000.0, 1000.7]),
     "start_times must be finite"),
    (_vllm(gpu_energy_j=1e30), "no board draws outside"),
    (_vllm(gpu_energy_j="80"), "no board draws outside"),
    (_vllm(gpu_energy_j=80.0, latencies=[0.01, 0.0, 0.04]), "no shorter than the time to"),
    (_vllm(gpu_energy_j=80.0, ttfts=["fast", 0.0, 0.04]), "ttft='fast'"),
    (_vllm(gpu_energy_j=80.0, itls=[[0.01, "x"], [], []]), "itls must be a list of finite"),
    (_vllm(gpu_energy_j=80.0, input_lens=[10_000_000, 200, 50]), "exceeds the context of"),
    (_vllm(gpu_energy_j=80.0, duration=-1), "duration=-1 must be a finite number > 0"),
])
def test_a_result_that_cannot_be_replayed_is_one_line(tmp_path, doc, needle):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=needle) as err:
        replay_record(path, model="llama-2-7b", engine="vllm", engine_version="0.11")
    assert "\n" not in str(err.value)


def test_the_meter_wraps_a_benchmark_and_keeps_its_duration(tmp_path, monkeypatch, capsys):
    """The window around the command (1 s at 300 W, idle 100 W) holds the benchmark's
    0.9 s: the start-up outside it is taken off at idle power."""
    import piep.commands.meter as cmd
    from test_meter import _fake_window
    monkeypatch.setattr(cmd, "_window", _fake_window)
    result, out = tmp_path / "result.json", tmp_path / "replays.jsonl"
    write = f"import json; json.dump({_vllm()!r}, open({str(result)!r}, 'w'))"
    args = ["meter", "--serving-result", str(result), "--model", "llama-2-7b", "--engine",
            "vllm", "--engine-version", "0.11", "--out", str(out)]
    assert main(args + ["--", sys.executable, "-c", write]) == 0
    rec = json.loads(out.read_text())
    window = rec["window"]
    assert window["outside_s"] == pytest.approx(window["time_s"] - 0.9)
    assert rec["energy_j"] == pytest.approx(window["energy_j"] - 100.0 * window["outside_s"])
    assert rec["schema"] == "piep.serving_measurement" and len(rec["per_request"]) == 2
    capsys.readouterr()
    assert main(args + ["--", sys.executable, "-c", "pass"]) == 2  # wrote no new result
    assert "wrote no" in capsys.readouterr().err
    assert len(out.read_text().splitlines()) == 1


def _simulated_vllm(truth, trace, base) -> dict:
    """What `vllm bench serve` would save of `trace` served by an engine that is exactly
    `truth` (piep's simulator with known terms), with vLLM's own energy metering."""
    from piep.fit.serving import _policy
    from piep.serving.serve import document, iteration_grid, serving_scenario
    from piep.serving.simulate import simulate
    scn = serving_scenario("llama-2-7b", trace, gpu=base.gpu, check_memory=False)
    policy = _policy(scn, 1.3)
    costs = iteration_grid(scn, policy).costs(truth)
    sim = simulate(trace, costs, policy)
    doc = document(scn, trace, sim, costs, policy)
    rq = doc["per_request"]
    return _vllm(duration=doc["time_s"], gpu_energy_j=doc["energy_j"],
                 input_lens=[int(p) for p in trace.prompt_len],
                 output_lens=[int(g) for g in trace.gen_len],
                 ttfts=[r["ttft_s"] for r in rq], latencies=[r["e2e_s"] for r in rq],
                 itls=[[r["tpot_s"]] * (int(g) - 1) for r, g in zip(rq, trace.gen_len)],
                 start_times=[500.0 + float(a) for a in trace.arrival_s],
                 errors=[""] * len(rq), completed=len(rq), failed=0)


@pytest.mark.slow
def test_a_serving_engine_of_your_own_is_fitted_from_its_benchmarks(tmp_path, monkeypatch,
                                                                    capsys):
    """Benchmarks of an engine that is exactly known (slow attention, 30 ms per iteration,
    90 W while the host works) at two rates, fitted `--like hf-cb`: `piep serve --engine
    NAME` then predicts a third rate as the engine serves it."""
    from piep.fit.serving import _with_terms
    from piep.predict.store import load_learned
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    base = load_learned("h200")
    truth = _with_terms(base, {"time_scale.kind:attention": 1.8,
                               "host_launch_s": 2e-5, "step_host_s": 0.03,
                               "request_host_s": 4e-4, "launch_gap_w": 90.0})
    replays = tmp_path / "replays.jsonl"
    for rate, seed in ((2.0, 1), (20.0, 2)):
        result = tmp_path / f"vllm_{rate}.json"
        result.write_text(json.dumps(_simulated_vllm(truth, poisson_trace(
            rate_per_s=rate, requests=60, seed=seed, prompt_len="lognormal:300:0.6:2000",
            gen_len="lognormal:60:0.5:200"), base)))
        assert main(["meter", "--serving-result", str(result), "--model", "llama-2-7b",
                     "--engine", "my-vllm", "--engine-version", "0.11", "--out",
                     str(replays)]) == 0
    capsys.readouterr()
    assert main(["train", "--engine", "my-vllm", "--like", "hf-cb", "--from-measurements",
                 str(replays), "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert fitted["like"] == "hf-cb" and fitted["version"] == "0.11"
    test = poisson_trace(rate_per_s=6.0, requests=80, seed=3,
                         prompt_len="lognormal:500:0.5:2000", gen_len="lognormal:80:0.5:200")
    seen = _simulated_vllm(truth, test, base)
    trace = tmp_path / "test.jsonl"
    trace.write_text(test.to_jsonl())
    assert main(["serve", "--model", "llama-2-7b", "--engine", "my-vllm", "--trace",
                 str(trace), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["engine"] == "my-vllm" or doc["engine_ref"]["name"] == "my-vllm"
    assert doc["energy_j"] == pytest.approx(seen["gpu_energy_j"], rel=0.05)
    assert doc["time_s"] == pytest.approx(seen["duration"], rel=0.05)
    # two replays cannot size a band: hf-cb's, flagged
    assert "few_runs_interval" in doc["flags"] and "hf-cb's 90 % band" in doc["interval"]["level"]


def test_a_user_engine_fitted_on_too_few_runs_takes_its_base_engines_band(tmp_path,
                                                                          monkeypatch):
    """A fit on 3 replays whose held-out errors were all small (a +-2.7 % band) does not
    print that band: each band is the wider of its own and hf-cb's, flagged."""
    import math
    from dataclasses import replace

    from piep import api
    from piep.fit.engines import widened_to_base
    from piep.predict.engines import load_profile, save_profile, user_profile_dir
    from piep.core.scenario import Scenario
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    shipped = load_profile("h200", "hf-cb")
    narrow = replace(shipped, name="my-cb", like="hf-cb", intervals={"all": math.log(1.027)},
                     time_intervals={"all": math.log(1.5)}, meta=replace(shipped.meta, lomo_runs=3))
    mine = widened_to_base(narrow, shipped, 3)
    assert mine.intervals["all"] == shipped.intervals["all"]  # hf-cb's is wider
    assert mine.time_intervals["all"] == math.log(1.5)  # its own is wider
    assert widened_to_base(narrow, shipped, 9) is narrow  # 9 held out size a band
    save_profile(mine, user_profile_dir("h200", "my-cb"))
    scn = Scenario.build("llama-2-7b", engine="my-cb", batch=4, gen_len=16)
    doc = api.predict(scn, hosts=False)
    theirs = api.predict(scn.replace(engine="hf-cb"), hosts=False)  # the same widenings
    assert doc["interval"]["energy_j"][1] / doc["energy_j"] == pytest.approx(
        theirs["interval"]["energy_j"][1] / theirs["energy_j"], rel=1e-9)
    assert "few_runs_interval" in doc["flags"] and "hf-cb's 90 % band" in doc["interval"]["level"]


def _held(n=60, concurrency=4, **over):
    """A `vllm bench serve --request-rate inf --max-concurrency 4` result: every request sent
    at once, four in flight at a time."""
    outs = [100 + 10 * (i % 5) for i in range(n)]
    fields = dict(request_rate="inf", max_concurrency=concurrency, num_prompts=n,
                  duration=12.0, input_lens=[200] * n, output_lens=outs, ttfts=[0.05] * n,
                  itls=[[0.01] * (o - 1) for o in outs], latencies=[1.0] * n,
                  start_times=[1000.0] * n, errors=[""] * n, gpu_energy_j=4800.0)
    return _vllm(**{**fields, **over})


def test_a_run_held_at_a_concurrency_is_a_steady_state(tmp_path, monkeypatch, capsys):
    from piep.sampling.bench_results import steady_record
    path = tmp_path / "held.json"
    path.write_text(json.dumps(_held()))
    rec = steady_record(path, model="llama-2-7b", engine="vllm", engine_version="0.11",
                        gpu="h100")
    tokens = sum(100 + 10 * (i % 5) for i in range(60))
    assert rec["output_tokens_per_s"] == pytest.approx(tokens / 12.0)
    assert rec["j_per_output_token"] == pytest.approx(4800.0 / tokens)
    assert rec["server"] == {"max_num_seqs": 4} and rec["workload"]["prompt_len"] == 200
    assert sum(rec["workload"]["output_len_counts"]) == 60
    path.write_text(json.dumps(_held(n=4)))
    with pytest.raises(ConfigError, match="many more requests than slots"):
        steady_record(path, model="llama-2-7b", engine="vllm", engine_version="0.11", gpu="h100")
    path.write_text(json.dumps(_held(request_rate=3.0)))
    with pytest.raises(ConfigError, match="--request-rate inf"):
        steady_record(path, model="llama-2-7b", engine="vllm", engine_version="0.11", gpu="h100")
    # piep meter around the benchmark: the window's energy, less its start-up at idle
    import piep.commands.meter as cmd
    from test_meter import _fake_window
    monkeypatch.setattr(cmd, "_window", _fake_window)
    result, out = tmp_path / "result.json", tmp_path / "steady.jsonl"
    write = f"import json; json.dump({_held()!r}, open({str(result)!r}, 'w'))"
    args = ["meter", "--serving-result", str(result), "--model", "llama-2-7b", "--engine",
            "vllm", "--engine-version", "0.11", "--out", str(out), "--", sys.executable, "-c",
            write]
    assert main(args) == 2 and "give --gpu" in capsys.readouterr().err
    assert not out.exists()
    assert main(args[:-4] + ["--gpu", "H100"] + args[-4:]) == 0
    rec = json.loads(out.read_text())
    window = rec["metered"]
    assert rec["schema"] == "piep.steady_measurement" and rec["gpu"] == "h100"
    assert rec["j_per_output_token"] * tokens == pytest.approx(
        window["energy_j"] - window["idle_power_w"] * max(window["time_s"] - 12.0, 0.0))


def test_steady_states_fit_the_profile_piep_steady_reads(tmp_path, monkeypatch, capsys):
    """The public steady states of two models, as records: `piep train --engine vllm`
    fits a profile into the user data directory, and `piep steady` answers with it."""
    root = ROOT
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(root)  # (the records name their configs from the repository's root)
    lines = (root / "calibration/public/mlenergy-v3/steady.jsonl").read_text().splitlines()
    mine = [x for x in lines if '"h100"' in x and ("Qwen3-8B" in x or "Llama-3.1-8B" in x)]
    records = tmp_path / "steady.jsonl"
    records.write_text("\n".join(mine) + "\n")
    assert main(["train", "--engine", "vllm", "--gpu", "h100", "--steady-states",
                 str(records), "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert fit["records"] == len(mine) and fit["rms_log"] < 0.3
    assert (tmp_path / "data/h100/engines/vllm/steady.json").is_file()
    assert main(["steady", "--model", "llama-3-8b", "--max-num-seqs", "32", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["profile"]["source"] == str(records) and "supplied_profile" not in doc["flags"]
    assert main(["train", "--engine", "hf-cb", "--gpu", "h100", "--steady-states",
                 str(records)]) == 2
    assert "--engine vllm" in capsys.readouterr().err


def test_a_served_answer_round_trips_as_vllms_result_file(tmp_path, capsys):
    """`piep serve --vllm-result F` writes the file `vllm bench serve --save-result
    --save-detailed` writes; `piep meter --serving-result F` (its own energy) reads it
    back to the same requests, tokens, window and energy."""
    result, out = tmp_path / "r.json", tmp_path / "replays.jsonl"
    assert main(["serve", "--model", "llama-3-8b", "--rate", "4", "--requests", "12",
                 "--vllm-result", str(result), "--json"]) == 0
    served = json.loads(capsys.readouterr().out)
    run = json.loads(result.read_text())
    assert run["model_id"] == "llama-3-8b" and run["max_concurrency"] is None
    assert run["total_output_tokens"] == served["output_tokens"]
    assert run["mean_ttft_ms"] == pytest.approx(
        1e3 * sum(r["ttft_s"] for r in served["per_request"]) / 12)
    assert main(["meter", "--serving-result", str(result), "--model", "llama-3-8b",
                 "--engine", "vllm", "--engine-version", "0.11", "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert rec["requests"] == 12 and rec["gen_tokens"] == served["output_tokens"]
    assert rec["energy_j"] == pytest.approx(served["energy_j"])
    assert rec["time_s"] == pytest.approx(served["time_s"])
    ttft = sorted(r["ttft_s"] for r in rec["per_request"])
    assert ttft == pytest.approx(sorted(r["ttft_s"] for r in served["per_request"]))


def test_a_vllm_bench_sweep_folder_is_every_run_it_holds(tmp_path, capsys):
    """`vllm bench sweep serve -o DIR` writes DIR/<experiment>/<SERVE-..-BENCH-..>/run=N.json
    (each a `vllm bench serve` result with the combination's overrides): each run becomes
    a record with its own gpu_energy_j (a steady state where held at a concurrency), and
    one bad run keeps every record out."""
    exp = tmp_path / "sweep" / "20261205_010000"
    held = exp / "SERVE--max_num_seqs=4-BENCH--max_concurrency=4"
    rate = exp / "SERVE--max_num_seqs=4-BENCH--request_rate=2"
    for folder in (held, rate):
        folder.mkdir(parents=True)
    for n in (0, 1):
        (held / f"run={n}.json").write_text(json.dumps({**_held(), "run_number": n}))
        (rate / f"run={n}.json").write_text(json.dumps({**_vllm(gpu_energy_j=90.0),
                                                        "run_number": n}))
    (held / "summary.json").write_text("[]")  # the combination's summary: not a run
    base = ["meter", "--serving-result", str(tmp_path / "sweep"), "--model", "llama-2-7b",
            "--engine", "vllm", "--engine-version", "0.11", "--gpu", "h100"]
    out = tmp_path / "runs.jsonl"
    assert main([*base, "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["records"] == 4
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["schema"] for r in recs] == ["piep.steady_measurement"] * 2 \
        + ["piep.serving_measurement"] * 2
    assert [r["energy_j"] for r in recs[2:]] == [90.0, 90.0]
    (rate / "run=1.json").write_text(json.dumps(_vllm()))  # no energy: nothing written
    bad = tmp_path / "bad.jsonl"
    assert main([*base, "--out", str(bad)]) == 2
    assert "gpu_energy_j" in capsys.readouterr().err and not bad.exists()
    assert main([*base, "--out", str(bad), "--", "true"]) == 2
    assert "one meter window" in capsys.readouterr().err
