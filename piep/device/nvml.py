"""NVML through nvidia-ml-py: the only import of pynvml in piep. Read-only here except
for the clock setters used by the runtime (piep.clocks), which go through
`NvmlDevice.set_locked_clocks` / `reset_locked_clocks`."""

from __future__ import annotations

import threading

import pynvml

from piep.core.errors import DeviceError

_init_lock = threading.Lock()
_initialized = False
FIELD_POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT


def _ensure_init() -> None:
    global _initialized
    with _init_lock:
        if not _initialized:
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as exc:
                raise DeviceError(f"NVML could not start ({exc}); is the NVIDIA driver loaded?") from None
            _initialized = True


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_gpus() -> list[dict]:
    _ensure_init()
    out = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        out.append({"index": i, "name": _text(pynvml.nvmlDeviceGetName(h)),
                    "uuid": _text(pynvml.nvmlDeviceGetUUID(h)),
                    "memory_gib": pynvml.nvmlDeviceGetMemoryInfo(h).total / 1024 ** 3})
    return out


def driver_version() -> str:
    _ensure_init()
    return _text(pynvml.nvmlSystemGetDriverVersion())


class NvmlDevice:
    """One GPU, found by UUID (the CUDA device's UUID) or NVML index."""

    def __init__(self, *, uuid: str | None = None, index: int | None = None):
        _ensure_init()
        if uuid is not None:
            key = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
            try:
                self.handle = pynvml.nvmlDeviceGetHandleByUUID(key.encode())
            except pynvml.NVMLError as exc:
                raise DeviceError(f"no GPU with UUID {key} ({exc})") from None
        else:
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index or 0)
        self.uuid = _text(pynvml.nvmlDeviceGetUUID(self.handle))
        self.name = _text(pynvml.nvmlDeviceGetName(self.handle))
        self.index = pynvml.nvmlDeviceGetIndex(self.handle)

    def energy_mj(self) -> int:
        return int(pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def power_w(self) -> float:
        """Instantaneous power (field 186) where supported, else the averaged reading."""
        try:
            vals = pynvml.nvmlDeviceGetFieldValues(self.handle, [FIELD_POWER_INSTANT])
            if vals[0].nvmlReturn == 0:
                return vals[0].value.uiVal / 1000.0
        except pynvml.NVMLError:
            pass
        return pynvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0

    def averaged_power_w(self) -> float:
        return pynvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0

    def temperature_c(self) -> float:
        return float(pynvml.nvmlDeviceGetTemperature(self.handle, pynvml.NVML_TEMPERATURE_GPU))

    def sm_clock_mhz(self) -> float:
        return float(pynvml.nvmlDeviceGetClockInfo(self.handle, pynvml.NVML_CLOCK_SM))

    def mem_clock_mhz(self) -> float:
        return float(pynvml.nvmlDeviceGetClockInfo(self.handle, pynvml.NVML_CLOCK_MEM))

    def memory_used_gib(self) -> float:
        return pynvml.nvmlDeviceGetMemoryInfo(self.handle).used / 1024 ** 3

    def power_limit_w(self) -> float:
        return pynvml.nvmlDeviceGetPowerManagementLimit(self.handle) / 1000.0

    def clock_event_reasons(self) -> int:
        return int(pynvml.nvmlDeviceGetCurrentClocksEventReasons(self.handle))

    def snapshot(self) -> dict:
        return {"temperature_c": self.temperature_c(), "sm_clock_mhz": self.sm_clock_mhz(),
                "mem_clock_mhz": self.mem_clock_mhz(), "power_w": self.power_w()}

    # --- setters: used only by the clock runtime, never by measurement code ---------
    def set_locked_clocks(self, min_mhz: int, max_mhz: int) -> None:
        try:
            pynvml.nvmlDeviceSetGpuLockedClocks(self.handle, int(min_mhz), int(max_mhz))
        except pynvml.NVMLError_NoPermission:
            raise DeviceError("setting GPU clocks needs root or CAP_SYS_ADMIN") from None

    def reset_locked_clocks(self) -> None:
        try:
            pynvml.nvmlDeviceResetGpuLockedClocks(self.handle)
        except pynvml.NVMLError_NoPermission:
            raise DeviceError("resetting GPU clocks needs root or CAP_SYS_ADMIN") from None

    def set_power_limit_w(self, watts: float) -> None:
        try:
            pynvml.nvmlDeviceSetPowerManagementLimit(self.handle, int(watts * 1000))
        except pynvml.NVMLError_NoPermission:
            raise DeviceError("setting a GPU power limit needs root or CAP_SYS_ADMIN") from None

    def reset_power_limit(self) -> None:
        self.set_power_limit_w(pynvml.nvmlDeviceGetPowerManagementDefaultLimit(self.handle) / 1000)
