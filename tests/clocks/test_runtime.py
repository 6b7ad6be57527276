"""The clock runtime against fake devices: restore paths, recovery, locks, dwell, no-ops,
verification and permissions. Nothing here touches a real GPU."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from piep.device.fake import FakeClockDevice
from piep.core.errors import DeviceError
from piep.clocks import ClockRuntime

pytestmark = pytest.mark.fake_device


class Tick:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def runtime(tmp_path, devs, **kw):
    kw.setdefault("dry_run", False)
    kw.setdefault("permission_check", lambda: True)
    return ClockRuntime(devs, tmp_path / "state", **kw)


def test_apply_then_restore_on_exit(tmp_path):
    dev = FakeClockDevice()
    with runtime(tmp_path, [dev]) as rt:
        assert rt.apply(1410, label="decode")
        assert dev.locked == (1410, 1410)
        assert (tmp_path / "state" / f"{dev.uuid}.json").is_file()
    assert dev.locked is None and dev.calls[-1] == ("reset", dev.uuid)
    assert not list((tmp_path / "state").glob("*.json"))


def test_restore_on_exception(tmp_path):
    dev = FakeClockDevice()
    with pytest.raises(RuntimeError):
        with runtime(tmp_path, [dev]) as rt:
            rt.apply(1200)
            raise RuntimeError("the inference crashed")
    assert dev.locked is None and ("reset", dev.uuid) in dev.calls


def test_restore_on_sigterm(tmp_path):
    log = tmp_path / "calls.log"
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from piep.device.fake import FakeClockDevice
        from piep.clocks import ClockRuntime
        dev = FakeClockDevice(log_path={str(log)!r})
        rt = ClockRuntime([dev], Path({str(tmp_path / 'state')!r}), dry_run=False,
                          permission_check=lambda: True)
        rt.start()
        rt.apply(1305, label="decode")
        os.kill(os.getpid(), signal.SIGTERM)
        print("not reached")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert "not reached" not in proc.stdout
    calls = log.read_text().splitlines()
    assert calls[0].startswith("set") and calls[-1].startswith("reset")
    assert not list((tmp_path / "state").glob("*.json"))


def test_recovery_after_a_hard_kill(tmp_path):
    dev = FakeClockDevice()
    state = tmp_path / "state"
    state.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (state / f"{dev.uuid}.json").write_text(json.dumps({"owner_pid": dead.pid,
                                                        "locked_sm_mhz": 990}))
    rt = runtime(tmp_path, [dev])
    rt.start()
    assert dev.calls == [("reset", dev.uuid)]
    assert not (state / f"{dev.uuid}.json").exists()
    rt.stop()


def test_refuses_while_another_owner_is_live(tmp_path):
    dev = FakeClockDevice()
    state = tmp_path / "state"
    state.mkdir()
    (state / f"{dev.uuid}.json").write_text(json.dumps({"owner_pid": os.getpid()}))
    rt = runtime(tmp_path, [dev], owner_pid=os.getpid() + 100000)
    with pytest.raises(DeviceError, match=f"locked by another piep runtime \\(pid {os.getpid()}"):
        rt.start()
    assert dev.calls == []


def test_dwell_and_noop_are_skipped(tmp_path):
    dev = FakeClockDevice()
    tick = Tick()
    with runtime(tmp_path, [dev], clock=tick, min_dwell_s=0.1) as rt:
        assert rt.apply(1410, label="prefill")
        tick.t = 0.05
        assert not rt.apply(1200, label="too soon")
        tick.t = 0.2
        assert not rt.apply(1410, label="same")
        assert rt.apply(1200, label="decode")
        s = rt.summary()
    assert s["switches"] == 2 and s["skipped_dwell"] == 1 and s["skipped_noop"] == 1
    assert s["min_dwell_seen_s"] >= 0.1
    assert [c for c in dev.calls if c[0] == "set"] == [("set", dev.uuid, 1410, 1410),
                                                       ("set", dev.uuid, 1200, 1200)]


def test_verification_failures_are_reported(tmp_path):
    dev = FakeClockDevice(ignore_lock=True)
    with runtime(tmp_path, [dev]) as rt:
        rt.apply(1005, label="decode")
    assert rt.failures and "above the locked 1005 MHz" in rt.failures[0]


def test_permission_is_checked_before_anything(tmp_path):
    dev = FakeClockDevice()
    rt = runtime(tmp_path, [dev], permission_check=lambda: False)
    with pytest.raises(DeviceError, match="needs root or CAP_SYS_ADMIN"):
        rt.start()
    assert dev.calls == []


def test_dry_run_touches_nothing(tmp_path):
    dev = FakeClockDevice()
    with ClockRuntime([dev], tmp_path / "state", permission_check=lambda: False) as rt:
        assert rt.apply(1410, label="decode") and rt.apply(None, label="end") is False
    assert dev.calls == [] and rt.summary()["dry_run"]
