"""Power curves for a planner: a deployment's predicted throughput, board power and energy
per output token at every power limit its boards can be set to, at default clocks
(`piep plan --power-curves`; document `piep.power_curves`, docs/integrations.md).

Each point is the batch priced by the deployment's cost model and moved to the limit by
the frequency model, as `piep optimize` prices it: a limit below the default acts on each
phase's mean board power (`planner.under_limit`). The 90 % band of each point is the
default prediction's (its held-out residuals, as log half-widths) carried to the limit;
the frequency model's own error is not in it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from piep.core.errors import ConfigError

SCHEMA, VERSION = "piep.power_curves", 1
STEP_W = 25.0


def settable_limits(gpu, step_w: float = STEP_W) -> list[float]:
    """Every `step_w` watts from the board's highest power limit down to its lowest, both
    ends included."""
    if not (math.isfinite(step_w) and step_w > 0):
        raise ConfigError(f"--power-step={step_w:g} must be a number of watts > 0")
    hi, lo = gpu.max_power_w, gpu.min_power_limit_w
    out = list(np.arange(hi, lo, -step_w)) + [lo]
    return [float(w) for w in dict.fromkeys(round(w, 6) for w in out)]


def power_curves(res, fm, *, step_w: float = STEP_W) -> dict[str, Any]:
    """The power-curve document of a resolved batch scenario (`res`) under frequency
    model `fm`."""
    from piep.plan.planner import leaves, phase_curves, under_limit
    scn, dep = res.scenario, res.deployment
    w, p = dep.workload, dep.parallel
    lv = leaves(dep, res.cost_model)
    default = phase_curves(fm, lv)
    tokens = w.batch * w.gen_len
    gpus = p.world_size
    e0, t0 = float(default.energy_j[:, -1].sum()), float(default.time_s[:, -1].sum())
    band = res.cost_model.interval(dep, e0, t0) if hasattr(res.cost_model, "interval") \
        else None
    points = []
    for limit in settable_limits(dep.gpu, step_w):
        cv = under_limit(default, lv, fm, limit)
        energy, time_s = float(cv.energy_j[:, -1].sum()), float(cv.time_s[:, -1].sum())
        point = {"power_limit_w": limit, "energy_j": energy, "time_s": time_s,
                 "output_tokens_per_s": tokens / time_s,
                 "power_w_per_gpu": energy / time_s / gpus,
                 "j_per_output_token": energy / tokens,
                 "ttft_s": float(cv.time_s[0, -1]),
                 "limit_binds": bool(energy != e0 or time_s != t0)}
        if band is not None:  # the default's band, as ratios, at this limit
            lo_e, hi_e = (b / e0 for b in band["energy_j"])
            lo_t, hi_t = (b / t0 for b in band["time_s"])
            point["interval"] = {"j_per_output_token": [point["j_per_output_token"] * lo_e,
                                                        point["j_per_output_token"] * hi_e],
                                 "output_tokens_per_s": [tokens / (time_s * hi_t),
                                                         tokens / (time_s * lo_t)]}
        points.append(point)
    return {"schema": SCHEMA, "schema_version": VERSION, "model": scn.model.name,
            "gpu": dep.gpu.name, "engine": scn.engine.name,
            "layout": {"tp": p.tp, "pp": p.pp, "dp": p.dp, "gpus": gpus},
            "workload": {"batch": w.batch, "prompt_len": w.prompt_len, "gen_len": w.gen_len},
            "clocks": "default (the board's own boost under each limit)",
            "settable_w": [dep.gpu.min_power_limit_w, dep.gpu.max_power_w],
            "points": points,
            "interval_level": None if band is None else
            band["level"] + "; carried from the default limit (the frequency model's error "
                            "not included)",
            "flags": list(res.flags), "predictor": res.cost_model.name}
