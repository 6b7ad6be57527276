"""The held-out error figures the fits and reports print (piep.stats.conformal)."""

import pytest

from piep.stats.conformal import mape, mape_text

pytestmark = pytest.mark.pure


def test_the_error_figure_and_its_range():
    rows = [{"energy_j": 100.0, "pred_energy_j": 110.0},
            {"energy_j": 200.0, "pred_energy_j": 170.0},
            {"energy_j": None, "pred_energy_j": 5.0}]  # nothing measured: left out of the text
    assert mape(rows[:2], "energy_j") == pytest.approx(12.5)
    assert mape_text(rows, "energy_j") == "12.5 % (-15..+10 %)"
    assert mape_text(rows[2:], "energy_j") == "-"
