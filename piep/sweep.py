"""Many predictions: a grid or random draws, invalid points kept with their reason."""

from __future__ import annotations

import itertools
import logging
import sys
from typing import Any

from piep.core.errors import PiepError
from piep.core.gpus import DEFAULT_GPU

CHUNK = 8192  # deployments priced per table
log = logging.getLogger("piep.sweep")


def grid(*, models, tp, pp, dp, batch, prompt_len, gen_len, mode=(None,),
         engine=(None,)) -> list[dict[str, Any]]:
    """Every combination; `mode` and `engine` entries of None are left out of the rows."""
    keys = ("model", "tp", "pp", "dp", "batch", "prompt_len", "gen_len", "mode", "engine")
    return [{k: v for k, v in zip(keys, values) if v is not None or k not in ("mode", "engine")}
            for values in itertools.product(models, tp, pp, dp, batch, prompt_len, gen_len,
                                            mode, engine)]


def grid_key(configs: list[dict[str, Any]]) -> str:
    """What identifies a grid across machines: a hash of its configurations in order."""
    import hashlib
    import json
    text = json.dumps(configs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shard(configs: list[dict[str, Any]], index: int, of: int) -> list[dict[str, Any]]:
    """Shard `index` of `of`: every `of`-th configuration from the `index`-th (so the
    shards of a grid mixing cheap and dear points get alike work)."""
    return configs[index::of]


def merge(docs: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The sweep document of a whole grid from its shards' (each `(where, doc)`): their
    rows interleaved back into the grid's order, as one unsharded sweep writes it. Every
    shard of one grid (the same key, count and total) must be there once."""
    from piep.core.errors import ConfigError
    if not docs:
        raise ConfigError("--merge: give the shards' sweep files (JSON)")
    keys = set()
    for where, doc in docs:
        sh = doc.get("shard")
        if not isinstance(sh, dict):
            raise ConfigError(f"--merge {where}: not a shard's sweep (no 'shard'; write it "
                              f"with `piep sweep ... --shard I/N --out FILE.json`)")
        keys.add((sh["grid"], sh["of"], sh["configs"]))
    if len(keys) > 1:
        raise ConfigError(f"--merge: the files are shards of {len(keys)} different grids or "
                          f"shard counts; merge one grid's shards together")
    (key, of, total), = keys
    by_index = {}
    for where, doc in docs:
        i = doc["shard"]["index"]
        if i in by_index:
            raise ConfigError(f"--merge: shard {i}/{of} given twice ({by_index[i][0]}, "
                              f"{where})")
        if len(doc["rows"]) != len(range(i, total, of)):
            raise ConfigError(f"--merge {where}: shard {i}/{of} has {len(doc['rows'])} rows, "
                              f"not {len(range(i, total, of))}: an unfinished shard")
        by_index[i] = (where, doc)
    missing = sorted(set(range(of)) - set(by_index))
    if missing:
        raise ConfigError(f"--merge: shard(s) {', '.join(f'{i}/{of}' for i in missing)} "
                          f"missing")
    rows: list[dict[str, Any]] = [{}] * total
    for i, (_, doc) in by_index.items():
        rows[i::of] = doc["rows"]
    first = by_index[0][1]
    return {k: v for k, v in first.items() if k not in ("shard", "rows")} | {"rows": rows}


def sweep(configs: list[dict[str, Any]], *, gpu: str = DEFAULT_GPU, predictor: str = "auto",
          progress: bool = False) -> list[dict[str, Any]]:
    """One row per configuration: its prediction's summary, or `error` with the reason it
    was refused. Priced in chunks through the one pricing path (`piep.predict.pricing`)."""
    from piep import api
    from piep.core.gpus import load_gpu
    from piep.core.models import load_model
    from piep.predict.pricing import price
    from piep.predict.table import TableBuilder
    from piep.core.scenario import Scenario
    builder = TableBuilder()
    gpu_profile = load_gpu(gpu)
    tell = _Progress(len(configs)) if progress else None
    resolved: dict[str, Any] = {}  # engine -> a resolution its points are variants of
    specs: dict[str, Any] = {}  # model name or path -> its config, read once per sweep
    rows: list[dict[str, Any]] = []
    for start in range(0, len(configs), CHUNK):
        part = configs[start:start + CHUNK]
        by_model: dict[Any, tuple[list, list]] = {}  # one table per cost model
        for cfg in part:
            row = dict(cfg)
            try:
                model = cfg.get("model")
                if isinstance(model, str):
                    if model not in specs:
                        specs[model] = load_model(model)
                    cfg = {**cfg, "model": specs[model]}
                scn = Scenario.build(gpu=gpu_profile, **cfg)
                first = resolved.get(scn.engine.name)
                res = first.variant(scn) if first else api.resolve(scn, predictor)
                resolved.setdefault(scn.engine.name, res)
                cm = res.cost_model  # one object per engine and host: one table each
                deps, valid = by_model.setdefault(cm, ([], []))
                deps.append(res.deployment)
                valid.append((row, res))
            except PiepError as exc:
                row["error"] = str(exc)
            rows.append(row)
        for cm, (deps, valid) in by_model.items():
            # a serving engine's batch is a stream its scheduler runs, the tree priced here
            # attributing it (one engine a cost model: a table is all streams or none)
            streams = api.pricer(valid[0][1]).reads_tree
            priced = price(deps, cm, builder=builder, detail=streams)
            for i, ((row, res), summary) in enumerate(zip(valid, priced.summaries())):
                if not streams:
                    row.update(summary)
                    row["flags"] = row["flags"] + list(res.flags)  # as predict flags the point
                    continue
                try:
                    row.update(_summary(api.predict(res, hosts=False,
                                                    batch_tree=priced.prediction(i))))
                except PiepError as exc:
                    row["error"] = str(exc)
        if tell:
            tell(start + len(part))
    if tell:
        tell.close()
    return rows


class _Progress:
    """Where a long sweep is (stderr), at most once a second: a line redrawn on a
    terminal, a log line elsewhere; nothing for a sweep done within a second."""

    def __init__(self, total: int):
        import time
        self.total, self.clock = total, time.monotonic
        self.start = self.last = self.clock()
        self.shown = False

    def __call__(self, done: int) -> None:
        now = self.clock()
        if now - self.last < 1.0 or done >= self.total:
            return
        self.last, self.shown = now, True
        left = (now - self.start) / max(done, 1) * (self.total - done)
        text = f"sweep {done:,}/{self.total:,} points, ~{left:.0f} s left"
        if sys.stderr.isatty():
            sys.stderr.write(f"\r{text}   ")
            sys.stderr.flush()
        else:
            log.info(text)

    def close(self) -> None:
        if self.shown and sys.stderr.isatty():
            sys.stderr.write(f"\rsweep {self.total:,}/{self.total:,} points done\n")


def _summary(doc: dict[str, Any]) -> dict[str, Any]:
    """A sweep row's fields of a prediction document (`Priced.summary`'s)."""
    from piep.core.results import flat
    return {**flat(doc), "predictor": doc["predictor"], "flags": doc["flags"]}
