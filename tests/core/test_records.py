"""Measurement records are typed once, where the lab's files are read: every field a fit
uses is an attribute, a record of another harness loads through the same type, and a bad
record is one line naming each missing field."""

import json

import pytest

from piep.core.errors import ConfigError
from piep.core.gpus import load_gpu
from piep.core.records import Measurement, ServingReplay, merge_repeats, read_runs

pytestmark = pytest.mark.pure

RUN = {"model": "llama-2-7b", "tp": 2, "batch": 4, "prompt_len": 128, "gen_len": 64,
       "mode": "graph", "energy_j": 300.0, "time_s": 1.5}


def test_a_record_of_another_harness_loads_through_the_same_type():
    """No schema, no shape, no pp/dp: a shipped model by name, the layout's defaults, the
    configuration key piep's records carry."""
    m = Measurement.from_json(RUN, "mine.jsonl:1")
    assert (m.spec.hidden_size, m.spec.num_layers) == (4096, 32)
    assert (m.parallel.tp, m.parallel.pp, m.parallel.dp, m.gpus) == (2, 1, 1, 2)
    assert m.key == "llama-2-7b|2|1|1|4|128|64|graph"
    assert m.engine is None and m.host_probe_s is None and m.prefill.energy_j is None
    dep = m.deployment(load_gpu("h200"), engine="hf-static")
    assert dep.workload.mode == "graph" and dep.parallel.tp == 2
    assert Measurement.from_json(m.to_json()) == m


def test_a_bad_record_names_every_missing_field_in_one_line():
    with pytest.raises(ConfigError) as err:
        Measurement.from_json({"model": "llama-2-7b", "tp": 1, "energy_j": 5.0}, "f.jsonl:3")
    msg = str(err.value)
    assert msg.startswith("f.jsonl:3: lacks batch, prompt_len, gen_len, time_s")
    assert "\n" not in msg
    with pytest.raises(ConfigError, match="batch=0"):
        Measurement.from_json({**RUN, "batch": 0})
    with pytest.raises(ConfigError, match="no shipped config"):
        Measurement.from_json({**RUN, "model": "my-own-9b"})
    with pytest.raises(ConfigError, match="shape lacks ffn"):
        Measurement.from_json({**RUN, "model": "my-own-9b", "shape": {
            "hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 8, "head_dim": 128,
            "vocab": 32000}})
    with pytest.raises(ConfigError, match="lacks mode"):
        Measurement.from_json({k: v for k, v in RUN.items() if k != "mode"})


def test_repeats_merge_by_their_medians_and_keep_the_first_probes():
    runs = [Measurement.from_json({**RUN, "energy_j": e, "time_s": t,
                                   "prefill": {"energy_j": p, "time_s": 0.1},
                                   "host_probe": {"launch_add_s": h}})
            for e, t, p, h in ((300.0, 1.5, 10.0, 6e-6), (310.0, 1.6, None, 7e-6),
                               (290.0, 1.4, 12.0, 8e-6))]
    other = Measurement.from_json({**RUN, "batch": 8})
    (merged, single) = merge_repeats(runs + [other])
    assert (merged.energy_j, merged.time_s, merged.n_measurements) == (300.0, 1.5, 3)
    assert merged.prefill.energy_j == 11.0  # the median of the known phases only
    assert merged.host_probe_s == 6e-6
    assert single == other and single.n_measurements == 1


def test_a_replay_is_typed_with_its_requests_and_iteration_log():
    doc = {"model": "llama-2-7b", "tp": 1, "energy_j": 900.0, "time_s": 6.0,
           "engine": {"name": "hf-cb", "version": "5.17.0"}, "trace": "t/night.jsonl",
           "per_request": [{"id": 0, "arrival_s": 0.0, "prompt_len": 32, "gen_len": 8,
                            "ttft_s": 0.05, "tpot_s": 0.01, "e2e_s": 0.12}],
           "iterations": {"q_tokens": [32, 1], "kv_tokens": [0, 32], "requests": [1, 1],
                          "t_start_s": [0.0, 0.05], "t_end_s": [0.05, 0.06]},
           "cb_config": {"cache_num_blocks": 120}}
    rep = ServingReplay.from_json(doc)
    assert (rep.engine, rep.engine_version, rep.cache_blocks) == ("hf-cb", "5.17.0", 120)
    assert rep.requests[0].id == "0" and rep.iterations.q_tokens == (32, 1)
    with pytest.raises(ConfigError, match=r"per_request\[0\] lacks arrival_s, gen_len"):
        ServingReplay.from_json({**doc, "per_request": [{"id": 1, "prompt_len": 3}]})


def test_a_file_of_records_is_read_typed_and_a_bad_line_is_named(tmp_path):
    path = tmp_path / "runs.jsonl"
    good = {"schema": "piep.measurement", **RUN, "pp": 1, "dp": 1, "prefill": {}, "decode": {}}
    path.write_text(json.dumps(good) + "\n" + json.dumps({"schema": "other"}) + "\n"
                    + json.dumps({**good, "tp": 0}) + "\n")
    with pytest.raises(ConfigError, match=r"runs.jsonl:3: tp=0"):
        read_runs(path, "piep.measurement")
    path.write_text(json.dumps(good) + "\n")
    (m,) = read_runs(path, "piep.measurement")
    assert m.energy_j == 300.0


def test_a_module_sample_is_typed_with_its_shape():
    from piep.core.dataset import load_calibration, repeat_check_pairs
    from piep.core.samples import ModuleSample
    doc = {"schema": "piep.module_sample", "kind": "q_proj", "phase": "decode", "tokens": 8,
           "d_in": 4096, "d_out": 4096, "mode": "graph", "time_s": 2e-5, "energy_j": 0.01,
           "shape_fields": ["d_in", "d_out", "kind", "mode", "phase", "tokens"]}
    s = ModuleSample.from_json(doc)
    assert s.shape == {"d_in": 4096, "d_out": 4096, "kind": "q_proj", "mode": "graph",
                       "phase": "decode", "tokens": 8}
    assert (s.repeat, s.op_version, s.check, s.captures) == (0, 1, "", None)
    with pytest.raises(ConfigError, match="a module sample lacks tokens"):
        ModuleSample.from_json({k: v for k, v in doc.items() if k != "tokens"})
    cal = load_calibration("h200")
    assert all(isinstance(m, ModuleSample) for m in cal.modules)
    pairs = repeat_check_pairs(cal.modules)
    assert pairs and all(a.shape == b.shape and (a.repeat, b.repeat) == (0, 1)
                         for a, b in pairs)
