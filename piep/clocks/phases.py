"""Apply a clock plan at phase boundaries.

    from piep.clocks import PhaseClocks, load_plan
    with PhaseClocks(load_plan("plan.json"), devices, dry_run=True) as clocks:
        clocks.enter("prefill"); ...prefill...
        clocks.enter("decode");  ...decode...

`PhaseClocks.enter` is cheap and never blocks on a failed set (failures are collected);
with `background=True` it only queues the change and a worker thread makes the NVML
calls (milliseconds each) off the serving loop's critical path. The underlying
`ClockRuntime` skips no-op changes and changes within the dwell time, verifies each set,
and restores the default clocks on exit, exception and SIGINT/SIGTERM.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

from piep.core.artifacts import read_json
from piep.clocks.runtime import ClockRuntime, default_state_dir
from piep.core.errors import ArtifactError

PHASES = ("prefill", "decode")


def clock_for(plan: dict[str, Any], rank: int, phase: str) -> int | None:
    """The plan's SM clock for `rank` in `phase` (None: default clocks)."""
    ranks = plan["ranks"]
    entry = ranks[rank] if rank < len(ranks) else ranks[0]
    for e in entry["entries"]:
        if e["phase"] == phase:
            return e["sm_mhz"]
    return None


def load_plan(path: str | Path) -> dict[str, Any]:
    """A clock plan file, checked: ranks with an entry per phase, each a lockable SM clock
    in MHz (or null for the default clocks) within the plan GPU's range."""
    plan = read_json(path, "piep.clock_plan")
    ranks = plan.get("ranks")
    if not ranks or not all(isinstance(r, dict) and isinstance(r.get("entries"), list)
                            and all(isinstance(e, dict) and e.get("phase") in PHASES
                                    for e in r["entries"]) for r in ranks):
        raise ArtifactError(f"{path}: a clock plan needs ranks with entries for "
                            f"{'/'.join(PHASES)}")
    low, high = _clock_range(plan.get("gpu"))
    for r in ranks:
        for e in r["entries"]:
            mhz = e.get("sm_mhz")
            if mhz is not None and (isinstance(mhz, bool) or not isinstance(mhz, int)
                                    or not low <= mhz <= high):
                raise ArtifactError(f"{path}: sm_mhz={mhz!r} of phase {e['phase']} is not a "
                                    f"lockable SM clock ({low:.0f}-{high:.0f} MHz, or null)")
    return plan


def _clock_range(gpu: str | None) -> tuple[float, float]:
    from piep.core.errors import ConfigError
    from piep.core.gpus import load_gpu
    try:
        g = load_gpu(gpu or "")
        return g.sm_clock_min_mhz, g.sm_clock_max_mhz
    except ConfigError:
        return 1.0, 10000.0


class PhaseClocks:
    """Hooks for a serving loop: `enter(phase)` at each phase boundary."""

    def __init__(self, plan: dict[str, Any], devices: list, *, rank: int = 0,
                 dry_run: bool = True, state_dir: Path | None = None,
                 background: bool = False, **runtime_kw: Any):
        self.plan = plan
        self.rank = rank
        dwell = plan.get("constraints", {}).get("min_dwell_s", 0.1)
        runtime_kw.setdefault("min_dwell_s", dwell)
        self.runtime = ClockRuntime(devices, state_dir or default_state_dir(), dry_run=dry_run,
                                    **runtime_kw)
        self.background = background
        self._queue: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None

    def __enter__(self) -> "PhaseClocks":
        self.runtime.start()
        if self.background:
            self._worker = threading.Thread(target=self._run, name="piep-clocks", daemon=True)
            self._worker.start()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.flush()
        finally:
            self.runtime.stop()

    def _run(self) -> None:
        while True:
            phase = self._queue.get()
            try:
                if phase is None:
                    return
                self.runtime.apply(clock_for(self.plan, self.rank, phase), label=phase)
            except Exception as exc:  # a failed set must not stop the serving loop
                self.runtime.failures.append(f"{phase}: {exc}")
            finally:
                self._queue.task_done()

    def flush(self) -> None:
        """Wait until every queued change is made, and stop the worker."""
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join()
            self._worker = None

    def enter(self, phase: str) -> bool:
        """At a phase boundary: the plan's clock for `phase` (queued in the background
        mode, where the return value is always True)."""
        if self._worker is not None:
            self._queue.put(phase)
            return True
        return self.runtime.apply(clock_for(self.plan, self.rank, phase), label=phase)

    def summary(self) -> dict[str, Any]:
        out = self.runtime.summary()
        out["plan_mhz"] = {ph: clock_for(self.plan, self.rank, ph) for ph in PHASES}
        t0 = self.runtime.changes[0].time_s if self.runtime.changes else 0.0
        out["log"] = [{"t_s": c.time_s - t0, "phase": c.label, "sm_mhz": c.sm_mhz,
                       "applied": c.applied, "reason": c.reason}
                      for c in self.runtime.changes if c.applied or c.reason == "dwell"]
        return out
