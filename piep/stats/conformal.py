"""Bands of |log(predicted / measured)| from held-out residuals, and their coverage.

A band is the `level` quantile of held-out log errors (the (n+1)-corrected order
statistic), placed around the prediction of the fit on every run: a cross-validation
("jackknife") interval, not a split-conformal one (whose residuals would come from runs
the fit never saw). With fewer than MIN_HELD_OUT residuals the corrected order statistic
lies past the largest, so the band is that largest residual and sizes nothing (`basis`
says so). Coverage is measured cross-conformally: each row against the band sized on the
rows of the other groups only (a held-out model's residuals never size its own band), so
the figure is what a user of an unseen model would have got.
"""

from __future__ import annotations

import math
from typing import Any, Sequence


# fewer held-out residuals than this cannot size a 90 % band ((n+1) x 0.9 > n)
MIN_HELD_OUT = 9


def basis(n: int, held_out: str, group: str | None = None) -> str:
    """A band's basis in words: what it is a quantile of (`held_out`: "leave-one-model-out
    residuals", ...), and whether there were enough of them to size it."""
    where = f", group {group}" if group else ""
    if n >= MIN_HELD_OUT:
        return (f"90 % jackknife interval (the full fit's prediction +- the 90 % quantile of "
                f"{n} {held_out}{where})")
    return (f"band of the largest of {n} {held_out}{where} around the full fit's prediction "
            f"(too few to size a 90 % band: {MIN_HELD_OUT} needed)")


def band(log_errors: Sequence[float], level: float = 0.9) -> float:
    """The `level` half-width of absolute held-out log errors ((n+1)-corrected)."""
    v = sorted(log_errors)
    return v[min(len(v) - 1, math.ceil(level * (len(v) + 1)) - 1)]


def log_error(row: dict[str, Any], key: str) -> float:
    """|log(pred_KEY / KEY)| of a row beside its prediction."""
    return abs(math.log(row[f"pred_{key}"] / row[key]))


def mape(rows: Sequence[dict[str, Any]], key: str) -> float:
    """Mean |pred_KEY / KEY - 1| of held-out rows, in per cent: the one held-out error
    figure the fits report."""
    return 100 * math.fsum(abs(r[f"pred_{key}"] / r[key] - 1) for r in rows) / len(rows)


def mape_text(rows: Sequence[dict[str, Any]], key: str) -> str:
    """`mape` with the range of the signed errors, as reports print it: '5.6 % (-18..+17
    %)'; rows without a measured KEY left out ('-': none left)."""
    rows = [r for r in rows if r.get(key)]
    if not rows:
        return "-"
    errs = [r[f"pred_{key}"] / r[key] - 1 for r in rows]
    return f"{mape(rows, key):.1f} % ({100 * min(errs):+.0f}..{100 * max(errs):+.0f} %)"


def cross_coverage(rows: Sequence[dict[str, Any]], key: str, *, group: str = "model",
                   level: float = 0.9) -> float:
    """Share of rows inside the `level` band sized on the other groups' rows alone."""
    errs = [(r[group], log_error(r, key)) for r in rows]
    inside = sum(x <= band([v for g2, v in errs if g2 != g], level) for g, x in errs)
    return inside / len(errs)
