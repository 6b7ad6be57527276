"""Outputs that survive anything: a folder switched in whole, a set committed together
(and completed after a kill), temporaries never reached through a planted symlink, what a
dead run left cleaned by the next, a second writer refused, torn appends ignored and cut,
figures that do not depend on the hash seed, and `kill -9` at random points."""

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import piep.core.artifacts as artifacts
from piep.core import outputs
from piep.cli import main
from piep.core.errors import OutputError
from _paths import ROOT  # noqa: E402

pytestmark = pytest.mark.pure



def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_folder_is_switched_in_whole_or_left_as_it_was(tmp_path):
    out = tmp_path / "r"
    with artifacts.output_set() as tx:
        stage = tx.folder(out, "report.json")
        (stage / "report.json").write_text("1")
        (stage / "old.png").write_text("x")
    with pytest.raises(RuntimeError):  # a failure half-way: the folder stays as it was
        with artifacts.output_set() as tx:
            stage = tx.folder(out, "report.json")
            (stage / "report.json").write_text("2")
            raise RuntimeError("the work failed")
    assert sorted(os.listdir(out)) == ["old.png", "report.json"]
    assert (out / "report.json").read_text() == "1"
    (out / "mine.txt").write_text("the user's")
    with artifacts.output_set() as tx:  # a later run: its files, and what it does not write
        stage = tx.folder(out, "report.json")
        (stage / "report.json").write_text("3")
    assert sorted(os.listdir(out)) == ["mine.txt", "old.png", "report.json"]
    assert (out / "report.json").read_text() == "3" and (out / "mine.txt").read_text() \
        == "the user's"
    assert sorted(os.listdir(tmp_path)) == ["r"]  # nothing beside it


