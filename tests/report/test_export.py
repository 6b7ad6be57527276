"""`piep export`: a deployment's prediction as Prometheus gauges (prometheus-client), with
the 90 % band as `bound` labels, on stdout, in a textfile or served on a port."""

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from piep import api
from piep.cli import main

pytestmark = pytest.mark.replay
parser = pytest.importorskip("prometheus_client.parser")

ARGS = ["--model", "llama-2-7b", "--batch", "8", "--tp", "2"]


def _gauges(text: str) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels["bound"]): s.value
            for family in parser.text_string_to_metric_families(text) for s in family.samples}


def test_the_gauges_are_the_prediction_and_its_band(capsys):
    assert main(["export", *ARGS]) == 0
    g = _gauges(capsys.readouterr().out)
    doc = api.predict("llama-2-7b", batch=8, tp=2, hosts=False)
    e, t, tokens = doc["energy_j"], doc["time_s"], doc["output_tokens"]
    name = "piep_predicted_energy_per_output_token_joules"
    assert g[(name, "predicted")] == pytest.approx(doc["j_per_output_token"], rel=1e-12)
    lo, hi = doc["interval"]["energy_j"]
    assert (g[(name, "low")], g[(name, "high")]) == pytest.approx((lo / tokens, hi / tokens))
    assert g[("piep_predicted_power_watts", "predicted")] == pytest.approx(e / t)
    for gauge in {n for n, _ in g}:  # every band surrounds its value
        assert g[(gauge, "low")] < g[(gauge, "predicted")] < g[(gauge, "high")]


def test_a_textfile_for_node_exporter(tmp_path, capsys):
    out = tmp_path / "piep.prom"
    assert main(["export", *ARGS, "--textfile", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["textfile"] == str(out)
    assert len(_gauges(out.read_text())) == 12
    assert main(["export", *ARGS, "--textfile", str(tmp_path / "x.txt")]) == 2
    assert ".prom" in capsys.readouterr().err
    assert main(["export", *ARGS, "--prometheus", "0"]) == 2


def test_served_on_a_port():
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "piep", "export", *ARGS, "--prometheus",
                             str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert "serving" in proc.stdout.readline()
        for _ in range(50):
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                              timeout=5).read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert ("piep_predicted_power_watts", "predicted") in _gauges(text)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
