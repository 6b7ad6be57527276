"""Clock planner (SPEC §2): the ideal per-kernel plan as a bound, and the applied plan.

* Ideal: every leaf (kernel or collective) at its own SM clock, chosen by a Lagrangian
  trade of energy against time that meets the slowdown budget. It cannot be applied (an
  NVML call takes milliseconds; a graph decode step holds hundreds of kernels); it bounds
  what clock control could save.
* Applied: one SM clock per phase (prefill, decode), the same for every GPU of a TP group
  and of the deployment; a phase that is communication-heavy keeps the maximum clock;
  when a phase is shorter than the dwell time both phases share one clock (the runtime
  would skip the switch anyway); no change inside a phase (so none inside a graph replay).

Savings and slowdowns are against the GPU's default boost behaviour (no lock), predicted
by the frequency model over the predictor's leaves, and given as a band over the model's
parameter bands. They are model-based, not measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from piep.core.artifacts import provenance
from piep.core.layout import Deployment
from piep.plan.freq import (FreqModel, LeafArrays, leaf_arrays, phase_totals, response,
                            totals_at_each_clock)
from piep.predict.pricing import deployment_fields
from piep.predict.pricing import price

PHASES = ("prefill", "decode")
COMM_HEAVY_SHARE = 0.5  # a phase spending more than half its time in collectives


def leaves(dep: Deployment, cost_model) -> LeafArrays:
    """The priced leaves of one deployment, for the frequency model."""
    return leaf_arrays(price([dep], cost_model))


@dataclass
class Curves:
    """Per-phase time and energy with the whole phase locked at each clock."""
    clocks: np.ndarray
    time_s: np.ndarray    # (2, clocks)
    energy_j: np.ndarray  # (2, clocks)
    t_call: np.ndarray
    e_call: np.ndarray
    # highest clock index each phase may run at (a power limit below the default caps it)
    cap: tuple[int, int] | None = None

    def top(self, ph: int) -> int:
        return len(self.clocks) - 1 if self.cap is None else self.cap[ph]


def phase_curves(fm: FreqModel, lv: LeafArrays, power_limit_w: float | None = None) -> Curves:
    """Phase totals with the whole phase locked at each clock, under `power_limit_w`
    (see `under_limit`)."""
    clocks = fm.clocks()
    t_call, e_call = response(fm, lv, clocks)
    times, energies = totals_at_each_clock(lv, t_call, e_call)
    times = no_faster(times, times[:, -1:])
    return under_limit(Curves(clocks, times, energies, t_call, e_call), lv, fm, power_limit_w)


def under_limit(cv: Curves, lv: LeafArrays, fm: FreqModel,
                power_limit_w: float | None) -> Curves:
    """The curves under a power limit. A limit below the default acts on the phase's mean
    board power (the firmware averages over far longer than a kernel): the phase runs at
    the highest clock whose mean power fits. Limits at or above the default change
    nothing (the per-kernel default limit is already in `response`)."""
    if power_limit_w is None or power_limit_w >= fm.power_limit_w:
        return cv
    times, energies = cv.time_s.copy(), cv.energy_j.copy()
    gpus = lv.tp * lv.dp * lv.pp
    mean_w = energies / np.maximum(times, 1e-15) / gpus
    caps = []
    for ph in (0, 1):
        fits = np.flatnonzero(mean_w[ph] <= power_limit_w * (1 + 1e-9))
        cap = int(fits.max()) if fits.size else 0
        idx = np.minimum(np.arange(len(cv.clocks)), cap)
        times[ph], energies[ph] = times[ph, idx], energies[ph, idx]
        caps.append(cap)
    return Curves(cv.clocks, times, energies, cv.t_call, cv.e_call, (caps[0], caps[1]))


def peak_phase_power_w(cv: Curves, lv: LeafArrays) -> float:
    """Highest mean board power per GPU of a phase at default clocks."""
    gpus = lv.tp * lv.dp * lv.pp
    return float(max(cv.energy_j[ph, -1] / cv.time_s[ph, -1] / gpus
                     for ph in (0, 1) if cv.time_s[ph, -1] > 0))


def _comm_heavy(lv: LeafArrays) -> list[bool]:
    out = []
    for ph in (0, 1):
        sel = lv.phase == ph
        total = (lv.count[sel] * (lv.t0[sel] + lv.gap[sel] + lv.wait[sel])).sum()
        comm = (lv.count[sel & lv.comm] * (lv.t0[sel & lv.comm] + lv.wait[sel & lv.comm])).sum()
        out.append(bool(total > 0 and comm / total > COMM_HEAVY_SHARE))
    return out


def applied_plan(cv: Curves, lv: LeafArrays, max_slowdown: float, dwell_s: float,
                 worst_time_s: np.ndarray | None = None) -> dict[str, Any]:
    """Best (prefill clock, decode clock) under the constraints; indices into cv.clocks.
    The slowdown budget holds for `worst_time_s` (per phase and clock, the slowest of the
    model's parameter corners) when given: a robust plan, not one at a parameter's edge."""
    top = len(cv.clocks) - 1
    wt = cv.time_s if worst_time_s is None else worst_time_s
    base_t = cv.time_s[:, top].sum()
    base_e = cv.energy_j[:, top].sum()
    heavy = _comm_heavy(lv)
    allowed = [np.array([top]) if heavy[ph] else np.arange(len(cv.clocks)) for ph in (0, 1)]
    one_clock = bool(cv.time_s[0, top] < dwell_s or cv.time_s[1, top] < dwell_s)
    best = (base_e, top, top)
    for i in allowed[0]:
        js = np.array([i]) if one_clock else allowed[1]
        if one_clock and i not in allowed[1]:
            continue
        t = wt[0, i] + wt[1, js]
        e = cv.energy_j[0, i] + cv.energy_j[1, js]
        ok = t <= base_t * (1 + max_slowdown) + 1e-15
        if ok.any():
            k = int(np.argmin(np.where(ok, e, np.inf)))
            if e[k] < best[0] - 1e-12:
                best = (float(e[k]), int(i), int(js[k]))
    reasons = []
    if one_clock:
        reasons.append(f"a phase is shorter than the dwell time ({dwell_s * 1e3:.0f} ms): "
                       "one clock for both phases")
    for ph, h in zip(PHASES, heavy):
        if h:
            reasons.append(f"{ph} is communication-heavy: maximum clock")
    return {"index": (best[1], best[2]), "one_clock": one_clock, "notes": reasons}


def ideal_plan(cv: Curves, lv: LeafArrays, max_slowdown: float,
               worst_t_call: np.ndarray | None = None) -> np.ndarray:
    """Per-leaf clock indices minimizing energy within the slowdown budget (Lagrangian
    bisection on the price of time), the budget checked on `worst_t_call` when given.
    Pipeline bubbles are priced after the choice."""
    rows = np.arange(len(lv))
    base = _default_choice(cv, lv)
    # clocks above a phase's power-limit cap are not available to its leaves
    above = np.arange(len(cv.clocks))[None, :] > base[:, None]
    e = np.where(above, np.inf, cv.e_call * lv.weight[:, None])
    t = (cv.t_call if worst_t_call is None else worst_t_call) * lv.count[:, None]
    budget = (cv.t_call[rows, base] * lv.count).sum() * (1 + max_slowdown)

    def pick(lam: float) -> np.ndarray:  # clocks above a cap cost inf energy: never picked
        return np.argmin(e + lam * t, axis=1)

    lo, hi = 0.0, 1.0
    while t[rows, pick(hi)].sum() > budget and hi < 1e9:
        hi *= 4.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if t[rows, pick(mid)].sum() > budget:
            lo = mid
        else:
            hi = mid
    return pick(hi)


def _default_choice(cv: Curves, lv: LeafArrays) -> np.ndarray:
    """Per leaf, the clock index of the default behaviour: the top clock, or under a power
    limit below the default the highest clock its phase's mean power allows."""
    return np.where(lv.phase == 0, cv.top(0), cv.top(1))


def _outcome(fm: FreqModel, lv: LeafArrays, choice: np.ndarray, cv: Curves) -> tuple[float, float]:
    """(saving, slowdown) of a per-leaf clock choice against the default behaviour (under
    the same power limit: a locked clock above a phase's cap runs at the cap)."""
    default = _default_choice(cv, lv)
    base = phase_totals(fm, lv, cv.t_call, cv.e_call, default)
    got = phase_totals(fm, lv, cv.t_call, cv.e_call, np.minimum(choice, default))
    time_s = no_faster(got.time_s, base.time_s).sum()
    return (1 - got.total_energy / base.total_energy, time_s / base.total_time - 1)


def no_faster(time_s: np.ndarray, default_s: np.ndarray) -> np.ndarray:
    """Phase times under a lock, never below the default's: a phase the board holds at
    its limit runs at the highest clock that fits, so a lower lock cannot be faster (the
    held phase's stretch and the clock response are two models of that one slowdown)."""
    return np.maximum(time_s, default_s)


def _band(models: list[FreqModel], curves: list[Curves], lv: LeafArrays, choice: np.ndarray):
    """Saving and slowdown of a per-leaf clock choice (indices into the shared clock grid)
    under every corner model."""
    outcomes = [_outcome(m, lv, choice, cv) for m, cv in zip(models, curves)]
    savings, slows = [o[0] for o in outcomes], [o[1] for o in outcomes]
    return [min(savings), max(savings)], [min(slows), max(slows)]


def make_plan(dep: Deployment, cost_model, fm: FreqModel, *, max_slowdown: float = 0.01,
              dwell_s: float = 0.1, power_limit_w: float | None = None) -> dict[str, Any]:
    priced = price([dep], cost_model)
    lv = leaf_arrays(priced)
    cv = phase_curves(fm, lv, power_limit_w)
    corner_models = fm.corners()
    corners = [phase_curves(c, lv, power_limit_w) for c in corner_models]
    # slowest corner, relative to each corner's own default, applied to the central model
    worst_rel = np.max([c.time_s / c.time_s[:, -1:] for c in corners], axis=0)
    worst_time = worst_rel * cv.time_s[:, -1:]
    worst_call = np.max([c.t_call / c.t_call[:, -1:] for c in corners], axis=0) \
        * cv.t_call[:, -1:]
    ap = applied_plan(cv, lv, max_slowdown, dwell_s, worst_time)
    ip, idp = ap["index"]
    choice_applied = np.where(lv.phase == 0, ip, idp)
    choice_ideal = ideal_plan(cv, lv, max_slowdown, worst_call)
    clocks = cv.clocks
    a_s, a_d = _outcome(fm, lv, choice_applied, cv)
    i_s, i_d = _outcome(fm, lv, choice_ideal, cv)
    if a_s > i_s:  # the Lagrangian choice is not always optimal: the applied plan is also
        choice_ideal, (i_s, i_d) = choice_applied, (a_s, a_d)  # a per-kernel plan
    a_band = _band(corner_models, corners, lv, choice_applied)
    i_band = _band(corner_models, corners, lv, choice_ideal)
    top = len(clocks) - 1
    base_e = float(cv.energy_j[:, top].sum())
    base_t = float(cv.time_s[:, top].sum())
    p = dep.parallel
    entries = [{"phase": ph, "sm_mhz": int(clocks[k]), "mem_mhz": None}
               for ph, k in zip(PHASES, (ip, idp))]
    used = np.bincount(choice_ideal, weights=lv.count * cv.t_call[np.arange(len(lv)),
                                                                    choice_ideal],
                       minlength=len(clocks))
    return {
        "schema": "piep.clock_plan",
        "schema_version": 1,
        "boundary": "gpu_board",
        "label": "model-based (frequency model + predictor), not measured",
        **deployment_fields(dep),
        "ranks": [{"rank": r, "entries": entries} for r in range(p.world_size)],
        "constraints": {"max_slowdown": max_slowdown, "min_dwell_s": dwell_s,
                        "granularity": "phase", "same_clock_in_tp_group": True,
                        "communication": "maximum clock when a phase is communication-heavy "
                                         f"(> {COMM_HEAVY_SHARE:.0%} of its time)",
                        "no_change_inside_graph_replay": True,
                        "power_limit_w": power_limit_w or fm.power_limit_w,
                        "memory_clock": "not set: NVML does not confirm run-time memory clock "
                                        "switching on our H200s"},
        "notes": ap["notes"],
        "default": {"energy_j": base_e, "time_s": base_t,
                    "predictor_energy_j": float(priced.energy_j[0]),
                    "predictor_time_s": float(priced.time_s[0])},
        "applied": {"saving": a_s, "slowdown": a_d, "saving_band": a_band[0],
                    "slowdown_band": a_band[1],
                    "energy_j": base_e * (1 - a_s), "time_s": base_t * (1 + a_d),
                    "phase_mhz": {ph: int(clocks[k]) for ph, k in zip(PHASES, (ip, idp))},
                    "phase_time_s": {"prefill": float(cv.time_s[0, ip]),
                                     "decode": float(cv.time_s[1, idp])}},
        "ideal_bound": {"saving": i_s, "slowdown": i_d, "saving_band": i_band[0],
                        "slowdown_band": i_band[1],
                        "time_weighted_mhz": float((used * clocks).sum() / used.sum())},
        "provenance": provenance(predictor=cost_model.name, freq_model=fm.to_json()),
    }


def plan_for(res, fm: FreqModel, **options: Any) -> dict[str, Any]:
    """The clock plan of a resolved scenario (`make_plan`'s options); its predictor
    baseline is the scenario's prediction (a serving engine's: the stream of its
    requests, while its clocks are chosen on its static batch's modules, noted)."""
    from piep import api
    plan = make_plan(res.deployment, res.cost_model, fm, **options)
    note = api.pricer(res).plan_note
    if note:  # its baseline is priced otherwise than the plan's batch
        doc = api.predict(res, hosts=False)
        plan["default"].update(predictor_energy_j=doc["energy_j"], predictor_time_s=doc["time_s"])
        plan["notes"].append(note)
    return plan
