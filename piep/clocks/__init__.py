"""GPU clock control: the runtime that applies locked clocks safely, the phase hooks that
apply a clock plan in a serving loop, and the choice of devices (NVML or fakes).

    from piep.clocks import PhaseClocks, load_plan
    with PhaseClocks(load_plan("plan.json"), devices, dry_run=True) as clocks:
        clocks.enter("prefill"); ...prefill...
        clocks.enter("decode");  ...decode...
"""

from piep.clocks.access import ClockAccess, fake_access, nvml_access
from piep.clocks.phases import PhaseClocks, clock_for, load_plan
from piep.clocks.runtime import ClockRuntime, default_state_dir, has_clock_permission

__all__ = ["ClockAccess", "ClockRuntime", "PhaseClocks", "clock_for", "default_state_dir",
           "fake_access", "has_clock_permission", "load_plan", "nvml_access"]
