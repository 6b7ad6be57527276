"""A sweep across machines: each predicts a shard of the grid (`--shard I/N`), and the
shards merge (`--merge`) into the document one machine writes for the whole grid."""

import json

import pytest

from piep.cli import main

pytestmark = pytest.mark.replay

GRID = ["--model", "llama-2-7b", "llama-2-13b", "--tp", "1", "2", "--batch", "1", "8", "64",
        "--gen-len", "32", "128"]


def test_shards_merge_into_the_whole_sweep(tmp_path, capsys):
    whole = tmp_path / "whole.json"
    assert main(["sweep", *GRID, "--out", str(whole)]) == 0
    parts = []
    for i in range(3):
        parts.append(tmp_path / f"shard-{i}.json")
        assert main(["sweep", *GRID, "--shard", f"{i}/3", "--out", str(parts[i])]) == 0
    sizes = [len(json.loads(p.read_text())["rows"]) for p in parts]
    assert sizes == [8, 8, 8]  # 24 points, every third each
    merged = tmp_path / "merged.json"
    assert main(["sweep", "--merge", *map(str, reversed(parts)), "--out", str(merged)]) == 0
    assert json.loads(merged.read_text()) == json.loads(whole.read_text())
    capsys.readouterr()
    # what cannot merge: a shard missing, one given twice, another grid's, an unsharded file
    for files, needle in (([parts[0], parts[1]], "2/3 missing"),
                          ([parts[0], parts[0], parts[1]], "given twice"),
                          ([whole], "not a shard's sweep")):
        assert main(["sweep", "--merge", *map(str, files)]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, err
    other = tmp_path / "other.json"
    assert main(["sweep", "--model", "llama-2-7b", "--shard", "0/3", "--out", str(other)]) == 0
    assert main(["sweep", "--merge", str(other), str(parts[1]), str(parts[2])]) == 2
    assert "different grids" in capsys.readouterr().err


def test_a_shard_needs_a_json_file(capsys):
    assert main(["sweep", *GRID, "--shard", "0/2"]) == 2
    assert "--out FILE.json" in capsys.readouterr().err
    assert main(["sweep", *GRID, "--shard", "2/2", "--out", "x.json"]) == 2
    assert "0 <= I < N" in capsys.readouterr().err
    assert main(["sweep", "--tp", "1"]) == 2
    assert "--merge" in capsys.readouterr().err
