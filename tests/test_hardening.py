"""No tracebacks, no exit-0 nonsense: every command over odd flag values, file-system faults
injected through the one writer, and the human tables pinned."""

import contextlib
import io
import json
import math
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import piep.core.artifacts as artifacts
from piep.cli import main

pytestmark = pytest.mark.replay

DATA = Path(__file__).with_name("data")
ROOT = Path(__file__).parents[1]
ODD = st.one_of(st.sampled_from(["nan", "inf", "-1", "0", "1e9", "x", "", "2", "7", "1,2",
                                 "lognormal:4:0.5", "uniform:9:3", "-1,2", "hf-static", "h200",
                                 "vllm", "latency"]),
                st.integers(-3, 5000).map(str))
# every command -> (fixed arguments, flags a fuzzer may set); {out} is a fresh folder per
# example (nothing may be written there on an error), {runs} the committed runs below
COMMANDS = {
    "predict": (["--model", "llama-2-7b"], ["--tp", "--pp", "--dp", "--batch", "--prompt-len",
                                            "--gen-len", "--modules", "--cache-len", "--engine",
                                            "--host-probe-us", "--gpu", "--mode",
                                            "--scenario"]),
    "compare": (["llama-2-7b@tp2", "llama-2-13b"], ["--batch", "--prompt-len", "--gen-len",
                                                    "--engine"]),
    "sweep": (["--model", "llama-2-7b"], ["--tp", "--batch", "--gen-len"]),
    "serve": (["--model", "llama-3-8b", "--out", "{out}/s"],
              ["--rate", "--requests", "--prompt-len", "--gen-len", "--seed", "--tp",
               "--requests-shown", "--host-probe-us"]),
    "plan": (["--model", "llama-2-7b", "--out", "{out}/plan.json"],
             ["--batch", "--max-slowdown", "--dwell-ms", "--power-limit"]),
    "optimize": (["--model", "llama-2-7b", "--log", "{out}/log.jsonl"],
                 ["--batches", "--power-limits", "--clock-stride", "--front", "--weight",
                  "--latency-bound", "--objective", "--online-axes"]),
    "tree": (["llama-2-7b", "--save", "{out}/tree.json"], ["--tp", "--pp", "--batch"]),
    "report": (["--model", "llama-2-7b", "--out", "{out}/r"], ["--tp", "--batch", "--gen-len"]),
    "apply": (["{runs}/plan.json"], ["--gpus", "--batches"]),
    "train": (["--from-measurements", "{runs}/ref.jsonl", "--out", "{out}/p"],
              ["--gpu", "--engine", "--like"]),
    "measure": (["--model", "llama-2-7b", "--out", "{out}/m.jsonl"],
                ["--tp", "--batch", "--prompt-len", "--repeats", "--min-window-s", "--shard",
                 "--budget-s", "--seed", "--engine"]),
    "meter": (["--model", "llama-3-8b", "--engine", "vllm", "--engine-version", "1",
               "--out", "{out}/m.jsonl"], ["--batch", "--prompt-len", "--gen-len", "--tp"]),
    "calibrate": (["modules", "--out", "{out}/c.jsonl"], ["--budget-s", "--shard", "--per-kind",
                                                          "--seed", "--min-window-s"]),
    "env": ([], []),
    "models": ([], []),
}


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _finite(value) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Committed runs to fit on (outside the tests' own folders): the reference runner's,
    and one model's hf-static runs (one model: no leave-one-model-out pass); a plan file."""
    from piep.core.artifacts import read_jsonl
    from piep.fit.engines import engine_records
    folder = tmp_path_factory.mktemp("runs")
    ref = read_jsonl(ROOT / "calibration/h200/e2e/raw/e2e_2gpu.jsonl")[:6]
    static = [r.doc for r in engine_records("h200", "hf-static") if r.model == "llama-2-7b"]
    for name, rows in (("ref.jsonl", ref), ("static.jsonl", static)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["plan", "--model", "llama-2-7b", "--out", str(folder / "plan.json")]) == 0
    return folder


def _one_line_or_answer(argv, out_dir: Path):
    """Run `argv`: an answer (valid, finite JSON) or one line on stderr with exit 2 or 3 and
    nothing written under `out_dir`."""
    code, out, err = _run([*argv, "--json"])
    assert "Traceback" not in err, argv
    if code == 0:
        assert _finite(json.loads(out)), argv  # valid JSON: no NaN, no Infinity
    else:
        assert code in (2, 3), (argv, code, err)
        assert err.count("\n") == 1 and err.startswith("piep"), (argv, err)
        assert not [p for p in out_dir.rglob("*") if p.is_file()], argv


@pytest.mark.slow  # (seconds: the default tier's budget, reports/speed.md)
@settings(max_examples=150)
@given(command=st.sampled_from(sorted(COMMANDS)), data=st.data())
def test_every_command_over_odd_values_is_an_answer_or_one_line(command, data, runs):
    import tempfile
    fixed, flags = COMMANDS[command]
    chosen = data.draw(st.lists(st.sampled_from(flags), max_size=3, unique=True)) \
        if flags else []
    argv = [command, *fixed]
    for flag in chosen:
        argv += [flag, data.draw(ODD)]
    if command == "serve" and "--rate" not in chosen:
        argv += ["--rate", "2", "--requests", "5"]
    if command == "meter":
        argv += ["--", "true"]
    with tempfile.TemporaryDirectory() as tmp:
        _one_line_or_answer([a.replace("{out}", tmp).replace("{runs}", str(runs))
                             for a in argv], Path(tmp))


def _inputs(folder: Path) -> None:
    """The bad inputs of the cases below."""
    cfg = json.loads((ROOT / "model_trees/llama-2-7b/config.json").read_text())
    for name, change in (("swa", {"sliding_window": -5}), ("gpt2", {"model_type": "gpt2"})):
        (folder / name).mkdir()
        (folder / name / "config.json").write_text(json.dumps({**cfg, **change}))
    rows = lambda *rs: "".join(json.dumps(r) + "\n" for r in rs)  # noqa: E731
    (folder / "far.jsonl").write_text(rows({"arrival_s": 0, "prompt_len": 9, "gen_len": 9},
                                           {"arrival_s": 1e12, "prompt_len": 9, "gen_len": 9}))
    (folder / "dup.jsonl").write_text(rows({"id": "a", "arrival_s": 0, "prompt_len": 9,
                                            "gen_len": 9},
                                           {"id": "a", "arrival_s": 1, "prompt_len": 9,
                                            "gen_len": 9}))
    (folder / "policy.json").write_text(json.dumps({"host": {"step_host_s": 1e6}}))
    rec = json.loads((ROOT / "calibration/h200/e2e/raw/e2e_1gpu_s0.jsonl").open().readline())
    (folder / "negative.jsonl").write_text(rows({**rec, "time_s": -1}))
    (folder / "no_energy.jsonl").write_text(rows({k: v for k, v in rec.items()
                                                  if k != "energy_j"}))
    (folder / "empty_home").mkdir()


MEASURED = ["report", "--model", "qwen2.5-7b", "--batch", "3", "--prompt-len", "133",
            "--gen-len", "109", "--out", "{out}/r", "--measured"]  # the committed run's shape
SERVE = ["serve", "--model", "llama-2-7b"]


# what the reliability review found accepted, or answered with a traceback or a misleading
# line: each is refused in one line that says what to do, and writes nothing
@pytest.mark.parametrize("argv, needle", [
    ([*SERVE, "--rate", "1", "--requests", "10", "--seed", "-1"], "--seed=-1"),
    (["train", "--engine", "hf-static", "--from-measurements", "{runs}/ref.jsonl"],
     "reference runner is fitted by"),
    (["train", "--engine", "my-eng", "--like", "hf-static", "--from-measurements",
      "{runs}/ref.jsonl"], "reference runner is fitted by"),
    ([*MEASURED, "{in}/no_energy.jsonl"], "without 'energy_j'"),
    ([*MEASURED, "{in}/negative.jsonl"], "time_s=-1 must be a finite number > 0"),
    (["predict", "--model", "{in}/swa"], "sliding_window=-5"),
    (["predict", "--model", "{in}/gpt2"],
     "is not a family piep prices (supported: cohere, cohere2, deepseek_v2, "),
    (["predict", "--model", "tests/data/jamba_config.json"], "the tree lacks its Mamba"),
    (["compare", "llama-2-7b@"], "no layout after '@'"),
    (["compare", "llama-2-7b@tp2:"], "no engine after ':'"),
    (["models", "PIEP_HOME={in}/empty_home"], "PIEP_HOME="),
    (["predict", "--model", "llama-2-7b", "PIEP_HOME={in}/empty_home"], "PIEP_HOME="),
    ([*SERVE, "--trace", "{in}/far.jsonl"], "at most 30 days"),
    ([*SERVE, "--rate", "1e-9", "--requests", "3"], "at most 30 days"),
    ([*SERVE, "--rate", "1", "--prompt-len", "lognormal:512:0.6:10"], "below the MEDIAN"),
    ([*SERVE, "--rate", "1", "--policy", "{in}/policy.json"], "host.step_host_s=1000000.0"),
    ([*SERVE, "--trace", "{in}/dup.jsonl"], "same id 'a'"),
    (["plan", "--model", "llama-2-7b", "--power-limit", "50"], "(200-700 W)"),
    (["optimize", "--model", "llama-2-7b", "--latency-bound", "5"], "--objective latency"),
    (["optimize", "--model", "llama-2-7b", "--batches", ""], "--batches is empty"),
    (["optimize", "--model", "llama-2-7b", "--batches", "-1,2"], "--batches=VALUE"),
    (["optimize", "--model", "llama-2-7b", "--batches=-1,2"], "whole numbers >= 1"),
    (["apply", "{runs}/plan.json", "--gpus", "abc"], "--gpus='abc'"),
    (["apply", "{runs}/plan.json", "--no-dry-run"], "give it after --"),
    (["predict", "--model", ""], "--model is empty"),
    (["predict", "--model", "/dev/null"], "neither a config.json file nor a model folder"),
    ([*SERVE, "--trace", "{in}"], "is a folder; give a file"),
    ([*MEASURED, "{in}"], "is a folder; give a file"),
    (["apply", "{in}"], "is a folder; give a file"),
    (["train", "--from-measurements", "{in}"], "is a folder; give a file"),
    (["train", "--from-measurements", "{in}/missing.jsonl"], "no such file"),
    (["optimize", "--model", "llama-2-7b", "--replay", "{in}/missing.jsonl"], "no such file"),
    (["predict", "--model", "llama-2-7b", "--cache-len", "100000"], "cache_len=100000"),
    (["plan", "--model", "llama-2-7b", "--allow-uncalibrated"], "`piep plan --help`"),
    (["plan", "--model", "llama-2-7b", "--max-slowdown", "5"], "give 0.05 or 5%"),
    (["predict", "--model", "llama-2-7b", "--engine", "sglang"], "meter its runs (piep meter)"),
    (["predict", "--model", "llama-2-7b", "--allow"], "unrecognized arguments: --allow"),
    (["predict"], "give --model (a shipped name or a config path) or --scenario"),
    (["predict", "--scenario", "{in}/policy.json"], "unknown key(s) host"),
    ([], "give a command"),
], ids=lambda v: " ".join(v)[:60] if isinstance(v, list) else None)
def test_what_was_accepted_or_misread_is_one_line(argv, needle, runs, tmp_path, monkeypatch):
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    out.mkdir()
    _inputs(inputs)
    argv = [a.replace("{in}", str(inputs)).replace("{out}", str(out))
            .replace("{runs}", str(runs)) for a in argv]
    for a in [a for a in argv if a.startswith("PIEP_HOME=")]:
        monkeypatch.setenv("PIEP_HOME", a.split("=", 1)[1])
        argv.remove(a)
    code, stdout, err = _run(argv)
    assert code == 2 and stdout == "" and err.count("\n") == 1, err
    assert needle in err and "Traceback" not in err, err
    assert not [p for p in out.rglob("*") if p.is_file()]


POLICY_VALUES = st.one_of(st.sampled_from([0, 1, 16, 0.5, 0.99, 2, -1, 1e9, 8.5, True, None,
                                           "x", [], {}]),
                         st.floats(allow_nan=True, allow_infinity=True))
POLICY = st.dictionaries(
    st.sampled_from(["block_size", "kv_memory_share", "num_blocks", "max_batch_tokens",
                     "max_requests_per_batch", "safety_margin", "name", "unknown"]),
    POLICY_VALUES, max_size=4)
HOST = st.dictionaries(st.sampled_from(["step_host_s", "request_host_s", "launch_gap_w", "x"]),
                       POLICY_VALUES, max_size=2)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(doc=POLICY, host=st.one_of(st.none(), HOST))
def test_policy_files_are_an_answer_or_one_line(doc, host, tmp_path):
    if host is not None:
        doc = {**doc, "host": host}
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(doc))
    code, out, err = _run(["serve", "--model", "llama-3-8b", "--rate", "4", "--requests", "8",
                           "--policy", str(path), "--json"])
    assert "Traceback" not in err, doc
    if code == 0:
        answer = json.loads(out)
        assert _finite(answer) and "unvalidated_engine" in answer["flags"], doc
    else:
        assert code == 2 and err.count("\n") == 1, (doc, err)


