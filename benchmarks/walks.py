"""Walks: how many of piep's files a reader enters following one parameter of a command
(issue 51's measure of how far one concern is spread).

A walk runs the command in this process under a profiler and follows the parameter's
value: a file is entered when one of its functions is called with the value, or with an
object that holds it (one attribute, item or element deep), or with what such a call
returned (a value derived from the parameter is followed too: not an object that was there
before, such as a registry's record or a module's constant a lookup returns); an object
built from it (`__init__` given it) is followed from then on. Functions that only run
beside the parameter (argparse's set-up, imports, logging) are not counted; the command's
own module and the CLI are.

    python benchmarks/walks.py            # every walk, the files of each
    python benchmarks/walks.py --write    # ... into reports/structure.md
    python benchmarks/walks.py --json

Walks: `piep serve` following --rate (the request stream) and --model; `piep train
--engine hf-cb` (the engine-profile fit) following --engine; `piep calibrate gpu`
following --name, on a fake board on the CPU as tests/sampling/test_calibrate_gpu.py runs
it (needs torch). Each walk runs in a process of its own, as a user's command does: a
cache an earlier walk filled would spare it files a first call enters.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# this checkout's piep, whatever an installed one points at: the walk counts the files
# under ROOT/piep, so another copy imported would walk no file of this one
sys.path.insert(0, str(ROOT))
PIEP = str(ROOT / "piep") + os.sep
# values that are one shared object in CPython: following them would follow everything
SHARED = (type(None), bool, type(Ellipsis))
SCAN = 64  # a container longer than this is not looked into


class Follow:
    """The profiler: the objects carrying the parameter, and the files entered with one."""

    def __init__(self, before: list | None = None):
        # the objects alive before the walk (held, so no id is reused): a registry record
        # or a module's constant a call returns is not derived from the parameter
        self.before = before or []
        self.old = {id(o) for o in self.before}
        # id -> the object, or a weak reference to it that leaves when the object dies (a
        # fit's derived arrays would otherwise all stay alive); held, so no id is reused
        self.carriers: dict[int, object] = {}
        self.files: dict[str, int] = {}        # file -> calls made with a carrier
        self.frames: set[int] = set()          # frames entered with a carrier

    def carry(self, obj) -> None:
        if isinstance(obj, SHARED) or (isinstance(obj, int) and -5 <= obj <= 256):
            return
        if isinstance(obj, (str, bytes, tuple, frozenset)) and len(obj) == 0:
            return
        key = id(obj)
        try:
            self.carriers[key] = weakref.ref(obj, lambda _, k=key: self.carriers.pop(k, None))
        except TypeError:  # numbers, strings, tuples, lists, dicts: held
            self.carriers[key] = obj

    def holds(self, obj) -> bool:
        """`obj` is a carrier or holds one one step down."""
        if id(obj) in self.carriers:
            return True
        if isinstance(obj, dict):
            inner = list(obj.values())[:SCAN]
        elif isinstance(obj, (list, tuple, set, frozenset)):
            inner = list(obj)[:SCAN]
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            inner = list(vars(obj).values())[:SCAN]
        elif hasattr(type(obj), "__slots__"):
            inner = [getattr(obj, s, None) for s in type(obj).__slots__][:SCAN]
        else:
            return False
        return any(id(x) in self.carriers for x in inner)

    def __call__(self, frame, event, arg):
        code = frame.f_code
        if event == "call":
            if not code.co_filename.startswith(PIEP):
                return
            names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount
                                     + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)]
            local = frame.f_locals
            if any(n in local and self.holds(local[n]) for n in names):
                self.frames.add(id(frame))
                rel = code.co_filename[len(PIEP):]
                self.files[rel] = self.files.get(rel, 0) + 1
                if code.co_name == "__init__" and "self" in local:
                    self.carry(local["self"])
        elif event == "return" and id(frame) in self.frames:
            self.frames.discard(id(frame))
            if not self.constant(arg, frame):
                self.carry(arg)

    def constant(self, obj, frame) -> bool:
        """`obj` was there before the walk: an object alive then, or a constant of the
        returning function or of its module (strings and numbers are not tracked by gc)."""
        if id(obj) in self.old:
            return True
        return any(obj is c for c in frame.f_code.co_consts) or \
            any(obj is v for v in frame.f_globals.values())


def follow(run, seed) -> dict[str, int]:
    """The files entered following `seed` while `run()` runs."""
    walk = Follow(gc.get_objects())
    walk.carry(seed)
    sys.setprofile(walk)
    try:
        run()
    finally:
        sys.setprofile(None)
    return walk.files


def cli_walk(argv: list[str], dest: str) -> dict[str, int]:
    """A command line's walk, following the value its parser gave to `dest`."""
    from piep import cli
    from piep.commands import common  # noqa: F401 (imported before the walk starts)
    parser = cli.build_parser(argv)
    args = parser.parse_args(argv)
    args.passthrough, args.verbose = [], False
    seed = getattr(args, dest)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        files = follow(lambda: args.handler(args), seed)
    command = f"commands/{argv[0]}.py"
    return {"cli.py": 1, command: files.pop(command, 0) or 1, **files}


