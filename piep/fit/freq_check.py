"""`piep plan --validate`: sweep locked SM clocks on a machine where that is allowed,
measure a compute-bound and a memory-bound reference kernel at each clock, refit the
frequency model. Never run on the lent GPUs (clocks are read-only there); tested against
fake devices."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from piep.clocks import ClockAccess
from piep.core.errors import ConfigError
from piep.fit.freq import refit_from_sweep, single_leaf
from piep.plan.freq import FreqModel, _at, load_freq_model, user_freq_model_path, write_freq_model

KINDS = ("compute", "memory")
# reference kernels: 8192^3 bf16 GEMM; 1 GiB device copy (read + write)
GEMM_N = 8192
COPY_BYTES = 2 * 1024 ** 3


def sweep(runtime, measure: Callable[[str], tuple[float, float]], clocks) -> list[dict]:
    """Lock each clock (highest first), measure every reference kernel; restore after."""
    rows = []
    with runtime:
        for f in sorted(clocks, reverse=True):
            runtime.apply(int(f), label=f"sweep {int(f)}")
            for kind in KINDS:
                t, e = measure(kind)
                rows.append({"kind": kind, "sm_mhz": float(f), "time_s": t, "energy_j": e,
                             "bytes": COPY_BYTES if kind == "memory" else 0.0})
    return rows


class ModelKernels:
    """A fake kernel runner: times and energies from a given ('true') frequency model at
    the clock its fake device is locked to (tests and fake clock devices)."""

    def __init__(self, truth: FreqModel, device):
        self.truth = truth
        self.device = device

    def __call__(self, kind: str) -> tuple[float, float]:
        f = float(self.device.sm_clock_mhz())
        t0, p0 = {"compute": (1.0e-3, 690.0), "memory": (0.5e-3, 460.0)}[kind]
        lv = single_leaf(kind, {"time_s": t0, "energy_j": t0 * p0,
                                "bytes": COPY_BYTES if kind == "memory" else 0.0})
        t, e = _at(self.truth, lv, np.array([[self.truth.f_max]]), np.array([[f]]))
        return float(t[0, 0]), float(e[0, 0])


def torch_kernels(device_index: int, meter) -> Callable[[str], tuple[float, float]]:
    """Real reference kernels on a GPU, energy from the tick-aligned meter."""
    import torch
    dev = torch.device("cuda", device_index)
    a = torch.randn(GEMM_N, GEMM_N, device=dev, dtype=torch.bfloat16)
    src = torch.empty(COPY_BYTES // 2, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)

    def run(kind: str) -> tuple[float, float]:
        op = (lambda: torch.mm(a, a)) if kind == "compute" else (lambda: dst.copy_(src))
        for _ in range(5):
            op()
        torch.cuda.synchronize(dev)
        calls = 200

        def work():
            for _ in range(calls):
                op()
            torch.cuda.synchronize(dev)
        res = meter.measure(work)
        return res.duration_s / calls, res.energy_j / calls
    return run


def validate_clocks(gpu: str, access: ClockAccess, out: str | None = None) -> dict[str, Any]:
    """Sweep locked SM clocks on GPU 0 of `access`, measure the reference kernels, refit
    the frequency model of `gpu` and write it to `out` (default: beside the shipped one)."""
    from piep.clocks import ClockRuntime, default_state_dir
    fm = load_freq_model(gpu)
    devices = access.devices("0")
    if not access.permission():
        raise ConfigError("`piep plan --validate` sets GPU clocks: it needs root or "
                          "CAP_SYS_ADMIN (and a GPU where that is allowed)")
    runtime = ClockRuntime(devices, default_state_dir(), dry_run=False,
                           permission_check=access.permission, min_dwell_s=0.0, settle_s=0.0)
    if access.fake:  # fake devices run no kernels: a known frequency model answers
        truth = fm.with_values(v_ratio=0.8, f_mem_sat_mhz=1000.0)
        measure = ModelKernels(truth, devices[0])
    else:
        from piep.device.energy import TickMeter
        from piep.device.nvml import NvmlDevice
        measure = torch_kernels(0, TickMeter(NvmlDevice(index=0)))
    clocks = fm.clocks()[::8]
    rows = sweep(runtime, measure, clocks)
    refit = refit_from_sweep(fm, rows)
    # a refit on your clock sweep goes to the user data directory, where it then answers
    path = Path(out) if out else user_freq_model_path(gpu)
    write_freq_model(path, refit, sweep=rows)
    return {"out": str(path), "sweep": rows, "v_ratio": refit.v("v_ratio"),
            "f_mem_sat_mhz": refit.v("f_mem_sat_mhz"), "failures": runtime.failures}