def _fill(argv, tmp_path, runs=None):
    return [a.replace("{tmp}", str(tmp_path)).replace("{runs}", str(runs)) for a in argv]


WRITERS = [
    ["plan", "--model", "llama-2-7b", "--out", "{tmp}/plan.json"],
    ["serve", "--model", "llama-3-8b", "--rate", "2", "--requests", "4", "--out", "{tmp}/s"],
    ["tree", "llama-2-7b", "--save", "{tmp}/tree.json"],
    ["report", "--model", "llama-2-7b", "--out", "{tmp}/r"],
    ["train", "--from-measurements", "{runs}/ref.jsonl", "--out", "{tmp}/p"],
    ["train", "--engine", "hf-static", "--from-measurements", "{runs}/static.jsonl", "--out",
     "{tmp}/e"],
]


@pytest.mark.parametrize("argv", WRITERS, ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("fault", [PermissionError(13, "Permission denied"),
                                   OSError(28, "No space left on device")],
                         ids=["permission", "disk-full"])
def test_write_faults_are_one_line(argv, fault, tmp_path, monkeypatch, runs):
    def refuse(path, mode):
        raise fault
    monkeypatch.setattr(artifacts, "_open_for_write", refuse)
    code, out, err = _run(_fill(argv, tmp_path, runs))
    assert code == 2 and "Traceback" not in err
    assert err.count("\n") == 1 and fault.strerror in err, err
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert not leftovers, leftovers  # nothing half-written


def test_a_failed_write_leaves_what_was_there(tmp_path, monkeypatch, runs):
    """A command that writes several files and fails on a later one puts back the files
    the earlier ones replaced: a folder of a former run, a predictor fitted before."""
    out = tmp_path / "s"
    assert _run(["serve", "--model", "llama-3-8b", "--rate", "2", "--requests", "4", "--out",
                 str(out)])[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    predictor = tmp_path / "p"
    assert _run(_fill(WRITERS[4], tmp_path, runs))[0] == 0
    fitted = {p.name: p.read_bytes() for p in predictor.iterdir()}
    opened = []

    def second_fails(path, mode):
        opened.append(path)
        if len(opened) == 2:
            raise OSError(28, "No space left on device")
        return open(path, mode)
    monkeypatch.setattr(artifacts, "_open_for_write", second_fails)
    code, _, err = _run(["serve", "--model", "llama-3-8b", "--rate", "3", "--requests", "6",
                         "--out", str(out)])
    assert code == 2 and err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    opened.clear()
    assert _run(_fill(WRITERS[4], tmp_path, runs))[0] == 2
    assert {p.name: p.read_bytes() for p in predictor.iterdir()} == fitted


def _special_files(tmp_path):
    """A FIFO, and (as root) a character device like /dev/full, in `tmp_path`."""
    import stat
    made = {"fifo": tmp_path / "fifo"}
    os.mkfifo(made["fifo"])
    if os.geteuid() == 0:
        made["chardev"] = tmp_path / "full"
        os.mknod(made["chardev"], 0o600 | stat.S_IFCHR, os.makedev(1, 7))
    return made


TARGETS = [
    ["tree", "llama-2-7b", "--save", "{target}"],
    ["plan", "--model", "llama-2-7b", "--out", "{target}"],
    ["plan", "--model", "llama-2-7b", "--plot", "{target}.png"],
    ["serve", "--model", "llama-3-8b", "--rate", "2", "--requests", "4", "--plot",
     "{target}.png"],
    ["optimize", "--model", "llama-2-7b", "--log", "{target}"],
    ["serve", "--model", "llama-3-8b", "--rate", "2", "--requests", "4", "--out", "{dir}"],
    ["report", "--model", "llama-2-7b", "--out", "{dir}"],
    ["train", "--from-measurements", "{runs}/ref.jsonl", "--out", "{dir}"],
]
DIR_FILE = {"serve": "serving.json", "report": "report.json", "train": "predictor.json"}


@pytest.mark.parametrize("argv", TARGETS, ids=lambda a: f"{a[0]} {a[-2]}")
def test_what_is_not_a_regular_file_is_refused_and_left_alone(argv, tmp_path, runs):
    """`piep tree --save /dev/full` once replaced the device node with a JSON file: a
    device, a FIFO or a socket where piep would write is refused in one line, untouched."""
    import stat
    for kind, node in _special_files(tmp_path).items():
        folder = tmp_path / f"dir-{kind}"
        folder.mkdir()
        target = node
        if "{dir}" in argv:  # the file a folder output writes first is the special one
            os.rename(node, folder / DIR_FILE[argv[0]])
            target = folder / DIR_FILE[argv[0]]
        elif any(a.endswith("{target}.png") for a in argv):
            target = node.with_name(node.name + ".png")
            os.rename(node, target)
        mode = os.stat(target).st_mode
        code, out, err = _run([a.replace("{target}.png", str(target))
                               .replace("{target}", str(target)).replace("{dir}", str(folder))
                               .replace("{runs}", str(runs)) for a in argv])
        assert code == 2 and err.count("\n") == 1 and "not a regular file" in err, (kind, err)
        assert os.stat(target).st_mode == mode and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode))
        assert not [p for p in tmp_path.rglob("*") if p.is_file()], kind  # nothing written