def test_a_folder_piep_did_not_write_is_never_replaced(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("keep me")
    code, _, err = _run(["report", "--model", "llama-2-7b", "--out", str(mine)])
    assert code == 2 and "holds files piep did not write (notes.md)" in err
    assert os.listdir(mine) == ["notes.md"]
    with pytest.raises(OutputError, match="holds files piep did not write"):
        with artifacts.output_set() as tx:
            tx.folder(mine, "report.json")
    assert os.listdir(mine) == ["notes.md"]


def test_a_symlink_planted_at_a_temporary_name_is_never_followed(tmp_path, monkeypatch):
    """Temporaries are created with O_EXCL | O_NOFOLLOW: a symlink planted where piep will
    write its temporary (the name made predictable here) stops the write; what the link
    points to is left alone."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    monkeypatch.setattr(outputs.secrets, "token_hex", lambda n: "0badc0de")
    target = tmp_path / "plan.json"
    planted = target.with_name(f".plan.json.{os.getpid()}-0badc0de.piep-tmp.json")
    planted.symlink_to(victim)
    with pytest.raises(OutputError):
        artifacts.write_text(target, "{}")
    assert victim.read_text() == "precious" and not target.exists()


def test_what_a_dead_run_left_is_cleaned_by_the_next(tmp_path):
    dead = _dead_pid()
    tmp = tmp_path / f".plan.json.{dead}-0000aaaa.piep-tmp.json"
    tmp.write_text("half")
    staging = tmp_path / f".r.{dead}-0000bbbb.piep-new"
    staging.mkdir()
    (staging / "report.json").write_text("half")
    aside = tmp_path / f".s.{dead}-0000cccc.piep-old"  # moved aside, the new never came
    aside.mkdir()
    (aside / "serving.json").write_text("old")
    mine = tmp_path / f".plan.json.{os.getpid()}-0000dddd.piep-tmp.json"  # a live run's
    mine.write_text("mine")
    outputs._CLEANED.clear()
    artifacts.write_text(tmp_path / "plan.json", "{}")
    assert sorted(os.listdir(tmp_path)) == sorted(["plan.json", "s", mine.name])
    assert (tmp_path / "s" / "serving.json").read_text() == "old"


def test_a_set_killed_between_its_renames_is_completed_by_the_next_run(tmp_path, monkeypatch):
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "plan.json").write_text("old plan")
    (tmp_path / "plan.png").write_text("old figure")
    tx = outputs.Outputs(journal=artifacts.journal_dir())
    tx.file(tmp_path / "plan.json").write_text("new plan")
    tx.file(tmp_path / "plan.png").write_text("new figure")
    journal = tx._journal()
    outputs.apply(tx.units[0])  # ... and the process died here
    doc = json.loads(journal.read_text())
    journal.write_text(json.dumps({**doc, "pid": _dead_pid()}))
    assert (tmp_path / "plan.json").read_text() == "new plan"
    assert (tmp_path / "plan.png").read_text() == "old figure"  # a mix, until the next run
    assert _run(["models", "--json"])[0] == 0  # any command completes it first
    assert (tmp_path / "plan.png").read_text() == "new figure"
    assert not os.listdir(artifacts.journal_dir())
    assert sorted(os.listdir(tmp_path)) == ["data", "plan.json", "plan.png"]


def test_a_plan_and_its_figure_are_written_both_or_neither(tmp_path, monkeypatch):
    """On a full disk `plan --out --plot` replaced the old plan, then failed on the
    figure: now the old plan stays."""
    plan = tmp_path / "plan.json"
    assert _run(["plan", "--model", "llama-2-7b", "--out", str(plan)])[0] == 0
    before = plan.read_bytes()

    def no_room_for_figures(path, mode):
        if str(path).endswith(".png"):
            raise OSError(28, "No space left on device")
        return outputs.create_new(path, mode)
    monkeypatch.setattr(artifacts, "_open_for_write", no_room_for_figures)
    code, _, err = _run(["plan", "--model", "llama-2-7b", "--batch", "8", "--out", str(plan),
                         "--plot", str(tmp_path / "plan.png")])
    assert code == 2 and "No space left" in err and err.count("\n") == 1
    assert plan.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["plan.json"]


def test_a_second_writer_of_an_output_is_refused_in_one_line(tmp_path, monkeypatch):
    """Two `train` into one data dir silently dropped one fit, two `report --out` to one
    folder mixed their files: the second is now refused while the first holds it."""
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    env = {**os.environ, "PIEP_DATA_DIR": str(tmp_path / "data")}
    held = tmp_path / "r"
    outputs.claim(held)
    predictor = tmp_path / "data" / "h200" / "predictor"
    outputs.claim(predictor)
    try:
        for argv in (["report", "--model", "llama-2-7b", "--out", str(held)],
                     ["train", "--from-measurements",
                      str(ROOT / "calibration/h200/e2e/raw/e2e_2gpu.jsonl")]):
            proc = subprocess.run([sys.executable, "-m", "piep", *argv], env=env,
                                  capture_output=True, text=True, timeout=120)
            assert proc.returncode == 2, proc.stderr
            assert f"(pid {os.getpid()}) is writing it" in proc.stderr
            assert proc.stderr.count("\n") == 1
        assert not held.exists() and not predictor.exists()
    finally:
        outputs.release_claims()


def test_a_torn_last_line_is_skipped_and_cut_before_the_next_append(tmp_path, caplog):
    """A full disk left a torn last line, and the whole JSONL was refused (blocking the
    resume of a campaign): it is skipped with a warning and cut at the next append."""
    path = tmp_path / "runs.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": 3, "b": [1, 2')
    assert artifacts.read_jsonl(path) == [{"a": 1}, {"a": 2}]
    assert "torn" in caplog.text
    artifacts.append_jsonl(path, {"a": 4})
    assert path.read_text() == '{"a": 1}\n{"a": 2}\n{"a": 4}\n'
    path.write_text('{"a": 1}\n{"a": \n{"a": 3}\n')  # a bad line inside: still refused
    with pytest.raises(artifacts.ArtifactError, match="runs.jsonl:2: not valid JSON"):
        artifacts.read_jsonl(path)


def _report_bytes(folder: Path, seed: str) -> dict[str, bytes]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    subprocess.run([sys.executable, "-m", "piep", "report", "--model", "llama-2-7b", "--out",
                    str(folder)], env=env, check=True, capture_output=True, timeout=300)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.slow  # (seconds: the default tier's budget, reports/speed.md)
def test_the_report_is_byte_identical_whatever_the_hash_seed(tmp_path):
    """Its figure (and the HTML that embeds it) once changed with PYTHONHASHSEED."""
    assert _report_bytes(tmp_path / "a", "1") == _report_bytes(tmp_path / "b", "2")


def test_sweep_writes_its_rows_whole_to_a_file(tmp_path, capsys):
    out = tmp_path / "sweep.csv"
    assert main(["sweep", "--model", "llama-2-7b", "--batch", "1", "4", "--out", str(out)]) == 0
    assert "wrote 2 rows (0 refused)" in capsys.readouterr().out
    lines = out.read_text().splitlines()
    assert lines[0].startswith("model,tp,pp") and len(lines) == 3
    as_json = tmp_path / "sweep.json"
    assert main(["sweep", "--model", "llama-2-7b", "--batch", "1", "4", "--out", str(as_json),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"out": str(as_json), "rows": 2, "refused": 0}
    doc = json.loads(as_json.read_text())
    assert doc["schema"] == "piep.sweep" and len(doc["rows"]) == 2
    assert sorted(os.listdir(tmp_path)) == ["sweep.csv", "sweep.json"]


def test_a_long_sweep_says_where_it_is(caplog):
    """A sweep of serving-engine points (seconds each) logs its progress to stderr."""
    from piep.sweep import _Progress
    ticks = iter([0.5, 1.2, 1.5, 2.6])
    tell = _Progress(100)
    tell.clock = lambda: next(ticks)
    tell.start = tell.last = 0.0
    with caplog.at_level("INFO", logger="piep.sweep"):
        for done in (10, 20, 30, 40):
            tell(done)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["sweep 20/100 points, ~5 s left", "sweep 40/100 points, ~4 s left"]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["report", "serve", "train-refit", "train-engine", "sweep"])
def test_kill_9_at_random_points_leaves_the_old_or_the_new_outputs(case):
    """50 kills each: what is there is the old outputs or the new ones, whole; after the
    next run, the new ones and nothing beside them (benchmarks/kill_trials.py)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from kill_trials import trial
    r = trial(case, kills=50, seed=1)
    assert r["mixed"] == 0 and r["old"] + r["new"] == 50, r
    assert r["after_next_run"] == [] and r["next_run_is_new"], r


def test_a_folder_behind_a_symlink_is_written_through(tmp_path):
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real)
    with artifacts.output_set() as tx:
        (tx.folder(link, "report.json") / "report.json").write_text("1")
    assert link.is_symlink() and (real / "report.json").read_text() == "1"


