"""Every fitted artifact a prediction reads is looked up user-directory-first by one
function (piep.artifacts.fitted), and `piep env` says whose each one is."""

import json
import shutil

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
