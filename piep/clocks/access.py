"""Which clock devices a command drives: NVML's, or fakes the caller injects (tests and
dry runs never touch a GPU's clocks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from piep.core.errors import ConfigError


@dataclass(frozen=True)
class ClockAccess:
    """`devices(indices)` opens clock devices; `permission()` says whether sets may be made;
    `fake` marks devices that run no kernels (a frequency-model stand-in measures them)."""
    devices_for: Callable[[list[int]], list]
    permission: Callable[[], bool]
    fake: bool = False

    def devices(self, gpus: str) -> list:
        """Devices of a comma-separated index list such as `0,1`."""
        try:
            indices = [int(x) for x in gpus.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--gpus={gpus!r}: give indices like 0,1") from None
        if not indices or any(i < 0 for i in indices):
            raise ConfigError(f"--gpus={gpus!r}: give indices like 0,1")
        return self.devices_for(indices)


def nvml_access() -> ClockAccess:
    from piep.clocks.runtime import has_clock_permission

    def devices(indices: list[int]) -> list:
        from piep.device.nvml import NvmlDevice
        return [NvmlDevice(index=i) for i in indices]
    return ClockAccess(devices, has_clock_permission)


def fake_access(log_path: str | None = None, *, permission: bool = True) -> ClockAccess:
    """Fake clock devices recording every set (to `log_path` too, for subprocess tests)."""
    from piep.device.fake import FakeClockDevice

    def devices(indices: list[int]) -> list:
        return [FakeClockDevice(f"GPU-fake-{i}", log_path=log_path) for i in indices]
    return ClockAccess(devices, lambda: permission, fake=True)
