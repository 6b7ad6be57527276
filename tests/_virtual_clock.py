"""Virtual host time for the GPU-side code on the CPU: durations advance with the work done,
not with the machine's speed, so tests of measured windows hold on a loaded machine."""

from __future__ import annotations

import contextlib

from torch.overrides import TorchFunctionMode

from piep.device import clock as host_clock
from piep.device.fake import FakeClock


class WorkClock(FakeClock):
    """Every torch call (function, method, operator, collective) costs `op_s` of virtual
    time and every read of the clock `read_s` (so it is strictly increasing); sleeps advance
    it. `running()` installs it as piep's host clock and counts the calls."""

    def __init__(self, op_s: float = 1e-4, read_s: float = 1e-6, poll_cost_s: float = 5e-4):
        super().__init__(start=0.0, poll_cost_s=poll_cost_s)
        self.op_s, self.read_s = op_s, read_s

    def __call__(self) -> float:
        self.now += self.read_s
        return self.now

    @contextlib.contextmanager
    def running(self):
        clock = self

        class Work(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                clock.now += clock.op_s
                return func(*args, **(kwargs or {}))
        with host_clock.using(self), Work():
            yield self
