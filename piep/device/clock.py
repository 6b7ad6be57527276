"""The host clock of piep's GPU-side code: every duration a measurement takes (energy
windows, warm-ups, host probes, budgets) is read through `now()` and waited through
`sleep()`.

Wall time by default. A test installs a virtual clock (`using`), e.g.
`piep.device.fake.FakeClock` or one that advances with the work done, so durations and
the powers computed from them are the same on any machine under any load.
"""

from __future__ import annotations

import contextlib
import time
from typing import Iterator, Protocol


class Clock(Protocol):
    def __call__(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class WallClock:
    """Seconds of `time.perf_counter`; `sleep` is `time.sleep`."""

    poll_cost_s = 0.0

    def __call__(self) -> float:
        return time.perf_counter()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(seconds, 0.0))


_installed: list[Clock] = [WallClock()]


def now() -> float:
    """Seconds on the installed clock (only differences mean anything)."""
    return _installed[-1]()


def sleep(seconds: float) -> None:
    """Wait `seconds` on the installed clock."""
    _installed[-1].sleep(seconds)


@contextlib.contextmanager
def using(clock: Clock) -> Iterator[Clock]:
    """`clock` is the host clock inside the block (every thread's)."""
    _installed.append(clock)
    try:
        yield clock
    finally:
        _installed.remove(clock)