def test_a_symlink_is_written_through(tmp_path):
    """An output that is a symlink: its target gets the file, the link stays a link (also
    a dangling one: the target is created)."""
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("{}")
    link.symlink_to(real)
    assert _run(["tree", "llama-2-7b", "--save", str(link)])[0] == 0
    assert link.is_symlink() and json.loads(real.read_text())["schema"] == "piep.model_tree"
    dangling, missing = tmp_path / "d.json", tmp_path / "sub" / "new.json"
    dangling.symlink_to(missing)
    assert _run(["plan", "--model", "llama-2-7b", "--out", str(dangling)])[0] == 0
    assert dangling.is_symlink() and "applied" in json.loads(missing.read_text())


@pytest.mark.parametrize("argv, where", [
    (["plan", "--model", "llama-2-7b", "--out", "{file}/plan.json"], "is a file, not a folder"),
    (["plan", "--model", "llama-2-7b", "--out", "{dir}"], "is a folder"),
    (["serve", "--model", "llama-3-8b", "--rate", "1", "--plot", "{dir}/p.xyz"], "give a file"),
    (["optimize", "--model", "llama-2-7b", "--log", "{file}/l.jsonl"], "is a file"),
], ids=["under-a-file", "onto-a-folder", "figure-format", "log-under-a-file"])
def test_paths_are_checked_before_the_work(argv, where, tmp_path):
    (tmp_path / "f").write_text("x")
    code, _, err = _run([a.replace("{file}", str(tmp_path / "f")).replace("{dir}", str(tmp_path))
                         for a in argv])
    assert code == 2 and where in err and err.count("\n") == 1, err


