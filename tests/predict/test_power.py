"""How a board holds its power limit over a phase (piep.predict.power), against
hand-computed numbers, and in the shipped predictor's prices."""

import math

import numpy as np
import pytest

from piep import api
from piep.predict.store import load_learned
from piep.predict.power import SUSTAINED_S, BoardLimit
from piep.predict.pricing import price

pytestmark = pytest.mark.replay

LIMIT_W = 700.0
BOARD = BoardLimit(burst_ratio=1.1, burst_s=0.5, stretch_exponent=0.5)  # burst 770 W


def _hold(limit, time_s, energy_j):
    t, f = limit.hold(np.array([time_s]), np.array([[energy_j]]), LIMIT_W)
    return float(t[0]), float(f[0, 0])


def test_a_short_phase_above_the_burst_power_slows_and_is_held_at_it():
    t, f = _hold(BOARD, 0.2, 176.0)  # 880 W of kernels
    assert t == pytest.approx(0.2 * math.sqrt(880 / 770))
    assert f * 176.0 / t == pytest.approx(770.0)  # mean power: the burst power


def test_a_sustained_phase_is_held_at_the_limit():
    t, f = _hold(BOARD, 2.0, 1600.0)  # 800 W of kernels
    assert t == pytest.approx(2.0 * math.sqrt(800 / 770))
    assert f * 1600.0 / t == pytest.approx(LIMIT_W)


def test_the_ceiling_falls_in_log_time_between_the_burst_and_the_sustained_phase():
    mid = math.sqrt(BOARD.burst_s * SUSTAINED_S)
    ceiling = BOARD.ceiling_w(np.array([0.01, BOARD.burst_s, mid, SUSTAINED_S, 5.0]), LIMIT_W)
    assert ceiling == pytest.approx([770.0, 770.0, 735.0, 700.0, 700.0])


def test_a_phase_under_the_ceiling_is_unchanged():
    assert _hold(BOARD, 0.3, 0.3 * 760.0) == pytest.approx((0.3, 1.0))  # under 770 W
    assert _hold(BOARD, 3.0, 3.0 * 650.0) == pytest.approx((3.0, 1.0))
    assert _hold(BOARD, 0.0, 0.0) == (0.0, 1.0)


def test_the_default_keeps_the_energy_and_stretches_the_time_to_the_limit():
    t, f = _hold(BoardLimit(), 0.4, 0.4 * 840.0)
    assert t == pytest.approx(0.4 * 840 / LIMIT_W)
    assert f == pytest.approx(1.0)


def test_the_busiest_gpu_sets_the_time_and_each_gpu_is_capped_on_its_own():
    t, f = BOARD.hold(np.array([2.0]), np.array([[1600.0, 1000.0]]), LIMIT_W)
    assert t[0] == pytest.approx(2.0 * math.sqrt(800 / 770))
    assert f[0, 0] < 1.0 and f[0, 1] == 1.0  # 1000 J over 2.04 s: under the limit


@pytest.mark.parametrize("bad", [dict(burst_ratio=0.9), dict(burst_s=0.0),
                                 dict(burst_s=SUSTAINED_S), dict(stretch_exponent=-1.0)])
def test_impossible_terms_are_refused(bad):
    with pytest.raises(ValueError):
        BoardLimit(**bad)


def test_the_shipped_predictor_holds_a_heavy_prefill_at_its_fitted_burst_power():
    """llama-2-13b, 64 x 512 tokens: a prefill whose kernels add up to more than the
    board's limit; its mean power stays at most the fitted burst power (and at the limit
    once the phase lasts 1 s)."""
    dep = api.deployment(model="llama-2-13b", batch=64, prompt_len=512, gen_len=2)
    model = load_learned("h200")
    limit = model.host.board_limit()
    assert limit.burst_ratio > 1.0 and 0.0 < limit.stretch_exponent <= 1.0
    priced = price([dep], model)
    t, e = priced.phase_time_s[0, 0], priced.phase_energy_j[0, 0]
    ceiling = float(limit.ceiling_w(np.array([t]), dep.gpu.max_power_w)[0])
    assert e / t <= ceiling * (1 + 1e-9)
    assert e / t > 0.95 * dep.gpu.max_power_w  # the case does reach the limit


def test_an_iteration_over_the_limit_is_held_at_it():
    from piep.serving.costs import under_limit
    kernel, gap = under_limit(np.array([0.5, 0.5]), np.array([300.0, 500.0]),
                              np.array([100.0, 0.0]), 700.0)  # 800 and 1000 W of 700
    assert kernel.tolist() == pytest.approx([262.5, 350.0])
    assert gap.tolist() == pytest.approx([87.5, 0.0])
    assert under_limit(0.5, 100.0, 50.0, 700.0) == (100.0, 50.0)  # under: unchanged


def _burst_ratio() -> float:
    return load_learned("h200").host.board_limit().burst_ratio


