"""Gamma fits of waiting times (SPEC §2): loc fixed at 0 on the positive waits, with KS and
Anderson-Darling statistics; empirical quantiles kept beside, and used where the fit fails."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from scipy import stats

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99)
MIN_SAMPLES = 20
KS_P_FLOOR = 1e-3


def anderson_darling(x: np.ndarray, cdf) -> float:
    x = np.sort(x)
    n = len(x)
    f = np.clip(cdf(x), 1e-12, 1 - 1e-12)
    i = np.arange(1, n + 1)
    return float(-n - np.sum((2 * i - 1) / n * (np.log(f) + np.log(1 - f[::-1]))))


def fit_waits(waits_s: Sequence[float]) -> dict[str, Any]:
    """Fit a Gamma(shape, scale, loc=0) to positive waits; report fit quality."""
    w = np.asarray([v for v in waits_s if v > 0 and math.isfinite(v)], dtype=float)
    out: dict[str, Any] = {"n": int(len(w)), "n_total": len(waits_s),
                           "mean_s": float(w.mean()) if len(w) else 0.0,
                           "quantiles_s": {str(q): float(np.quantile(w, q)) for q in QUANTILES}
                           if len(w) else {}}
    if len(w) < MIN_SAMPLES:
        out.update(method="empirical", reason=f"only {len(w)} positive waits")
        return out
    try:
        shape, _, scale = stats.gamma.fit(w, floc=0)
    except Exception as exc:  # scipy's optimizer failed: keep the empirical description
        out.update(method="empirical", reason=f"fit failed: {exc}")
        return out
    ks = stats.kstest(w, "gamma", args=(shape, 0, scale))
    ad = anderson_darling(w, lambda x: stats.gamma.cdf(x, shape, 0, scale))
    out.update(shape=float(shape), scale_s=float(scale), ks_statistic=float(ks.statistic),
               ks_pvalue=float(ks.pvalue), ad_statistic=ad)
    if ks.pvalue < KS_P_FLOOR:
        out.update(method="empirical", reason=f"Gamma rejected (KS p={ks.pvalue:.2g})")
    else:
        out["method"] = "gamma"
    return out


def expected_wait_s(fit: dict[str, Any]) -> float:
    if fit.get("method") == "gamma":
        return fit["shape"] * fit["scale_s"]
    return fit.get("mean_s", 0.0)
