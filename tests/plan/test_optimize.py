"""`piep optimize`: objectives, offline grid, online search on replayed and fake devices."""

import json
import math

import pytest

from piep.api import scenario
from piep.cli import main
from piep.device.fake import FakeClockDevice
from piep.core.errors import ConfigError
from piep.optimize import (DeviceSteps, Objective, ReplayMeasure, offline, online_search,
                           pareto, restricted_optimum)
from piep.clocks import ClockRuntime
from _paths import ROOT  # noqa: E402

pytestmark = pytest.mark.replay


@pytest.fixture(scope="module")
def eds():
    return offline(scenario("llama-2-7b"), Objective("eds", 0.5), batches=[1, 2, 4, 8, 16, 32])


def test_objectives():
    ref = {"j_per_output_token": 2.0, "s_per_output_token": 0.01, "e2e_p50_s": 1.0}
    p = {"j_per_output_token": 1.0, "s_per_output_token": 0.02, "e2e_p50_s": 2.0}
    assert Objective("eds", 0.5).value(ref, ref) == pytest.approx(1.0)
    assert Objective("eds", 0.5).value(p, ref) == pytest.approx(0.5 * 0.5 + 0.5 * 2.0)
    assert Objective("zeus", 0.25, p_max_w=700).value(p, ref) == pytest.approx(
        0.25 * 1.0 + 0.75 * 700 * 0.02)
    lat = Objective("latency", latency_bound_s=1.5)
    assert lat.value(ref, ref) == 2.0 and math.isinf(lat.value(p, ref))
    with pytest.raises(ConfigError):
        Objective("latency")
    with pytest.raises(ConfigError):
        Objective("eds", 1.5)


def test_offline_reference_chosen_and_front(eds):
    ref = eds.reference
    assert ref["batch"] == 1 and ref["sm_mhz"] is None and ref["power_limit_w"] == 700
    assert ref["objective"] == pytest.approx(1.0)
    assert eds.chosen["objective"] == min(p["objective"] for p in eds.points)
    assert eds.chosen["objective"] < 1.0
    front = eds.front
    for p in eds.points:  # nothing beats a front point on both axes
        assert not any(q["j_per_output_token"] < p["j_per_output_token"] - 1e-12
                       and q["s_per_output_token"] < p["s_per_output_token"] - 1e-12 for q in front
                       if p in front)
    assert pareto(front) == front


def test_power_limit_that_cannot_bind_is_said_and_changes_nothing(eds):
    assert any("cannot bind" in n for n in eds.notes)
    for p in eds.points:
        if not p["limit_binds"]:
            same = next(q for q in eds.points if q["batch"] == p["batch"]
                        and q["sm_mhz"] == p["sm_mhz"] and q["power_limit_w"] == 700)
            assert p["energy_j"] == pytest.approx(same["energy_j"])


def test_latency_objective_respects_the_bound():
    res = offline(scenario("llama-2-7b"), Objective("latency", latency_bound_s=1.2),
                  batches=[1, 4, 16, 64])
    assert res.chosen["e2e_p50_s"] <= 1.2
    with pytest.raises(ConfigError, match="latency bound"):
        offline(scenario("llama-2-7b"), Objective("latency", latency_bound_s=0.01), batches=[1, 2])


def _replay_rows(res, scale_e=1.0):
    return [{"batch": p["batch"], "power_limit_w": p["power_limit_w"], "sm_mhz": p["sm_mhz"],
             "energy_j": p["energy_j"] * scale_e, "time_s": p["time_s"], "gen_len": 128}
            for p in res.points]


def test_online_batch_search_on_a_replayed_device(eds):
    start = restricted_optimum(eds, ["batch"])
    assert start["sm_mhz"] is None and start["power_limit_w"] == 700
    replay = ReplayMeasure(_replay_rows(eds))
    batches = sorted({p["batch"] for p in eds.points})
    key = ("batch", "power_limit_w", "sm_mhz")
    out = online_search({k: start[k] for k in key}, {k: eds.reference[k] for k in key},
                        replay, Objective("eds", 0.5), {"batch": batches}, max_steps=10)
    # on a device that measures exactly the predictions, the search stays at the optimum
    assert out["best"]["batch"] == start["batch"]
    assert replay.calls[0] == (1, 700.0, None)  # the default configuration first
    assert out["measured_gain"]["energy_per_token"] < 0