@pytest.mark.parametrize("name, argv", [
    ("predict_table.txt", ["predict", "--model", "llama-2-7b", "--tp", "2", "--batch", "16"]),
    ("serve_table.txt", ["serve", "--model", "llama-3-8b", "--rate", "4", "--requests", "30",
                         "--seed", "2"]),
])
def test_human_tables_are_pinned(name, argv):
    """What a person reads. A change that is meant: PIEP_UPDATE_GOLDEN=1 pytest this test."""
    code, out, _ = _run(argv)
    assert code == 0
    if os.environ.get("PIEP_UPDATE_GOLDEN"):
        (DATA / name).write_text(out)
    assert out == (DATA / name).read_text()


def _hostile_cases():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from hostile_inputs import cases
    return cases()


@pytest.mark.parametrize("case", _hostile_cases(), ids=lambda c: c[0])
def test_every_file_input_over_hostile_contents_is_an_answer_or_one_line(case, tmp_path,
                                                                         monkeypatch):
    """Every file piep reads, filled with JSON nested past reason, integers of 5,000
    digits, NaN and Infinity, strings for numbers, empty lists, a torn last line and 64 MB
    of zeros; sizes beyond any model; records no board could make; a GPU named as a path
    (benchmarks/hostile_inputs.py runs the same as processes and counts them)."""
    name, argv, files, expect = case
    for rel, content in files.items():
        path = tmp_path / rel
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    code, out, err = _run([a.replace("{d}", str(tmp_path)) for a in argv])
    assert "Traceback" not in err, err
    if code == 0:
        assert expect == "any", (name, "accepted")
    else:
        assert code in (2, 3) and err.count("\n") == 1, (name, code, err)
        if name.startswith("suggests:"):
            assert "--allow-uncalibrated" not in err or "piep predict" in err, err
    assert not (tmp_path / "x").exists()  # nothing outside the data directory


