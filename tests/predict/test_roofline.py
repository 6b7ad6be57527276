import pytest

from piep.api import predict
from piep.predict.pricing import prediction as evaluate
from piep.predict.roofline import RooflineModel

pytestmark = pytest.mark.replay


def test_prediction_schema_and_partition(make_dep):
    doc = predict("llama-2-7b", tp=2, batch=16, predictor="roofline")
    for key in ("schema", "schema_version", "predictor", "boundary", "engine", "energy_j",
                "time_s", "prefill", "decode", "j_per_output_token", "output_tokens_per_s", "per_gpu",
                "interval", "breakdown_j", "modules", "flags"):
        assert key in doc
    assert doc["schema"] == "piep.prediction" and doc["predictor"] == "roofline"
    assert doc["boundary"] == "gpu_board"
    assert set(doc["breakdown_j"]) == {"compute", "communication", "wait", "idle"}
    assert sum(doc["breakdown_j"].values()) == pytest.approx(doc["energy_j"])
    assert sum(m["energy_j"] for m in doc["modules"]) == pytest.approx(doc["energy_j"])
    assert doc["prefill"]["energy_j"] + doc["decode"]["energy_j"] == pytest.approx(doc["energy_j"])
    assert doc["prefill"]["time_s"] + doc["decode"]["time_s"] == pytest.approx(doc["time_s"])
    assert doc["j_per_output_token"] == pytest.approx(doc["energy_j"] / (16 * 128))
    assert doc["j_per_request"] == pytest.approx(doc["energy_j"] / 16)
    assert doc["ttft_s"]["p99"] == doc["prefill"]["time_s"] and doc["e2e_s"]["p50"] == doc["time_s"]
    assert len(doc["per_gpu"]) == 2
    lo, hi = doc["interval"]["energy_j"]
    assert lo < doc["energy_j"] < hi


def test_pipeline_bubbles_are_wait(make_dep):
    dep = make_dep("llama-2-13b", pp=2, batch=4)
    doc = evaluate(dep, RooflineModel())
    assert doc["breakdown_j"]["wait"] > 0
    assert any(m["kind"] == "pipeline_wait" for m in doc["modules"])


def test_dp_doubles_energy_not_time(make_dep):
    one = evaluate(make_dep("llama-2-7b", batch=4), RooflineModel())
    two = evaluate(make_dep("llama-2-7b", dp=2, batch=8), RooflineModel())
    assert two["energy_j"] == pytest.approx(2 * one["energy_j"])
    assert two["time_s"] == pytest.approx(one["time_s"])
    assert "extrapolated" not in two["flags"]
    four = evaluate(make_dep("llama-2-7b", dp=4, batch=8), RooflineModel())
    assert "extrapolated" in four["flags"]


def test_decode_time_is_weight_bandwidth_bound(make_dep):
    dep = make_dep("llama-2-7b", batch=1, prompt_len=128, gen_len=129)
    doc = evaluate(dep, RooflineModel())
    weights = dep.model.num_params() * 2
    floor = weights / dep.gpu.hbm_bytes_per_s
    assert floor < doc["tpot_s"]["p50"] < 2 * floor
