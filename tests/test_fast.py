"""The vectorized sweep path equals the reference engine, configuration by configuration."""

import random

import pytest

from piep import api
from piep.errors import PiepError
from piep.predict.engine import evaluate
from piep.predict.fast import FastSweep
from piep.sweep import sweep

MODELS = ("llama-2-7b", "llama-3-8b", "qwen2.5-7b", "mistral-small-24b", "vicuna-33b",
          "llama-3-70b")


@pytest.fixture(scope="module")
def learned():
    cm = api.cost_model("h200", "learned")
    assert hasattr(cm, "cost_arrays")
    return cm


def _configs(n, seed):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        cfg = {"model": rng.choice(MODELS), "tp": rng.choice((1, 2, 4, 8)),
               "pp": rng.choice((1, 2, 4)), "dp": rng.choice((1, 2)),
               "batch": rng.choice((1, 2, 3, 8, 33, 64)), "prompt_len": rng.randint(1, 3000),
               "gen_len": rng.randint(1, 700), "mode": rng.choice(("graph", "eager"))}
        try:
            api.deployment(**cfg)
        except PiepError:
            continue
        out.append(cfg)
    return out


def test_fast_path_equals_reference_engine(learned):
    configs = _configs(60, seed=11)
    deps = [api.deployment(**c) for c in configs]
    fast = FastSweep(learned).evaluate(deps)
    for dep, got in zip(deps, fast):
        ref = evaluate(dep, learned)
        assert got["energy_j"] == pytest.approx(ref["energy_j"], rel=1e-9), dep.describe()
        assert got["time_s"] == pytest.approx(ref["time_s"], rel=1e-9), dep.describe()
        assert got["ttft_s"] == pytest.approx(ref["prefill"]["time_s"], rel=1e-9)
        assert got["tpot_s"] == pytest.approx(ref["decode"]["tpot_s"], rel=1e-9, abs=1e-15)
        assert set(got["flags"]) == set(ref["flags"])


def test_sweep_rows_use_the_fast_path_and_keep_refusals(learned):
    cfgs = _configs(5, seed=3) + [{"model": "llama-3-70b", "tp": 3, "pp": 1, "dp": 1,
                                   "batch": 1, "prompt_len": 8, "gen_len": 8,
                                   "mode": "graph"}]
    rows = sweep(cfgs)
    assert "error" in rows[-1] and "tp" in rows[-1]["error"]
    for cfg, row in zip(cfgs[:-1], rows):
        ref = api.predict(**cfg)
        assert row["energy_j"] == pytest.approx(ref["energy_j"], rel=1e-9)
        assert row["predictor"] == "learned"
