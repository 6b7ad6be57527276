"""The one pricing path: leaf table -> cost model -> timeline -> energy partition.

A cost model prices one call of every row of a leaf table on one GPU (`CostModel.price`):
duration, board power while it runs, the launch gap that follows it (GPU idle), busy
waiting inside a collective, and the combiner's weight. `price` multiplies by the calls,
lays the rows out on the timeline (`piep.predict.timeline`), charges every other stage's
GPUs for pipeline bubbles at the busy-poll power, and partitions the energy of every GPU
into compute, communication, wait and idle. Many deployments are priced at once; a
single prediction is a sweep of one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np

from piep.core.layout import Deployment
from piep.predict.power import SUSTAINED_S, BoardLimit
from piep.predict.table import KIND_NAMES, KINDS, PHASES, LeafTable, TableBuilder
from piep.predict.timeline import Timeline, lay_out
from piep.core.results import Prediction, Summary, batch_rows

CATEGORIES = ("compute", "communication", "wait", "idle")


@dataclass(frozen=True)
class Prices:
    """One call of every row of a leaf table on one GPU."""
    time_s: np.ndarray        # kernel (or collective) duration
    power_w: np.ndarray       # board power during it
    gap_s: np.ndarray         # launch gap after it: GPU idle (no kernel)
    wait_s: np.ndarray        # busy-polling inside a collective waiting for peers
    out_of_range: np.ndarray  # bool: far from the data the model was fitted on
    alpha: np.ndarray         # the combiner's weight of the row (1 without one)
    segment_alpha: np.ndarray  # the combiner's weight of each segment's pipeline bubbles
    idle_w: float             # board power in launch gaps and between batches
    wait_w: float             # board power busy-polling
    limit: BoardLimit = BoardLimit()  # how the board holds its power limit over a phase
    # per row, the board power in its launch gap where it is not `idle_w` (a gap of
    # transformers' tensor-parallel path); None: idle_w everywhere
    gap_w: np.ndarray | None = None

    def gap_power_w(self) -> "np.ndarray | float":
        """The board power in each row's launch gap."""
        return self.idle_w if self.gap_w is None else self.gap_w


class CostModel(Protocol):
    """What the roofline, learned and spec-sheet transfer models implement."""
    name: str

    def price(self, table: LeafTable) -> Prices:
        """One call of every row of `table` on its GPU."""

    def interval(self, dep: Deployment, energy_j: float, time_s: float, *,
                 far: bool = False) -> dict[str, Any]:
        """The interval document of a prediction of `dep` (energy, time, level); `far`:
        the module models extrapolate for some of its leaves (out_of_range)."""


