"""Nelder-Mead that does not stop on a stalled simplex.

A simplex that shrank along a direction where the error is flat (a host term whose effect
another term can take over) stops there, short of the minimum. Each restart builds a fresh
simplex around the best point so far; the search ends when a restart no longer lowers the
error.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np


def nelder_mead(fun: Callable[[np.ndarray], float], x0: Sequence[float], *, xatol: float,
                fatol: float, maxiter: int, restarts: int = 0) -> np.ndarray:
    """The minimizer of `fun` from `x0`: Nelder-Mead (`maxiter` iterations a search),
    restarted from its best point, at most `restarts` times, while that lowers the error by
    more than `fatol`."""
    from scipy.optimize import minimize
    x = np.asarray(x0, dtype=float)
    best = None
    for _ in range(restarts + 1):
        res = minimize(fun, x, method="Nelder-Mead",
                       options={"xatol": xatol, "fatol": fatol, "maxiter": maxiter})
        if best is not None and res.fun >= best - fatol:
            if res.fun < best:
                x = res.x
            break
        x, best = res.x, float(res.fun)
    return x
