"""Engines: their KV-cache handling in the tree, their profiles, and `--engine` at the edge."""

import json

import numpy as np
import pytest

from piep import api
from piep.cli import main
from piep.core.config import BF16_BYTES
from piep.core.errors import ConfigError
from piep.core.engines import ENGINES
from piep.fit.engines import engine_records, fit_profile
from piep.predict.engines import load_profile, save_profile
from piep.predict.store import load_learned
from piep.tree import build_tree
from piep.tree.builder import ELEMENTWISE

pytestmark = pytest.mark.replay


def _layer_leaves(dep, phase):
    tree = build_tree(dep)
    ph = next(p for p in tree.children[0].children if p.name == phase)
    layer = next(n for _, _, n in ph.walk() if n.kind == "layer")
    return {n.name if n.name == "attention" else n.kind: n for n in layer.children}


def test_dynamic_cache_copies_the_whole_cache_every_step():
    dep = api.deployment("llama-3-8b", engine="hf-eager", batch=4, prompt_len=300, gen_len=101)
    kids = _layer_leaves(dep, "decode")
    m = dep.model
    ctx = 300 + 101 // 2  # the live prefix, on average over the steps
    kv = kids["kv_append"]
    assert kv.bytes_read == 2 * 4 * ctx * m.num_kv_heads * m.head_dim * BF16_BYTES
    assert kv.bytes_written == 2 * 4 * (ctx + 1) * m.num_kv_heads * m.head_dim * BF16_BYTES
    assert "kv_append" not in _layer_leaves(dep, "prefill")  # the first update only stores
    ref = api.deployment("llama-3-8b", mode="eager", batch=4, prompt_len=300, gen_len=101)
    assert "kv_append" not in _layer_leaves(ref, "decode")


def test_static_cache_is_attended_whole_with_kv_expanded():
    """A static-cache decode step attends every slot under a mask (its own kernel kind),
    K/V expanded to every query head; its prefill is causal over the prompt (transformers
    drops the mask into an empty cache), native GQA, nothing expanded."""
    dep = api.deployment("qwen2.5-7b", engine="hf-static", batch=2, prompt_len=100,
                         gen_len=28, cache_len=1000)
    m = dep.model
    kids = _layer_leaves(dep, "decode")
    att, exp = kids["attention"], kids["kv_expand"]
    assert att.kind == "sdpa_masked"
    assert att.context_len == 1000 and att.attrs["kv_heads"] == m.num_heads
    assert exp.bytes_written == 2 * 2 * 1000 * m.num_heads * m.head_dim * BF16_BYTES
    pre = _layer_leaves(dep, "prefill")
    assert "kv_expand" not in pre and pre["attention"].kind == "attention"
    assert pre["attention"].attrs["kv_heads"] == m.num_kv_heads
    # MHA: repeat_kv is a no-op, nothing expanded; one KV head: its reshape is a view
    assert "kv_expand" not in _layer_leaves(
        api.deployment("llama-2-7b", engine="hf-static"), "decode")
    from piep.tree.builder import expands_kv
    assert not expands_kv(16, 1) and expands_kv(16, 2) and not expands_kv(8, 8)


def test_cache_len_is_validated_and_costs_energy():
    with pytest.raises(ConfigError, match="cache_len"):
        api.scenario("llama-3-8b", engine="hf-static", prompt_len=512, gen_len=128,
                     cache_len=600)
    with pytest.raises(ConfigError, match="static-cache engines"):
        api.scenario("llama-3-8b", engine="hf-eager", cache_len=4096)
    short = api.predict("qwen2.5-7b", engine="hf-static", batch=32)
    long = api.predict("qwen2.5-7b", engine="hf-static", batch=32, cache_len=4096)
    assert long["energy_j"] > 1.2 * short["energy_j"]


def test_engine_predictions_name_engine_and_version():
    doc = api.predict("llama-3-8b", engine="hf-static", batch=8)
    prof = load_profile("h200", "hf-static")
    host = prof.host
    assert doc["engine_ref"] == {"name": "hf-static", "version": prof.version,
                                 "host_probe_ref_us": 1e6 * host.host_probe_ref_s,
                                 "host_probe_us": 1e6 * host.host_probe_default_s,
                                 "host_probe_source": "default",
                                 "host_factor": pytest.approx(host.host_probe_default_s
                                                              / host.host_probe_ref_s)}
    assert "static cache" in doc["engine"] and "hf-static" in doc["predictor"]
    assert "unmeasured_engine_layout" not in doc["flags"]
    tp4 = api.predict("llama-3-8b", engine="hf-static", tp=4, batch=8)
    assert "unmeasured_engine_layout" in tp4["flags"]
    ref = api.predict("llama-3-8b", batch=8)
    assert ref["engine_ref"]["name"] == "piep-graph"


def _half_widths(doc):
    return [np.log(doc["interval"][k][1] / doc[k]) for k in ("energy_j", "time_s")]