def test_online_search_moves_when_the_device_disagrees(eds):
    rows = _replay_rows(eds)
    start = restricted_optimum(eds, ["batch"])
    bigger = next(b for b in sorted({r["batch"] for r in rows}) if b > start["batch"])
    for r in rows:  # the real machine runs the next batch up much cheaper and faster
        if r["batch"] == bigger and r["sm_mhz"] is None and r["power_limit_w"] == 700:
            r["energy_j"] *= 0.3
            r["time_s"] *= 0.8
    key = ("batch", "power_limit_w", "sm_mhz")
    out = online_search({k: start[k] for k in key}, {k: eds.reference[k] for k in key},
                        ReplayMeasure(rows), Objective("eds", 0.5),
                        {"batch": sorted({r["batch"] for r in rows})}, max_steps=10)
    assert out["best"]["batch"] >= bigger
    assert any(s["accepted"] and s["axis"] == "batch" for s in out["steps"])


def test_clock_and_power_steps_on_a_fake_device(eds, tmp_path):
    dev = FakeClockDevice(log_path=tmp_path / "dev.log")
    rt = ClockRuntime([dev], tmp_path / "state", dry_run=False, permission_check=lambda: True,
                      min_dwell_s=0.0)
    replay = ReplayMeasure(_replay_rows(eds))
    seen = []

    def measure(p):
        seen.append((dev.locked, dev.power_limit))
        return replay(p)
    steps = DeviceSteps(measure, [dev], rt, 700.0)
    clocks = sorted({p["sm_mhz"] for p in eds.points if p["sm_mhz"] is not None}) + [None]
    limits = sorted({p["power_limit_w"] for p in eds.points})
    key = ("batch", "power_limit_w", "sm_mhz")
    start = restricted_optimum(eds, ["batch", "clock", "power"])
    try:
        out = online_search({k: start[k] for k in key}, {k: eds.reference[k] for k in key},
                            steps, Objective("eds", 0.5),
                            {"sm_mhz": clocks, "power_limit_w": limits}, max_steps=12)
    finally:
        steps.close()
    assert dev.locked is None and dev.power_limit is None  # restored
    assert seen[0] == (None, None)  # the reference runs at default clocks and limit
    if start["sm_mhz"] is not None:
        assert (int(start["sm_mhz"]), int(start["sm_mhz"])) in [s[0] for s in seen]
    assert out["measurements"] <= 12
    lines = (tmp_path / "dev.log").read_text().splitlines()
    assert lines[-1].startswith(("reset", "power-reset"))


def test_cli_offline_json_and_replayed_online(tmp_path, capsys):
    assert main(["optimize", "--model", "llama-2-7b", "--tp", "1", "--objective", "eds",
                 "--batches", "1,2,4,8", "--json", "--plot", str(tmp_path / "f.png")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "piep.optimize" and doc["front"] and doc["chosen"]
    assert (tmp_path / "f.png").stat().st_size > 1000
    log = tmp_path / "log.jsonl"
    rows = [{"measured": {"batch": p["batch"], "power_limit_w": 700.0, "sm_mhz": None,
                          "energy_j": p["energy_j"], "time_s": p["time_s"], "gen_len": 128}}
            for p in doc["front"] + [doc["reference"], doc["chosen"]]]
    res = offline(scenario("llama-2-7b"), Objective("eds", 0.5), batches=[1, 2, 4, 8])
    rows += [{"measured": r} for r in _replay_rows(res)]
    replay = tmp_path / "replay.jsonl"
    replay.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main(["optimize", "--model", "llama-2-7b", "--batches", "1,2,4,8", "--replay",
                 str(replay), "--log", str(log)]) == 0
    out = capsys.readouterr().out
    assert "online (replay" in out and "(measured)" in out
    assert len(log.read_text().splitlines()) >= 2


def test_cli_bad_input_one_line(capsys):
    assert main(["optimize", "--model", "llama-2-7b", "--objective", "latency"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "latency-bound" in err[0]
    assert main(["optimize", "--model", "llama-2-7b", "--power-limits", "900"]) != 0
    assert "power limits" in capsys.readouterr().err


def test_committed_h200_online_search_replays():
    """The committed online batch search (calibration/h200/optimize) re-runs from its log
    and lands on the point it landed on."""
    path = ROOT / "calibration/h200/optimize/" \
        "online_llama-2-7b_eds.jsonl"
    steps = [json.loads(line) for line in path.read_text().splitlines()]
    assert steps[0]["axis"] == "reference" and steps[0]["point"]["batch"] == 1
    best = min(steps, key=lambda s: s["objective"])
    replay = ReplayMeasure([s["measured"] for s in steps])
    key = ("batch", "power_limit_w", "sm_mhz")
    out = online_search({k: steps[1]["point"][k] for k in key},
                        {k: steps[0]["point"][k] for k in key}, replay,
                        Objective("eds", 0.5), {"batch": [1, 2, 4, 8, 16, 32, 64]})
    assert out["best"]["batch"] == best["point"]["batch"]
    assert out["best_objective"] == pytest.approx(best["objective"])
