"""`piep calibrate gpu --name NAME`: the calibration of a GPU of one's own, in one command.

What it measures, on GPU 0 of this machine, into the user data directory's
`calibration/NAME/` (what `--gpu NAME` then reads everywhere):

1. the board: its memory, its idle power with a context open, the host's launch overhead
   and the power of a GPU that sees only launch gaps;
2. module samples (every compute node kind, at shapes drawn from the shipped models'
   trees) and single-GPU end-to-end runs of the reference runner, interleaved so that the
   samples taken at any moment cover every kind and several models.

The recipe is the quick one measured from scratch on H200 (`reports/calibration_cost.md`:
60 % of the minutes on module samples, the rest on end-to-end runs). A single GPU measures
no collective and no waiting time: those are copied from the reference calibration, and
`calibrate.json` says so. Every sample is appended as it is taken; a second call with the
same name and recipe resumes where the first stopped.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from piep.core.artifacts import read_json, read_jsonl, user_calibration_dir, write_json
from piep.core.errors import ConfigError
from piep.core.gpus import DEFAULT_GPU
from piep.core.writer import append_record
from piep.sampling.options import check_gpu_name

log = logging.getLogger("piep.calibrate")

MODULES = Path("modules") / "quick.jsonl"
RUNS = Path("e2e") / "raw" / "quick.jsonl"
STATE = "calibrate.json"
# what one GPU cannot measure, copied from the reference calibration
REUSED = ("probe/probe_main.json", "waits/fits.json", "collectives")
MEASURED = ("memory_gib", "idle_power_w")  # the gpu.json values measured here
# device seconds per module sample, the plan's estimate: device call 59 took 361 samples of
# the model trees' shapes (0.3 s windows, builds and captures included) in 200 s
# (calibration/h200/device/run59.log: modules start 1796309255, end 1796309455)
MODULE_S = 0.55


@dataclass(frozen=True)
class Recipe:
    """What a quick calibration measures (the draws are seeded: a resume redraws them)."""
    minutes: float = 15.0        # device minutes planned
    module_share: float = 0.6    # of them on module samples, the rest on end-to-end runs
    seed: int = 70
    per_kind: int = 40           # module shapes drawn per (kind, phase), attention 2x, and
    run_draws: int = 12          # runs per model (those that fit): pools the plan cuts
    max_run_s: float = 1.5       # longest run (roofline), as the quick designs
    min_window_s: float = 0.3    # module samples' energy windows
    models: tuple[str, ...] | None = None  # draw from these models only (default: shipped)

    def shapes(self) -> list[dict[str, Any]]:
        from piep.sampling.calibrate import module_shapes
        return module_shapes(seed=self.seed, per_kind=self.per_kind, models=self.models)

    def runs(self, gpu) -> list[dict[str, Any]]:
        from piep.sampling.design import build_design
        return build_design(seed=self.seed, draws=self.run_draws, max_time_s=self.max_run_s,
                            layouts=("tp1",), models=self.models, gpu=gpu)


@dataclass(frozen=True)
class Task:
    kind: str                    # "module" or "run"
    item: dict[str, Any]         # the shape, or the configuration
    key: str
    est_s: float

    @property
    def label(self) -> str:
        if self.kind == "module":
            return f"module {self.item['kind']} ({self.item['mode']})"
        return f"run {self.item['model']} b{self.item['batch']} {self.item['mode']}"


def _round_robin(items: list[dict[str, Any]], group) -> list[dict[str, Any]]:
    """One item of each group in turn (in their drawn order): a prefix covers every group."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for it in items:
        groups.setdefault(group(it), []).append(it)
    out, queues = [], list(groups.values())
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def plan(shapes: list[dict[str, Any]], runs: list[dict[str, Any]], recipe: Recipe
         ) -> list[Task]:
    """The tasks of a calibration in the order they run: module samples and runs
    interleaved at the recipe's shares of device time, each kind and each model in turn,
    until the estimated time fills the recipe's minutes."""
    from piep.sampling.calibrate import _key
    from piep.sampling.grid import config_key
    mods = [Task("module", s, _key(s), MODULE_S)
            for s in _round_robin(shapes, lambda s: (s["kind"], s.get("phase"), s["mode"]))]
    rns = [Task("run", c, config_key(c), float(c.get("estimated_s", 10.0)))
           for c in _round_robin(runs, lambda c: c["model"])]
    budget, out, spent = 60.0 * recipe.minutes, [], {"module": 0.0, "run": 0.0}
    share = recipe.module_share
    while mods or rns:
        behind = spent["module"] * (1 - share) <= spent["run"] * share
        task = (mods if (behind and mods) or not rns else rns).pop(0)
        if sum(spent.values()) + task.est_s > budget:
            break
        spent[task.kind] += task.est_s
        out.append(task)
    return out


