"""Gamma fits of waiting times: loc fixed at 0 on the positive waits, with KS and
Anderson-Darling statistics; empirical quantiles kept beside, and used where the fit fails.

The KS p-value of a Gamma whose parameters were fitted on the same waits is too high (the
fit hugs the data: on true Gamma samples it rejects far less often than its level), so
the test is a parametric bootstrap (`scipy.stats.goodness_of_fit`: the KS statistic of
the data against those of samples drawn from the fit and refitted), run at fit time."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from scipy import stats

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99)
MIN_SAMPLES = 20
GOF_ALPHA = 0.01       # a Gamma is rejected below this p-value
GOF_SAMPLES = 999      # bootstrap samples of the test (p-values in steps of 1/1000)


def anderson_darling(x: np.ndarray, cdf) -> float:
    x = np.sort(x)
    n = len(x)
    f = np.clip(cdf(x), 1e-12, 1 - 1e-12)
    i = np.arange(1, n + 1)
    return float(-n - np.sum((2 * i - 1) / n * (np.log(f) + np.log(1 - f[::-1]))))


def gamma_pvalue(w: np.ndarray, *, samples: int = GOF_SAMPLES, seed: int = 0) -> float:
    """The parametric-bootstrap KS p-value of a Gamma(loc 0) fitted to `w`."""
    res = stats.goodness_of_fit(stats.gamma, w, known_params={"loc": 0.0}, statistic="ks",
                                n_mc_samples=samples, random_state=seed)
    return float(res.pvalue)


def fit_waits(waits_s: Sequence[float], *, gof_samples: int = GOF_SAMPLES) -> dict[str, Any]:
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
    # the fitted-parameter p-value only errs high: where it rejects, the bootstrap would too
    p, how = float(ks.pvalue), "KS with fitted parameters (rejects already)"
    if p >= GOF_ALPHA:
        p, how = gamma_pvalue(w, samples=gof_samples), f"parametric bootstrap ({gof_samples})"
    out.update(shape=float(shape), scale_s=float(scale), ks_statistic=float(ks.statistic),
               ks_pvalue=p, ks_pvalue_method=how, ad_statistic=ad)
    if p < GOF_ALPHA:
        out.update(method="empirical", reason=f"Gamma rejected (KS p={p:.2g}, {how})")
    else:
        out["method"] = "gamma"
    return out


def expected_wait_s(fit: dict[str, Any]) -> float:
    if fit.get("method") == "gamma":
        return fit["shape"] * fit["scale_s"]
    return fit.get("mean_s", 0.0)
