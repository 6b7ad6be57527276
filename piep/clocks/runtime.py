"""The clock runtime: applies SM (and memory) locked clocks through NVML, safely.

* Dry-run by default: it logs what it would set and when, and touches nothing.
* Off the critical path of correctness: a change that would come sooner than `min_dwell_s`
  after the previous one is skipped, and so is a change to the clocks already applied.
* Every set is verified (the current SM clock must not exceed the locked maximum, beyond
  a tolerance, once settled); failures are collected, never silent.
* Restores on exit, on an exception, on SIGINT/SIGTERM, and at the next start after a
  hard kill: each GPU has a state file (owner pid, what was locked) written before the
  first set. NVML cannot read a locked range back, so restoring means resetting the
  locked clocks. A live lock of another process is refused.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from piep.core.errors import DeviceError
from piep.core.outputs import pid_alive

log = logging.getLogger("piep.runtime")
CAP_SYS_ADMIN = 21


class ClockDevice(Protocol):
    uuid: str

    def set_locked_clocks(self, min_mhz: int, max_mhz: int) -> None: ...

    def reset_locked_clocks(self) -> None: ...

    def sm_clock_mhz(self) -> float: ...


def default_state_dir() -> Path:
    return Path.home() / ".cache" / "piep" / "clock-state"


def has_clock_permission() -> bool:
    """Root, or CAP_SYS_ADMIN in the effective capability set."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return True
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    except OSError:
        pass
    return False




@dataclass
class Change:
    time_s: float
    label: str
    sm_mhz: int | None
    applied: bool
    reason: str = ""


@dataclass
class ClockRuntime:
    devices: list[ClockDevice]
    state_dir: Path
    dry_run: bool = True
    min_dwell_s: float = 0.1
    verify_tolerance_mhz: float = 30.0
    settle_s: float = 0.0
    owner_pid: int = field(default_factory=os.getpid)
    clock: Any = time.monotonic
    permission_check: Any = has_clock_permission
    changes: list[Change] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _current: int | None = None
    _last_change_s: float | None = None
    _locked: bool = False
    _old_handlers: dict[int, Any] = field(default_factory=dict)

    # --- lifecycle --------------------------------------------------------------------
    def __enter__(self) -> "ClockRuntime":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        if not self.dry_run and not self.permission_check():
            raise DeviceError("setting GPU clocks needs root or CAP_SYS_ADMIN; run as root, "
                              "grant the capability, or use --dry-run")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.recover()
        if not self.dry_run:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)

    def stop(self) -> None:
        try:
            self.restore()
        finally:
            for sig, old in self._old_handlers.items():
                signal.signal(sig, old)
            self._old_handlers.clear()

    def _on_signal(self, signum, frame) -> None:
        log.warning("signal %d: restoring GPU clocks", signum)
        self.restore()
        old = self._old_handlers.get(signum)
        if callable(old):
            old(signum, frame)
        raise SystemExit(128 + signum)

    # --- state files ------------------------------------------------------------------
    def _state_path(self, dev: ClockDevice) -> Path:
        return self.state_dir / f"{dev.uuid}.json"

    def recover(self) -> None:
        """Reset GPUs a dead owner left locked; refuse GPUs a live other owner holds."""
        for dev in self.devices:
            path = self._state_path(dev)
            if not path.is_file():
                continue
            try:
                state = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                state = {"owner_pid": -1}
            pid = int(state.get("owner_pid", -1))
            if pid != self.owner_pid and pid > 0 and pid_alive(pid):
                raise DeviceError(f"GPU {dev.uuid} is locked by another piep runtime (pid {pid},"
                                  f" state file {path}); stop it first")
            log.warning("recovering %s: a previous owner (pid %d) left clocks locked; resetting",
                        dev.uuid, pid)
            if not self.dry_run:
                dev.reset_locked_clocks()
            path.unlink(missing_ok=True)

    def _write_state(self, dev: ClockDevice, sm_mhz: int) -> None:
        from piep.core.artifacts import write_text
        write_text(self._state_path(dev), json.dumps({"owner_pid": self.owner_pid,
                                                      "locked_sm_mhz": sm_mhz,
                                                      "time_unix": time.time()}))

    # --- applying -----------------------------------------------------------------------
    def apply(self, sm_mhz: int | None, *, label: str = "") -> bool:
        """Lock every GPU's SM clock at `sm_mhz` (None: back to default). Returns whether a
        change was made (or, in dry-run, would be made)."""
        now = self.clock()
        if sm_mhz == self._current:
            self.changes.append(Change(now, label, sm_mhz, False, "no-op"))
            return False
        if self._last_change_s is not None and now - self._last_change_s < self.min_dwell_s:
            self.changes.append(Change(now, label, sm_mhz, False, "dwell"))
            return False
        if self.dry_run:
            log.debug("dry-run: at %.3f s (%s) would %s", now, label,
                     f"lock SM clocks at {sm_mhz} MHz" if sm_mhz else "reset SM clocks")
        else:
            for dev in self.devices:
                if sm_mhz is None:
                    dev.reset_locked_clocks()
                    self._state_path(dev).unlink(missing_ok=True)
                else:
                    self._write_state(dev, sm_mhz)  # before the set: a crash is recoverable
                    dev.set_locked_clocks(sm_mhz, sm_mhz)
            self._locked = sm_mhz is not None
            self._verify(sm_mhz, label)
        self._current = sm_mhz
        self._last_change_s = now
        self.changes.append(Change(now, label, sm_mhz, True))
        return True

    def _verify(self, sm_mhz: int | None, label: str) -> None:
        if sm_mhz is None:
            return
        if self.settle_s:
            time.sleep(self.settle_s)
        for dev in self.devices:
            got = dev.sm_clock_mhz()
            if got > sm_mhz + self.verify_tolerance_mhz:
                msg = (f"{dev.uuid}: SM clock {got:.0f} MHz above the locked {sm_mhz} MHz "
                       f"after '{label}'")
                log.warning(msg)
                self.failures.append(msg)

    def restore(self) -> None:
        """Back to the GPUs' default clock behaviour (reset), and forget the state."""
        if self.dry_run:
            if self._current is not None:
                log.debug("dry-run: would reset SM clocks")
            self._current = None
            return
        for dev in self.devices:
            path = self._state_path(dev)
            if self._locked or path.is_file():
                try:
                    dev.reset_locked_clocks()
                except Exception as exc:  # keep restoring the others; report this one
                    self.failures.append(f"{dev.uuid}: reset failed: {exc}")
                    continue
            path.unlink(missing_ok=True)
        self._locked = False
        self._current = None

    def summary(self) -> dict[str, Any]:
        applied = [c for c in self.changes if c.applied]
        gaps = [b.time_s - a.time_s for a, b in zip(applied, applied[1:])]
        return {"dry_run": self.dry_run, "switches": len(applied),
                "skipped_noop": sum(c.reason == "no-op" for c in self.changes),
                "skipped_dwell": sum(c.reason == "dwell" for c in self.changes),
                "min_dwell_seen_s": min(gaps) if gaps else None,
                "failures": list(self.failures)}
