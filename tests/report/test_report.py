"""`piep report`: structure, numbers equal to the predictions, actions as differences of two
predictions, and a real headless browser rendering the HTML."""

import json
import shutil
import subprocess

import pytest

from piep import api
from piep.report.hotspot import build_report

pytestmark = pytest.mark.replay


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    scn = api.scenario("llama-2-13b", tp=2, batch=8, prompt_len=256, gen_len=64)
    return scn, out, build_report(scn, out, compare=["llama-2-7b@tp2"])


def test_files_and_structure(report):
    _, out, data = report
    for name in ("report.html", "report.md", "report.json"):
        assert (out / name).is_file()
    assert {"energy_by_module", "layouts", "waits"} <= set(data["figures"])
    for rel in data["figures"].values():
        assert (out / rel).read_bytes()[:4] == b"\x89PNG"
    md = (out / "report.md").read_text()
    assert "## Top actions" in md and "## Module hotspots" in md and "GPU boards only" in md
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(data["figures"])
    assert "http://" not in html and "https://" not in html  # self-contained
    saved = json.loads((out / "report.json").read_text())
    assert saved["schema"] == "piep.report"
    assert "## Comparison (same workload)" in md and "llama-2-7b@tp2" in md
    assert [c["candidate"] for c in data["comparison"]["candidates"]] == [
        "llama-2-13b@tp2pp1dp1", "llama-2-7b@tp2"]


def test_numbers_equal_the_prediction(report):
    scn, out, data = report
    doc = api.predict(scn)
    assert data["prediction"]["energy_j"] == pytest.approx(doc["energy_j"])
    md = (out / "report.md").read_text()
    assert f"{doc['energy_j']:.1f}" in md and f"{doc['j_per_output_token']:.4f}" in md
    assert sum(k["energy_j"] for k in data["by_kind"]) == pytest.approx(doc["energy_j"])


def test_each_action_gain_is_a_difference_of_two_predictions(report):
    scn, out, data = report
    tried = data["actions"] + data["other_changes"]
    deltas = [a for a in tried if not a.get("model_based")]
    assert len(deltas) >= 3
    assert len(data["actions"]) <= 3
    assert all(a["energy_per_token_change"] < 0 for a in data["actions"])
    doc = api.predict(scn)
    md = (out / "report.md").read_text()
    for a in deltas:
        alt = api.predict(scn.replace(**a["delta"]))
        gain = alt["j_per_output_token"] / doc["j_per_output_token"] - 1
        assert a["energy_per_token_change"] == pytest.approx(gain)
        assert f"{100 * gain:+.1f} % energy per output token" in md
        if gain > 0:
            assert f"{a['text']}  **(costs energy)**" in md
        if a["clear"]:  # its why states the same saving, on the same base (now)
            assert f"{-100 * gain:.1f} % below now" in a["why"]


def test_cli_report_with_measurement(tmp_path, capsys):
    from piep.cli import main
    from piep.core.dataset import load_calibration
    rec = next(r.to_json() for r in load_calibration("h200").e2e
               if r.key.startswith("llama-2-13b|2|1|1|"))
    meas = tmp_path / "m.jsonl"
    meas.write_text(json.dumps(rec) + "\n")
    code = main(["report", "--model", "llama-2-13b", "--tp", "2", "--batch", str(rec["batch"]),
                 "--prompt-len", str(rec["prompt_len"]), "--gen-len", str(rec["gen_len"]),
                 "--measured", str(meas), "--out", str(tmp_path / "r"), "--json"])
    assert code == 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert "## Measured vs predicted" in md


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.mark.skipif(_browser() is None, reason="no headless browser installed "
                    "(Debian: apt-get install chromium; .ci/run installs it)")
def test_html_renders_in_a_headless_browser(report, tmp_path):
    _, out, _ = report
    shot = tmp_path / "shot.png"
    proc = subprocess.run([_browser(), "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'u'}",
                           f"--screenshot={shot}", "--window-size=1200,2400",
                           (out / "report.html").as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 20_000


def test_clock_plan_action_is_the_planner_saving(report):
    from piep.plan.freq import load_freq_model
    from piep.plan.planner import make_plan
    scn, out, data = report
    plan_actions = [a for a in data["actions"] + data["other_changes"] if a.get("model_based")]
    assert len(plan_actions) == 1
    plan = make_plan(scn.deployment, api.cost_model("h200"), load_freq_model("h200"),
                     max_slowdown=0.01)
    assert plan_actions[0]["energy_per_token_change"] == pytest.approx(-plan["applied"]["saving"])
    md = (out / "report.md").read_text()
    assert "## SM clock plan (model-based, not measured)" in md and "Ideal per-kernel bound" in md
