"""`piep apply`: apply a clock plan through NVML (dry-run by default)."""

from __future__ import annotations

import logging
import os
import re
import subprocess
from pathlib import Path

from piep.clocks import ClockAccess
from piep.commands.common import emit
from piep.core.errors import ConfigError

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


def clock_access() -> ClockAccess:
    """The command line's clock devices: NVML's, or with $PIEP_FAKE_CLOCKS set fakes that
    log every set to that file (end-to-end tests of the commands)."""
    from piep.clocks import fake_access, nvml_access
    if os.environ.get(FAKE_ENV):
        return fake_access(os.environ[FAKE_ENV],
                           permission=os.environ.get("PIEP_FAKE_NO_PERMISSION") != "1")
    return nvml_access()


def run(args) -> int:
    from piep.clocks import ClockRuntime, default_state_dir, load_plan
    if not re.fullmatch(r"\d+(,\d+)*", args.gpus.strip()):
        raise ConfigError(f"--gpus={args.gpus!r}: give GPU indices, comma separated (e.g. 0,1)")
    state_dir = Path(args.state_dir) if args.state_dir else default_state_dir()
    access = clock_access()
    if args.recover:
        rt = ClockRuntime(access.devices(args.gpus), state_dir, dry_run=args.dry_run,
                          permission_check=access.permission)
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
        return _hold(args, plan, state_dir, access)
    if not args.dry_run:
        raise ConfigError("--no-dry-run holds the plan's clock around a command: give it after "
                          "-- (piep apply PLAN --no-dry-run -- CMD ...); without a command, "
                          "apply only simulates the plan")
    if args.batches < 1:
        raise ConfigError(f"--batches={args.batches} must be >= 1")
    doc = simulate(plan, args.batches, state_dir)
    emit(args, doc, _human)
    return 0


def simulate(plan, batches: int, state_dir: Path) -> dict:
    """Dry-run the runtime over the plan's predicted timeline (virtual time)."""
    from piep.clocks import PhaseClocks
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


def _hold(args, plan, state_dir: Path, access: ClockAccess) -> int:
    """Run a command with the plan's single clock locked; restore afterwards."""
    from piep.clocks import PhaseClocks
    mhz = {e["sm_mhz"] for r in plan["ranks"] for e in r["entries"]}
    if len(mhz) != 1:
        raise ConfigError("this plan switches clocks between phases; a plain command has no "
                          "phase hooks: use piep.clocks.PhaseClocks in the serving loop, or "
                          "`piep measure --clock-plan`")
    phase = plan["ranks"][0]["entries"][0]["phase"]
    with PhaseClocks(plan, access.devices(args.gpus), dry_run=args.dry_run,
                     state_dir=state_dir, permission_check=access.permission) as pc:
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