class Bench:
    """The GPU being calibrated: where the work runs, its meter, its idle power."""

    def __init__(self, device, *, meter, dtype=None, hygiene=None,
                 min_window_s: float = 0.3, describe: dict[str, Any] | None = None):
        import torch
        from piep.sampling.runner import Hygiene
        self.device, self.meter = torch.device(device), meter
        self.dtype = dtype or torch.bfloat16
        self.hygiene = hygiene or Hygiene()
        self.min_window_s = min_window_s
        self._describe = describe
        self.idle_w = meter.idle(self.hygiene.idle_s)

    @classmethod
    def cuda(cls, min_window_s: float = 0.3) -> "Bench":
        import torch
        from piep.sampling.runner import RankMeter
        device = torch.device("cuda", 0)
        torch.cuda.set_device(device)
        torch.zeros(1, device=device)  # a context open while idle power is read
        return cls(device, meter=RankMeter(device), min_window_s=min_window_s)

    def describe(self) -> dict[str, Any]:
        if self._describe is not None:
            return self._describe
        import torch
        props = torch.cuda.get_device_properties(self.device)
        return {"gpu_name": props.name, "uuid": str(props.uuid),
                "memory_gib": round(props.total_memory / 2 ** 30, 1)}

    def host_overhead(self) -> dict[str, Any]:
        from piep.sampling.calibrate import host_overhead_row
        return host_overhead_row(self.meter.meter, self.idle_w, self.describe()["uuid"],
                                 self.device)

    def module(self, shape: dict[str, Any]) -> dict[str, Any]:
        from piep.sampling.calibrate import stamped
        from piep.sampling.modules import sample_shape
        row = sample_shape(shape, shape["mode"], meter=self.meter.meter, idle_w=self.idle_w,
                           device=self.device, min_window_s=self.min_window_s,
                           nvml=self.meter.nvml)
        return stamped(row, shape, repeat=0, uuid=self.describe()["uuid"],
                       idle_w=self.idle_w)

    def run(self, cfg: dict[str, Any]) -> dict[str, Any]:
        from piep.sampling.grid import parallel_workload, spec_of
        from piep.sampling.runner import Dist, measure_config
        parallel, workload = parallel_workload(cfg)
        return measure_config(spec_of(cfg), parallel, workload, d=Dist(), device=self.device,
                              dtype=self.dtype, hygiene=self.hygiene, meter=self.meter,
                              extra={"command": "piep calibrate gpu", "design": "quick"})


def seed_folder(folder: Path, name: str, described: dict[str, Any], idle_w: float | None,
                 reference: str) -> None:
    """gpu.json (memory and idle power measured; the rest the reference GPU's, saying so)
    and the reference calibration's collectives and waits."""
    from piep.core.artifacts import calibration_dir
    ref = calibration_dir(reference)
    doc = read_json(ref / "gpu.json", "piep.gpu_profile")
    values = {k: {"value": v["value"], "source": f"copied from {reference}: not measured "
                                                 f"here"} for k, v in doc["values"].items()}
    values["memory_gib"] = {"value": described["memory_gib"],
                            "source": f"measured: total memory of {described['gpu_name']}"}
    if idle_w is not None:
        values["idle_power_w"] = {"value": round(idle_w, 1), "source": "measured: counter "
                                  "tick to tick with a CUDA context open"}
    write_json(folder / "gpu.json", "piep.gpu_profile", 1, {"name": name, "values": values})
    for part in REUSED:
        src, dst = ref / part, folder / part
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        elif src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)


