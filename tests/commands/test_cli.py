import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from piep.cli import main

pytestmark = pytest.mark.pure


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, out, err, needle):
    assert code != 0
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert needle in lines[0], lines[0]


def test_predict_json(capsys):
    code, out, _ = run(capsys, "predict", "--model", "llama-2-7b", "--tp", "2", "--batch", "16",
                       "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "piep.prediction" and doc["layout"]["tp"] == 2


def test_predict_table(capsys):
    code, out, _ = run(capsys, "predict", "--model", "llama-2-7b")
    assert code == 0 and "energy_j" in out and "GPU boards only" in out


@pytest.mark.parametrize("argv, needle", [
    (["predict", "--model", "no-such-model"], "unknown model 'no-such-model'"),
    (["predict", "--model", "llama-2-7b", "--tp", "3"], "tp=3 does not divide"),
    (["predict", "--model", "llama-2-7b", "--batch", "-4"], "batch=-4"),
    (["predict", "--model", "llama-2-7b", "--batch", "3", "--dp", "2"], "not divisible by dp=2"),
    (["predict", "--model", "llama-3-70b", "--batch", "64", "--prompt-len", "2048"],
     "does not fit"),
    (["predict", "--model", "llama-2-7b", "--gpu", "a100"], "--allow-uncalibrated"),
    (["predict", "--model", "llama-2-7b", "--gpu", "tpu", "--allow-uncalibrated"],
     "unknown GPU 'tpu'"),
    (["predict", "--model", "llama-2-7b", "--gpu", "h300"],
     "unknown GPU 'h300': no calibration and no spec sheet (calibrated: h200; spec sheets"),
    (["predict", "--model", "tests/data/jamba_config.json"], "mixture of experts"),
    (["predict", "--model", "llama-2-7b", "--request-rate", "2"], "piep serve"),
    (["compare", "llama-2-7b@tp2x"], "layout after '@'"),
    (["plan", "--model", "llama-2-7b", "--power-limit", "-5"], "--power-limit"),
    (["apply"], "give a plan file"),
    (["apply", "/nonexistent/plan.json"], "no such file"),
    (["optimize", "--model", "llama-2-7b", "--online-axes", "fan"], "online-axes"),
])
def test_bad_input_is_one_clear_line(capsys, argv, needle):
    assert_one_line_error(*run(capsys, *argv), needle)


@pytest.mark.parametrize("given, key", [("NVIDIA H100 80GB HBM3", "h100"), ("H100", "h100"),
                                        ("h100-sxm", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"),
                                        ("nvidia-h200", "h200"), ("my-board_2", "my-board_2")])
def test_a_gpu_answers_to_its_other_names(given, key):
    """nvidia-smi's name and a form factor's are a spec sheet's aliases; a name of one's
    own stays as given, and so does an alias a calibration of the user's is named."""
    from piep.core.gpus import board_name
    assert board_name(given) == key


def test_an_alias_a_users_calibration_is_named_stays_theirs():
    """`piep calibrate gpu --name h100-sxm` (the README's example) keeps that name: its
    calibration answers for it, not the h100 spec sheet that lists it as an alias."""
    import shutil

    from piep.core.artifacts import calibration_dir, user_calibration_dir
    from piep.core.gpus import board_name
    own = user_calibration_dir("h100-sxm")
    own.mkdir(parents=True)
    try:
        shutil.copy(calibration_dir("h200") / "gpu.json", own / "gpu.json")
        assert board_name("h100-sxm") == "h100-sxm"
    finally:
        shutil.rmtree(own)
    assert board_name("h100-sxm") == "h100"


def test_malformed_and_non_config_files(capsys, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    assert_one_line_error(*run(capsys, "predict", "--model", str(bad)), "not valid JSON")
    other = tmp_path / "notes.json"
    other.write_text(json.dumps({"hello": "world"}))
    assert_one_line_error(*run(capsys, "predict", "--model", str(other)), "missing keys")
    listy = tmp_path / "list.json"
    listy.write_text("[1, 2]")
    assert_one_line_error(*run(capsys, "predict", "--model", str(listy)), "JSON object")
    text = tmp_path / "README.md"
    text.write_text("# hello")
    assert_one_line_error(*run(capsys, "predict", "--model", str(text)), "not valid JSON")
    empty = tmp_path / "empty-model"
    empty.mkdir()
    assert_one_line_error(*run(capsys, "predict", "--model", str(empty)), "no config.json")


def test_compare_recommends(capsys):
    code, out, _ = run(capsys, "compare", "llama-2-7b@tp2", "llama-2-13b@tp1", "--batch", "8",
                       "--json")
    assert code == 0
    doc = json.loads(out)
    assert [c["candidate"] for c in doc["candidates"]] == ["llama-2-7b@tp2", "llama-2-13b@tp1"]
    assert set(doc["recommendation"]) == {"latency", "energy", "memory"}
    best = min(doc["candidates"], key=lambda c: c["j_per_output_token"])["candidate"]
    assert doc["recommendation"]["energy"] == best


def test_sweep_keeps_invalid_points_with_reason(capsys):
    code, out, _ = run(capsys, "sweep", "--model", "llama-2-7b", "--tp", "1", "3", "--json")
    assert code == 0
    rows = json.loads(out)["rows"]
    assert "energy_j" in rows[0] and "tp=3" in rows[1]["error"]


def test_sweep_takes_lists_apart_or_comma_joined(capsys):
    code, out, _ = run(capsys, "sweep", "--model", "llama-2-7b", "--batch", "1,8", "16",
                       "--gen-len", "16", "--json")
    assert code == 0
    assert [r["batch"] for r in json.loads(out)["rows"]] == [1, 8, 16]
    for word, bad in (("1,x", "x"), ("--5", "--5")):
        code, _, err = run(capsys, "sweep", "--model", "llama-2-7b", f"--batch={word}")
        assert code != 0 and f"invalid int value: '{bad}'" in err


def test_tree_json_and_save(capsys, tmp_path):
    dest = tmp_path / "tree.json"
    code, out, _ = run(capsys, "tree", "llama-3-70b", "--tp", "2", "--pp", "2", "--json",
                       "--save", str(dest))
    assert code == 0
    doc = json.loads(out)
    saved = json.loads(dest.read_text())
    assert saved["schema"] == "piep.model_tree" and saved["nodes"] == doc["nodes"]
    assert "provenance" in saved


def test_models_and_env(capsys):
    code, out, _ = run(capsys, "models", "--json")
    listed = json.loads(out)
    assert code == 0 and len(listed["models"]) + len(listed["not_answered"]) >= 15
    code, out, _ = run(capsys, "env", "--json")
    assert code == 0 and "h200" in json.loads(out)["calibrations"]


def test_console_entry_point_runs_as_module():
    proc = subprocess.run([sys.executable, "-m", "piep", "predict", "--model", "llama-2-7b",
                           "--tp", "9"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "tp=9" in proc.stderr


layouts = st.fixed_dictionaries({
    "tp": st.integers(-1, 20), "pp": st.integers(-1, 12), "dp": st.integers(-1, 5),
    "batch": st.integers(-2, 300), "prompt-len": st.integers(-1, 40000),
    "gen-len": st.integers(-1, 5000)})
configs = st.fixed_dictionaries({}, optional={
    "model_type": st.sampled_from(["llama", "mistral", "qwen2", "gpt2", None, 3]),
    "hidden_size": st.one_of(st.integers(-8, 9000), st.text(max_size=3), st.none()),
    "num_hidden_layers": st.integers(-2, 100),
    "num_attention_heads": st.one_of(st.integers(-2, 70), st.floats(allow_nan=True)),
    "num_key_value_heads": st.integers(-1, 70),
    "head_dim": st.one_of(st.integers(-1, 300), st.just(0)),
    "intermediate_size": st.integers(-1, 40000),
    "vocab_size": st.integers(-1, 200000),
    "hidden_act": st.sampled_from(["silu", "gelu", 5]),
    "sliding_window": st.one_of(st.none(), st.integers(-5, 5000), st.text(max_size=2)),
    "num_local_experts": st.integers(-1, 9),
    "max_position_embeddings": st.integers(-1, 100000),
})


@pytest.mark.slow  # (seconds: the default tier's budget, reports/speed.md)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=layouts, config=configs)
def test_fuzz_configs_and_layouts_never_traceback(tmp_path_factory, layout, config):
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(json.dumps(config))
    argv = ["predict", "--model", str(path), "--json"]
    for key, value in layout.items():
        argv += [f"--{key}", str(value)]
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse on a value it cannot parse
            code = exc.code
    if code == 0:
        assert json.loads(out.getvalue())["energy_j"] > 0
    else:
        assert "Traceback" not in err.getvalue()
        assert len(err.getvalue().strip().splitlines()) == 1, err.getvalue()


@pytest.mark.parametrize("argv", [
    ["predict", "--model", "llama-2-7b"], ["compare", "llama-2-7b@tp2", "llama-2-13b"],
    ["serve", "--model", "llama-2-7b", "--rate", "1", "--requests", "3"],
    ["plan", "--model", "llama-2-7b"], ["optimize", "--model", "llama-2-7b"],
    ["sweep", "--model", "llama-2-7b"]], ids=lambda a: a[0])
def test_every_energy_output_states_its_boundary(capsys, argv):
    """GPU boards only (not CPU, DRAM, PSU or facility): in the JSON, the human table and
    the sweep's CSV."""
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0 and json.loads(out)["boundary"] == "gpu_board"
    code, out, _ = run(capsys, *argv)
    assert code == 0
    if argv[0] == "sweep":
        rows = out.splitlines()
        assert rows[0].endswith(",energy_boundary") and rows[1].endswith(",gpu_board")
    else:
        assert "GPU boards only" in out


def test_host_probe_auto_is_measured_once_and_kept(tmp_path, monkeypatch, capsys):
    """`--host-probe-us auto`: this machine's probe, measured the first time (here a fake
    measurement) and read back after; no GPU here and none kept: one line saying so."""
    import json

    from piep.cli import main
    from piep.commands import common
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path))
    calls = []

    def fake(repeats):
        calls.append(repeats)
        return {"launch_add_s": 9.25e-6, "python_loop_200k_s": 0.01}
    monkeypatch.setattr(common, "host_probe_here", fake)
    argv = ["predict", "--model", "llama-3-8b", "--engine", "hf-eager", "--json",
            "--host-probe-us", "auto"]
    for _ in range(2):
        assert main(argv) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["engine_ref"]["host_probe_us"] == pytest.approx(9.25)
    assert calls == [common.HOST_PROBES]  # measured once
    kept = json.loads((tmp_path / common.HOST_PROBE_FILE).read_text())
    assert kept[common.machine_key()]["launch_add_us"] == pytest.approx(9.25)
    (tmp_path / common.HOST_PROBE_FILE).unlink()
    monkeypatch.setattr(common, "host_probe_here", lambda repeats: None)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "needs torch and a CUDA GPU here" in err and err.count("\n") == 1


def test_measure_summarizes_one_trace_or_several():
    """`piep measure --engine hf-cb --trace` returns one trace's record itself and several
    under `traces`; the summary reads both (one trace's summary crashed on its record)."""
    from piep.commands.measure import _human
    rec = {"trace": "tiny.jsonl", "requests": 150, "energy_j": 5101.4, "time_s": 29.14,
           "schema": "piep.serving_measurement"}
    one = _human(rec)
    assert one.startswith("tiny.jsonl: 150 requests, 5101.4 J, 29.14 s")
    several = _human({"traces": [rec, {**rec, "trace": "code.jsonl"}]})
    assert several.splitlines()[1].startswith("code.jsonl: 150 requests")