def test_appends_of_two_processes_are_not_refused(tmp_path):
    """A file appended to (records of a campaign, an optimizer's log) is not claimed:
    processes append to it line by line, as sharded calibrations do."""
    path = tmp_path / "runs.jsonl"
    outputs.claim(tmp_path / "other.json")  # this process holds a claim of its own
    try:
        artifacts.append_jsonl(path, {"a": 1})
        code = ("import sys; from piep.core.artifacts import append_jsonl; "
                f"append_jsonl({str(path)!r}, {{'a': 2}})")
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
        artifacts.append_jsonl(path, {"a": 3})
    finally:
        outputs.release_claims()
    assert [json.loads(line)["a"] for line in path.read_text().splitlines()] == [1, 2, 3]


def test_a_torn_line_longer_than_a_block_is_cut_and_nothing_before_it(tmp_path, monkeypatch):
    """The torn tail is found however long it is (the search goes back block by block); a
    record that is not JSON (NaN) is one error, not a traceback."""
    path = tmp_path / "runs.jsonl"
    path.write_bytes(b'{"a": 1}\n' + b"x" * (3 << 20))
    artifacts.append_jsonl(path, {"a": 2})
    assert path.read_text() == '{"a": 1}\n{"a": 2}\n'
    with pytest.raises(OutputError, match="cannot append"):
        artifacts.append_jsonl(path, {"a": float("nan")})
    assert path.read_text() == '{"a": 1}\n{"a": 2}\n'
