"""Every fitted artifact a prediction reads is looked up user-directory-first by one
function (piep.artifacts.fitted), and `piep env` says whose each one is."""

import json
import shutil

import pytest

from piep.artifacts import calibration_dir, fitted, user_data_dir
from piep.cli import main
from piep.plan.freq import load_freq_model


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
    from piep.artifacts import user_calibration_dir
    from piep.gpus import load_gpu
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
