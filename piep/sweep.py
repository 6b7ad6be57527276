"""Many predictions: a grid or random draws, invalid points kept with their reason."""

from __future__ import annotations

import itertools
import sys
from typing import Any

from piep.errors import PiepError
from piep.gpus import DEFAULT_GPU

CHUNK = 8192  # deployments priced per table


def grid(*, models, tp, pp, dp, batch, prompt_len, gen_len, mode) -> list[dict[str, Any]]:
    keys = ("model", "tp", "pp", "dp", "batch", "prompt_len", "gen_len", "mode")
    return [dict(zip(keys, values)) for values in
            itertools.product(models, tp, pp, dp, batch, prompt_len, gen_len, mode)]


def sweep(configs: list[dict[str, Any]], *, gpu: str = DEFAULT_GPU, predictor: str = "auto",
          progress: bool = False) -> list[dict[str, Any]]:
    """One row per configuration: its prediction's summary, or `error` with the reason it
    was refused. Priced in chunks through the one pricing path (`piep.predict.pricing`)."""
    from piep import api
    from piep.gpus import load_gpu
    from piep.predict.pricing import price
    from piep.predict.table import TableBuilder
    cm = api.cost_model(gpu, predictor)
    builder = TableBuilder()
    gpu_profile = load_gpu(gpu)
    rows: list[dict[str, Any]] = []
    for start in range(0, len(configs), CHUNK):
        part = configs[start:start + CHUNK]
        deps, valid = [], []
        for cfg in part:
            row = dict(cfg)
            try:
                deps.append(api.deployment(gpu=gpu_profile, **cfg))
                valid.append(row)
            except PiepError as exc:
                row["error"] = str(exc)
            rows.append(row)
        if deps:
            priced = price(deps, cm, builder=builder)
            for i, row in enumerate(valid):
                row.update(priced.summary(i))
        if progress and sys.stderr.isatty():
            done = start + len(part)
            sys.stderr.write(f"\rsweep {done}/{len(configs)}"
                             + ("\n" if done == len(configs) else ""))
    return rows
