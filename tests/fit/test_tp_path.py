"""transformers' tensor-parallel path: runs of another harness load as they are, the
path's terms act only at tp > 1 and where the structure says, a fit recovers terms it
did not see, and the shipped profiles cover the supplied tp=2 runs."""

import copy
import json
from dataclasses import replace

import pytest

from piep import api
from piep.cli import main
from piep.fit import tp_path
from piep.core.foreign import ForeignRun, load_foreign
from piep.predict.pricing import price
from piep.core.scenario import Scenario
from _paths import ROOT  # noqa: E402

pytestmark = pytest.mark.replay

SUPPLIED = ROOT / "calibration/h200/engines/tp2" \
    / "hf-generate-tp2-h200.jsonl"


def test_the_supplied_runs_load_as_they_are():
    runs = load_foreign(SUPPLIED)
    assert len(runs) == 11 and {r.tp for r in runs} == {1, 2}
    assert {r.engine for r in runs} == {"hf-eager", "hf-static"}
    b1 = next(r for r in runs if r.label == "hf-static tp2 b1")
    assert b1.energy_j == 624.93 and len(b1.repeats) == 3
    assert b1.spread("energy_j") == pytest.approx(0.159, abs=0.002)
    assert len(tp_path.twins(runs)) == 5


@pytest.mark.parametrize("record, needle", [
    ({"engine": "transformers", "mode": "eager", "tp": 2, "batch": 1, "prompt_len": 8,
      "gen_len": 8, "energy_j": 1.0}, "lacks model, time_s"),
    ({"model": "llama-2-7b", "engine": "vllm", "tp": 2, "batch": 1, "prompt_len": 8,
      "gen_len": 8, "energy_j": 1.0, "time_s": 1.0}, "none of piep's"),
    ({"model": "llama-2-7b", "engine": "hf-eager", "tp": 2, "batch": 1, "prompt_len": 8,
      "gen_len": 8, "energy_j": -1.0, "time_s": 1.0}, "energy_j, time_s > 0")])
