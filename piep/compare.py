"""Deployments side by side on one workload, with the best candidate per goal."""

from __future__ import annotations

import re
from typing import Any

from piep.core.errors import ConfigError
from piep.core.engines import DEFAULT_ENGINE
from piep.core.results import clear_best, flat
from piep.core.scenario import Scenario

_LAYOUT = re.compile(r"^(?:(tp|pp|dp|ep)(\d+))+$")


def parse_candidate(text: str) -> tuple[str, dict[str, Any]]:
    """`llama-2-7b@tp2`, `llama-3-70b@tp2pp2`, `llama-2-7b@tp2:hf-static`, `mistral-7b:hf-eager`,
    `qwen3-30b-a3b@tp2ep2` (experts sharded over the tp group)
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
            raise ConfigError(f"candidate {text!r}: layout after '@' must look like tp2, tp2pp2, "
                              f"tp1dp2 or tp2ep2, optionally followed by :ENGINE (e.g. :hf-static)")
        for key, value in re.findall(r"(tp|pp|dp|ep)(\d+)", layout):
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
    """Predict every candidate on the base's workload; per goal (energy, latency, memory
    headroom) the clear best, or no winner where the candidates differ by less than the
    uncertainty of the difference (`piep.core.results.clear_best`)."""
    from piep import api
    rows = []
    for cand, scn in zip(candidates, candidate_scenarios(candidates, base)):
        doc = api.predict(scn, predictor=predictor, hosts=False)
        used = max(g["memory_gib"] for g in doc["per_gpu"])
        label = cand if ":" in cand or scn.engine.name == DEFAULT_ENGINE \
            else f"{cand}:{scn.engine.name}"  # the row names its engine
        rows.append({"candidate": label, "model": doc["model"], "gpus": doc["layout"]["gpus"],
                     **flat(doc), "memory_gib_per_gpu": used,
                     "memory_headroom_gib": scn.gpu.memory_gib - used,
                     "predictor": doc["predictor"], "flags": doc["flags"],
                     "interval_energy_j": doc["interval"]["energy_j"],
                     "interval_time_s": doc["interval"]["time_s"]})
    decisions = {
        "energy": clear_best([(r["candidate"], r["energy_j"], r["interval_energy_j"])
                              for r in rows], what="energy (J, all GPUs)"),
        "latency": clear_best([(r["candidate"], r["time_s"], r["interval_time_s"])
                               for r in rows], what="time (s)"),
        "memory": _most_headroom(rows)}
    w = base.workload
    return {"schema": "piep.comparison", "schema_version": 2, "boundary": "gpu_board",
            "workload": {"batch": w.batch, "prompt_len": w.prompt_len, "gen_len": w.gen_len,
                         "mode": base.mode},
            "candidates": rows,
            "recommendation": {goal: d["best"] for goal, d in decisions.items()},
            "decisions": decisions}


def _most_headroom(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Memory is computed, not predicted (exact): the most memory left on a candidate's
    fullest GPU; a layout over more GPUs leaves more on each. Ties (within 0.05 GiB) are
    stated."""
    ranked = sorted(rows, key=lambda r: -r["memory_headroom_gib"])
    best = ranked[0]
    tied = [r["candidate"] for r in ranked[1:]
            if best["memory_headroom_gib"] - r["memory_headroom_gib"] < 0.05]
    what = "memory left on the fullest GPU (per GPU: a layout over more GPUs leaves more)"
    if tied:
        return {"best": None, "within": [best["candidate"], *tied],
                "why": f"no clear winner: {', '.join([best['candidate'], *tied])} tie in {what}, "
                       f"{best['memory_headroom_gib']:.1f} GiB"}
    return {"best": best["candidate"],
            "why": f"{best['candidate']} has the most {what}: "
                   f"{best['memory_headroom_gib']:.1f} GiB"
                   + (f", {best['memory_headroom_gib'] - ranked[1]['memory_headroom_gib']:.1f} "
                      f"GiB more than {ranked[1]['candidate']}" if len(ranked) > 1 else "")}