def calibrate_walk() -> dict[str, int]:
    """`piep calibrate gpu --name NAME` on a fake board, following the name."""
    sys.path.insert(0, str(ROOT / "tests"))
    import torch
    from _virtual_clock import WorkClock
    from piep.device.fake import FakeDevice
    from piep.sampling.gpu_calibration import Bench, Recipe, calibrate_gpu
    from piep.sampling.runner import Hygiene, RankMeter
    from piep.sampling.calibrate import module_shapes
    tiny = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 176,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "vocab_size": 128, "max_position_embeddings": 256, "hidden_act": "silu"}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PIEP_DATA_DIR"] = str(Path(tmp) / "data")
        path = Path(tmp) / "tiny" / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(tiny))
        shapes = [s for s in module_shapes(seed=0, per_kind=1, models=(str(path),), tps=(1,))
                  if s["tokens"] <= 256 and s.get("context_len", 0) <= 512][:4]
        runs = [{"model": "tiny-0", "config": tiny, "tp": 1, "pp": 1, "dp": 1, "batch": 2,
                 "prompt_len": 16, "gen_len": 8, "mode": "eager", "estimated_s": 1.0}]
        clock = WorkClock()
        fake = FakeDevice(lambda t: 200.0, clock, tick_s=0.05, phase_s=0.01, step_s=0.001)
        bench = Bench("cpu", meter=RankMeter("cpu", fake=fake), dtype=torch.float32,
                      hygiene=Hygiene(repeats=2, min_window_s=0.15, idle_s=0.2),
                      min_window_s=0.15, describe={"gpu_name": "Fake GPU",
                                                   "uuid": "GPU-fake-0", "memory_gib": 80.0})
        name = "".join(["walk", "-gpu"])  # a string object of its own
        with clock.running():
            files = follow(lambda: calibrate_gpu(name, bench, recipe=Recipe(minutes=1.0),
                                                 shapes=shapes, runs=runs, clock=clock),
                           name)
    # the CLI and its command module stand before calibrate_gpu on the way in
    return {"cli.py": 1, "commands/calibrate.py": 1, **files}


WALKS = {
    "piep serve, following --rate":
        ("serve --model llama-3-8b --rate 3.5 --requests 200", "rate"),
    "piep serve, following --model":
        ("serve --model llama-3-8b --rate 3.5 --requests 200", "model"),
    "piep train --engine hf-cb (the engine-profile fit), following --engine":
        ("train --engine hf-cb --out {out}", "engine"),
    "piep calibrate gpu, following --name": (None, "name"),
}


def one_walk(name: str) -> dict[str, int]:
    """One walk, in this process: run it in a fresh one (`walks()`), so no cache another
    walk filled spares it a file a user's first call enters."""
    argv, dest = WALKS[name]
    os.environ["PIEP_FIT_WORKERS"] = "1"  # the fit's folds here, where the profiler sees them
    if argv is None:
        return calibrate_walk()
    return cli_walk(argv.format(out=tempfile.mkdtemp(prefix="piep-walk-")).split(), dest)


def walks() -> dict[str, dict[str, int]]:
    """Every walk, each in a process of its own."""
    found = {}
    for name in WALKS:
        done = subprocess.run([sys.executable, __file__, "--one", name], cwd=ROOT, text=True,
                              capture_output=True)
        if done.returncode != 0:  # calibrate gpu without torch
            print(f"{name}: not walked ({done.stderr.strip().splitlines()[-1]})",
                  file=sys.stderr)
            continue
        found[name] = json.loads(done.stdout)
    return found


TARGETS = {"piep serve": 15, "piep train": 20, "piep calibrate gpu": 20}
REPORT = ROOT / "reports" / "structure.md"


def layout() -> list[str]:
    """Rooms (top-level modules and folders) on floors, and the modules at the top."""
    from piep import FLOORS
    rooms = [r for units in FLOORS.values() for r in units]
    top = sorted(p.name for p in (ROOT / "piep").glob("*.py"))
    return [f"* {len(rooms)} rooms on {len(FLOORS)} floors (`piep.FLOORS`; issue 51: <= 22 "
            f"on <= 10), imports only down and no cycle (tests/test_layers.py)",
            f"* {len(top)} modules at the top of `piep/` (<= 8): {', '.join(top)}"]


def report(found: dict[str, dict[str, int]]) -> str:
    lines = ["# piep's structure", "",
             "Made by `python benchmarks/walks.py --write` (the walk's definition: the "
             "script's docstring).", "", *layout(), "",
             "| walk | files | issue 51's target |", "|---|---|---|"]
    for name, files in found.items():
        target = next(t for k, t in TARGETS.items() if name.startswith(k))
        lines.append(f"| {name} | {len(files)} | <= {target} |")
    for name, files in found.items():
        lines += ["", f"{name}: " + ", ".join(f"`{f}`" for f in sorted(files))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write", action="store_true", help=f"also write {REPORT.name}")
    ap.add_argument("--one", choices=WALKS, help=argparse.SUPPRESS)  # a walk's own process
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one_walk(args.one)))
        return 0
    found = walks()
    if args.json:
        print(json.dumps({k: sorted(v) for k, v in found.items()}, indent=2))
    else:
        print(report(found), end="")
    if args.write:
        from piep.core.artifacts import write_text
        write_text(REPORT, report(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
