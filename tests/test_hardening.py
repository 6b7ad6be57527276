"""No tracebacks, no exit-0 nonsense: every command over odd flag values, file-system faults
injected through the one writer, and the human tables pinned."""

import contextlib
import io
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import piep.artifacts as artifacts
from piep.cli import main

DATA = Path(__file__).with_name("data")
ODD = st.one_of(st.sampled_from(["nan", "inf", "-1", "0", "1e9", "x", "", "2", "7", "1,2",
                                 "lognormal:4:0.5", "uniform:9:3"]),
                st.integers(-3, 5000).map(str))
# command -> (fixed arguments, flags a fuzzer may set)
COMMANDS = {
    "predict": (["--model", "llama-2-7b"], ["--tp", "--pp", "--dp", "--batch", "--prompt-len",
                                            "--gen-len", "--modules", "--cache-len"]),
    "compare": (["llama-2-7b@tp2", "llama-2-13b"], ["--batch", "--prompt-len", "--gen-len"]),
    "sweep": (["--model", "llama-2-7b"], ["--tp", "--batch", "--gen-len"]),
    "serve": (["--model", "llama-3-8b"], ["--rate", "--requests", "--prompt-len", "--gen-len",
                                          "--seed", "--tp", "--requests-shown"]),
    "plan": (["--model", "llama-2-7b"], ["--batch", "--max-slowdown", "--dwell-ms",
                                         "--power-limit"]),
    "optimize": (["--model", "llama-2-7b"], ["--batches", "--power-limits", "--clock-stride",
                                             "--front", "--weight"]),
    "tree": (["llama-2-7b"], ["--tp", "--pp", "--batch"]),
}


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse on a value it cannot parse: usage + one line
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _finite(value) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(command=st.sampled_from(sorted(COMMANDS)), data=st.data())
def test_every_command_over_odd_values_is_an_answer_or_one_line(command, data):
    fixed, flags = COMMANDS[command]
    chosen = data.draw(st.lists(st.sampled_from(flags), max_size=3, unique=True))
    argv = [command, *fixed]
    for flag in chosen:
        argv += [flag, data.draw(ODD)]
    if command == "serve" and "--rate" not in chosen:
        argv += ["--rate", "2", "--requests", "5"]
    code, out, err = _run([*argv, "--json"])
    assert "Traceback" not in err, argv
    if code == 0:
        doc = json.loads(out)  # valid JSON: no NaN, no Infinity
        assert _finite(doc), argv
    else:
        assert code in (2, 3), (argv, code)
        lines = [line for line in err.strip().splitlines() if not line.startswith("usage:")
                 and not line.startswith(" ")]
        assert len(lines) == 1, (argv, err)


POLICY_VALUES = st.one_of(st.sampled_from([0, 1, 16, 0.5, 0.99, 2, -1, 1e9, 8.5, True, None,
                                           "x", [], {}]),
                         st.floats(allow_nan=True, allow_infinity=True))
POLICY = st.dictionaries(
    st.sampled_from(["block_size", "kv_memory_share", "num_blocks", "max_batch_tokens",
                     "max_requests_per_batch", "safety_margin", "name", "unknown"]),
    POLICY_VALUES, max_size=4)
HOST = st.dictionaries(st.sampled_from(["step_host_s", "request_host_s", "launch_gap_w", "x"]),
                       POLICY_VALUES, max_size=2)


@settings(max_examples=60, deadline=None, derandomize=True,
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


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A few committed runs to fit on (outside the tests' own folders): the reference
    runner's, and one model's hf-static runs (one model: no leave-one-model-out pass)."""
    from piep.artifacts import read_jsonl
    from piep.predict.engines import engine_records
    folder = tmp_path_factory.mktemp("runs")
    ref = read_jsonl(Path(__file__).parents[1] / "calibration/h200/e2e/raw/e2e_2gpu.jsonl")[:6]
    static = [r for r in engine_records("h200", "hf-static") if r["model"] == "llama-2-7b"]
    for name, rows in (("ref.jsonl", ref), ("static.jsonl", static)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


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
