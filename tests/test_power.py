"""How a board holds its power limit over a phase (piep.predict.power), against
hand-computed numbers, and in the shipped predictor's prices."""

import math

import numpy as np
import pytest

from piep import api
from piep.predict.learned import load_learned
from piep.predict.power import SUSTAINED_S, BoardLimit
from piep.predict.pricing import price

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
