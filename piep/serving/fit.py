"""Fitting a continuous-batching engine's profile on replayed request traces.

The scheduler's host time per iteration and per request of an iteration, and the host
time per kernel launch, are fitted so that simulating each measured trace reproduces its
window energy, median TPOT and median end-to-end latency (log errors). The KV-cache share
of free memory comes from the engine's own report of its blocks.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np

from piep.errors import ArtifactError
from piep.predict.engines import EngineProfile
from piep.serving.serve import (SchedulerPolicy, document, iteration_grid, kv_blocks, run,
                                with_host)
from piep.serving.trace import Trace, make_trace

FITTED = ("host_launch_s", "step_host_s", "request_host_s")
START = {"host_launch_s": 3e-5, "step_host_s": 0.02, "request_host_s": 5e-4}


def record_trace(rec: dict[str, Any]) -> Trace:
    """The trace a serving measurement replayed (its per-request rows)."""
    rows = rec["per_request"]
    return make_trace([r["arrival_s"] for r in rows], [r["prompt_len"] for r in rows],
                      [r["gen_len"] for r in rows], [r["id"] for r in rows],
                      where=f"record of {rec.get('trace', 'a trace')}")


def observed(rec: dict[str, Any]) -> tuple[float, float, float]:
    """(window energy, median TPOT, median end-to-end latency) of a measured replay."""
    pr = rec["per_request"]
    return (rec["energy_j"], statistics.median(r["tpot_s"] for r in pr if r["gen_len"] > 1),
            statistics.median(r["e2e_s"] for r in pr))


def predicted(case: "_Case", sim, costs) -> tuple[float, float, float]:
    """(window energy, median TPOT, median end-to-end latency) as `piep serve` reports them."""
    doc = document(case.scn, case.trace, sim, costs, case.policy)
    return doc["energy_j"], doc["tpot_s"]["p50"], doc["e2e_s"]["p50"]


class _Case:
    def __init__(self, rec, scn, policy, grid):
        self.rec, self.scn, self.policy, self.grid = rec, scn, policy, grid
        self.trace = record_trace(rec)
        self.meas = observed(rec)


def _cases(base, records: list[dict[str, Any]], memory_share: float):
    from piep.predict.train import spec_of_record
    from piep.serving.serve import serving_scenario
    out, grids = [], {}
    for rec in records:
        trace = record_trace(rec)
        scn = serving_scenario(spec_of_record({**rec, "model": rec["model"]}), trace,
                               gpu=base.gpu, check_memory=False)
        policy = SchedulerPolicy(num_blocks=kv_blocks(scn, 256, memory_share))
        key = (scn.model, policy)
        if key not in grids:
            grids[key] = iteration_grid(scn, policy)
        out.append(_Case(rec, scn, policy, grids[key]))
    return out


def memory_share(records: list[dict[str, Any]], base) -> float:
    """The share of free memory the engine gave its KV blocks (median over records)."""
    from piep.predict.train import spec_of_record
    from piep.serving.serve import serving_scenario
    shares = []
    for rec in records:
        blocks = rec.get("cb_config", {}).get("cache_num_blocks") or \
            rec.get("cb_config", {}).get("num_blocks")
        block = rec.get("cb_config", {}).get("cache_block_size") or 256
        if not blocks:
            continue
        scn = serving_scenario(spec_of_record(rec), record_trace(rec), gpu=base.gpu,
                               check_memory=False)
        shares.append(blocks / kv_blocks(scn, block, 1.0))
    return statistics.median(shares) if shares else 0.76


def _error(model, cases) -> float:
    errs = []
    for c in cases:
        sim, costs = run(c.scn, c.trace, model, c.policy, c.grid)
        for p, m in zip(predicted(c, sim, costs), c.meas):
            errs.append(math.log(p / m) ** 2)
    return float(np.mean(errs))


def fit_cb_profile(base, records: list[dict[str, Any]], *, maxiter: int = 150) -> EngineProfile:
    from scipy.optimize import minimize
    records = [r for r in records if r.get("energy_j")]
    if len(records) < 2:
        raise ArtifactError(f"fitting hf-cb needs at least 2 replayed traces with energy, "
                            f"found {len(records)}")
    share = memory_share(records, base)
    cases = _cases(base, records, share)
    x0 = [math.log(START[k]) for k in FITTED]

    def model_of(theta):
        return with_host(base, **{k: float(math.exp(v)) for k, v in zip(FITTED, theta)})
    res = minimize(lambda th: _error(model_of(th), cases), x0, method="Nelder-Mead",
                   options={"xatol": 0.01, "fatol": 1e-5, "maxiter": maxiter})
    fitted = model_of(res.x)
    versions = sorted({(r.get("engine") or {}).get("version", "unknown") for r in records})
    return EngineProfile("hf-cb", ",".join(versions), base.gpu.name, fitted.host, None,
                         meta={"runs": len(records), "traces": [r.get("trace") for r in records],
                               "models": sorted({r["model"] for r in records}),
                               "tp_measured": [1], "fitted_terms": list(FITTED),
                               "combiner": "reference",
                               "scheduler": {"block_size": 256, "max_batch_tokens": 8192,
                                             "max_requests_per_batch": 1024,
                                             "safety_margin": 0.15,
                                             "kv_memory_share": share}})


def leave_one_trace_out(base, records: list[dict[str, Any]], *, maxiter: int = 150
                        ) -> list[dict[str, Any]]:
    """Each trace predicted by a profile fitted on the others."""
    records = [r for r in records if r.get("energy_j")]
    out = []
    for i, rec in enumerate(records):
        profile = fit_cb_profile(base, records[:i] + records[i + 1:], maxiter=maxiter)
        model = profile.apply(base)
        share = profile.meta["scheduler"]["kv_memory_share"]
        (case,) = _cases(base, [rec], share)
        sim, costs = run(case.scn, case.trace, model, case.policy, case.grid)
        e, tpot, e2e = predicted(case, sim, costs)
        m_e, m_tpot, m_e2e = case.meas
        out.append({"trace": rec.get("trace"), "requests": len(case.trace),
                    "energy_j": m_e, "pred_energy_j": e, "time_s": rec["time_s"],
                    "pred_time_s": sim.end_s, "tpot_s": m_tpot, "pred_tpot_s": tpot,
                    "e2e_s": m_e2e, "pred_e2e_s": e2e})
    return out
