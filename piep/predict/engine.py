"""Turn per-leaf costs into a deployment prediction (SPEC §2 energy partition).

A cost model prices one call of a leaf on one GPU: duration, board power while it runs,
and the launch gap that follows it. The engine multiplies by repetitions, runs stages one
after another (no micro-batching), charges every other stage's GPUs for the wait, and
returns the prediction document of `piep predict --json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from piep.layout import Deployment
from piep.tree import build_tree
from piep.tree.nodes import Node

SCHEMA = "piep.prediction"
SCHEMA_VERSION = 1
CATEGORIES = ("compute", "communication", "wait", "idle")


@dataclass(frozen=True)
class LeafCost:
    time_s: float        # kernel (or collective) duration, one call, one GPU
    power_w: float       # board power during it
    gap_s: float         # launch gap after it: GPU idle (no kernel)
    wait_s: float = 0.0  # busy-polling inside a collective waiting for peers
    out_of_range: bool = False


class CostModel(Protocol):
    name: str

    def leaf_cost(self, node: Node, dep: Deployment) -> LeafCost: ...

    def idle_power_w(self, dep: Deployment) -> float: ...

    def wait_power_w(self, dep: Deployment) -> float: ...

    def interval(self, dep: Deployment, energy_j: float, time_s: float) -> dict[str, Any]: ...


@dataclass
class _Acc:
    energy: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0.0))
    modules: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    raw_j: float = 0.0

    def module(self, path: str, kind: str, phase: str, energy_j: float, time_s: float,
               raw_j: float) -> None:
        slot = self.modules.setdefault((path, kind, phase), [0.0, 0.0])
        slot[0] += energy_j
        slot[1] += time_s
        self.raw_j += raw_j


def _stage_leaves(stage: Node, base: str, mult: int):
    for path, m, node in stage.walk(base, mult):
        if node.is_leaf and node is not stage:
            yield path, m, node


def hides_host_gaps(mode: str, phase: str, pp: int) -> bool:
    """Eager decode over pipeline stages: each stage's process launches its kernels while
    the stage before it computes (they queue behind the receive), so only one stage's
    launch gaps reach the step time. Measured: with the gaps of every stage summed,
    eager pp2 decode was predicted 12-77 % too slow (13 runs)."""
    return pp > 1 and mode == "eager" and phase == "decode"


def phase_time_s(busy: list[float], gaps: list[float], hide: bool) -> float:
    """Stages run one after another: busy time (kernels, collectives, waits) of every
    stage, plus launch gaps, of one stage only where the others are hidden."""
    return sum(busy) + (max(gaps) if hide else sum(gaps))


@dataclass(frozen=True)
class LeafUse:
    """One leaf as the engine priced it (for the clock planner): `count` calls per GPU of
    stage `stage` in `phase`, each costing `cost`, weighted by the combiner's `alpha`."""
    phase: str
    stage: int
    node: Node
    count: int
    cost: LeafCost
    alpha: float


def evaluate(dep: Deployment, model: CostModel, tree: Node | None = None,
             collect: list[LeafUse] | None = None) -> dict[str, Any]:
    """The prediction document; with `collect`, also appends every priced leaf to it."""
    tree = tree or build_tree(dep)
    p = dep.parallel
    replica = tree.children[0]
    acc = _Acc()
    phase_time: dict[str, float] = {}
    oor: set[str] = set()
    gpu_energy = [0.0] * p.pp  # per stage GPU (one TP rank), one replica
    idle_w, wait_w = model.idle_power_w(dep), model.wait_power_w(dep)
    alpha = getattr(model, "alpha", None)  # the combiner's weights (1 for the roofline)
    mode = dep.workload.mode
    for phase in replica.children:
        mult_phase = phase.count
        stages: list[tuple[Node, int, str]] = []
        for child in phase.children:
            if child.kind == "step":
                stages += [(s, mult_phase * child.count, f"{phase.name}/step") for s in child.children]
            else:
                stages.append((child, mult_phase, phase.name))
        stage_busy, stage_gap = [0.0] * p.pp, [0.0] * p.pp
        for idx, (stage, mult, base) in enumerate(stages):
            for path, m, leaf in _stage_leaves(stage, base, mult):
                c = model.leaf_cost(leaf, dep)
                if c.out_of_range:
                    oor.add(leaf.kind)
                t_run = m * c.time_s
                t_gap = m * c.gap_s
                t_wait = m * c.wait_s
                cat = "communication" if leaf.is_comm else "compute"
                a = alpha(leaf.kind, phase.name, mode, leaf.tokens) if alpha else 1.0
                if collect is not None:
                    collect.append(LeafUse(phase.name, idx, leaf, m, c, a))
                e_run, e_gap, e_wait = t_run * c.power_w, t_gap * idle_w, t_wait * wait_w
                acc.energy[cat] += p.tp * a * e_run
                acc.energy["idle"] += p.tp * a * e_gap
                acc.energy["wait"] += p.tp * a * e_wait
                acc.module(path, leaf.kind, leaf.phase or phase.name,
                           p.tp * a * (e_run + e_gap + e_wait), t_run + t_gap + t_wait,
                           p.tp * (e_run + e_gap + e_wait))
                stage_busy[idx] += t_run + t_wait
                stage_gap[idx] += t_gap
                gpu_energy[idx] += e_run + e_gap + e_wait
        total = phase_time_s(stage_busy, stage_gap, hides_host_gaps(mode, phase.name, p.pp))
        phase_time[phase.name] = total
        for idx in range(p.pp):
            bubble = total - stage_busy[idx] - stage_gap[idx]
            if bubble > 0:
                e = bubble * wait_w
                a = alpha("pipeline_wait", phase.name, mode, phase.tokens) if alpha else 1.0
                acc.energy["wait"] += p.tp * a * e
                gpu_energy[idx] += e
                acc.module(f"{phase.name}/stage{idx}/pipeline_wait", "pipeline_wait",
                           phase.name, p.tp * a * e, bubble, p.tp * e)
    # replicas are identical: scale every energy by dp
    dp = p.dp
    energy = {k: v * dp for k, v in acc.energy.items()}
    energy_j = sum(energy.values())
    time_s = phase_time["prefill"] + phase_time["decode"]
    modules = [{"path": path, "kind": kind, "phase": ph, "energy_j": e * dp, "time_s": t}
               for (path, kind, ph), (e, t) in acc.modules.items()]
    phases = {}
    for name in ("prefill", "decode"):
        e = sum(m["energy_j"] for m in modules if m["phase"] == name)
        phases[name] = {"energy_j": e, "time_s": phase_time[name]}
    scale = energy_j / (dp * sum(gpu_energy) * p.tp) if sum(gpu_energy) else 1.0
    gpu_energy = [e * scale for e in gpu_energy]  # per-GPU energies carry the combiner too
    return _document(dep, model, energy_j, time_s, energy, modules, phases, gpu_energy, oor,
                     acc.raw_j * dp)


