"""Independent fits (held-out folds) in worker processes, one per core: forked from the
process that holds what they share (the replays' iteration grids and their module
outputs), so a worker starts with them. Where the platform does not fork (not Linux) or
cannot start workers (no /dev/shm), with one core or one fold, or with
`PIEP_FIT_WORKERS=1`, the folds run here, one after another: the same numbers either way
(each fold's fit reads only what it is given).

A forked worker evaluates the module models' GBDTs with numpy, never LightGBM: LightGBM's
OpenMP threads do not survive a fork (a worker that entered them could hang).

`Pace` logs each fold as it ends, with the time left at the pace so far (on `piep
train`'s log, stderr)."""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, Callable, Iterator, Sequence

log = logging.getLogger("piep.train")
WORKERS_ENV = "PIEP_FIT_WORKERS"  # at most this many worker processes (1: none)

_task: tuple[Callable[[Any], Any], Sequence[Any]] | None = None  # a map's, while it runs


def workers(n_items: int) -> int:
    """How many processes map `n_items` items: usable cores, at most `PIEP_FIT_WORKERS`,
    at most the items; 1 where the platform does not fork."""
    if not sys.platform.startswith("linux"):
        return 1
    cores = len(os.sched_getaffinity(0))
    limit = os.environ.get(WORKERS_ENV, "").strip()
    if limit:
        try:
            cores = min(cores, max(1, int(limit)))
        except ValueError:
            from piep.core.errors import ConfigError
            raise ConfigError(f"{WORKERS_ENV}={limit!r} is not a number of processes; give "
                              f"an integer >= 1 (1: no worker processes)") from None
    return max(1, min(cores, n_items))


def fold_map(fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Any]:
    """fn(item) of each item, in order (each yielded when it and those before it are
    done), by forked workers (`workers`)."""
    n = workers(len(items))
    if n == 1:
        yield from map(fn, items)
        return
    import multiprocessing
    global _task
    _task = (fn, items)  # the workers read it as forked; nothing of it is pickled
    try:
        try:
            pool = multiprocessing.get_context("fork").Pool(n, initializer=_without_lightgbm)
        except OSError:  # no semaphores here (a container without /dev/shm): one process
            yield from map(fn, items)
            return
        with pool:
            yield from pool.imap(_run, range(len(items)))
    finally:
        _task = None


def _run(i: int) -> Any:
    fn, items = _task
    return fn(items[i])


def _without_lightgbm() -> None:
    from piep.predict import gbdt
    gbdt.MANY_ROWS = gbdt.SOME_ROWS = sys.maxsize


class Pace:
    """Folds of one fit, each logged when done with an estimate of the time left."""

    def __init__(self, what: str):
        self.what, self.start = what, time.monotonic()

    def __call__(self, i: int, n: int, name: str) -> None:
        """Fold `i` of `n` (from 1), holding out `name`, is done."""
        left = (time.monotonic() - self.start) / i * (n - i)
        log.info("%s %d/%d (held out: %s), ~%.0f s left", self.what, i, n, name, left)
