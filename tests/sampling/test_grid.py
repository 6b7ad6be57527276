import json

import pytest

from piep.core.artifacts import read_jsonl
from piep.sampling.design import build_design
from piep.sampling.grid import config_key, pending, run_grid

pytestmark = pytest.mark.pure

torch = pytest.importorskip("torch")


def measured(cfg):
    """What the runner writes of a configuration (as little as a fit reads)."""
    return {"schema": "piep.measurement", "schema_version": 1, **cfg, "energy_j": 1.0,
            "time_s": 0.1, "prefill": {}, "decode": {}}


def cfgs(n, world=1):
    return [{"model": "llama-2-7b", "tp": world, "pp": 1, "dp": 1, "batch": b, "prompt_len": 128,
             "gen_len": 32, "mode": "graph", "estimated_s": 1.0} for b in range(1, n + 1)]


def test_resumable_and_budgeted(tmp_path):
    out = tmp_path / "data.jsonl"
    seen = []
    now = [0.0]

    def one(cfg):
        now[0] += 1.0  # each measurement takes its estimated second
        seen.append(cfg["batch"])
        return measured(cfg)
    # budget of 2.5 s with 1 s estimates: two configurations, then stop
    assert run_grid(cfgs(5), out, budget_s=2.5, measure_one=one, world=1, rank=0,
                    clock=lambda: now[0]) == 2
    assert run_grid(cfgs(5), out, budget_s=100, measure_one=one, world=1, rank=0,
                    clock=lambda: now[0]) == 3
    assert seen == [1, 2, 3, 4, 5]  # nothing measured twice
    assert len(read_jsonl(out)) == 5
    assert pending(cfgs(5), out, 1) == []


def test_failure_is_recorded_and_not_fatal(tmp_path):
    out = tmp_path / "data.jsonl"

    def one(cfg):
        if cfg["batch"] == 2:
            raise RuntimeError("CUDA out of memory")
        return measured(cfg)
    assert run_grid(cfgs(3), out, budget_s=100, measure_one=one, world=1, rank=0,
                    clock=lambda: 0.0) == 2
    rows = read_jsonl(out)
    fail = [r for r in rows if r["schema"] == "piep.measurement_failure"]
    assert len(fail) == 1 and "out of memory" in fail[0]["error"]


def test_shards_are_disjoint(tmp_path):
    out = tmp_path / "x.jsonl"
    got = {}
    for i in range(2):
        got[i] = []
        run_grid(cfgs(6), tmp_path / f"s{i}.jsonl", budget_s=100, world=1, rank=0, shard=(i, 2),
                 measure_one=lambda c, i=i: got[i].append(c["batch"]) or None,
                 clock=lambda: 0.0)
    assert sorted(got[0] + got[1]) == [1, 2, 3, 4, 5, 6] and not set(got[0]) & set(got[1])
    assert not out.exists()


def test_design_covers_the_space():
    rows = build_design(seed=0)
    keys = [config_key(r) for r in rows]
    assert len(keys) == len(set(keys)) >= 100
    assert {r["layout"] for r in rows} == {"tp1", "tp2", "pp2", "dp2"}
    assert {r["mode"] for r in rows} == {"graph", "eager"}
    assert any(r["model"] == "piep-unlisted-3b" for r in rows)
    assert min(r["batch"] for r in rows) <= 2 and max(r["batch"] for r in rows) >= 32
    assert all(r["batch"] % r["dp"] == 0 for r in rows)
    json.dumps(rows)


def test_a_grid_resumes_past_the_runners_own_records(tmp_path):
    """The reference runner's records name it ("piep reference runner"): they count as
    done, so a resumed grid measures only what is left (it re-measured every run)."""
    out = tmp_path / "runs.jsonl"
    rows = [{"model": "m", "tp": 1, "pp": 1, "dp": 1, "batch": b, "prompt_len": 8,
             "gen_len": 8, "mode": "graph"} for b in (1, 2, 3)]
    out.write_text(json.dumps({"schema": "piep.measurement", **rows[0],
                               "engine": "piep reference runner"}) + "\n")
    assert [c["batch"] for c in pending(rows, out, world=1)] == [2, 3]