def test_a_run_that_misses_what_a_fit_needs_is_refused_in_one_line(record, needle, tmp_path,
                                                                   capsys):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(record) + "\n")
    out = tmp_path / "profile"
    assert main(["train", "--engine", "hf-static", "--from-measurements", str(path),
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "runs.jsonl:1" in err, err
    assert not out.exists()


def test_only_the_transformers_engines_take_foreign_runs(tmp_path, capsys):
    assert main(["train", "--engine", "hf-cb", "--from-measurements", str(SUPPLIED),
                 "--out", str(tmp_path / "p")]) == 2
    assert "tensor-parallel path of hf-eager and hf-static" in capsys.readouterr().err


def _priced(engine, tp, batch, **terms):
    scn = Scenario.build("llama-2-7b", engine=engine, tp=tp, batch=batch, host_probe_us=6.0)
    model = api.resolve(scn).cost_model
    host = copy.deepcopy(model.host)
    for k, v in terms.items():
        setattr(host, k, v)
    p = price([scn.deployment], replace(model, host=host))
    return float(p.energy_j[0]), float(p.time_s[0])


def test_the_path_acts_at_tp_above_one_and_where_the_structure_says():
    off = {"tp_call_host_s": 0.0, "tp_step_host_s": 0.0}
    for engine in ("hf-eager", "hf-static"):  # tp=1 is what it was
        assert _priced(engine, 1, 4) == _priced(engine, 1, 4, **off)
    # eager: host time per sharded call (7 a layer and the LM head), GPU waiting on it
    def factor(engine):  # the host of probe 6 us against the profile's
        ref = api.resolve(Scenario.build("llama-2-7b", engine=engine)).profile.host
        return 6.0 / (1e6 * ref.host_probe_ref_s)
    e0, t0 = _priced("hf-eager", 2, 1, **off)
    e1, t1 = _priced("hf-eager", 2, 1, tp_call_host_s=100e-6, tp_step_host_s=0.0)
    added = 128 * (7 * 32 + 1) * 100e-6 * factor("hf-eager")  # prefill and 127 steps
    assert 0.5 * added < t1 - t0 <= added * (1 + 1e-9)  # a host-bound step: most shows
    # the compiled step: its decode steps at tp>1 (not prefill, not an eager engine)
    _, s0 = _priced("hf-static", 2, 1, **off)
    _, s1 = _priced("hf-static", 2, 1, tp_call_host_s=0.0, tp_step_host_s=1e-3)
    assert s1 - s0 == pytest.approx(127 * 1e-3 * factor("hf-static"), rel=1e-6)
    assert _priced("hf-eager", 2, 1, tp_call_host_s=0.0, tp_step_host_s=1e-3)[1] == t0
    # the gaps it adds draw tp_gap_w (on both GPUs; weighted by the engine's combiner)
    low = _priced("hf-eager", 2, 1, tp_call_host_s=100e-6, tp_gap_w=120.0)[0]
    high = _priced("hf-eager", 2, 1, tp_call_host_s=100e-6, tp_gap_w=220.0)[0]
    assert 2 * 100.0 * (t1 - t0) * 0.7 < high - low < 2 * 100.0 * (t1 - t0) * 1.5


def test_a_fit_recovers_terms_it_did_not_see():
    """Runs made by piep itself with known terms (at a known host): the fit finds them."""
    truth = {"tp_call_host_s": 90e-6, "tp_step_host_s": 3e-3, "tp_gap_w": 170.0}
    priced = tp_path.Pricer("h200")
    runs = []
    for engine, batch in (("hf-eager", 1), ("hf-eager", 16), ("hf-static", 4)):
        for tp in (1, 2):
            base = ForeignRun("llama-2-7b", engine, tp, batch, 512, 32, 1.0, 1.0, (), "made")
            e, t = priced(base, 6.0, truth if tp == 2 else None)
            runs.append(replace(base, energy_j=e, time_s=t))
    fitted = tp_path.fit(runs, priced, probe_us=6.0)
    for k, v in truth.items():
        assert fitted.terms[k] == pytest.approx(v, rel=0.03), k


def test_the_shipped_profiles_measured_tp2_and_cover_the_supplied_runs():
    runs = load_foreign(SUPPLIED)
    for engine in ("hf-eager", "hf-static"):
        res = api.resolve(Scenario.build("llama-2-7b", engine=engine, tp=2))
        assert 2 in res.profile.measured_tp and "unmeasured_engine_layout" not in res.flags
        meta = res.profile.meta.tp_path
        assert meta["energy_mape"] <= 10 and meta["time_mape"] <= 12  # the targets
        for run in (r for r in runs if r.engine == engine and r.tp == 2):
            doc = api.predict("llama-2-7b", engine=engine, tp=2, batch=run.batch,
                              host_probe_us=meta["harness_probe_us"])
            lo, hi = doc["interval"]["energy_j"]
            assert lo <= run.energy_j <= hi, run.label
            lo, hi = doc["interval"]["time_s"]
            assert lo <= run.time_s <= hi, run.label
    # hf-cb was not measured at tp=2: still flagged
    assert "unmeasured_engine_layout" in api.resolve(
        Scenario.build("llama-2-7b", engine="hf-cb", tp=2)).flags


@pytest.mark.slow
def test_piep_train_fits_the_path_on_the_supplied_runs(tmp_path, capsys):
    out = tmp_path / "hf-static"
    assert main(["train", "--engine", "hf-static", "--from-measurements", str(SUPPLIED),
                 "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tp_measured"] == [1, 2]
    shipped = api.resolve(Scenario.build("llama-2-7b", engine="hf-static")).profile
    for k, v in doc["terms"].items():  # the shipped profile is this command's output
        assert getattr(shipped.host, k) == pytest.approx(v, rel=1e-6)
