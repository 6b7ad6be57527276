"""Held-out folds in worker processes (piep.fit.workers): the same answers, in order, as
one process gives; forked workers never enter LightGBM; PIEP_FIT_WORKERS limits them."""

import os
import sys

import pytest

from piep.core.errors import ConfigError
from piep.fit import workers

pytestmark = pytest.mark.replay

FORKS = sys.platform.startswith("linux") and len(os.sched_getaffinity(0)) > 1


def _square(x):
    from piep.predict import gbdt
    return os.getpid(), x * x, gbdt.MANY_ROWS, gbdt.SOME_ROWS


def _fails(x):
    if x == 3:
        raise ValueError("fold 3 failed")
    return x


def test_folds_come_back_in_order_from_workers_that_never_enter_lightgbm(monkeypatch):
    monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    items = list(range(12))
    out = list(workers.fold_map(_square, items))
    assert [o[1] for o in out] == [x * x for x in items]
    pids = {o[0] for o in out}
    if FORKS:  # worker processes, not this one, each on numpy's GBDT walk
        assert os.getpid() not in pids and len(pids) <= workers.workers(len(items))
        assert workers.workers(len(items)) > 1
        assert all(o[2] == o[3] == sys.maxsize for o in out)
    from piep.predict import gbdt
    assert gbdt.MANY_ROWS < sys.maxsize  # this process keeps LightGBM for many rows


def test_one_worker_or_one_fold_runs_here(monkeypatch):
    monkeypatch.setenv(workers.WORKERS_ENV, "1")
    assert {o[0] for o in workers.fold_map(_square, [1, 2, 3])} == {os.getpid()}
    monkeypatch.delenv(workers.WORKERS_ENV)
    assert workers.workers(1) == 1
    assert [o[0] for o in workers.fold_map(_square, [5])] == [os.getpid()]


def test_a_failing_fold_fails_the_map_and_a_bad_limit_says_what_to_give(monkeypatch):
    monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    with pytest.raises(ValueError, match="fold 3 failed"):
        list(workers.fold_map(_fails, range(6)))
    monkeypatch.setenv(workers.WORKERS_ENV, "two")
    with pytest.raises(ConfigError, match="PIEP_FIT_WORKERS='two'.*integer >= 1"):
        workers.workers(4)


def test_without_semaphores_the_folds_run_here(monkeypatch):
    """Where worker processes cannot be started (a container without /dev/shm), the
    folds run in this process."""
    import multiprocessing.context
    monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    monkeypatch.setattr(workers, "workers", lambda n: 2)

    def no_pool(*args, **kwargs):
        raise OSError(38, "Function not implemented")
    monkeypatch.setattr(multiprocessing.context.ForkContext, "Pool", no_pool)
    out = list(workers.fold_map(_square, [1, 2, 3]))
    assert [o[1] for o in out] == [1, 4, 9] and {o[0] for o in out} == {os.getpid()}