@dataclass
class Priced:
    """Deployments of one table priced by one model: per-deployment totals (arrays of
    len(deps)) and, per row, its energy on all GPUs of the deployment (combiner-weighted)."""
    table: LeafTable
    prices: Prices
    model: CostModel
    timeline: Timeline
    energy_j: np.ndarray
    breakdown_j: np.ndarray     # (deps, CATEGORIES)
    phase_time_s: np.ndarray    # (deps, 2)
    time_s: np.ndarray
    phase_energy_j: np.ndarray  # (deps, 2)
    stage_energy_j: np.ndarray  # (deps, stages): one GPU of each stage of one replica
    raw_j: np.ndarray           # module energies without the combiner
    out_of_range: np.ndarray    # (deps,) bool
    row_energy_j: np.ndarray
    bubble_energy_j: np.ndarray  # (segments, stages), all GPUs, combiner-weighted
    power_capped: np.ndarray     # (deps,) a sustained phase held at the board's power limit
    short_window_power: np.ndarray  # (deps,) a phase shorter than 1 s above the limit

    def out_of_range_kinds(self, i: int) -> list[str]:
        """Kinds of deployment i's leaves that lie far from the data the model was fitted on."""
        sel = (self.table.cfg == i) & self.prices.out_of_range & (self.table.count > 0)
        return sorted(set(KIND_NAMES[self.table.kind_id[sel]]))

    def modules(self, i: int) -> list[dict[str, Any]]:
        """Attributed energy per module of deployment i, largest first (needs a table
        built with detail)."""
        t, p = self.table, self.prices
        if t.path is None:
            raise ValueError("module attribution needs a table built with detail=True")
        rows = np.flatnonzero((t.cfg == i) & (t.count > 0))
        row_time = t.count * (p.time_s + p.gap_s + p.wait_s)
        out = []
        for ph in (0, 1):
            for r in rows[t.phase[rows] == ph]:
                out.append({"path": t.path[r], "kind": KINDS[t.kind_id[r]], "phase": PHASES[ph],
                            "energy_j": float(self.row_energy_j[r]),
                            "time_s": float(row_time[r])})
            seg = 2 * i + ph
            for stage, bubble in enumerate(self.timeline.bubble_s[seg]):
                if bubble > 0:
                    out.append({"path": f"{PHASES[ph]}/stage{stage}/pipeline_wait",
                                "kind": "pipeline_wait", "phase": PHASES[ph],
                                "energy_j": float(self.bubble_energy_j[seg, stage]),
                                "time_s": float(bubble)})
        out.sort(key=lambda m: -m["energy_j"])
        return out

    def flags(self, i: int) -> list[str]:
        """The flags of deployment i's prediction."""
        return flags(self.table.deps[i], bool(self.out_of_range[i]),
                     power_capped=bool(self.power_capped[i]),
                     short_window_power=bool(self.short_window_power[i]))

    def summaries(self) -> list[dict[str, Any]]:
        """The fields of a sweep row, of every deployment: its outcome's flat row
        (`Summary.row`), the predictor and its flags."""
        work = [d.workload for d in self.table.deps]
        rows = batch_rows(self.energy_j, self.time_s, requests=[w.batch for w in work],
                          gen_len=[w.gen_len for w in work], prefill_s=self.phase_time_s[:, 0],
                          prompt_len=[w.prompt_len for w in work],
                          prefill_j=self.phase_energy_j[:, 0])
        name = self.model.name
        for i, row in enumerate(rows):
            row["predictor"] = name
            row["flags"] = self.flags(i)
        return rows

    def outcome(self, i: int) -> Summary:
        """Deployment i's energy, time and latencies, request by request."""
        w = self.table.deps[i].workload
        return Summary.batch(float(self.energy_j[i]), float(self.time_s[i]), requests=w.batch,
                             gen_len=w.gen_len, prefill_s=float(self.phase_time_s[i, 0]),
                             prompt_len=w.prompt_len,
                             prefill_j=float(self.phase_energy_j[i, 0]))

    def document(self, i: int) -> dict[str, Any]:
        """The prediction document of deployment i (`piep predict --json`)."""
        return self.prediction(i).to_json()

    def prediction(self, i: int) -> Prediction:
        """The prediction of deployment i (needs a table built with detail)."""
        dep = self.table.deps[i]
        p = dep.parallel
        energy_j, time_s = float(self.energy_j[i]), float(self.time_s[i])
        phases = {name: {"energy_j": float(self.phase_energy_j[i, ph]),
                         "time_s": float(self.phase_time_s[i, ph])}
                  for ph, name in enumerate(PHASES)}
        phases["no_request"] = {"energy_j": 0.0, "time_s": 0.0}
        stage_e = self.stage_energy_j[i, :p.pp]
        scale = energy_j / (p.dp * stage_e.sum() * p.tp) if stage_e.sum() else 1.0
        mem = dep.memory_items_gib()
        per_gpu = []
        for _ in range(p.dp):
            for stage in range(p.pp):
                pos = "all" if p.pp == 1 else ("first_stage" if stage == 0 else "last_stage")
                power = stage_e[stage] * scale / time_s if time_s else 0.0
                per_gpu += [{"stage": stage, "power_w_mean": float(power),
                             "memory_gib": mem[pos]["total"]}] * p.tp
        oor = self.out_of_range_kinds(i)
        return Prediction(
            predictor=self.model.name, engine=dep.engine_record.description,
            deployment=deployment_fields(dep), outcome=self.outcome(i), phases=phases,
            per_gpu=[dict(g) for g in per_gpu],
            interval=self.model.interval(dep, energy_j, time_s, far=bool(oor)),
            breakdown_j={k: float(v) for k, v in zip(CATEGORIES, self.breakdown_j[i])},
            modules=self.modules(i), modules_raw_sum_j=float(self.raw_j[i]),
            flags=tuple(self.flags(i)), out_of_range_kinds=tuple(oor))


def flags(dep: Deployment, out_of_range: bool, *, power_capped: bool = False,
          short_window_power: bool = False) -> list[str]:
    """The flags a prediction of `dep` carries: extrapolated layouts, far leaves, a phase
    held at the power limit or briefly above it, notes."""
    return ((["extrapolated"] if dep.parallel.world_size > 2 else [])
            + (["out_of_range"] if out_of_range else [])
            + (["power_capped"] if power_capped else [])
            + (["short_window_power"] if short_window_power else [])
            + [f"note: {n}" for n in dep.notes])


def deployment_fields(dep: Deployment) -> dict[str, Any]:
    """model, gpu, layout and workload of a deployment, as every document states them."""
    p, w = dep.parallel, dep.workload
    return {"model": dep.model.name, "gpu": dep.gpu.name,
            "layout": {"tp": p.tp, "pp": p.pp, "dp": p.dp, "gpus": p.world_size,
                       **({"ep": p.ep} if p.ep > 1 else {})},
            "workload": {"batch": w.batch, "prompt_len": w.prompt_len, "gen_len": w.gen_len,
                         "mode": w.mode},
            "dtypes": dep.dtypes}


