"""A replayable fake GPU: an energy counter that steps every `tick_s` like NVML's, driven by
a power function of time. Used by tests, dry runs and the meter's own checks."""

from __future__ import annotations

from typing import Callable


class FakeClock:
    """Virtual time: `sleep` advances it, so tests run instantly and deterministically."""

    def __init__(self, start: float = 1000.0, poll_cost_s: float = 0.004):
        self.now = start
        self.poll_cost_s = poll_cost_s

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)


class FakeDevice:
    """Counter in mJ, updated on tick boundaries with the exact integral of `power_fn` (from
    the first tick read: its counter starts there, as a real one counts from some start)."""

    def __init__(self, power_fn: Callable[[float], float], clock: FakeClock | None = None, *,
                 tick_s: float = 0.1, phase_s: float = 0.037, uuid: str = "GPU-fake-0",
                 name: str = "Fake H200", step_s: float = 0.001):
        self.power_fn = power_fn
        self.clock = clock or FakeClock()
        self.tick_s = tick_s
        self.phase_s = phase_s
        self.uuid = uuid
        self.name = name
        self.index = 0
        self.step_s = step_s
        self.sm_clock = 1980.0
        self.locked: tuple[int, int] | None = None

    def energy_mj(self) -> int:
        t = self.clock()
        self.clock.sleep(self.clock.poll_cost_s)  # an NVML call costs time
        last_tick = ((t - self.phase_s) // self.tick_s) * self.tick_s + self.phase_s
        return int(round(self._integral_cached(last_tick) * 1000))

    _cache: dict[float, float]

    def _integral_cached(self, t: float) -> float:
        cache = self.__dict__.setdefault("_cache", {})
        key = round(t, 9)
        if key not in cache:
            # incremental from the largest cached point below t
            below = [k for k in cache if k <= key]
            if below:
                k0 = max(below)
                n0, n1 = int(round(k0 / self.step_s)), int(t / self.step_s)
                cache[key] = cache[k0] + sum(self.power_fn(i * self.step_s)
                                             for i in range(n0, n1)) * self.step_s
            else:  # the counter's origin: the first tick read (as NVML's, since some start)
                cache[key] = 0.0
        return cache[key]

    def power_w(self) -> float:
        return self.power_fn(self.clock())

    averaged_power_w = power_w

    def temperature_c(self) -> float:
        return 35.0

    def sm_clock_mhz(self) -> float:
        return self.sm_clock

    def mem_clock_mhz(self) -> float:
        return 3201.0

    def power_limit_w(self) -> float:
        return 700.0

    def snapshot(self) -> dict:
        return {"temperature_c": 35.0, "sm_clock_mhz": self.sm_clock, "mem_clock_mhz": 3201.0,
                "power_w": self.power_w()}



class FakeClockDevice:
    """Records clock sets/resets (optionally to a file, for subprocess tests); can refuse
    permission or report a clock that ignores the lock."""

    def __init__(self, uuid: str = "GPU-fake-0", *, log_path=None, ignore_lock: bool = False,
                 no_permission: bool = False, default_mhz: float = 1980.0):
        self.uuid = uuid
        self.calls: list[tuple] = []
        self.log_path = log_path
        self.ignore_lock = ignore_lock
        self.no_permission = no_permission
        self.default_mhz = default_mhz
        self.locked: tuple[int, int] | None = None

    def _record(self, *call) -> None:
        self.calls.append(call)
        if self.log_path:
            with open(self.log_path, "a") as fh:
                fh.write(" ".join(map(str, call)) + "\n")

    def set_locked_clocks(self, min_mhz: int, max_mhz: int) -> None:
        from piep.core.errors import DeviceError
        if self.no_permission:
            raise DeviceError("setting GPU clocks needs root or CAP_SYS_ADMIN")
        self.locked = (min_mhz, max_mhz)
        self._record("set", self.uuid, min_mhz, max_mhz)

    def reset_locked_clocks(self) -> None:
        self.locked = None
        self._record("reset", self.uuid)

    power_limit: float | None = None

    def set_power_limit_w(self, watts: float) -> None:
        from piep.core.errors import DeviceError
        if self.no_permission:
            raise DeviceError("setting a GPU power limit needs root or CAP_SYS_ADMIN")
        self.power_limit = float(watts)
        self._record("power", self.uuid, int(watts))

    def reset_power_limit(self) -> None:
        self.power_limit = None
        self._record("power-reset", self.uuid)

    def sm_clock_mhz(self) -> float:
        if self.locked and not self.ignore_lock:
            return float(self.locked[1])
        return self.default_mhz
