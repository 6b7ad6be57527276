"""One answer per question, over a grid: every engine at tp 1 and 2, a batch and the same
requests arriving at once, on the calibrated GPU and on a spec-sheet one.

* A serving engine's batch is the stream of its requests: `predict` and `serve` give the
  same energy, time, latencies, partition, flags and interval, exactly (tolerance 0).
* A generate() engine has no server: `serve` refuses it in one line, naming the engines
  that serve; its answers carry the same names (piep.core.results) as a stream's.
* compare's row, a sweep's point, report's prediction and plan's predictor baseline are
  predict's answer to the last bit.
"""

import json

import pytest

from piep import api
from piep.core.engines import ENGINES, names
from piep.core.errors import ConfigError
from piep.core.results import QUANTITIES, flat
from piep.core.scenario import Scenario
from piep.core.trace import make_trace

pytestmark = pytest.mark.replay

MODEL, PROMPT, GEN = "llama-3-8b", 300, 40
SHARED = ("energy_j", "time_s", "requests", "output_tokens", "j_per_output_token",
          "j_per_request", "output_tokens_per_s", "ttft_s", "tpot_s", "e2e_s", "breakdown_j",
          "no_request", "flags", "interval")
GRID = [(engine, tp, batch, gpu) for engine in ENGINES for tp in (1, 2)
        for batch, gpu in ((1, "h200"), (6, "h200"), (6, "h100"))]
# the default tier asks each engine twice (one GPU at batch 1, two uncalibrated at 6);
# the rest of the grid runs in the slow tier (seconds: the default tier's budget,
# reports/speed.md)
DEFAULT_TIER = {(1, 1, "h200"), (2, 6, "h100")}


def _tiered(grid):
    return [pytest.param(*case, id="{}-tp{}-b{}-{}".format(*case),
                         marks=() if case[1:] in DEFAULT_TIER else pytest.mark.slow)
            for case in grid]


def _scenario(engine, tp, batch, gpu, **extra) -> Scenario:
    return Scenario.build(MODEL, engine=engine, tp=tp, batch=batch, prompt_len=PROMPT,
                          gen_len=GEN, gpu=gpu, allow_uncalibrated=True, **extra)


@pytest.mark.parametrize("engine, tp, batch, gpu", _tiered(GRID))
def test_one_answer_per_question(engine, tp, batch, gpu):
    scn = _scenario(engine, tp, batch, gpu)
    res = api.resolve(scn)
    doc = api.predict(res, hosts=False)  # (how an answer moves with its host: test_trust)
    for key in QUANTITIES:  # every answer names the same quantities the same way
        assert key in doc, key
    assert doc["j_per_output_token"] == pytest.approx(doc["energy_j"] / (batch * GEN))
    assert doc["j_per_request"] == pytest.approx(doc["energy_j"] / batch)
    assert sum(doc["breakdown_j"].values()) == pytest.approx(doc["energy_j"])
    phases = sum(doc[k]["energy_j"] for k in ("prefill", "decode", "no_request"))
    assert phases == pytest.approx(doc["energy_j"])
    # generation only (MLPerf's): the decode phase's energy; active: all but no request
    tokens = batch * GEN
    assert doc["j_per_output_token_generation"] == pytest.approx(
        doc["decode"]["energy_j"] / tokens)
    assert doc["j_per_output_token_active"] == pytest.approx(
        (doc["energy_j"] - doc["no_request"]["energy_j"]) / tokens)
    assert doc["j_per_output_token_generation"] < doc["j_per_output_token_active"] \
        <= doc["j_per_output_token"]
    # (a steady-priced engine's profile was fitted on H100 runs: no spec-sheet flag there)
    assert (gpu != "h200" and not ENGINES[engine].profile == "steady") == ("uncalibrated_gpu" in doc["flags"])
    burst = make_trace([0.0] * batch, [PROMPT] * batch, [GEN] * batch)
    if ENGINES[engine].kind == "stream":
        stream = api.serve(MODEL, trace=burst, engine=engine, tp=tp, gpu=gpu,
                           allow_uncalibrated=True, hosts=False)
        assert {k: doc[k] for k in SHARED} == {k: stream[k] for k in SHARED}
        assert doc["prefill"]["energy_j"] == stream["prefill"]["energy_j"]
        assert "stream" in doc["priced_as"]
        served = api.serve(scn, hosts=False)  # the batch, served
        assert served == stream | {"scenario": scn.to_json()}
    else:
        with pytest.raises(ConfigError, match=names(kind="stream")[0]):
            api.serve(scn)
        assert "priced_as" not in doc
    if gpu == "h200":
        _baselines_equal_predict(res, doc)


