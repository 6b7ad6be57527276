"""Request traces: what a server is asked to do, request by request.

A trace is JSONL or CSV with `arrival_s`, `prompt_len`, `gen_len` (= max_new_tokens; the
first token comes from the prefill) and an optional `id` (echoed as given); extra columns
are ignored; ties (bursts) are valid; arrivals count from the first. Or drawn: Poisson
arrivals at a rate, lengths from a number or `lognormal:MEDIAN:SIGMA[:MAX]` /
`uniform:LO:HI`, reproducible from a seed.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from piep.core.config import LIMITS
from piep.core.errors import ConfigError

# the longest stream priced: a month of arrivals. Beyond it the window is the boards' idle
# power over the gaps, not serving (a rate of 1e-9/s or an arrival at 1e12 s priced decades
# of idle); a longer log is priced in parts
MAX_SPAN_S = 30 * 86400.0
# the most requests a stream holds (a million are priced in ~20 s; a longer log in parts)
MAX_REQUESTS = 1_000_000


@dataclass(frozen=True)
class Trace:
    """Requests sorted by arrival (ties keep their order)."""
    ids: tuple[str, ...]
    arrival_s: np.ndarray   # from the first arrival (the first is 0)
    prompt_len: np.ndarray  # int
    gen_len: np.ndarray     # int, >= 1
    was_sorted: bool = True  # False: the rows came out of arrival order (flagged)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def gen_tokens(self) -> int:
        """Output tokens of every request (the prefill's first included)."""
        return int(self.gen_len.sum())

    def rows(self) -> list[dict]:
        """The requests as rows: id, arrival_s, prompt_len, gen_len."""
        return [{"id": i, "arrival_s": a, "prompt_len": p, "gen_len": g}
                for i, a, p, g in zip(self.ids, self.arrival_s.tolist(),
                                      self.prompt_len.astype(np.int64).tolist(),
                                      self.gen_len.astype(np.int64).tolist())]

    def to_jsonl(self) -> str:
        """The rows as JSONL (what --trace reads back)."""
        return "".join(json.dumps(r) + "\n" for r in self.rows())


def make_trace(arrival_s, prompt_len, gen_len, ids=None, *, where: str = "trace") -> Trace:
    """Validate and sort; one clear error for the first bad row."""
    a = np.asarray(arrival_s, dtype=float)
    p = np.asarray(prompt_len, dtype=float)
    g = np.asarray(gen_len, dtype=float)
    n = len(a)
    if n == 0:
        raise ConfigError(f"{where}: no requests")
    if n > MAX_REQUESTS:
        raise ConfigError(f"{where}: {n:,} requests; piep prices at most {MAX_REQUESTS:,} in "
                          f"one stream: price the trace in parts")
    ids = [str(i) for i in (ids if ids is not None else range(n))]
    for name, col, low in (("arrival_s", a, 0), ("prompt_len", p, 1), ("gen_len", g, 1)):
        bad = ~np.isfinite(col) | (col < low)
        if name != "arrival_s":
            bad |= (col != np.round(col)) | (col > LIMITS[name])
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            need = "a finite number >= 0" if name == "arrival_s" else \
                f"an integer from 1 to {LIMITS[name]:,}"
            raise ConfigError(f"{where}: request {ids[i]}: {name}={float(col[i])!r} must be {need}")
    seen: dict[str, int] = {}
    for i, rid in enumerate(ids):
        if rid in seen:
            raise ConfigError(f"{where}: requests {seen[rid] + 1} and {i + 1} have the same id "
                              f"{rid!r}; give each request its own id (or none)")
        seen[rid] = i
    span = float(a.max() - a.min())
    if span > MAX_SPAN_S:
        raise ConfigError(f"{where}: the arrivals span {span / 86400:.3g} days; piep prices at "
                          f"most {MAX_SPAN_S / 86400:.0f} days of arrivals (beyond that the "
                          f"answer is the boards' idle power): raise the rate or split the trace")
    order = np.argsort(a, kind="stable")
    a = a[order] - a[order][0]
    return Trace(tuple(ids[i] for i in order), a, p[order].astype(np.int64),
                 g[order].astype(np.int64), was_sorted=bool(np.all(np.diff(order) > 0)))


def read_trace(path: str | Path) -> Trace:
    """A trace file: JSONL (one object per line) or CSV with a header."""
    import itertools

    from piep.core.artifacts import iter_jsonl, read_text
    if Path(path).suffix.lower() == ".csv":
        source = csv.DictReader(io.StringIO(read_text(path)))
    else:
        source = (row for _, row in iter_jsonl(path))
    rows: list = list(itertools.islice(source, MAX_REQUESTS + 1))  # (a row past: too many)
    if len(rows) > MAX_REQUESTS:
        raise ConfigError(f"{path}: more than {MAX_REQUESTS:,} requests; piep prices at most "
                          f"{MAX_REQUESTS:,} in one stream: price the trace in parts")
    need = ("arrival_s", "prompt_len", "gen_len")
    for i, r in enumerate(rows, 1):
        missing = [k for k in need if k not in r or r[k] in (None, "")] \
            if isinstance(r, dict) else []
        if not isinstance(r, dict) or missing:
            raise ConfigError(f"{path}: row {i} lacks {', '.join(missing) or 'fields'}; a trace "
                              f"row has arrival_s, prompt_len, gen_len and optionally id")

    def num(v):
        try:
            return float(v)
        except (TypeError, ValueError):
            return math.nan
    ids = [str(r["id"]) if r.get("id") not in (None, "") else str(i) for i, r in enumerate(rows)]
    return make_trace([num(r["arrival_s"]) for r in rows], [num(r["prompt_len"]) for r in rows],
                      [num(r["gen_len"]) for r in rows], ids, where=str(path))


def parse_dist(text: str, what: str):
    """A length distribution: `N`, `lognormal:MEDIAN:SIGMA[:MAX]` or `uniform:LO:HI`;
    returns draw(rng, n) -> integer array >= 1."""
    parts = str(text).split(":")
    try:
        vals = [float(x) for x in parts[1:]] if len(parts) > 1 else [float(parts[0])]
    except ValueError:
        vals = []
    kind = parts[0] if len(parts) > 1 else "fixed"
    ok = {"fixed": (1, 1), "lognormal": (2, 3), "uniform": (2, 2)}.get(kind)
    if ok is None or not ok[0] <= len(vals) <= ok[1] or not all(math.isfinite(v) for v in vals) \
            or any(v <= 0 for v in vals[:1]) or (kind != "fixed" and vals[1] < 0):
        raise ConfigError(f"{what}={text!r}: give a number, lognormal:MEDIAN:SIGMA[:MAX] or "
                          f"uniform:LO:HI (positive)")
    if kind == "uniform" and vals[1] < vals[0]:
        raise ConfigError(f"{what}={text!r}: uniform needs LO <= HI")
    if kind == "lognormal" and len(vals) == 3 and vals[2] < vals[0]:
        raise ConfigError(f"{what}={text!r}: MAX {vals[2]:g} is below the MEDIAN {vals[0]:g} "
                          f"(most draws would be cut to MAX); give MAX >= MEDIAN")

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        if kind == "fixed":
            x = np.full(n, vals[0])
        elif kind == "uniform":
            x = rng.uniform(vals[0], vals[1], n)
        else:
            x = np.exp(rng.normal(math.log(vals[0]), vals[1], n))
            if len(vals) == 3:
                x = np.minimum(x, vals[2])
        return np.maximum(1, np.round(x)).astype(np.int64)
    return draw


def poisson_trace(*, rate_per_s: float, requests: int, prompt_len: str, gen_len: str,
                  seed: int = 0) -> Trace:
    """Poisson arrivals at `rate_per_s`, lengths drawn from their distributions."""
    if not (isinstance(rate_per_s, (int, float)) and math.isfinite(rate_per_s) and rate_per_s > 0):
        raise ConfigError(f"--rate={rate_per_s!r} must be a positive number of requests per second")
    if not (isinstance(requests, int) and 1 <= requests <= MAX_REQUESTS):
        raise ConfigError(f"--requests={requests!r} must be an integer from 1 to "
                          f"{MAX_REQUESTS:,} (a longer stream: price it in parts)")
    if not (isinstance(seed, int) and 0 <= seed < 2 ** 63):
        raise ConfigError(f"--seed={seed!r} must be a whole number >= 0")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate_per_s, requests)
    gaps[0] = 0.0
    p = parse_dist(prompt_len, "--prompt-len")(rng, requests)
    g = parse_dist(gen_len, "--gen-len")(rng, requests)
    return make_trace(np.cumsum(gaps), p, g, where=f"--rate {rate_per_s:g} --requests {requests}")
