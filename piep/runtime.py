"""piep.runtime: apply a clock plan at phase boundaries (SPEC §2).

    from piep.runtime import PhaseClocks, load_plan
    with PhaseClocks(load_plan("plan.json"), devices, dry_run=True) as clocks:
        clocks.enter("prefill"); ...prefill...
        clocks.enter("decode");  ...decode...

`PhaseClocks.enter` is cheap and never blocks on a failed set (failures are collected);
the underlying `ClockRuntime` skips no-op changes and changes within the dwell time,
verifies each set, and restores the default clocks on exit, exception and SIGINT/SIGTERM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from piep.artifacts import read_json
from piep.errors import ArtifactError
from piep.plan.planner import PHASES, clock_for
from piep.plan.runtime import ClockRuntime, has_clock_permission

__all__ = ["ClockRuntime", "PhaseClocks", "load_plan", "default_state_dir",
           "has_clock_permission"]


def default_state_dir() -> Path:
    return Path.home() / ".cache" / "piep" / "clock-state"


def load_plan(path: str | Path) -> dict[str, Any]:
    plan = read_json(path, "piep.clock_plan", 1)
    ranks = plan.get("ranks")
    if not ranks or not all(e.get("phase") in PHASES for r in ranks for e in r["entries"]):
        raise ArtifactError(f"{path}: a clock plan needs ranks with entries for "
                            f"{'/'.join(PHASES)}")
    return plan


class PhaseClocks:
    """Hooks for a serving loop: `enter(phase)` at each phase boundary."""

    def __init__(self, plan: dict[str, Any], devices: list, *, rank: int = 0,
                 dry_run: bool = True, state_dir: Path | None = None, **runtime_kw: Any):
        self.plan = plan
        self.rank = rank
        dwell = plan.get("constraints", {}).get("min_dwell_s", 0.1)
        runtime_kw.setdefault("min_dwell_s", dwell)
        self.runtime = ClockRuntime(devices, state_dir or default_state_dir(), dry_run=dry_run,
                                    **runtime_kw)

    def __enter__(self) -> "PhaseClocks":
        self.runtime.start()
        return self

    def __exit__(self, *exc) -> None:
        self.runtime.stop()

    def enter(self, phase: str) -> bool:
        return self.runtime.apply(clock_for(self.plan, self.rank, phase), label=phase)

    def summary(self) -> dict[str, Any]:
        out = self.runtime.summary()
        out["plan_mhz"] = {ph: clock_for(self.plan, self.rank, ph) for ph in PHASES}
        t0 = self.runtime.changes[0].time_s if self.runtime.changes else 0.0
        out["log"] = [{"t_s": c.time_s - t0, "phase": c.label, "sm_mhz": c.sm_mhz,
                       "applied": c.applied, "reason": c.reason}
                      for c in self.runtime.changes if c.applied or c.reason == "dwell"]
        return out
