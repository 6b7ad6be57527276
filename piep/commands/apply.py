"""`piep apply`: apply a clock plan through NVML (dry-run by default)."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

from piep.cli import emit
from piep.errors import ConfigError

log = logging.getLogger("piep.apply")
FAKE_ENV = "PIEP_FAKE_CLOCKS"  # tests: fake clock devices that log to this file


def configure(parser) -> None:
    parser.add_argument("plan", nargs="?", metavar="PLAN.json", help="a `piep plan --out` file")
    parser.add_argument("--no-dry-run", dest="dry_run", action="store_false",
                        help="really set clocks (needs root or CAP_SYS_ADMIN); default: dry-run")
    parser.add_argument("--gpus", default="0", help="GPU indices, comma separated (default 0)")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="per-GPU state files (default ~/.cache/piep/clock-state)")
    parser.add_argument("--batches", type=int, default=3,
                        help="without a command: batches of the predicted timeline to "
                             "simulate (default 3)")
    parser.add_argument("--recover", action="store_true",
                        help="reset clocks a killed piep runtime left locked, then exit")
    parser.epilog = ("piep apply PLAN -- CMD ARGS...: run CMD with the plan's clock held "
                     "(single-clock plans only)")


def clock_devices(gpus: str) -> list:
    try:
        indices = [int(x) for x in gpus.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--gpus={gpus!r}: give indices like 0,1") from None
    if os.environ.get(FAKE_ENV):
        from piep.device.fake import FakeClockDevice
        return [FakeClockDevice(f"GPU-fake-{i}", log_path=os.environ[FAKE_ENV]) for i in indices]
    from piep.device.nvml import NvmlDevice
    return [NvmlDevice(index=i) for i in indices]


def _permission():
    if os.environ.get(FAKE_ENV):
        return os.environ.get("PIEP_FAKE_NO_PERMISSION") != "1"
    from piep.plan.runtime import has_clock_permission
    return has_clock_permission()


def run(args) -> int:
    from piep.plan.runtime import ClockRuntime
    from piep.runtime import default_state_dir, load_plan
    state_dir = Path(args.state_dir) if args.state_dir else default_state_dir()
    if args.recover:
        rt = ClockRuntime(clock_devices(args.gpus), state_dir, dry_run=args.dry_run,
                          permission_check=_permission)
        rt.start()
        rt.stop()
        emit(args, {"recovered": True, "dry_run": args.dry_run, "state_dir": str(state_dir)},
             lambda d: f"state files checked under {d['state_dir']}"
                       + (" (dry-run: nothing reset)" if d["dry_run"] else ""))
        return 0
    if not args.plan:
        raise ConfigError("give a plan file (piep plan ... --out plan.json) or --recover")
    plan = load_plan(args.plan)
    if getattr(args, "passthrough", None):
        return _hold(args, plan, state_dir)
    if args.batches < 1:
        raise ConfigError(f"--batches={args.batches} must be >= 1")
    doc = simulate(plan, args.batches, state_dir)
    emit(args, doc, _human)
    return 0


def simulate(plan, batches: int, state_dir: Path) -> dict:
    """Dry-run the runtime over the plan's predicted timeline (virtual time)."""
    from piep.runtime import PhaseClocks
    t = [0.0]
    times = plan["applied"]["phase_time_s"]
    with PhaseClocks(plan, [], dry_run=True, state_dir=state_dir, clock=lambda: t[0]) as pc:
        for _ in range(batches):
            for phase in ("prefill", "decode"):
                pc.enter(phase)
                t[0] += times[phase]
        doc = pc.summary()
    doc.update({"batches": batches, "predicted_phase_time_s": times})
    return doc


def _hold(args, plan, state_dir: Path) -> int:
    """Run a command with the plan's single clock locked; restore afterwards."""
    from piep.runtime import PhaseClocks
    mhz = {e["sm_mhz"] for r in plan["ranks"] for e in r["entries"]}
    if len(mhz) != 1:
        raise ConfigError("this plan switches clocks between phases; a plain command has no "
                          "phase hooks: use piep.runtime.PhaseClocks in the serving loop, or "
                          "`piep measure --clock-plan`")
    phase = plan["ranks"][0]["entries"][0]["phase"]
    with PhaseClocks(plan, clock_devices(args.gpus), dry_run=args.dry_run, state_dir=state_dir,
                     permission_check=_permission) as pc:
        pc.enter(phase)
        cmd = args.passthrough
        log.info("running %s with SM clock %s MHz%s", cmd, mhz.pop(),
                 " (dry-run)" if args.dry_run else "")
        rc = subprocess.call(cmd)
        summary = pc.summary()
    if pc.runtime.failures:
        log.warning("clock failures: %s", "; ".join(pc.runtime.failures))
    emit(args, {**summary, "returncode": rc}, _human)
    return rc


def _human(doc) -> str:
    lines = [f"{'dry-run: ' if doc['dry_run'] else ''}{doc['switches']} clock switch(es), "
             f"{doc['skipped_noop']} no-op and {doc['skipped_dwell']} dwell skip(s); "
             f"plan {doc['plan_mhz']}"]
    for e in doc["log"]:
        what = f"{e['sm_mhz']} MHz" if e["sm_mhz"] else "default clocks"
        lines.append(f"  t={e['t_s']:.3f}s {e['phase']}: "
                     + (f"set {what}" if e["applied"] else f"skip {what} ({e['reason']})"))
    if doc["failures"]:
        lines.append("failures: " + "; ".join(doc["failures"]))
    return "\n".join(lines)
