"""The device seam: the only place that talks to NVML (piep.device.nvml, lazily).

`EnergyDevice` is what the meter and the runtime need of a GPU; `FakeDevice` replays a
power trace for tests and dry runs.
"""

from __future__ import annotations

import logging

log = logging.getLogger("piep.device")


def list_gpus() -> list[dict]:
    """GPUs NVML sees ([] without pynvml or a driver): index, name, uuid, memory."""
    try:
        from piep.device.nvml import nvml_gpus
    except ImportError:
        return []
    try:
        return nvml_gpus()
    except Exception as exc:  # no driver, no library: nothing seen, say why in debug logs
        log.debug("NVML unavailable: %s", exc)
        return []