def test_an_engine_at_an_unmeasured_tp_degree_has_a_wider_interval(monkeypatch):
    """No run of the shipped hf engines had tp=4: their tp=4 predictions are flagged and
    their 90 % band is the measured degrees' widened x1.5 in log (beside the x1.5 of
    collectives beyond 2 GPUs); a profile whose runs had tp=4 keeps only the latter."""
    from piep.predict import engines
    from piep.predict.learned import OUT_OF_RANGE_WIDENING as W
    for engine in ("hf-eager", "hf-static"):
        one = api.predict("llama-3-8b", engine=engine, tp=2, batch=8)
        two = api.predict("llama-3-8b", engine=engine, tp=4, batch=8)
        assert "unmeasured_engine_layout" in two["flags"]
        assert _half_widths(two) == pytest.approx([W * W * h for h in _half_widths(one)])
        assert "tp=4, which none of its runs had" in two["interval"]["level"]
        assert "widened" not in one["interval"]["level"]
    import copy
    prof = copy.deepcopy(load_profile("h200", "hf-static"))  # the loaded one is read-only
    prof.meta.tp_measured = [1, 2, 4]
    monkeypatch.setattr(engines, "load_profile", lambda gpu, engine: prof)
    measured = api.predict("llama-3-8b", engine="hf-static", tp=4, batch=8)
    assert "unmeasured_engine_layout" not in measured["flags"]
    assert "which none of its runs had" not in measured["interval"]["level"]
    assert _half_widths(measured) == pytest.approx([W * h for h in _half_widths(one)])


