"""Runs of another harness: a model, a layout, lengths, energy and time, no `schema` (the
supplied tp=2 runs). A `ForeignRun` is one measured `generate()` call whose engine is
named as piep names it (`"engine": "hf-static"`) or as transformers with its cache mode."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from piep.core.engines import ENGINES, names
from piep.core.errors import ConfigError, require_fields

# what a run of another harness (tp=2 generate() calls, ...) states
FOREIGN_NEEDED = ("model", "engine", "tp", "batch", "prompt_len", "gen_len", "energy_j", "time_s")


@dataclass(frozen=True)
class ForeignRun:
    """One measured `generate()` call of another harness, loaded as it is (a model, a
    built-in engine, a layout, a workload, energy and time of the whole call; no prefill
    split, no host probe): the repeat of median energy, and its repeats."""
    model: str
    engine: str                 # a built-in engine of piep
    tp: int
    batch: int
    prompt_len: int
    gen_len: int
    energy_j: float
    time_s: float
    repeats: tuple[tuple[float, float], ...]  # (energy_j, time_s) of each repeat, in order
    source: str                 # file:line

    @property
    def label(self) -> str:
        """`engine tpN bB`, how reports name the run."""
        return f"{self.engine} tp{self.tp} b{self.batch}"

    def spread(self, key: str = "energy_j") -> float:
        """(max - min) / median of the repeats (0 without repeats)."""
        values = sorted(e if key == "energy_j" else t for e, t in self.repeats)
        return (values[-1] - values[0]) / values[len(values) // 2] if values else 0.0


def engine_of(rec: dict[str, Any]) -> str | None:
    """The built-in engine a record names: piep's name, or transformers and its mode."""
    name = rec.get("engine")
    if name in ENGINES:
        return name
    if name == "transformers":  # generate() by its cache: static (compiled) or dynamic
        mode = str(rec.get("mode", "")).lower()
        generate = names(runs_generate=True)
        for key, words in (("compiled_decode", ("static",)),
                           ("dynamic_cache", ("eager", "dynamic"))):
            if any(w in mode for w in words):
                return next(e for e in generate if getattr(ENGINES[e], key))
    return None


def foreign_run(rec: Any, where: str) -> ForeignRun:
    """One record, checked: one line names what is missing or wrong."""
    require_fields(rec, where, FOREIGN_NEEDED, states=True)
    engine = engine_of(rec)
    if engine is None or ENGINES[engine].kind == "stream":  # (a server's runs are its own records)
        raise ConfigError(f"{where}: engine {rec['engine']!r} (mode {rec.get('mode')!r}) is "
                          f"none of piep's batch engines ({', '.join(names(kind='batch'))}; "
                          f"or transformers with an eager or static-cache mode)")
    try:
        ints = {k: int(rec[k]) for k in ("tp", "batch", "prompt_len", "gen_len")}
        energy, time_s = float(rec["energy_j"]), float(rec["time_s"])
        repeats = tuple((float(r["energy_j"]), float(r["time_s"]))
                        for r in rec.get("repeats_in_order") or ())
    except (TypeError, ValueError, KeyError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if min(ints.values()) < 1 or not (energy > 0 and time_s > 0):
        raise ConfigError(f"{where}: tp, batch, prompt_len, gen_len must be >= 1 and "
                          f"energy_j, time_s > 0")
    return ForeignRun(model=str(rec["model"]), engine=engine, energy_j=energy, time_s=time_s,
                      repeats=repeats, source=where, **ints)


def is_foreign(path: str | Path) -> bool:
    """The file's first record is not one of piep's (it has no `schema`)."""
    from piep.core.artifacts import iter_jsonl
    from piep.core.errors import ArtifactError
    try:
        for _, first in iter_jsonl(path):
            return isinstance(first, Mapping) and "schema" not in first
    except ArtifactError:  # not JSON lines: read as piep's, which says what is wrong
        return False
    return False


def load_foreign(path: str | Path) -> list[ForeignRun]:
    """Every run of a JSONL file of another harness (one line per run)."""
    from piep.core.artifacts import iter_jsonl
    runs = [foreign_run(rec, f"{path}:{i}") for i, rec in iter_jsonl(path)]
    if not runs:
        raise ConfigError(f"{path}: no runs")
    return runs
