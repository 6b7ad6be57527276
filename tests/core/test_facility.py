"""Facility energy, carbon and cost (piep.core.results: Facility): board energy x PUE, then x the grid's
intensity or a price, each with the boards' interval carried; the flags on every command
that prices a deployment."""

import csv
import io
import json

import pytest

from piep.cli import main
from piep.core.errors import ConfigError
from piep.core.results import Facility, with_facility

pytestmark = pytest.mark.replay


@pytest.mark.pure
def test_facility_arithmetic_by_hand():
    f = Facility(pue=1.5, carbon_g_per_kwh=400.0, price_per_kwh=0.2)
    out = f.of(3.6e6, [1.8e6, 7.2e6])  # one board kWh, its interval 0.5-2 kWh
    assert out["energy_kwh"] == pytest.approx(1.5)
    assert out["energy_kwh_interval"] == pytest.approx([0.75, 3.0])
    assert out["kg_co2eq"] == pytest.approx(0.6) and out["cost"] == pytest.approx(0.3)
    assert out["kg_co2eq_interval"] == pytest.approx([0.3, 1.2])
    plain = Facility().of(3.6e6)
    assert plain["energy_kwh"] == pytest.approx(1.0) and "kg_co2eq" not in plain \
        and "cost" not in plain
    for bad in ({"pue": 0.9}, {"carbon_g_per_kwh": -1.0}, {"price_per_kwh": float("nan")}):
        with pytest.raises(ConfigError):
            Facility(**bad)
    assert with_facility({"energy_j": 1.0}, None) == {"energy_j": 1.0}


def test_every_pricing_command_takes_the_facility_flags(capsys):
    flags = ["--pue", "1.25", "--carbon-intensity", "400", "--price-per-kwh", "0.1", "--json"]
    assert main(["predict", "--model", "llama-2-7b", *flags]) == 0
    doc = json.loads(capsys.readouterr().out)
    f = doc["facility"]
    assert f["energy_kwh"] == pytest.approx(doc["energy_j"] * 1.25 / 3.6e6)
    lo, hi = doc["interval"]["energy_j"]
    assert f["kg_co2eq_interval"] == pytest.approx([lo * 1.25 / 3.6e6 * 0.4,
                                                    hi * 1.25 / 3.6e6 * 0.4])
    assert main(["compare", "llama-2-7b@tp1", "llama-2-13b@tp1", *flags]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(c["facility"]["cost"] == pytest.approx(c["energy_j"] * 1.25 / 3.6e6 * 0.1)
               for c in doc["candidates"])
    assert main(["sweep", "--model", "llama-2-7b", "--batch", "1", "4", "--pue", "1.5"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert all(float(r["facility_energy_kwh"]) == pytest.approx(float(r["energy_j"]) * 1.5
                                                                 / 3.6e6) for r in rows)
    assert main(["predict", "--model", "llama-2-7b", "--pue", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--pue=0.5" in err and len(err.splitlines()) == 1
    assert main(["predict", "--model", "llama-2-7b", "--carbon-intensity", "300"]) == 0
    assert "kg CO2eq at 300 g/kWh" in capsys.readouterr().out


def test_energy_per_input_and_total_token(capsys, tmp_path):
    """The window's energy over the prompts' tokens, and over prompts and outputs."""
    assert main(["predict", "--model", "llama-2-7b", "--batch", "4", "--prompt-len", "300",
                 "--gen-len", "50", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["input_tokens"] == 4 * 300
    assert doc["j_per_input_token"] == pytest.approx(doc["energy_j"] / 1200)
    assert doc["j_per_total_token"] == pytest.approx(doc["energy_j"] / (1200 + 4 * 50))
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"arrival_s": 0.1 * i, "prompt_len": 100 + i,
                                         "gen_len": 20}) + "\n" for i in range(5)))
    assert main(["serve", "--model", "llama-3-8b", "--trace", str(trace), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["input_tokens"] == sum(100 + i for i in range(5))
    assert doc["j_per_total_token"] == pytest.approx(doc["energy_j"] / (510 + 100))