def test_engine_flags_at_the_edge(capsys):
    assert main(["predict", "--model", "llama-3-8b", "--engine", "hf-static", "--mode",
                 "eager"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--mode eager belongs to piep's reference runner" in err
    assert main(["predict", "--model", "llama-3-8b", "--engine", "sglang"]) == 2
    assert "hf-static" in capsys.readouterr().err  # the choices are listed
    assert main(["predict", "--model", "llama-3-8b", "--engine", "piep-eager", "--mode",
                 "graph"]) == 2
    assert "runs eager decode" in capsys.readouterr().err
    assert main(["predict", "--model", "llama-3-8b", "--engine", "hf-eager", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["engine_ref"]["name"] == "hf-eager"
    assert main(["predict", "--model", "llama-3-8b", "--host-probe-us", "7"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["predict", "--model", "llama-3-8b", "--engine", "hf-static", "--json",
                 "--host-probe-us", "9"]) == 0
    assert json.loads(capsys.readouterr().out)["engine_ref"]["host_probe_us"] == 9.0
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if not gpu:  # the probe needs torch and a GPU: one line, no traceback
        assert main(["env", "--host-probe"]) == 2
        assert "CUDA GPU" in capsys.readouterr().err


def test_a_host_probe_scales_host_time_only():
    """`--host-probe-us`: the engine's host terms scale by the probe over the profile's
    reference host; kernels do not; no probe = the reference host; bad input = one line."""
    ref_us = 1e6 * load_profile("h200", "hf-eager").host.host_probe_ref_s
    host = load_profile("h200", "hf-eager").host
    base = api.predict("llama-3-8b", engine="hf-eager", batch=4,
                       host_probe_us=1e6 * (host.host_probe_default_s or host.host_probe_ref_s))
    assert base["time_s"] == pytest.approx(
        api.predict("llama-3-8b", engine="hf-eager", batch=4)["time_s"], rel=1e-9)
    base = api.predict("llama-3-8b", engine="hf-eager", batch=4, host_probe_us=ref_us)
    same = api.predict("llama-3-8b", engine="hf-eager", batch=4, host_probe_us=ref_us)
    slow = api.predict("llama-3-8b", engine="hf-eager", batch=4, host_probe_us=2 * ref_us)
    assert same["time_s"] == pytest.approx(base["time_s"], rel=1e-9)
    assert same["engine_ref"]["host_factor"] == pytest.approx(1.0)
    assert slow["time_s"] > 1.2 * base["time_s"] and slow["energy_j"] > base["energy_j"]
    dep = api.deployment("llama-3-8b", engine="hf-eager", host_probe_us=2 * ref_us)
    assert dep.host_probe_s == pytest.approx(2e-6 * ref_us)
    # the compute kernels' own time is the same on either host; only the gaps grow
    from dataclasses import replace
    from piep.predict.table import TableBuilder
    model = load_profile("h200", "hf-eager").apply(load_learned("h200"))
    on = {}
    for probe in (None, dep.host_probe_s):
        table = TableBuilder().table([replace(dep, host_probe_s=probe)])
        on[probe] = model.price(table)
    fast, slow_p = on[None], on[dep.host_probe_s]
    assert np.array_equal(fast.time_s, slow_p.time_s)
    assert (slow_p.gap_s >= fast.gap_s).all() and slow_p.gap_s.sum() > 1.5 * fast.gap_s.sum()
    for engine in (None, "piep-eager"):
        with pytest.raises(ConfigError, match="engines fitted per host"):
            api.scenario("llama-3-8b", engine=engine, host_probe_us=7.0)
    with pytest.raises(ConfigError, match="outside 0.5-1000 us"):
        api.scenario("llama-3-8b", engine="hf-eager", host_probe_us=5000)


def test_a_deployment_of_unknown_host_is_priced_on_the_profiles_default_host():
    """A shipped profile predicts a deployment without a probe for the typical host of the
    calibration machines (`host_probe_default_s`), exactly as if that probe were given; a
    profile without a default, for its own runs' host; the document says which."""
    import copy
    from dataclasses import replace
    from piep.predict.table import TableBuilder
    prof = load_profile("h200", "hf-eager")
    ref = prof.host.host_probe_ref_s
    dep = api.deployment("llama-3-8b", engine="hf-eager", batch=4)
    priced = {}
    for default in (None, 1.6 * ref):
        host = copy.deepcopy(prof.host)
        host.host_probe_default_s = default
        model = replace(prof, host=host).apply(load_learned("h200"))
        for probe in (None, ref, 1.6 * ref):
            table = TableBuilder().table([replace(dep, host_probe_s=probe)])
            priced[default, probe] = model.price(table).gap_s.sum()
    assert priced[None, None] == pytest.approx(priced[None, ref], rel=1e-12)
    assert priced[1.6 * ref, None] == pytest.approx(priced[None, 1.6 * ref], rel=1e-12)
    assert priced[1.6 * ref, ref] == pytest.approx(priced[None, ref], rel=1e-12)
    assert priced[1.6 * ref, None] > 1.3 * priced[None, None]
    doc = api.predict("llama-3-8b", engine="hf-eager", batch=4)["engine_ref"]
    if prof.host.host_probe_default_s:
        assert doc["host_probe_source"] == "default"
        assert doc["host_probe_us"] == pytest.approx(1e6 * prof.host.host_probe_default_s)
    given = api.predict("llama-3-8b", engine="hf-eager", batch=4, host_probe_us=9.0)
    assert given["engine_ref"]["host_probe_source"] == "given"


def test_the_host_factor_is_the_probe_over_the_reference():
    """The host factor is probe / reference; an unknown host is the default's; without a
    reference, ones."""
    from piep.predict.host import HostTerms
    host = HostTerms(host_probe_ref_s=8e-6, host_probe_default_s=10e-6)
    assert host.host_factor(np.array([8e-6, 16e-6, np.nan])) == pytest.approx([1.0, 2.0, 1.25])
    assert HostTerms().host_factor(np.array([16e-6])) == pytest.approx([1.0])


def test_the_typical_host_is_the_median_launch_probe_of_every_shipped_run():
    from piep.fit.engines import engine_records, typical_host_s
    probes = sorted(r.host_probe_s for e in ("hf-eager", "hf-static", "hf-cb")
                    for r in engine_records("h200", e) if r.host_probe_s)
    assert len(probes) > 100
    assert typical_host_s("h200") == pytest.approx(float(np.median(probes)))


def test_every_shipped_profile_fitted_per_host_predicts_for_the_typical_host_now():
    """A run added to one engine moves the typical host of all: each profile fitted per
    host is refit with it (hf-eager and hf-static were left at the old one once)."""
    from piep.core.engines import names
    from piep.fit.engines import typical_host_s
    typical = typical_host_s("h200")
    for engine in names(host_fitted=True):
        assert load_profile("h200", engine).host.host_probe_default_s == \
            pytest.approx(typical, rel=1e-12), engine


@pytest.mark.slow  # (seconds: the default tier's budget, reports/speed.md)
def test_a_profile_without_host_probes_refuses_a_host(tmp_path, monkeypatch, capsys):
    """Runs without a host probe (e.g. metered from another engine's process) give a
    profile without a host reference: a host probe is refused in one line."""
    recs = [{k: v for k, v in r.doc.items() if k not in ("host_probe", "host_probes")}
            for r in engine_records("h200", "hf-eager") if r.model != "qwen2.5-32b"][:12]
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(r) + "\n" for r in recs))
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    assert main(["train", "--engine", "hf-eager", "--from-measurements", str(runs)]) == 0
    capsys.readouterr()
    assert load_profile("h200", "hf-eager").host.host_probe_ref_s is None
    assert main(["predict", "--model", "llama-3-8b", "--engine", "hf-eager",
                 "--host-probe-us", "9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no host reference" in err


def test_the_host_goes_along_with_the_scenario(capsys):
    """Variants of a scenario run on the same host: another engine fitted per host keeps
    the probe, the reference runner drops it; a sweep gives it to the engines it fits."""
    scn = api.scenario("llama-3-8b", engine="hf-eager", host_probe_us=9.0)
    assert scn.replace(batch=8).engine.host_probe_us == 9.0
    assert scn.replace(engine="hf-static").deployment.host_probe_s == pytest.approx(9e-6)
    assert scn.replace(engine="piep-graph").engine.host_probe_us is None
    assert scn.replace(host_probe_us=None).deployment.host_probe_s is None
    assert main(["sweep", "--model", "llama-3-8b", "--engine", "hf-eager", "piep-graph",
                 "--batch", "1", "--host-probe-us", "15", "--json"]) == 0
    rows = {r["engine"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    slow = api.predict("llama-3-8b", engine="hf-eager", host_probe_us=15.0)
    assert rows["hf-eager"]["energy_j"] == pytest.approx(slow["energy_j"])
    assert rows["piep-graph"]["energy_j"] == pytest.approx(
        api.predict("llama-3-8b")["energy_j"])
    assert main(["sweep", "--model", "llama-3-8b", "--batch", "1",
                 "--host-probe-us", "15"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_profile_is_fitted_per_host():
    """Each run's host time is its launch probe over the runs' median: the fit recovers
    one set of host terms from runs on hosts of different speed."""
    import numpy as np
    from piep.fit.engines import host_reference_s
    recs = engine_records("h200", "hf-eager")
    ref = host_reference_s(recs)
    assert ref == pytest.approx(float(np.median([r.doc["host_probe"]["launch_add_s"]
                                                 for r in recs])))
    assert load_profile("h200", "hf-eager").host.host_probe_ref_s == pytest.approx(ref)
    slow = max(recs, key=lambda r: r.host_probe_s)
    gpu = load_learned("h200").gpu
    on_host = slow.deployment(gpu, "hf-eager", on_its_host=True)
    assert on_host.host_probe_s == slow.doc["host_probe"]["launch_add_s"]
    assert slow.deployment(gpu, "hf-eager").host_probe_s is None
    host = load_profile("h200", "hf-eager").host
    assert float(host.host_factor(np.array([on_host.host_probe_s]))[0]) > 1.2
    assert float(host.host_factor(np.array([np.nan]))[0]) == pytest.approx(
        (host.host_probe_default_s or host.host_probe_ref_s) / host.host_probe_ref_s)


def test_compare_takes_an_engine_per_candidate():
    from piep.compare import compare, parse_candidate
    assert parse_candidate("llama-2-7b@tp2:hf-static") == (
        "llama-2-7b", {"tp": 2, "pp": 1, "dp": 1, "engine": "hf-static"})
    assert parse_candidate("/a:b/config.json@tp2")[0] == "/a:b/config.json"
    doc = compare(["llama-2-7b", "llama-2-7b:hf-eager"], api.scenario("llama-2-7b", batch=4))
    a, b = doc["candidates"]
    assert b["energy_j"] == pytest.approx(api.predict("llama-2-7b", engine="hf-eager",
                                                      batch=4)["energy_j"])
    assert a["energy_j"] == pytest.approx(api.predict("llama-2-7b", batch=4)["energy_j"])


@pytest.mark.parametrize("engine", ["hf-eager", "hf-static"])
def test_shipped_profile_is_reproduced_from_its_runs(engine):
    """`piep train --engine NAME` on the committed runs gives the shipped host terms."""
    shipped = load_profile("h200", engine)
    refit = fit_profile(load_learned("h200"), engine_records("h200", engine), engine)
    for name in ENGINES[engine].fitted_terms:
        assert getattr(refit.host, name) == pytest.approx(getattr(shipped.host, name),
                                                          rel=1e-6, abs=1e-12)
    assert refit.meta.runs == shipped.meta.runs > 5


def test_a_user_profile_takes_precedence(tmp_path, monkeypatch):
    prof = load_profile("h200", "hf-eager")
    prof.host.step_host_s = 0.05  # 50 ms per token: unmistakable
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path))
    save_profile(prof, tmp_path / "h200" / "engines" / "hf-eager")
    slow = api.predict("llama-2-7b", engine="hf-eager", gen_len=64)
    monkeypatch.delenv("PIEP_DATA_DIR")
    fast = api.predict("llama-2-7b", engine="hf-eager", gen_len=64)
    host = load_profile("h200", "hf-eager").host
    factor = (host.host_probe_default_s or host.host_probe_ref_s) / host.host_probe_ref_s
    assert slow["time_s"] - fast["time_s"] == pytest.approx(
        64 * (0.05 - host.step_host_s) * factor, rel=0.02)


def test_train_engine_from_own_measurements(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    # three models' runs: the fit and both leave-one-model-out passes, in a few seconds
    recs = [r for r in engine_records("h200", "hf-static")
            if r.model in ("llama-2-7b", "llama-3-8b", "qwen2.5-7b")]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in recs))
    assert main(["train", "--engine", "hf-static", "--from-measurements", str(path),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["profile"].startswith(str(tmp_path / "data"))
    assert out["runs"] == len({r.key for r in recs})
    assert np.isfinite(out["lomo_energy_mape"])
    # runs with host probes: the profile is fitted per host and keeps both figures
    mine = load_profile("h200", "hf-static")
    assert mine.host.host_probe_ref_s > 0
    assert np.isfinite(mine.meta.lomo_time_mape_host_probe)


@pytest.mark.slow  # (seconds: the default tier's budget, reports/speed.md)
def test_an_engine_of_your_own_is_fitted_and_priced_as_a_builtin(tmp_path, monkeypatch,
                                                                  capsys):
    """Runs of an engine piep cannot run, under a name of the user's own, fitted `--like`
    a built-in engine: the same profile as that engine fitted on the same runs, answering
    predict, compare and sweep under the user's name, listed by `piep env`."""
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    models = ("llama-2-7b", "llama-3-8b")  # two: a leave-one-model-out pass, quickly
    runs = [r for r in engine_records("h200", "hf-static") if r.model in models]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps({**r.to_json(), "engine": {"name": "my-vllm",
                                                                  "version": "0.11"}})
                            + "\n" for r in runs))
    assert main(["train", "--engine", "my-vllm", "--like", "hf-static", "--from-measurements",
                 str(path), "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert fitted["like"] == "hf-static" and fitted["version"] == "0.11"
    mine = load_profile("h200", "my-vllm")
    twin = fit_profile(load_learned("h200"), runs, "hf-static",
                       default_host_s=None)
    assert mine.like == "hf-static" and mine.host.to_dict() == twin.host.to_dict()
    doc = api.predict("llama-3-8b", engine="my-vllm", batch=8)
    assert doc["engine_ref"]["name"] == "my-vllm" and doc["engine_ref"]["like"] == "hf-static"
    assert "priced as hf-static" in doc["engine"] and doc["workload"]["mode"] == "graph"
    same = twin.apply(load_learned("h200"))
    from piep.predict.pricing import price
    assert doc["energy_j"] == pytest.approx(
        float(price([api.deployment("llama-3-8b", engine="hf-static", batch=8)],
                    same).energy_j[0]), rel=1e-9)
    assert main(["compare", "llama-3-8b:my-vllm", "llama-3-8b@tp2:my-vllm", "--json"]) == 0
    cands = json.loads(capsys.readouterr().out)["candidates"]
    assert [c["candidate"] for c in cands] == ["llama-3-8b:my-vllm", "llama-3-8b@tp2:my-vllm"]
    assert main(["sweep", "--model", "llama-3-8b", "--engine", "my-vllm", "hf-static",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["engine"] for r in rows] == ["my-vllm", "hf-static"] and "error" not in rows[0]
    assert main(["env", "--json"]) == 0
    listed = {e["name"]: e for e in json.loads(capsys.readouterr().out)["engines"]}
    assert listed["my-vllm"]["like"] == "hf-static"
    assert main(["env"]) == 0
    assert "my-vllm" in capsys.readouterr().out
    # fitted on one model's runs: no leave-one-model-out figure, and env still lists it
    one = tmp_path / "one.jsonl"
    one.write_text("".join(json.dumps({**r.to_json(), "engine": {"name": "one-model",
                                                                 "version": "1"}})
                           + "\n" for r in runs if r.model == "llama-2-7b"))
    assert main(["train", "--engine", "one-model", "--like", "hf-static",
                 "--from-measurements", str(one)]) == 0
    capsys.readouterr()
    assert main(["env"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines()
               if x.startswith("  one-model")]
    assert "LOMO energy -" in line


@pytest.mark.parametrize("argv, needle", [
    (["train", "--engine", "my-vllm"], "--like hf-eager|hf-static|hf-cb --from-measurements"),
    (["train", "--engine", "hf-static", "--like", "hf-eager"], "is piep's own"),
    (["train", "--like", "hf-eager"], "--like goes with --engine"),
    (["train", "--engine", "piep-graph"], "reference runner"),
    (["train", "--engine", "My VLLM", "--like", "hf-eager", "--from-measurements", "x"],
     "lower case"),
    (["train", "--engine", "mine", "--like", "hf-eager", "--from-measurements",
      "/no/such.jsonl"], "no such file"),
    (["predict", "--model", "llama-3-8b", "--engine", "never-fitted"], "is not an engine here"),
])
def test_engines_of_your_own_at_the_edge(tmp_path, monkeypatch, capsys, argv, needle):
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    with pytest.raises(ConfigError, match="piep train --engine never-fitted --like"):
        api.predict("llama-3-8b", engine="never-fitted")


@pytest.mark.slow
def test_shipped_serving_profile_is_reproduced_from_its_traces():
    """`piep train --engine hf-cb` on the committed replays (each on its session's host,
    as the fit reads them) gives the shipped host terms."""
    from piep.fit.serving import fit_cb_profile, shipped_replays
    shipped = load_profile("h200", "hf-cb")
    refit = fit_cb_profile(load_learned("h200"), shipped_replays("h200"))
    for name in ENGINES["hf-cb"].fitted_terms:
        assert refit.host.term(name) == pytest.approx(shipped.host.term(name), rel=1e-6)


def test_a_host_fitted_prediction_names_the_host_it_is_for(capsys):
    """Without --host-probe-us the document names the profile's reference host, and the
    table says how to predict for another; with it, the factor applied."""
    ref = load_profile("h200", "hf-eager").host.host_probe_ref_s
    doc = api.predict("llama-3-8b", engine="hf-eager", batch=4)
    assert doc["engine_ref"]["host_probe_ref_us"] == pytest.approx(1e6 * ref)
    slow = api.predict("llama-3-8b", engine="hf-eager", batch=4, host_probe_us=2e6 * ref)
    assert slow["engine_ref"]["host_factor"] == pytest.approx(2.0)
    assert slow["time_s"] > doc["time_s"]
    assert main(["predict", "--model", "llama-3-8b", "--engine", "hf-eager"]) == 0
    assert "--host-probe-us" in capsys.readouterr().out
    assert main(["predict", "--model", "llama-3-8b"]) == 0
    assert "host-probe" not in capsys.readouterr().out


def test_env_host_probe_reports_the_median_of_its_probes(monkeypatch, capsys):
    """`piep env --host-probe` on a GPU host (the probe replaced: no GPU here): the median
    of HOST_PROBES probes, in us and ms, with the tiny decode step where it was taken."""
    import piep.commands.env as env
    seen = {}

    def fake(gpu=0, repeats=1):
        seen["repeats"] = repeats
        return {"launch_add_s": 7.5e-6, "python_loop_200k_s": 7e-3,
                "tiny_decode_step_s": 1.5e-3}
    monkeypatch.setattr(env, "host_probe_here", fake)
    assert main(["env", "--host-probe", "--json"]) == 0
    probe = json.loads(capsys.readouterr().out)["host_probe"]
    assert seen["repeats"] == env.HOST_PROBES > 1
    assert probe == pytest.approx({"launch_us": 7.5, "python_loop_200k_ms": 7.0,
                                   "tiny_decode_step_ms": 1.5})
    assert main(["env", "--host-probe"]) == 0
    assert "launch probe 7.5 us" in capsys.readouterr().out


def test_runs_of_two_library_versions_are_refused_before_fitting(tmp_path, monkeypatch,
                                                                capsys):
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    recs = [r.to_json() for r in engine_records("h200", "hf-static")]
    for r in recs[:3]:
        r["engine"] = {**r["engine"], "version": "0.0.1"}
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["train", "--engine", "hf-static", "--from-measurements", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "0.0.1" in err and "versions" in err
    assert not (tmp_path / "data").exists()


def test_a_sliding_window_caps_the_cache_and_masks_attention_past_it():
    """mistral-7b (window 4096) under hf-eager: below the window nothing changes; a prompt
    past it runs a masked prefill with K/V expanded; decode steps past it attend the window
    (masked), the ones before it the live prefix; piep's runner ignores the window."""
    below = api.deployment("mistral-7b", engine="hf-eager", batch=2, prompt_len=1000,
                           gen_len=100)
    assert below.window_weights == ((1.0, 0.0), (1.0, 0.0))
    assert "kv_expand" not in _layer_leaves(below, "prefill")
    past = api.deployment("mistral-7b", engine="hf-eager", batch=2, prompt_len=4500,
                          gen_len=64)
    assert past.window_weights == ((0.0, 1.0), (0.0, 1.0))
    pre = {n.kind: n for _, _, n in build_tree(past).walk() if n.phase == "prefill"}
    assert pre["sdpa_masked"].context_len == 4500 and "kv_expand" in pre
    dec = [n for _, _, n in build_tree(past).walk() if n.phase == "decode"
           and n.kind in ("sdpa_masked", "attention")]
    assert [n.context_len for n in dec] == [4096]
    # past it a step concatenates the new key to a strided slice of the window (kv_slide)
    # and copies K/V out to every query head eagerly; before it, DynamicCache's append
    copies = {n.kind: n for _, _, n in build_tree(past).walk() if n.phase == "decode"
              and n.kind.startswith("kv_")}
    assert set(copies) == {"kv_slide", "kv_expand"} and copies["kv_slide"].context_len == 4095
    assert {n.kind for _, _, n in build_tree(below).walk()
            if n.phase == "decode" and n.kind.startswith("kv_")} == {"kv_append"}
    # crossing during the decode: 4096 - 3900 - 1 = 195 of 299 steps before the window
    across = api.deployment("mistral-7b", engine="hf-eager", batch=1, prompt_len=3900,
                            gen_len=300)
    assert across.window_weights[1] == pytest.approx((195 / 299, 104 / 299))
    ref = api.deployment("mistral-7b", mode="eager", batch=2, prompt_len=4500, gen_len=64)
    assert ref.window_weights == ((1.0, 0.0), (1.0, 0.0))
    # a static sliding cache holds the window: its decode attends min(cache, window)
    static = api.deployment("mistral-7b", engine="hf-static", batch=2, prompt_len=4500,
                            gen_len=64)
    assert {n.context_len for _, _, n in build_tree(static).walk()
            if n.phase == "decode" and n.kind == "sdpa_masked"} == {4096}


def test_a_profile_whose_runs_never_crossed_a_window_flags_it(tmp_path, monkeypatch):
    prof = load_profile("h200", "hf-eager")
    assert prof.meta.window_measured  # the shipped runs crossed windows
    args = dict(engine="hf-eager", batch=2, prompt_len=4500, gen_len=64)
    assert "unmeasured_sliding_window" not in api.predict("mistral-7b", **args)["flags"]
    prof.meta.window_measured = False
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path))
    save_profile(prof, tmp_path / "h200" / "engines" / "hf-eager")
    assert "unmeasured_sliding_window" in api.predict("mistral-7b", **args)["flags"]
    assert "unmeasured_sliding_window" not in api.predict(
        "mistral-7b", **{**args, "prompt_len": 1000})["flags"]


@pytest.mark.slow  # (seconds: the default tier's budget, reports/speed.md)
def test_any_windowed_config_gets_a_positive_answer_inside_its_interval():
    """Random Llama-family shapes (head dim 64-128, MHA or GQA, with or without a sliding
    window, tied or not) under hf-eager and hf-static, below, across and past the window:
    every valid one is answered, positive, inside its interval."""
    import random
    from piep.core.config import ModelSpec
    from piep.core.errors import PiepError
    rng = random.Random(3)
    answered = 0
    for _ in range(40):
        hd, heads = rng.choice((64, 80, 96, 112, 128)), rng.choice((8, 16, 28, 32, 40))
        kv = rng.choice([k for k in (1, 2, 4, 8, heads) if heads % k == 0])
        cfg = {"model_type": rng.choice(("llama", "mistral", "qwen2")),
               "hidden_size": heads * hd, "intermediate_size": 3 * heads * hd,
               "num_hidden_layers": rng.randint(2, 48), "num_attention_heads": heads,
               "num_key_value_heads": kv, "vocab_size": rng.choice((32000, 151936)),
               "max_position_embeddings": 32768, "tie_word_embeddings": rng.random() < 0.3,
               "sliding_window": rng.choice((None, 256, 4096))}
        try:
            doc = api.predict(ModelSpec.from_hf_config(cfg, name="fuzz"),
                              engine=rng.choice(("hf-eager", "hf-static")),
                              batch=rng.randint(1, 32), prompt_len=rng.randint(1, 6000),
                              gen_len=rng.randint(1, 400))
        except PiepError:  # e.g. it does not fit the GPU's memory: a one-line refusal
            continue
        lo, hi = doc["interval"]["energy_j"]
        assert 0 < lo <= doc["energy_j"] <= hi and doc["time_s"] > 0
        answered += 1
    assert answered >= 30


def _pointwise(dep, phase):
    tree = build_tree(dep)
    ph = next(p for p in tree.children[0].children if p.name == phase)
    return [n for _, _, n in ph.walk() if n.is_leaf and n.kind in ELEMENTWISE]


def test_a_compiled_step_fuses_its_pointwise_leaves(capsys):
    """hf-static compiles its decode step: each pointwise leaf is one fused kernel (`piep
    tree` says so); its eager prefill and the other engines keep the eager ops."""
    dep = api.deployment("llama-3-8b", engine="hf-static", batch=4, prompt_len=100, gen_len=9)
    fused = _pointwise(dep, "decode")
    assert len(fused) == 7  # 2 norms, rope, 2 residual adds, activation, the final norm
    assert all(n.attrs.get("fused") and n.launches == 1 for n in fused)
    assert not any(n.attrs.get("fused") for n in _pointwise(dep, "prefill"))
    for other in ({"engine": "hf-eager"}, {"mode": "graph"}, {"mode": "eager"}):
        d = api.deployment("llama-3-8b", batch=4, prompt_len=100, gen_len=9, **other)
        assert not any(n.attrs.get("fused") for n in _pointwise(d, "decode"))
    assert main(["tree", "llama-3-8b", "--engine", "hf-static"]) == 0
    out = capsys.readouterr().out
    assert out.count("rmsnorm (fused)") == 2 and "final_norm (fused)" in out


def test_fused_leaves_take_the_fused_kernel_time():
    """With a fused-kernel time, a fused row runs that time plus its bytes at HBM
    bandwidth; without one, it is priced as the eager module it replaces."""
    from dataclasses import replace
    from piep.predict.table import TableBuilder
    dep = api.deployment("llama-3-8b", engine="hf-static", batch=4, prompt_len=100, gen_len=9)
    model = load_profile("h200", "hf-static").apply(load_learned("h200"))
    table = TableBuilder().table([dep])
    off = replace(model, host=replace(model.host, fused_kernel_s=0.0)).price(table)
    on = replace(model, host=replace(model.host, fused_kernel_s=2e-6)).price(table)
    f = table.fused
    moved = table.q["bytes_read"][f] + table.q["bytes_written"][f]
    assert np.allclose(on.time_s[f], 2e-6 + moved / dep.gpu.hbm_bytes_per_s)
    assert np.array_equal(on.time_s[~f], off.time_s[~f])
    # a norm's or rope's eager ops launch several kernels each
    chains = f & np.isin(table.kind, ("rmsnorm", "final_norm", "rope"))
    assert (off.time_s[chains] > on.time_s[chains]).all()


def test_the_fused_kernel_time_comes_from_the_census(tmp_path, monkeypatch):
    """One layer's fused kernels (compiler-generated, not the K/V expansion) less the
    bytes of the layer's fused leaves at HBM bandwidth, per fused leaf."""
    from piep.fit import census
    from piep.predict.table import TableBuilder
    rec = {"schema": census.SCHEMA, "schema_version": 1, "model": "llama-3-8b",
           "engine": "hf-static", "batch": 16, "prompt_len": 512, "gen_len": 9, "prefill": {},
           "decode_step": {"per_layer_us_by_name": {
               "triton_red_fused_add_mean_mul_pow_rsqrt_1": 4.0, "triton_poi_fused_silu_2": 8.0,
               "triton_poi_fused_cat_clone_expand_3": 50.0, "nvjet_sm90_gemm": 60.0}}}
    (tmp_path / "c.jsonl").write_text(json.dumps(rec) + "\n")
    monkeypatch.setattr(census, "census_dir", lambda gpu: tmp_path)
    rec = census.census_records("h200")[0]
    assert census.fused_pointwise_us(rec) == 12.0
    gpu = load_learned("h200").gpu
    spec = api.deployment("llama-3-8b").model
    dep = census.census_deployment(rec, spec, gpu)
    t = TableBuilder().table([dep])
    inside = t.fused & (t.kind != "final_norm")
    per_layer = t.count * inside / 8 / dep.model.num_layers  # 8 decode steps
    moved = (per_layer * (t.q["bytes_read"] + t.q["bytes_written"])).sum()
    want = (12e-6 - moved / gpu.hbm_bytes_per_s) / per_layer.sum()
    assert per_layer.sum() == pytest.approx(6)
    specs = {"llama-3-8b": spec}
    assert census.fused_kernel_estimate(gpu, "hf-static", specs) == pytest.approx(want)
    assert census.fused_kernel_estimate(gpu, "hf-eager", specs) is None
    assert census.fused_kernel_estimate(gpu, "hf-static", {}) is None  # no shape known


def test_an_engine_combiner_holds_the_prefill_decode_split(monkeypatch):
    """The engines refit the combiner on their runs with each phase's energy error beside
    the whole run's: in sample, the phases err less than with the whole run alone, and
    the reference runner's combiner is not the one shipped."""
    import math
    import piep.fit.engines as engines
    from piep.fit.predictor import rows_of
    base = load_learned("h200")
    records = engine_records("h200", "hf-static")
    err = {}
    for weight in (0.0, engines.COMBINER_PHASE_WEIGHT):
        monkeypatch.setattr(engines, "COMBINER_PHASE_WEIGHT", weight)
        prof = fit_profile(base, records, "hf-static")
        assert prof.combiner is not None and prof.meta.combiner == "refit"
        rows = rows_of(engines._cases(records, base.gpu, "hf-static"), prof.apply(base))
        err[weight] = np.mean([abs(math.log(r[f"pred_{k}"] / r[k]))
                               for r in rows for k in ("prefill_j", "decode_j")])
    assert err[engines.COMBINER_PHASE_WEIGHT] < err[0.0]
    assert fit_profile(base, records, "hf-static", refit_combiner=False).combiner is None


@pytest.mark.slow
def test_held_out_serving_rows_on_both_hosts_share_their_fits():
    """One held-out fit per group serves the predictions without a host probe and with
    each replay's: the same rows as two separate held-out passes give."""
    from piep.fit.serving import held_out, held_out_on_hosts
    records = engine_records("h200", "hf-cb")
    few = [r for r in records if r.model == "llama-2-7b"][:2] + \
        [r for r in records if r.model == "qwen2.5-7b"][:2]
    base = load_learned("h200")
    both = held_out_on_hosts(base, few, by="model", maxiter=20)
    for on_host in (False, True):
        alone = held_out(base, few, by="model", maxiter=20, with_host=on_host)
        assert [r["pred_energy_j"] for r in both[on_host]] == \
            pytest.approx([r["pred_energy_j"] for r in alone], rel=1e-9)
    assert [r["model"] for r in both[True]] == [r["model"] for r in both[False]]
