"""Every fitted artifact a prediction reads is looked up user-directory-first by one
function (piep.core.artifacts.fitted), and `piep env` says whose each one is."""

import json
import shutil

import pytest

from piep import api
from piep.core.artifacts import calibration_dir, fitted, user_data_dir
from piep.cli import main
from piep.plan.freq import load_freq_model
from _paths import ROOT  # noqa: E402

pytestmark = pytest.mark.replay



def test_a_users_frequency_model_answers_in_place_of_the_shipped_one(capsys):
    shipped = calibration_dir("h200") / "dvfs" / "freq_model.json"
    assert fitted("h200", "dvfs", "freq_model.json") == shipped
    mine = user_data_dir() / "h200" / "dvfs" / "freq_model.json"
    mine.parent.mkdir(parents=True, exist_ok=True)
    doc = json.loads(shipped.read_text())
    doc["params"]["v_ratio"]["value"] = 0.9 if doc["params"]["v_ratio"]["value"] != 0.9 \
        else 0.8
    mine.write_text(json.dumps(doc))
    try:
        assert fitted("h200", "dvfs", "freq_model.json") == mine
        assert load_freq_model("h200").v("v_ratio") == doc["params"]["v_ratio"]["value"]
        assert main(["env", "--json"]) == 0
        env = json.loads(capsys.readouterr().out)
        assert env["fitted"]["h200"]["frequency model"]["source"] == "yours"
        assert env["fitted"]["h200"]["predictor"]["source"] == "shipped"
    finally:
        shutil.rmtree(mine.parent)
    assert fitted("h200", "dvfs", "freq_model.json") == shipped
    assert fitted("h200", "no", "such.json") is None


@pytest.mark.slow
def test_a_gpu_of_your_own_is_trained_and_answers_to_its_name(tmp_path, monkeypatch, capsys):
    """A calibration folder as `piep calibrate gpu --name` leaves it (here: the two quick
    calibrations measured from scratch on H200, device calls 59-60): `piep train --gpu NAME`
    fits a predictor into it and `--gpu NAME` answers with it, near the full calibration."""
    from piep import api
    from piep.core.artifacts import user_calibration_dir
    from piep.core.gpus import load_gpu
    from piep.sampling.gpu_calibration import seed_folder
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    folder = user_calibration_dir("quick-h200")
    seed_folder(folder, "quick-h200", {"gpu_name": "NVIDIA H200", "memory_gib": 140.4},
                118.4, "h200")
    quick = calibration_dir("h200") / "quick"
    for part, names in (("modules", ("modules_quick_s70.jsonl", "modules_quick_s71.jsonl")),
                        ("e2e/raw", ("e2e_s59_quick.jsonl", "e2e_s60_quick.jsonl"))):
        (folder / part).mkdir(parents=True, exist_ok=True)
        for name in names:
            shutil.copyfile(quick / name, folder / part / name)
    load_gpu.cache_clear()
    assert main(["train", "--gpu", "quick-h200", "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["predictor"] == str(folder / "predictor") and trained["e2e_runs"] == 39
    mine = api.predict("llama-2-7b", gpu="quick-h200")
    shipped = api.predict("llama-2-7b")
    assert mine["predictor"] == "learned" and mine["gpu"] == "quick-h200"
    assert mine["energy_j"] == pytest.approx(shipped["energy_j"], rel=0.1)
    assert main(["env", "--json"]) == 0
    assert "quick-h200" in json.loads(capsys.readouterr().out)["calibrations"]


def _refit_records(tmp_path, name, change):
    rows = [json.loads(line) for line in
            (ROOT / "calibration/h200/e2e/raw/e2e_2gpu.jsonl").read_text().splitlines()[:6]]
    for r in rows:
        change(r)
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("name, change, needle", [
    ("eternal", lambda r: r.update(time_s=1e308) if r["batch"] else None, "W a board"),
    ("huge_batch", lambda r: r.update(batch=10 ** 30), "31-digit number is beyond"),
    ("hot", lambda r: r.update(energy_j=r["energy_j"] * 100), "W a board"),
    ("too_fast", lambda r: r.update(time_s=r["time_s"] / 20, energy_j=r["energy_j"] / 20,
                                    prefill={}, decode={}), "half its roofline"),
    ("phase", lambda r: r["decode"].update(time_s=r["time_s"] * 2,
                                           energy_j=r["energy_j"] * 2), "longer than the run"),
])
def test_an_impossible_record_is_refused_before_a_refit(tmp_path, monkeypatch, capsys, name,
                                                        change, needle):
    """One record at time_s 1e308 made every later prediction 2e14 J: a record no board
    could have made is refused, naming it, and nothing is written."""
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    path = _refit_records(tmp_path, name, change)
    assert main(["train", "--from-measurements", str(path)]) == 2
    err = capsys.readouterr().err
    assert needle in err and f"{name}.jsonl:" in err and err.count("\n") == 1, err
    assert not (tmp_path / "data").exists()


def test_a_refit_that_moves_the_shipped_answers_beyond_its_band_is_flagged(
        tmp_path, monkeypatch, capsys):
    """Runs three times slower than the shipped ones (possible, but not what the shipped
    band was sized on) refit the predictor; every answer of it then says so."""
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))

    def slower(r):
        r.update(time_s=3 * r["time_s"], energy_j=3 * r["energy_j"], prefill={}, decode={})
    path = _refit_records(tmp_path, "slow", slower)
    assert main(["train", "--from-measurements", str(path), "--json"]) == 0
    moved = json.loads(capsys.readouterr().out)["moves_shipped"]
    assert moved["moved_pct"] > 100 and moved["moved_pct"] > moved["band_pct"]
    doc = api.predict("llama-2-7b")
    assert doc["predictor"] == "learned (your refit)" and "refit_moves_shipped" in doc["flags"]
    path = _refit_records(tmp_path, "same", lambda r: None)  # the shipped runs: no move
    assert main(["train", "--from-measurements", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["moves_shipped"] is None
    assert "refit_moves_shipped" not in api.predict("llama-2-7b")["flags"]


@pytest.mark.slow
def test_the_h100s_quick_calibration_answers_to_its_name(tmp_path, monkeypatch, capsys):
    """The folder `piep calibrate gpu` left on an H100 (device call 91), placed where the
    command leaves one: trained, it answers `--gpu h100-quick` from its own samples, near
    its measured runs, with no spec-sheet flag (reports/h100.md scores it held out)."""
    from piep.core.artifacts import read_jsonl, user_calibration_dir
    from piep.core.gpus import load_gpu
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    shipped = ROOT / "calibration" / "h100" / "quick" / "h100-quick"
    shutil.copytree(shipped, user_calibration_dir("h100-quick"))
    load_gpu.cache_clear()
    assert main(["train", "--gpu", "h100-quick", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["e2e_runs"] == 24
    runs = [r for r in read_jsonl(shipped / "e2e" / "raw" / "quick.jsonl")
            if r["model"] == "llama-2-7b"]
    assert len(runs) == 3
    for run in runs:
        got = api.predict("llama-2-7b", gpu="h100-quick", batch=run["batch"],
                          prompt_len=run["prompt_len"], gen_len=run["gen_len"])
        assert "uncalibrated_gpu" not in got["flags"]
        assert got["energy_j"] == pytest.approx(run["energy_j"], rel=0.1)
        assert got["time_s"] == pytest.approx(run["time_s"], rel=0.1)
