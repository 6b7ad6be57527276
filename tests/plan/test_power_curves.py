"""Power curves for a planner: every settable limit, each point what `piep optimize`
prices at that limit and default clocks, the band carried from the default."""

import json

import pytest

from piep import api
from piep.cli import main
from piep.core.errors import ConfigError
from piep.core.gpus import load_gpu
from piep.optimize import Objective, offline
from piep.plan.freq import load_freq_model
from piep.plan.power_curves import power_curves, settable_limits

pytestmark = pytest.mark.replay


def test_every_settable_limit_from_the_highest_to_the_lowest():
    h200 = load_gpu("h200")
    limits = settable_limits(h200, 25)
    assert limits[0] == h200.max_power_w and limits[-1] == h200.min_power_limit_w
    assert all(a - b == pytest.approx(25) for a, b in zip(limits, limits[1:]))
    assert settable_limits(h200, 300) == [700.0, 400.0, 200.0]  # the lowest end kept
    with pytest.raises(ConfigError, match="> 0"):
        settable_limits(h200, 0)


def test_each_point_is_what_optimize_prices_there():
    scn = api.scenario("llama-2-7b", batch=16, prompt_len=512, gen_len=128)
    doc = power_curves(api.resolve(scn), load_freq_model("h200"), step_w=50)
    opt = offline(scn, Objective(), batches=[16], power_limits=[700, 600, 500, 400, 300])
    at = {p["power_limit_w"]: p for p in opt.points if p["sm_mhz"] is None}
    mine = {p["power_limit_w"]: p for p in doc["points"]}
    for limit, o in at.items():
        assert mine[limit]["energy_j"] == pytest.approx(o["energy_j"], rel=1e-12)
        assert mine[limit]["time_s"] == pytest.approx(o["time_s"], rel=1e-12)
        assert mine[limit]["j_per_output_token"] == pytest.approx(o["j_per_output_token"])
    first, low = doc["points"][0], mine[300.0]
    assert not first["limit_binds"] and low["limit_binds"]
    assert low["power_w_per_gpu"] < first["power_w_per_gpu"]
    assert low["output_tokens_per_s"] < first["output_tokens_per_s"]
    for p in doc["points"]:  # the band surrounds each point
        lo, hi = p["interval"]["j_per_output_token"]
        assert lo < p["j_per_output_token"] < hi


def test_the_command_writes_the_document(tmp_path, capsys):
    out = tmp_path / "curves.json"
    assert main(["plan", "--model", "llama-2-7b", "--power-curves", "100", "--out",
                 str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "piep.power_curves"
    assert [p["power_limit_w"] for p in doc["points"]] == [700, 600, 500, 400, 300, 200]
    assert "limit W" in capsys.readouterr().out
    assert main(["plan", "--model", "llama-2-7b", "--power-curves", "--power-limit",
                 "400"]) == 2
