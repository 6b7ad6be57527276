"""One answer per question: a scenario is resolved once (cost model, engine profile,
transfer, flags, interval policy), and every command that prices it agrees with predict."""

import json
import math

import pytest

from piep import api
from piep.cli import main
from piep.predict.learned import OUT_OF_RANGE_WIDENING
from piep.core.scenario import Scenario
from piep.serving.serve import serve, serving_scenario
from piep.core.trace import poisson_trace

pytestmark = pytest.mark.replay

TRACE = poisson_trace(rate_per_s=2, requests=12, prompt_len="uniform:100:400",
                      gen_len="uniform:16:48", seed=3)


@pytest.mark.parametrize("engine, tp, gpu", [
    ("hf-static", 1, "h200"), ("hf-static", 4, "h200"), ("hf-eager", 4, "h200"),
    ("hf-eager", 2, "h200"), ("piep-graph", 2, "h200"), ("hf-static", 1, "h100"),
    ("piep-eager", 1, "a100")])
def test_predict_and_sweep_carry_the_resolutions_flags(engine, tp, gpu):
    scn = Scenario.build("llama-3-8b", engine=engine, tp=tp, gpu=gpu, batch=8,
                         allow_uncalibrated=True)
    res = api.resolve(scn)
    doc = api.predict(res)
    assert set(res.flags) <= set(doc["flags"])
    assert ("uncalibrated_gpu" in res.flags) == (gpu != "h200") == ("transfer" in doc)
    # the transformers engines were measured at tp 1 and 2 (tp=2 from another harness)
    assert ("unmeasured_engine_layout" in res.flags) == (tp == 4)
    if gpu == "h200":  # a sweep's point is the same prediction, with the same flags
        from piep.sweep import sweep
        (row,) = sweep([{"model": "llama-3-8b", "engine": engine, "tp": tp, "batch": 8}])
        assert row["energy_j"] == doc["energy_j"] and row["time_s"] == doc["time_s"]
        assert row["flags"] == doc["flags"]


@pytest.mark.parametrize("tp, gpu", [(1, "h200"), (2, "h200"), (1, "h100")])
def test_serve_resolves_as_predict_does(tp, gpu):
    """The serving engine's profile is the one its cost model runs (for a spec-sheet GPU,
    the reference GPU's, with its scheduler on the new GPU's memory), its flags name the
    same doubts as a batch prediction of the engine, and its band is the same policy."""
    scn = serving_scenario("llama-3-8b", TRACE, tp=tp, gpu=gpu, allow_uncalibrated=True)
    res = api.resolve(scn)
    doc = serve(scn)
    assert res.profile is not None and res.profile.name == "hf-cb"
    assert set(res.flags) <= set(doc["flags"])
    batch = api.predict(scn.replace(batch=4))  # the same deployment as a batch: the same doubts
    assert {f for f in batch["flags"] if f in ("uncalibrated_gpu", "unmeasured_engine_layout")} \
        == {f for f in doc["flags"] if f in ("uncalibrated_gpu", "unmeasured_engine_layout")}
    want = res.cost_model.interval(scn.deployment, doc["energy_j"], doc["time_s"],
                                   far="out_of_range" in doc["flags"])
    assert doc["interval"] == want
    if gpu != "h200":
        assert doc["transfer"]["reference"] == "h200" and "fixed" in doc["interval"]["level"]


def test_serving_at_tp2_widens_its_band_as_a_batch_prediction_does():
    one = serve(serving_scenario("llama-3-8b", TRACE))
    two = serve(serving_scenario("llama-3-8b", TRACE, tp=2))
    width = [math.log(d["interval"]["energy_j"][1] / d["energy_j"]) for d in (one, two)]
    assert width[1] == pytest.approx(OUT_OF_RANGE_WIDENING * width[0])


