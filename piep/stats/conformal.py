"""Split-conformal bands of |log(predicted / measured)| and their coverage.

A band is the `level` quantile of held-out log errors (the (n+1)-corrected order
statistic). Coverage is measured cross-conformally: each row against the band sized on
the rows of the other groups only (a held-out model's residuals never size its own
band), so the figure is what a user of an unseen model would have got.
"""

from __future__ import annotations

import math
from typing import Any, Sequence


def band(log_errors: Sequence[float], level: float = 0.9) -> float:
    """The `level` split-conformal half-width of absolute log errors."""
    v = sorted(log_errors)
    return v[min(len(v) - 1, math.ceil(level * (len(v) + 1)) - 1)]


def log_error(row: dict[str, Any], key: str) -> float:
    """|log(pred_KEY / KEY)| of a row beside its prediction."""
    return abs(math.log(row[f"pred_{key}"] / row[key]))


def cross_coverage(rows: Sequence[dict[str, Any]], key: str, *, group: str = "model",
                   level: float = 0.9) -> float:
    """Share of rows inside the `level` band sized on the other groups' rows alone."""
    errs = [(r[group], log_error(r, key)) for r in rows]
    inside = sum(x <= band([v for g2, v in errs if g2 != g], level) for g, x in errs)
    return inside / len(errs)