def _baselines_equal_predict(res, doc) -> None:
    from piep.compare import compare
    from piep.plan.freq import load_freq_model
    from piep.plan.planner import plan_for
    from piep.sweep import sweep
    scn = res.scenario
    (row,) = compare([scn.label()], scn)["candidates"]
    assert {k: row[k] for k in flat(doc)} == flat(doc) and row["flags"] == doc["flags"]
    p, w = scn.parallel, scn.workload
    (point,) = sweep([{"model": MODEL, "engine": scn.engine.name, "tp": p.tp,
                       "batch": w.batch, "prompt_len": PROMPT, "gen_len": GEN}])
    assert {k: point[k] for k in flat(doc)} == flat(doc) and point["flags"] == doc["flags"]
    plan = plan_for(res, load_freq_model("h200"))
    assert plan["default"]["predictor_energy_j"] == doc["energy_j"]
    assert plan["default"]["predictor_time_s"] == doc["time_s"]


def test_a_stream_is_a_scenario(tmp_path, capsys):
    """A stream is a workload: its scenario file (`serve --json`'s 'scenario') asks again
    what was asked; predict refuses it in one line; a generate() engine cannot serve it."""
    from piep.cli import main
    trace = make_trace([0.0, 0.5, 0.7], [200, 400, 100], [30, 10, 50], ids=["a", "b", "c"])
    doc = api.serve(MODEL, trace=trace)
    assert doc["requests"] == 3 and doc["scenario"]["workload"]["requests"][1]["id"] == "b"
    path = tmp_path / "stream.json"
    path.write_text(json.dumps(doc["scenario"]))
    assert main(["serve", "--scenario", str(path), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["energy_j"] == doc["energy_j"] and again["per_request"] == doc["per_request"]
    assert main(["serve", "--scenario", str(path), "--tp", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layout"]["tp"] == 2
    assert main(["predict", "--scenario", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "piep serve --scenario" in err
    with pytest.raises(ConfigError, match="serves"):
        Scenario.build(MODEL, trace=trace, engine="hf-static")
    with pytest.raises(ConfigError, match="request b"):
        Scenario.build(MODEL, engine="hf-cb",
                       trace=make_trace([0, 1], [10, 9000], [5, 5], ids=["a", "b"]))
    # a batch scenario of piep's own runner, served: one line saying which engine serves
    static = tmp_path / "batch.json"
    static.write_text(json.dumps(api.predict(MODEL, batch=2)["scenario"]))
    assert main(["serve", "--scenario", str(static)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give --engine hf-cb" in err
    assert main(["serve", "--scenario", str(static), "--engine", "hf-cb", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 2
    bad = dict(doc["scenario"], workload={"requests": [{"arrival_s": 0, "prompt_len": 5}]})
    path.write_text(json.dumps(bad))
    assert main(["serve", "--scenario", str(path)]) == 2
    assert "lacks gen_len" in capsys.readouterr().err


def test_answers_are_typed_and_written_by_one_serializer():
    """A prediction and a served stream are typed results (piep.core.results) built once; the
    documents are their `to_json`, under the registered schemas."""
    from piep.core.artifacts import check_document
    from piep.core.results import Prediction, ServingResult
    from piep.serving.serve import served
    pred = api.prediction(MODEL, engine="hf-static", tp=2, batch=4)
    assert isinstance(pred, Prediction) and pred.outcome.requests == 4
    assert pred.to_json() == api.predict(MODEL, engine="hf-static", tp=2, batch=4)
    check_document(pred.to_json(), "prediction")
    trace = make_trace([0.0, 0.2, 0.9], [100, 300, 200], [20, 40, 10])
    result, _ = served(Scenario.build(MODEL, engine="hf-cb", trace=trace))
    assert isinstance(result, ServingResult) and result.outcome.requests == 3
    assert result.to_json() == api.serve(MODEL, trace=trace)
    check_document(result.to_json(), "serving")
    # a serving engine's batch over dp replicas counts every replica's requests
    two = api.prediction(MODEL, engine="hf-cb", dp=2, batch=6)
    assert two.outcome.requests == 6 and two.to_json()["j_per_request"] == \
        pytest.approx(two.outcome.energy_j / 6)


def test_long_lists_are_written_a_row_per_line_as_the_same_document():
    """An answer's long lists (a row per request of a stream) are one compact row per line
    (written by the C encoder); the document reads back the same, a short one is written
    as an indented dump is."""
    import json as json_
    from piep.core.artifacts import LONG_LIST, json_text
    doc = {"energy_j": 1.5, "per_request": [{"id": str(i), "e2e_s": i / 3}
                                            for i in range(LONG_LIST + 1)],
           "flags": [{"name": "x", "rows": [[1, 2]] * LONG_LIST}], "nan": float("nan")}
    text = json_text(doc)
    assert json_.dumps(json_.loads(text)) == json_.dumps(doc)
    lines = text.splitlines()
    assert '    {"id": "7", "e2e_s": 2.3333333333333335},' in lines
    assert len(lines) < 2 * LONG_LIST + 20  # one line a row, not one a field
    short = {"a": [1, {"b": [2, 3]}], "c": "d"}
    assert json_text(short) == json_.dumps(short, indent=2)


@pytest.mark.parametrize("gen_len", [1, 2, 50])
def test_a_batch_summary_states_what_its_requests_state(gen_len):
    """A static batch's summary reads its alike requests' latencies from the first; the
    document is the one a summary of the same requests, not known alike, gives (a TPOT
    of one-token requests null)."""
    from dataclasses import replace

    from piep.core.results import Summary
    batch = Summary.batch(12.5, 3.0, requests=8, gen_len=gen_len, prefill_s=0.25)
    assert batch.alike
    doc = batch.to_json()
    assert doc == replace(batch, alike=False).to_json()
    assert doc["ttft_s"] == {"p50": 0.25, "p90": 0.25, "p99": 0.25}
    assert (doc["tpot_s"]["p99"] is None) == (gen_len == 1)


def test_batch_rows_are_the_rows_of_batch_summaries():
    """Many static batches' flat rows at once (a sweep's) are each batch's
    `Summary.batch(...).row()`: the same numbers, keys in the same order, a TPOT of
    one-token requests null, rates of an empty window zero."""
    import numpy as np

    from piep.core.results import Summary, batch_rows
    rng = np.random.default_rng(3)
    n = 300
    energy, time = rng.uniform(0, 5e4, n), rng.uniform(0, 90, n)
    prefill = time * rng.uniform(0, 1, n)
    requests, gen = rng.integers(1, 257, n), rng.integers(1, 2049, n)
    gen[:20], time[20:25], energy[25:30] = 1, 0.0, 0.0
    rows = batch_rows(energy, time, requests=requests, gen_len=gen, prefill_s=prefill)
    want = [Summary.batch(float(e), float(t), requests=int(r), gen_len=int(g),
                          prefill_s=float(p)).row()
            for e, t, r, g, p in zip(energy, time, requests, gen, prefill)]
    assert [list(r.items()) for r in rows] == [list(w.items()) for w in want]
    assert all(type(r["requests"]) is int and type(r["energy_j"]) is float for r in rows)
    assert rows[0]["tpot_p50_s"] is None and rows[20]["output_tokens_per_s"] == 0.0
