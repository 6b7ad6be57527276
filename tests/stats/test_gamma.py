import numpy as np
import pytest

from piep.stats.gamma import anderson_darling, expected_wait_s, fit_waits

pytestmark = pytest.mark.pure


def test_recovers_gamma_parameters():
    rng = np.random.default_rng(0)
    w = rng.gamma(2.3, 1.8e-6, size=4000)
    fit = fit_waits(list(w) + [0.0] * 100)  # zero waits (the fastest rank) are excluded
    assert fit["method"] == "gamma" and fit["n"] == 4000 and fit["n_total"] == 4100
    assert fit["shape"] == pytest.approx(2.3, rel=0.08)
    assert fit["scale_s"] == pytest.approx(1.8e-6, rel=0.08)
    assert fit["ks_pvalue"] > 0.01
    assert expected_wait_s(fit) == pytest.approx(w.mean(), rel=0.03)


def test_non_gamma_falls_back_to_quantiles():
    rng = np.random.default_rng(1)
    w = np.concatenate([rng.normal(1e-5, 1e-7, 3000), rng.normal(5e-5, 1e-7, 3000)])
    fit = fit_waits(w)
    assert fit["method"] == "empirical" and "rejected" in fit["reason"]
    assert fit["quantiles_s"]["0.5"] > 0


def test_too_few_samples():
    fit = fit_waits([1e-6] * 5)
    assert fit["method"] == "empirical" and fit["n"] == 5


def test_anderson_darling_small_for_true_model():
    from scipy import stats
    rng = np.random.default_rng(2)
    x = rng.gamma(3.0, 2.0, 2000)
    good = anderson_darling(x, lambda v: stats.gamma.cdf(v, 3.0, 0, 2.0))
    bad = anderson_darling(x, lambda v: stats.gamma.cdf(v, 1.0, 0, 2.0))
    assert good < 3 < bad


def test_nelder_mead_restarts_a_stalled_search_and_stops_when_it_gains_nothing():
    """A search cut short (here by its iteration budget, as a simplex shrunk along a flat
    direction stops) goes on from its best point; once a restart gains nothing, it ends."""
    from scipy.optimize import minimize, rosen

    from piep.stats.search import nelder_mead
    x0 = [-1.2, 1.0, 0.8]
    once = minimize(rosen, x0, method="Nelder-Mead", options={"maxiter": 80})
    assert list(nelder_mead(rosen, x0, xatol=1e-4, fatol=1e-4, maxiter=80)) == list(once.x)
    calls = []

    def counted(x):
        calls.append(1)
        return rosen(x)
    best = nelder_mead(counted, x0, xatol=1e-6, fatol=1e-12, maxiter=80, restarts=30)
    assert rosen(best) < 1e-3 * once.fun
    assert len(calls) < 31 * 80  # 31 searches of at least 80 steps each: it stopped before


def test_the_gamma_test_rejects_true_gammas_at_its_level():
    """On samples of a true Gamma, the test's p-value is uniform: about half of them lie
    below 0.5 and about a tenth below 0.1. The KS p-value of parameters fitted on the same
    waits is not (it piles up near 1: it rejected 0 of 200 such samples at 5 %)."""
    from scipy import stats

    from piep.stats.gamma import gamma_pvalue
    boot, naive = [], []
    for seed in range(60):
        w = np.random.default_rng(100 + seed).gamma(2.0, 1e-5, size=100)
        boot.append(gamma_pvalue(w, samples=199, seed=seed))
        shape, _, scale = stats.gamma.fit(w, floc=0)
        naive.append(stats.kstest(w, "gamma", args=(shape, 0, scale)).pvalue)
    boot, naive = np.array(boot), np.array(naive)
    assert 0.35 < boot.mean() < 0.65 and 0.02 <= (boot < 0.1).mean() <= 0.2
    assert naive.mean() > 0.7 and (naive < 0.1).mean() == 0.0


def test_a_fit_names_the_test_behind_its_p_value():
    rng = np.random.default_rng(3)
    fit = fit_waits(rng.gamma(2.0, 1e-5, size=300), gof_samples=199)
    assert fit["ks_pvalue_method"] == "parametric bootstrap (199)"
    odd = fit_waits(np.concatenate([rng.normal(1e-5, 1e-7, 500), rng.normal(5e-5, 1e-7, 500)]))
    assert odd["ks_pvalue_method"].startswith("KS with fitted parameters")