def test_serve_takes_a_gpu_without_calibration(capsys):
    assert main(["serve", "--model", "llama-3-8b", "--gpu", "h100", "--allow-uncalibrated",
                 "--rate", "2", "--requests", "8", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["flags"][0] == "uncalibrated_gpu" and doc["gpu"] == "h100"
    lo, hi = doc["interval"]["energy_j"]
    assert lo == pytest.approx(doc["energy_j"] / 2) and hi == pytest.approx(2 * doc["energy_j"])


def test_compare_report_and_plan_price_as_predict_does(tmp_path):
    """Their baselines are predict's answer, to the last bit."""
    from piep.compare import compare
    from piep.report.hotspot import build_report
    scn = Scenario.build("llama-2-7b", engine="hf-static", tp=2, batch=8)
    doc = api.predict(scn)
    other = Scenario.build("llama-2-13b", engine="hf-static", batch=8)
    rows = compare([scn.label(), other.label()], scn)["candidates"]
    assert rows[0]["energy_j"] == doc["energy_j"] and rows[0]["flags"] == doc["flags"]
    assert rows[1]["energy_j"] == api.predict(other)["energy_j"]
    report = build_report(scn, tmp_path / "r")
    assert report["prediction"]["energy_j"] == doc["energy_j"]
    assert report["prediction"]["flags"] == doc["flags"]
    from piep.plan.freq import load_freq_model
    from piep.plan.planner import make_plan
    plain = Scenario.build("llama-2-7b", batch=1)
    plan = make_plan(plain.deployment, api.resolve(plain).cost_model,
                     load_freq_model("h200"))
    assert plan["default"]["energy_j"] == pytest.approx(api.predict(plain)["energy_j"],
                                                        rel=1e-9)


def test_a_variant_keeps_the_cost_model_and_recomputes_the_flags():
    res = api.resolve(Scenario.build("llama-3-8b", engine="hf-static", batch=8))
    two = res.variant(res.scenario.replace(tp=4))
    assert two.cost_model is res.cost_model and two.profile is res.profile
    assert "unmeasured_engine_layout" in two.flags and not res.flags
    other = res.variant(res.scenario.replace(engine="hf-eager"))
    assert other.cost_model is not res.cost_model and other.profile.name == "hf-eager"


@pytest.mark.parametrize("argv", [
    ["--model", "llama-2-7b", "--tp", "2", "--batch", "16", "--engine", "hf-static",
     "--host-probe-us", "9"],
    ["--model", "mistral-7b", "--gpu", "h100", "--allow-uncalibrated", "--mode", "eager"],
    ["--model", "{config}", "--cache-len", "4000", "--engine", "hf-static"]],
    ids=["engine-host", "uncalibrated", "own-config"])
def test_a_scenario_file_asks_what_its_flags_asked(argv, tmp_path, capsys):
    """`--scenario FILE.json` (the 'scenario' of a prediction) is the whole request: the
    same answer; a flag beside it changes its field."""
    import dataclasses
    from piep.core.models import load_model
    spec = dataclasses.replace(load_model("llama-3-8b"), name="mine", num_layers=8)
    (tmp_path / "config.json").write_text(json.dumps(spec.to_hf_config()))
    argv = [a.replace("{config}", str(tmp_path / "config.json")) for a in argv]
    assert main(["predict", *argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(doc["scenario"]))
    assert main(["predict", "--scenario", str(path), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["energy_j"] == doc["energy_j"] and again["flags"] == doc["flags"]
    assert again["scenario"] == doc["scenario"]
    assert main(["predict", "--scenario", str(path), "--batch", "2", "--json"]) == 0
    two = json.loads(capsys.readouterr().out)
    assert two["workload"]["batch"] == 2 and two["engine_ref"] == doc["engine_ref"]


@pytest.mark.parametrize("doc, needle", [
    ([], "a JSON object"), ({"gpu": "h200"}, "model is missing"),
    ({"model": "llama-2-7b", "workload": {"batch": 2, "beams": 3}}, "unknown key(s) beams"),
    ({"model": "llama-2-7b", "layout": {"tp": 3}}, "tp=3 does not divide"),
    ({"model": {"name": "x"}}, "{name, config}"), ({"model": "llama-2-7b", "x": 1},
                                                   "unknown key(s) x")])
def test_a_bad_scenario_file_is_one_line(doc, needle, tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    assert main(["predict", "--scenario", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


@pytest.mark.parametrize("tp", [1, 2])
def test_a_serving_engines_batch_is_the_stream_of_its_requests(tp):
    """Continuous batching has no static batch: `predict --engine hf-cb --batch B` is
    `serve` of B requests arriving at once - the same energy, time, TTFT, partition, flags
    and interval - and a sweep's point is the same prediction."""
    from piep.core.trace import make_trace
    from piep.sweep import sweep
    burst = make_trace([0.0] * 6, [300] * 6, [40] * 6)
    stream = serve(serving_scenario("mistral-7b", burst, tp=tp))
    doc = api.predict("mistral-7b", engine="hf-cb", tp=tp, batch=6, prompt_len=300,
                      gen_len=40)
    assert doc["energy_j"] == stream["energy_j"] and doc["time_s"] == stream["time_s"]
    assert doc["prefill"]["time_s"] == stream["ttft_s"]["p99"]
    assert doc["prefill"]["energy_j"] == stream["prefill"]["energy_j"]
    for key in ("ttft_s", "tpot_s", "e2e_s", "j_per_output_token", "j_per_request",
                "no_request"):
        assert doc[key] == stream[key], key
    assert doc["breakdown_j"] == stream["breakdown_j"] and doc["flags"] == stream["flags"]
    assert doc["interval"] == stream["interval"] and "stream" in doc["priced_as"]
    assert sum(m["energy_j"] for m in doc["modules"]) == pytest.approx(doc["energy_j"])
    (row,) = sweep([{"model": "mistral-7b", "engine": "hf-cb", "tp": tp, "batch": 6,
                     "prompt_len": 300, "gen_len": 40}])
    assert row["energy_j"] == doc["energy_j"] and row["flags"] == doc["flags"]


def test_replicas_of_a_serving_engine_each_serve_their_share():
    one = api.predict("mistral-7b", engine="hf-cb", batch=4, prompt_len=300, gen_len=40)
    two = api.predict("mistral-7b", engine="hf-cb", dp=2, batch=8, prompt_len=300,
                      gen_len=40)
    assert two["energy_j"] == pytest.approx(2 * one["energy_j"])
    assert two["time_s"] == pytest.approx(one["time_s"])