@pytest.mark.parametrize("what, spoil", [
    ("model_empty", lambda p: (p / "predictor" / "linear.time.txt").write_text("")),
    ("model_cut_short", lambda p: (p / "predictor" / "linear.time.txt").write_text(
        (ROOT / "calibration/h200/predictor/linear.time.txt").read_text()[:5000])),
    ("predictor_json_empty", lambda p: (p / "predictor" / "predictor.json").write_text("")),
    ("profile_empty", lambda p: (p / "engines" / "hf-static" / "profile.json").write_text("")),
])
def test_a_broken_fitted_file_is_one_line_naming_it(what, spoil, tmp_path, monkeypatch):
    """An empty or cut-short module model was a traceback or, cut short, read as fewer
    trees (every answer silently other); an empty profile or predictor document too."""
    import shutil
    mine = tmp_path / "data" / "h200"
    shutil.copytree(ROOT / "calibration/h200/predictor", mine / "predictor")
    (mine / "engines" / "hf-static").mkdir(parents=True)
    shutil.copy(ROOT / "calibration/h200/engines/hf-static/profile.json",
                mine / "engines" / "hf-static" / "profile.json")
    spoil(mine)
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    from piep.predict.store import load_learned
    load_learned.cache_clear()
    try:
        code, out, err = _run(["predict", "--model", "llama-2-7b", "--engine", "hf-static"])
    finally:
        load_learned.cache_clear()
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert str(mine) in err, err