def calibrate_gpu(name: str, bench: Bench, *, recipe: Recipe = Recipe(),
                  shapes: list[dict[str, Any]] | None = None,
                  runs: list[dict[str, Any]] | None = None, budget_s: float = float("inf"),
                  reference: str = DEFAULT_GPU,
                  progress: Callable[[dict[str, Any]], None] | None = None,
                  clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Measure (or resume) the calibration `name` on `bench`; `shapes` and `runs` replace
    the recipe's draws (tests); `budget_s` stops this call early (resumable)."""
    from piep.core.gpus import load_gpu
    folder = user_calibration_dir(check_gpu_name(name))
    state_path = folder / STATE
    described = bench.describe()
    recipe_doc = dataclasses.asdict(recipe)
    if state_path.is_file():
        state = read_json(state_path, "piep.gpu_calibration")
        if state["recipe"] != json.loads(json.dumps(recipe_doc)):
            raise ConfigError(f"{folder} was begun with another recipe ({state['recipe']}); "
                              f"resume it with the same options or choose another --name")
        if state["device"]["gpu_name"] != described["gpu_name"]:
            raise ConfigError(f"{folder} was begun on a {state['device']['gpu_name']}, this "
                              f"is a {described['gpu_name']}: choose another --name")
    else:
        folder.mkdir(parents=True, exist_ok=True)
        seed_folder(folder, name, described, bench.idle_w, reference)
        state = {"name": name, "recipe": recipe_doc, "device": described, "reference": reference,
                 "reused": {"from": reference, "what": list(REUSED),
                            "why": "one GPU measures no collective and no waiting time"},
                 "spent_s": 0.0, "done": False}
        _write_state(state_path, state)
    if not any(r.get("schema") == "piep.host_overhead" for r in read_jsonl(folder / MODULES)):
        append_record(folder / MODULES, bench.host_overhead())
    load_gpu.cache_clear()
    gpu = load_gpu(name)
    tasks = plan(recipe.shapes() if shapes is None else shapes,
                 recipe.runs(gpu) if runs is None else runs, recipe)
    done = _done(folder)
    todo = [t for t in tasks if t.key not in done]
    total = sum(t.est_s for t in tasks)
    left = todo_s = sum(t.est_s for t in todo)
    start, spent0, ratio = clock(), float(state["spent_s"]), 1.0
    measured = 0
    for i, task in enumerate(todo):
        if clock() - start + task.est_s * ratio > budget_s:
            log.info("budget reached: %d of %d tasks left (resume with the same command)",
                     len(todo) - i, len(tasks))
            break
        if progress:
            progress({"task": task.label, "done_s": total - left, "total_s": total,
                      "left_s": left * ratio, "index": len(tasks) - len(todo) + i + 1,
                      "tasks": len(tasks)})
        _measure(bench, folder, task)
        measured += 1
        left -= task.est_s
        ran = clock() - start
        ratio = ran / max(todo_s - left, 1e-9)  # time over estimate, so far
        state["spent_s"] = spent0 + ran
        _write_state(state_path, state)
    done = _done(folder)
    still = sum(t.key not in done for t in tasks)
    state["done"] = still == 0
    state["spent_s"] = spent0 + (clock() - start)
    _write_state(state_path, state)
    return {"gpu": name, "folder": str(folder), "measured": measured,
            "tasks": len(tasks), "left": still,
            "minutes": round(state["spent_s"] / 60, 1), "done": state["done"],
            "reused": f"collectives and waits of {reference}"}


def _write_state(path: Path, state: dict[str, Any]) -> None:
    write_json(path, "piep.gpu_calibration", 1, {k: v for k, v in state.items() if k not in
                                                  ("schema", "schema_version", "provenance")})


def _done(folder: Path) -> set[str]:
    """The keys of the tasks measured (or failed: a failure is not retried)."""
    from piep.sampling.calibrate import sampled_keys
    from piep.sampling.grid import done_keys
    return sampled_keys(folder / MODULES) | done_keys(folder / RUNS)


def _measure(bench: Bench, folder: Path, task: Task) -> None:
    from piep.sampling.grid import free_memory
    try:
        _measure_one(bench, folder, task)
    finally:
        free_memory()  # each sample's buffers, each run's model


def _measure_one(bench: Bench, folder: Path, task: Task) -> None:
    from piep.core.errors import PiepError
    from piep.sampling.grid import config_key, failure_record
    t0 = time.monotonic()
    if task.kind == "module":
        try:
            row = bench.module(task.item)
        except (RuntimeError, PiepError) as exc:
            log.warning("%s failed: %s", task.label, exc)
            row = {**task.item, "schema": "piep.module_failure", "schema_version": 1,
                   "shape_fields": sorted(task.item), "error": str(exc)[:300]}
        append_record(folder / MODULES, row)
        return
    try:
        rec = bench.run(task.item)
    except (RuntimeError, PiepError) as exc:
        log.warning("%s failed: %s", task.label, exc)
        append_record(folder / RUNS, failure_record(task.item, str(exc)))
        return
    rec["key"] = config_key(task.item)
    rec["wall_s"] = time.monotonic() - t0
    append_record(folder / RUNS, rec)
