"""Deployments side by side on one workload, with the best candidate per goal."""

from __future__ import annotations

import re
from typing import Any

from piep.errors import ConfigError
from piep.results import flat
from piep.scenario import Scenario

_LAYOUT = re.compile(r"^(?:(tp|pp|dp)(\d+))+$")


def parse_candidate(text: str) -> tuple[str, dict[str, Any]]:
    """`llama-2-7b@tp2`, `llama-3-70b@tp2pp2`, `llama-2-7b@tp2:hf-static`, `mistral-7b:hf-eager`
    or a bare model (tp=pp=dp=1, the command's engine)."""
    head, sep, engine = text.rpartition(":")
    if not sep or "/" in engine:  # no engine (a path may hold a colon)
        head, sep, engine = text, "", ""
    if sep and not engine:
        raise ConfigError(f"candidate {text!r}: no engine after ':'; give one (e.g. "
                          f":hf-static) or drop the ':'")
    model, at, layout = head.partition("@")
    if at and not layout:
        raise ConfigError(f"candidate {text!r}: no layout after '@'; give one (e.g. @tp2, "
                          f"@tp2pp2) or drop the '@'")
    degrees: dict[str, Any] = {"tp": 1, "pp": 1, "dp": 1}
    if engine:
        degrees["engine"] = engine
    if layout:
        if not _LAYOUT.match(layout):
            raise ConfigError(f"candidate {text!r}: layout after '@' must look like tp2, tp2pp2 "
                              f"or tp1dp2, optionally followed by :ENGINE (e.g. :hf-static)")
        for key, value in re.findall(r"(tp|pp|dp)(\d+)", layout):
            degrees[key] = int(value)
    if not model:
        raise ConfigError(f"candidate {text!r} names no model")
    return model, degrees


def candidate_scenarios(candidates: list[str], base: Scenario) -> list[Scenario]:
    """Each `MODEL@LAYOUT[:ENGINE]` as a variant of `base` (its GPU and workload, and its
    engine unless the candidate names one)."""
    out = []
    for cand in candidates:
        model, degrees = parse_candidate(cand)
        out.append(base.replace(model=model, **degrees))
    return out


def compare(candidates: list[str], base: Scenario, *, predictor: str = "auto") -> dict[str, Any]:
    """Predict every candidate on the base's workload; the best per goal (latency, energy
    per token, memory headroom)."""
    from piep import api
    rows = []
    for cand, scn in zip(candidates, candidate_scenarios(candidates, base)):
        doc = api.predict(scn, predictor=predictor)
        used = max(g["memory_gib"] for g in doc["per_gpu"])
        rows.append({"candidate": cand, "model": doc["model"], "gpus": doc["layout"]["gpus"],
                     **flat(doc), "memory_gib_per_gpu": used,
                     "memory_headroom_gib": scn.gpu.memory_gib - used,
                     "predictor": doc["predictor"], "flags": doc["flags"],
                     "interval_energy_j": doc["interval"]["energy_j"]})
    recs = {
        "latency": min(rows, key=lambda r: r["time_s"])["candidate"],
        "energy": min(rows, key=lambda r: r["j_per_output_token"])["candidate"],
        "memory": max(rows, key=lambda r: r["memory_headroom_gib"])["candidate"],
    }
    w = base.workload
    return {"schema": "piep.comparison", "schema_version": 2, "boundary": "gpu_board",
            "workload": {"batch": w.batch, "prompt_len": w.prompt_len, "gen_len": w.gen_len,
                         "mode": base.mode},
            "candidates": rows, "recommendation": recs}
