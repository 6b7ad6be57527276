"""Tick-aligned energy windows on NVML's total-energy counter (SPEC §3).

The counter steps every ~100 ms. A window waits for a step, runs the work, waits for the
next step, and subtracts the alignment waits before and after the work at the GPU's idle
power measured the same way. Nothing polls NVML while the work runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Protocol

from piep.device import clock as host_clock
from piep.core.errors import DeviceError


class EnergyCounter(Protocol):
    def energy_mj(self) -> int: ...


@dataclass(frozen=True)
class Tick:
    time_s: float        # when the changed value was read
    energy_mj: int
    poll_s: float        # duration of the read that saw the change (timing uncertainty)


@dataclass(frozen=True)
class Window:
    energy_j: float      # work energy: counter delta minus idle energy of the alignment waits
    duration_s: float    # work duration (host clock, after a device synchronize)
    raw_delta_j: float   # counter delta, tick to tick
    pre_wait_s: float
    post_wait_s: float
    idle_power_w: float
    bound_j: float       # timing uncertainty of the two tick edges, priced at idle power
    short: bool          # the work lasted less than one tick: flagged, never trusted alone

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TickMeter:
    """Rank-local meter of one GPU. `clock` and `sleep` are injectable for fakes."""

    def __init__(self, counter: EnergyCounter, *, clock: Callable[[], float] = host_clock.now,
                 sleep: Callable[[float], None] = host_clock.sleep, poll_interval_s: float = 0.0,
                 tick_timeout_s: float = 1.0, tick_s: float = 0.1):
        self.counter = counter
        self.clock = clock
        self.sleep = sleep
        self.poll_interval_s = poll_interval_s
        self.tick_timeout_s = tick_timeout_s
        self.tick_s = tick_s

    def wait_tick(self) -> Tick:
        start = self.clock()
        last = self.counter.energy_mj()
        while True:
            before = self.clock()
            value = self.counter.energy_mj()
            after = self.clock()
            if value != last:
                return Tick(after, value, after - before)
            if after - start > self.tick_timeout_s:
                raise DeviceError(f"energy counter did not change for {self.tick_timeout_s:.1f} s;"
                                  f" this GPU's NVML energy counter is unusable")
            if self.poll_interval_s:
                self.sleep(self.poll_interval_s)

    def idle_power_w(self, duration_s: float = 1.0) -> float:
        """Tick-to-tick power over ~`duration_s` of doing nothing (context open)."""
        t0 = self.wait_tick()
        self.sleep(duration_s)
        t1 = self.wait_tick()
        return (t1.energy_mj - t0.energy_mj) / 1000.0 / (t1.time_s - t0.time_s)

    def measure(self, work: Callable[[], None], *, idle_power_w: float,
                before: Callable[[], None] | None = None) -> Window:
        """`work` must end with a device synchronize; `before` (a barrier) runs after the
        first tick, inside the correction."""
        t0 = self.wait_tick()
        if before is not None:
            before()
        start = self.clock()
        work()
        return self.close(t0, start, self.clock(), idle_power_w=idle_power_w)

    def close(self, t0: Tick, start: float, end: float, *, idle_power_w: float) -> Window:
        """The window of work that ran from `start` to `end` after the tick `t0`: waits
        for the next tick and subtracts both alignment waits at idle power."""
        t1 = self.wait_tick()
        pre, post = start - t0.time_s, t1.time_s - end
        raw = (t1.energy_mj - t0.energy_mj) / 1000.0
        return Window(energy_j=raw - idle_power_w * (pre + post), duration_s=end - start,
                      raw_delta_j=raw, pre_wait_s=pre, post_wait_s=post,
                      idle_power_w=idle_power_w,
                      bound_j=idle_power_w * (t0.poll_s + t1.poll_s),
                      short=end - start < self.tick_s)