def _check_phases(label, energy_j, time_s, gpus, flags, limit_w=700.0):
    """Each phase's mean power per GPU within the limit; a phase under 1 s within the
    fitted burst power, and flagged when above the limit."""
    burst = _burst_ratio()
    for e, t in zip(energy_j, time_s):
        if t <= 0:
            continue
        w = e / t / gpus
        if t >= SUSTAINED_S:
            assert w <= limit_w * (1 + 1e-9), (label, w, t)
        else:
            assert w <= burst * limit_w * (1 + 1e-9), (label, w, t)
            if w > limit_w * (1 + 1e-9):
                assert "short_window_power" in flags, (label, w, t, flags)


def _draw(n: int, seed: int, engine: str, small: bool = False) -> list[dict]:
    import random
    rng = random.Random(seed)
    models = ("llama-2-7b", "llama-3-8b", "mistral-7b", "qwen2.5-14b", "llama-2-13b",
              "qwen2.5-32b")
    out = []
    for _ in range(n):
        out.append({"model": rng.choice(models), "tp": rng.choice((1, 2, 4, 8)),
                    "pp": 1 if engine.startswith("hf") else rng.choice((1, 2)),
                    "batch": rng.choice((1, 4, 16, 64) if small else (1, 2, 8, 32, 64, 128)),
                    "prompt_len": rng.randint(16, 1024 if small else 3500),
                    "gen_len": rng.randint(2, 64 if small else 500), "engine": engine})
    return out


@pytest.mark.parametrize("engine", ["piep-graph", "piep-eager", "hf-eager", "hf-static"])
def test_no_batch_engine_draws_more_than_the_board_over_a_sweep(engine):
    """1,000 random deployments of each batch engine: every phase of every GPU within the
    board's limit (a phase under 1 s within the burst allowance, flagged)."""
    from piep.core.errors import PiepError
    from piep.core.scenario import Scenario
    checked, deps, first = 0, [], None
    for cfg in _draw(1000, 7, engine):
        try:  # (as a sweep resolves its points: variants of the first)
            scn = Scenario.build(**cfg)
            res = first.variant(scn) if first else api.resolve(scn)
        except PiepError:
            continue
        first = first or res
        deps.append(res)
    by_model: dict[int, list] = {}
    for res in deps:
        by_model.setdefault(id(res.cost_model), []).append(res)
    for group in by_model.values():
        priced = price([r.deployment for r in group], group[0].cost_model)
        for i, res in enumerate(group):
            dep = res.deployment
            fl = ["short_window_power"] if priced.short_window_power[i] else []
            _check_phases(res.scenario.label(), priced.phase_energy_j[i],
                          priced.phase_time_s[i], dep.parallel.world_size, fl)
            # the busiest GPU (a pipeline stage) over the window
            w = priced.stage_energy_j[i].max() / priced.time_s[i]
            assert w <= _burst_ratio() * 700.0 * (1 + 1e-9) or priced.time_s[i] >= 1
            checked += 1
    assert checked >= 300, checked


def _check_serving_engine(n: int, seed: int):
    from piep.core.errors import PiepError
    from piep.core.scenario import Scenario
    checked = 0
    for cfg in _draw(n, seed, "hf-cb", small=True):
        try:
            doc = api.predict(Scenario.build(**cfg), hosts=False)
        except PiepError:
            continue
        gpus = doc["layout"]["gpus"]
        _check_phases(cfg, [doc["prefill"]["energy_j"], doc["decode"]["energy_j"]],
                      [doc["prefill"]["time_s"], doc["decode"]["time_s"]], gpus, doc["flags"])
        _check_phases(cfg, [doc["energy_j"]], [doc["time_s"]], gpus, doc["flags"])
        checked += 1
    assert checked >= n // 3, checked


@pytest.mark.slow  # (seconds: the default tier's budget, reports/speed.md)
def test_the_serving_engine_stays_within_the_board_over_a_sweep():
    _check_serving_engine(40, 3)


@pytest.mark.slow
def test_the_serving_engine_stays_within_the_board_over_a_long_sweep():
    _check_serving_engine(1000, 4)


def test_a_long_heavy_prefill_under_continuous_batching_stays_at_the_limit():
    """64 prompts of 2,048 tokens at once under hf-cb: ~25 s of prefill iterations whose
    kernels add up to ~810 W; held at the 700 W limit and flagged."""
    from piep.serving.serve import serve
    from piep.core.scenario import Scenario
    from piep.core.trace import make_trace
    scn = Scenario.build("llama-2-7b", engine="hf-cb", batch=64, prompt_len=2048, gen_len=128)
    doc = api.predict(scn, hosts=False)
    assert doc["prefill"]["time_s"] > 10
    assert doc["prefill"]["energy_j"] / doc["prefill"]["time_s"] <= 700.0 * (1 + 1e-9)
    assert doc["prefill"]["energy_j"] / doc["prefill"]["time_s"] > 650.0
    assert "power_capped" in doc["flags"]
    stream = serve(scn.replace(trace=make_trace([0.0] * 64, [2048] * 64, [128] * 64)))
    assert stream["prefill"]["energy_j"] / stream["prefill"]["time_s"] <= 700.0 * (1 + 1e-9)