def price(deps: Sequence[Deployment], model: CostModel, *, builder: TableBuilder | None = None,
          detail: bool = False, prices: Prices | None = None,
          table: LeafTable | None = None) -> Priced:
    """Price deployments (all on one GPU) with `model`. `table` and `prices` may be given
    when the caller already holds them (training re-prices one table many times)."""
    table = table or (builder or TableBuilder()).table(deps, detail=detail)
    prices = prices or model.price(table)
    return partition(table, prices, model)


def row_energies(table: LeafTable, p: Prices) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, all its calls on one GPU: energy running, in launch gaps, busy-waiting."""
    count = table.count
    return (count * p.time_s * p.power_w, count * p.gap_s * p.gap_power_w(),
            count * p.wait_s * p.wait_w)


def partition(table: LeafTable, p: Prices, model: CostModel, *,
              hold_limit: bool = True) -> Priced:
    """Calls x one-call prices -> timeline and the energy partition of every GPU; with
    `hold_limit`, each phase under the board's power limit (`Prices.limit`)."""
    n, seg = len(table.deps), table.segments
    cfg, count = table.cfg, table.count
    e_run, e_gap, e_wait = row_energies(table, p)
    gpus = table.tp * table.dp                   # GPUs running each row, all replicas
    tl = lay_out(len(seg), table.segment, table.stage, count * (p.time_s + p.wait_s),
                 count * p.gap_s, hide_gaps=seg.hide_gaps, pp=table.pp[seg.cfg])
    bubble_raw = tl.bubble_s * p.wait_w          # (segments, stages), one GPU per stage
    own = e_run + e_gap + e_wait
    ns = tl.bubble_s.shape[1]
    # per (segment, stage): the combiner-weighted energy of one GPU
    gpu_e = np.bincount(table.segment * ns + table.stage, weights=p.alpha * own,
                        minlength=len(seg) * ns).reshape(len(seg), ns) \
        + bubble_raw * p.segment_alpha[:, None]
    seg_time, held = tl.time_s, np.ones_like(tl.bubble_s)
    limit_w = table.gpu.max_power_w * (1 + 1e-9)
    over = np.zeros(len(seg), bool)  # a phase whose kernels would draw more than the limit
    if hold_limit:
        seg_time, held = p.limit.hold(tl.time_s, gpu_e, table.gpu.max_power_w)
        over = gpu_e.max(1) > limit_w * tl.time_s
    weight = p.alpha * gpus[cfg] * held[table.segment, table.stage]
    bubble_e = bubble_raw * (p.segment_alpha * gpus[seg.cfg])[:, None] * held

    def per_cfg(values, where=None):
        w = values if where is None else np.where(where, values, 0.0)
        return np.bincount(cfg, weights=w, minlength=n)
    run_w = weight * e_run
    bubble_cfg = np.bincount(seg.cfg, weights=bubble_e.sum(1), minlength=n)
    breakdown = np.column_stack([per_cfg(run_w, ~table.is_comm), per_cfg(run_w, table.is_comm),
                                 per_cfg(weight * e_wait) + bubble_cfg, per_cfg(weight * e_gap)])
    row_e = weight * own
    seg_e = np.bincount(table.segment, weights=row_e, minlength=len(seg)) + bubble_e.sum(1)
    phase_e = _per_phase(seg, seg_e, n)
    stage_e = np.bincount(cfg * ns + table.stage, weights=own * held[table.segment, table.stage],
                          minlength=n * ns).reshape(n, ns)
    np.add.at(stage_e, seg.cfg, bubble_raw * held)
    raw = (np.bincount(cfg, weights=own, minlength=n)
           + np.bincount(seg.cfg, weights=bubble_raw.sum(1), minlength=n)) * gpus
    oor = np.bincount(cfg, weights=(p.out_of_range & (count > 0)).astype(float),
                      minlength=n) > 0
    # a sustained phase lowered to the limit; a shorter one left above it
    peak_w = (gpu_e * held).max(1) / np.maximum(seg_time, 1e-12)
    long = seg_time >= SUSTAINED_S
    capped = long & over
    short = ~long & (peak_w > limit_w)
    phase_t = _per_phase(seg, seg_time, n)
    return Priced(table, p, model, tl, breakdown.sum(1), breakdown, phase_t, phase_t.sum(1),
                  phase_e, stage_e, raw, oor, row_e, bubble_e,
                  np.bincount(seg.cfg, weights=capped, minlength=n) > 0,
                  np.bincount(seg.cfg, weights=short, minlength=n) > 0)


def _per_phase(seg, values: np.ndarray, n: int) -> np.ndarray:
    """Segment values summed per (deployment, phase): (n, 2)."""
    out = np.zeros((n, 2))
    np.add.at(out, (seg.cfg, seg.phase), values)
    return out


def prediction(dep: Deployment, model: CostModel) -> dict[str, Any]:
    """The prediction document of one deployment."""
    return price([dep], model, detail=True).document(0)