def _document(dep, model, energy_j, time_s, energy, modules, phases, gpu_energy, oor, raw):
    w, p = dep.workload, dep.parallel
    gen_tokens = w.batch * w.gen_len
    decode_steps = max(w.gen_len - 1, 0)
    phases["decode"]["tpot_s"] = phases["decode"]["time_s"] / decode_steps if decode_steps else 0.0
    mem = dep.memory_items_gib()
    per_gpu = []
    for _ in range(p.dp):
        for stage in range(p.pp):
            pos = "all" if p.pp == 1 else ("first_stage" if stage == 0 else "last_stage")
            for _ in range(p.tp):
                per_gpu.append({"stage": stage,
                                "power_w_mean": gpu_energy[stage] / time_s if time_s else 0.0,
                                "memory_gib": mem[pos]["total"]})
    flags = []
    if p.world_size > 2:
        flags.append("extrapolated")
    if oor:
        flags.append("out_of_range")
    flags += [f"note: {n}" for n in dep.notes]
    modules.sort(key=lambda m: -m["energy_j"])
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "predictor": model.name,
        "boundary": "gpu_board",
        "engine": "piep reference runner",
        **deployment_fields(dep),
        "energy_j": energy_j,
        "time_s": time_s,
        "prefill": phases["prefill"],
        "decode": phases["decode"],
        "j_per_token": energy_j / gen_tokens,
        "tokens_per_s": gen_tokens / time_s if time_s else 0.0,
        "per_gpu": per_gpu,
        "interval": model.interval(dep, energy_j, time_s),
        "breakdown_j": energy,
        "modules": modules,
        "modules_raw_sum_j": raw,
        "flags": flags,
        "out_of_range_kinds": sorted(oor),
    }


def deployment_fields(dep: Deployment) -> dict[str, Any]:
    """model, gpu, layout and workload of a deployment, as every document states them."""
    p, w = dep.parallel, dep.workload
    return {"model": dep.model.name, "gpu": dep.gpu.name,
            "layout": {"tp": p.tp, "pp": p.pp, "dp": p.dp, "gpus": p.world_size},
            "workload": {"batch": w.batch, "prompt_len": w.prompt_len, "gen_len": w.gen_len,
                         "mode": w.mode}}


def add_serving(doc: dict[str, Any], dep: Deployment, request_rate: float,
                idle_power_w: float) -> dict[str, Any]:
    """Serving scenario: batches of `batch` requests arrive at `request_rate` req/s; the
    GPUs idle between batches. Adds the idle energy and energy per request."""
    period_s = dep.workload.batch / request_rate
    gap_s = period_s - doc["time_s"]
    serving = {"request_rate_per_s": request_rate, "batch_period_s": period_s}
    if gap_s < 0:
        serving.update({"overloaded": True, "idle_energy_j": 0.0,
                        "energy_per_request_j": doc["energy_j"] / dep.workload.batch})
        doc["flags"].append("overloaded")
    else:
        idle = gap_s * idle_power_w * dep.num_gpus
        serving.update({"overloaded": False, "idle_s": gap_s, "idle_energy_j": idle,
                        "energy_per_request_j": (doc["energy_j"] + idle) / dep.workload.batch})
    doc["serving"] = serving
    return doc
