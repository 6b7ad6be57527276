"""Budgeted, resumable grid of measurements: one JSONL line appended per finished
configuration; configurations already in the output are skipped."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any, Iterable

from piep.core.artifacts import read_jsonl
from piep.core.config import ModelSpec, Parallel, Workload
from piep.device import clock as host_clock
from piep.core.records import KEY_FIELDS, run_key
from piep.core.writer import append_record

log = logging.getLogger("piep.measure")


def config_key(cfg: dict[str, Any]) -> str:
    """model|tp|pp|dp|batch|prompt|gen|mode, and |engine for engines other than piep's
    reference runner (whose keys stay as they were)."""
    key = run_key(cfg)
    engine = cfg.get("engine")
    if isinstance(engine, dict):
        engine = engine.get("name")
    # the runner's own records name it ("piep reference runner"): the key of its design row
    return f"{key}|{engine}" if engine and not str(engine).startswith("piep") else key


def spec_of(cfg: dict[str, Any]) -> ModelSpec:
    """A grid entry names a shipped model or carries its own config.json body."""
    if "config" in cfg:
        return ModelSpec.from_hf_config(cfg["config"], name=cfg["model"])
    from piep.core.models import load_model
    return load_model(cfg["model"])


FAILURE_SCHEMA = "piep.measurement_failure"


def failure_record(cfg: dict[str, Any], error: str) -> dict[str, Any]:
    """The line a configuration that failed leaves in its output (it is not retried)."""
    return {"schema": FAILURE_SCHEMA, "schema_version": 1, **{k: cfg[k] for k in KEY_FIELDS},
            **({"engine": cfg["engine"]} if "engine" in cfg else {}),
            "key": config_key(cfg), "error": error[:500]}


def done_keys(out: Path) -> set[str]:
    """Measured or failed configurations (a failure is not retried; delete its line to retry)."""
    return {config_key(r) for r in read_jsonl(out)
            if r.get("schema") in ("piep.measurement", FAILURE_SCHEMA)}


def pending(design: Iterable[dict[str, Any]], out: Path, world: int) -> list[dict[str, Any]]:
    done = done_keys(out)
    return [c for c in design if c["tp"] * c["pp"] * c["dp"] == world
            and config_key(c) not in done]


def load_design(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def parallel_workload(cfg: dict[str, Any]) -> tuple[Parallel, Workload]:
    return (Parallel(tp=cfg["tp"], pp=cfg["pp"], dp=cfg["dp"], ep=cfg.get("ep", 1)),
            Workload(batch=cfg["batch"], prompt_len=cfg["prompt_len"], gen_len=cfg["gen_len"],
                     mode=cfg["mode"]))


def run_grid(design: list[dict[str, Any]], out: Path, *, budget_s: float, measure_one,
             world: int, rank: int, shard: tuple[int, int] = (0, 1), broadcast=None,
             clock=host_clock.now) -> int:
    """Measure pending configurations until the budget is spent. `measure_one(cfg)` returns
    the record on rank 0. All ranks walk the same list; rank 0 decides when to stop."""
    todo = pending(design, out, world)
    todo = [c for i, c in enumerate(todo) if i % shard[1] == shard[0]]
    start = clock()
    finished = 0
    for i, cfg in enumerate(todo):
        est = float(cfg.get("estimated_s", 10.0))
        go = clock() - start + est <= budget_s
        if broadcast is not None:
            go = broadcast(go)
        if not go:
            log.info("budget reached: %d of %d pending configurations left", len(todo) - i,
                     len(todo))
            break
        t0 = clock()
        try:
            record = measure_one(cfg)
        except Exception as exc:  # one bad configuration must not end the grid
            log.warning("%s failed: %s: %s", config_key(cfg), type(exc).__name__, exc)
            if rank == 0:
                append_record(out, failure_record(cfg, f"{type(exc).__name__}: {exc}"))
            free_memory()
            continue
        if rank == 0 and record is not None:
            record["key"] = config_key(cfg)
            record["wall_s"] = clock() - t0
            append_record(out, record)
            finished += 1
            e = record.get("energy_j")
            log.info("[%d/%d] %s: %s J, %.3f s, spread %s (%.1f s wall)", i + 1, len(todo),
                     config_key(cfg), f"{e:.1f}" if e is not None else "n/a",
                     record["time_s"], record.get("spread"), record["wall_s"])
    return finished


def shuffled(configs: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Randomized configuration order (SPEC §3), reproducible from the seed."""
    rng = random.Random(seed)
    out = list(configs)
    rng.shuffle(out)
    return out


def free_memory() -> None:
    """Give a GPU's memory back between configurations (on CPU nothing holds a device)."""
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        import gc
        gc.collect()
        torch.cuda.empty_cache()
