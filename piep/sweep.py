"""Many predictions: a grid or random draws, invalid points kept with their reason."""

from __future__ import annotations

import itertools
import sys
from typing import Any

from piep.errors import PiepError


def grid(*, models, tp, pp, dp, batch, prompt_len, gen_len, mode) -> list[dict[str, Any]]:
    keys = ("model", "tp", "pp", "dp", "batch", "prompt_len", "gen_len", "mode")
    return [dict(zip(keys, values)) for values in
            itertools.product(models, tp, pp, dp, batch, prompt_len, gen_len, mode)]


def sweep(configs: list[dict[str, Any]], *, gpu: str = "h200", predictor: str = "auto",
          progress: bool = False) -> list[dict[str, Any]]:
    from piep import api
    from piep.tree import build_tree
    cm = api.cost_model(gpu, predictor)
    if hasattr(cm, "cost_arrays"):
        return _fast(configs, gpu, cm, progress)
    rows = []
    chunk = 256
    for start in range(0, len(configs), chunk):
        part = configs[start:start + chunk]
        built: list = []
        for cfg in part:
            try:
                dep = api.deployment(gpu=gpu, **cfg)
                built.append((dep, build_tree(dep)))
            except PiepError as exc:
                built.append(exc)
        if hasattr(cm, "prepare"):  # one GBDT call per node kind for the whole chunk
            cm.prepare([b for b in built if not isinstance(b, PiepError)])
        rows += _rows(part, built, cm, progress, start, len(configs))
        if hasattr(cm, "clear"):
            cm.clear()
    return rows


def _fast(configs, gpu, cm, progress) -> list[dict[str, Any]]:
    """The learned predictor's vectorized path (piep.predict.fast), same numbers."""
    from piep import api
    from piep.gpus import load_gpu
    from piep.predict.fast import FastSweep
    fast = FastSweep(cm)
    gpu_profile = load_gpu(gpu)
    rows: list[dict[str, Any]] = []
    chunk = 8192
    for start in range(0, len(configs), chunk):
        part = configs[start:start + chunk]
        deps, out = [], []
        for cfg in part:
            row = dict(cfg)
            try:
                deps.append(api.deployment(gpu=gpu_profile, **cfg))
                out.append(row)
            except PiepError as exc:
                row["error"] = str(exc)
            rows.append(row)
        for row, doc in zip(out, fast.evaluate(deps) if deps else []):
            row.update(doc)
        if progress and sys.stderr.isatty():
            done = start + len(part)
            sys.stderr.write(f"\rsweep {done}/{len(configs)}"
                             + ("\n" if done == len(configs) else ""))
    return rows


def _rows(part, built, cm, progress, offset, total) -> list[dict[str, Any]]:
    from piep.predict.engine import evaluate
    rows = []
    for cfg, b in zip(part, built):
        row = dict(cfg)
        if isinstance(b, PiepError):
            row["error"] = str(b)
        else:
            doc = evaluate(b[0], cm, b[1])
            row.update(energy_j=doc["energy_j"], time_s=doc["time_s"],
                       j_per_token=doc["j_per_token"], tokens_per_s=doc["tokens_per_s"],
                       ttft_s=doc["prefill"]["time_s"], tpot_s=doc["decode"]["tpot_s"],
                       predictor=doc["predictor"], flags=doc["flags"])
        rows.append(row)
    if progress and sys.stderr.isatty():
        done = offset + len(part)
        sys.stderr.write(f"\rsweep {done}/{total}" + ("\n" if done == total else ""))
    return rows
