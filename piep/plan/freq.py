"""Frequency response: time and board power of a priced leaf at another SM clock (SPEC §2).

A leaf measured (or predicted) at its natural clock f0 with duration T0 and power P0 is
split into parts with different clock behaviour:

* time: the compute part (roofline FLOP time share r_c) scales as f0/f; the memory part
  (share r_m) stays flat until the SMs are too slow to keep HBM busy, below `f_mem_sat`:
  T(f) = T0 * max(r_c * f0/f, r_m * m(f)/m(f0)),  m(f) = max(1, f_mem_sat/f);
* energy: static power over the duration, HBM energy per byte (clock independent), and SM
  dynamic energy E_sm = E_sm0 * (V(f)/V(f0))^2 * (a + (1-a) * f*T(f) / (f0*T0)), with a
  the per-operation part and the rest clock-tree/stall energy per cycle. The split is
  assumed: a = r_c + op_floor * (1 - r_c), op_floor (banded) the part of a memory-bound
  kernel's SM energy spent per operation (load/store, L2) rather than per cycle;
* voltage: V(f)/V(f_max) = v_ratio below `f_knee`, linear up to 1 at f_max.

A power limit caps the clock: the GPU runs at the highest clock whose power fits. The
natural clock of a leaf is f_max unless its default power reaches the limit, then the
median clock of power-capped module samples (measured).

Every parameter carries its provenance: measured (our H200 data), literature-fit (fitted
to published figures in `dvfs/literature.csv`), or assumed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from piep.core.artifacts import calibration_dir, read_json, write_json
from piep.core.errors import ConfigError
from piep.predict.power import BoardLimit
from piep.predict.pricing import Priced
from piep.predict.timeline import lay_out

SCHEMA = "piep.freq_model"
SCHEMA_VERSION = 1
PROVENANCE = ("measured", "literature-fit", "assumed")
THROTTLE_FRACTION = 0.95  # default power at >= 95 % of the limit: the leaf ran power-capped


@dataclass(frozen=True)
class Param:
    value: float
    provenance: str
    source: str
    band: tuple[float, float] | None = None  # (low, high) used for the prediction band

    def __post_init__(self):
        if self.provenance not in PROVENANCE:
            raise ValueError(f"provenance {self.provenance!r} not in {PROVENANCE}")


@dataclass(frozen=True)
class FreqModel:
    gpu: str
    f_max: float
    f_min: float
    step_mhz: float
    power_limit_w: float
    params: dict[str, Param] = field(default_factory=dict)

    def v(self, name: str) -> float:
        return self.params[name].value

    # --- curves -----------------------------------------------------------------------
    def clocks(self) -> np.ndarray:
        """The lockable SM clocks (NVML steps), ascending."""
        n = int(round((self.f_max - self.f_min) / self.step_mhz))
        return np.round(self.f_max - self.step_mhz * np.arange(n + 1))[::-1]

    def voltage(self, f) -> np.ndarray:
        f = np.asarray(f, float)
        knee, r = self.v("f_knee_mhz"), self.v("v_ratio")
        up = np.clip((f - knee) / max(self.f_max - knee, 1.0), 0.0, 1.0)
        return r + (1.0 - r) * up

    def _mem_slow(self, f) -> np.ndarray:
        return np.maximum(1.0, self.v("f_mem_sat_mhz") / np.asarray(f, float))

    def with_values(self, **values: float) -> "FreqModel":
        params = dict(self.params)
        for k, v in values.items():
            params[k] = replace(params[k], value=float(v))
        return replace(self, params=params)

    def corners(self) -> list["FreqModel"]:
        """Models at the band ends of every banded parameter (for prediction bands)."""
        banded = [k for k, p in self.params.items() if p.band]
        out = []
        for bits in range(2 ** len(banded)):
            vals = {k: self.params[k].band[(bits >> i) & 1] for i, k in enumerate(banded)}
            out.append(self.with_values(**vals))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "gpu": self.gpu,
                "f_max_mhz": self.f_max, "f_min_mhz": self.f_min, "step_mhz": self.step_mhz,
                "power_limit_w": self.power_limit_w,
                "params": {k: {"value": p.value, "provenance": p.provenance, "source": p.source,
                               **({"band": list(p.band)} if p.band else {})}
                           for k, p in self.params.items()}}


def from_json(doc: dict[str, Any]) -> FreqModel:
    if doc.get("schema") != SCHEMA or doc.get("schema_version") != SCHEMA_VERSION:
        raise ConfigError(f"not a {SCHEMA} v{SCHEMA_VERSION} document")
    params = {k: Param(float(p["value"]), p["provenance"], p["source"],
                       tuple(p["band"]) if p.get("band") else None)
              for k, p in doc["params"].items()}
    return FreqModel(doc["gpu"], float(doc["f_max_mhz"]), float(doc["f_min_mhz"]),
                     float(doc["step_mhz"]), float(doc["power_limit_w"]), params)


def freq_model_path(gpu: str) -> Path:
    """Where the shipped frequency model of `gpu` lives."""
    return calibration_dir(gpu) / "dvfs" / "freq_model.json"


def user_freq_model_path(gpu: str) -> Path:
    """Where a user's refit of the frequency model goes (`piep plan --validate`); it
    answers in place of the shipped one."""
    from piep.core.artifacts import user_gpu_dir
    return user_gpu_dir(gpu) / "dvfs" / "freq_model.json"


def load_freq_model(gpu: str) -> FreqModel:
    """The frequency model that answers for `gpu`: the user's refit, else the shipped."""
    from piep.core.artifacts import fitted
    path = fitted(gpu, "dvfs", "freq_model.json")
    if path is None:
        raise ConfigError(f"no frequency model for GPU {gpu!r} ({freq_model_path(gpu)}); "
                          f"run `python benchmarks/dvfs_fit.py` to fit one")
    return from_json(read_json(path, SCHEMA))


def write_freq_model(path: Path, fm: FreqModel, **extra: Any) -> Path:
    """The model's document plus `extra` keys (its fit, its sweep), enveloped and atomic."""
    body = {k: v for k, v in fm.to_json().items() if k not in ("schema", "schema_version")}
    return write_json(path, SCHEMA, SCHEMA_VERSION, {**body, **extra})


# --- leaves as arrays --------------------------------------------------------------------
@dataclass
class LeafArrays:
    """The priced leaves of one deployment as columns (one row per leaf use)."""
    phase: np.ndarray    # 0 prefill, 1 decode
    stage: np.ndarray
    weight: np.ndarray   # calls per GPU x alpha (energy weight)
    count: np.ndarray    # calls per GPU (time weight)
    t0: np.ndarray       # one call at the natural clock (kernel or collective)
    p0: np.ndarray
    gap: np.ndarray      # launch gap after each call (idle power, clock independent)
    wait: np.ndarray     # busy-poll waiting per call
    r_c: np.ndarray      # roofline compute share (time at peak FLOP/s / max(...))
    r_m: np.ndarray      # roofline memory share
    hbm_bytes: np.ndarray
    comm: np.ndarray     # bool
    tp: int = 1
    dp: int = 1
    pp: int = 1
    idle_w: "float | np.ndarray" = 0.0  # board power in each leaf's launch gap
    wait_w: float = 0.0
    hide_gaps: tuple[bool, bool] = (False, False)  # per phase (table.hides_host_gaps)
    limit: BoardLimit = BoardLimit()  # how the board holds its power limit over a phase
    limit_w: float = math.inf         # the board's power limit (inf: none)

    def __len__(self) -> int:
        return len(self.t0)


def leaf_arrays(priced: Priced, i: int = 0) -> LeafArrays:
    """The leaves of deployment `i` of a priced table that run at least once."""
    t, p = priced.table, priced.prices
    rows = np.flatnonzero((t.cfg == i) & (t.count > 0))
    gpu, q = t.gpu, t.q
    comm = t.is_comm[rows]
    nbytes = (q["bytes_read"] + q["bytes_written"])[rows]
    tf, tb = q["flops"][rows] / gpu.bf16_flops, nbytes / gpu.hbm_bytes_per_s
    top = np.maximum(np.maximum(tf, tb), 1e-15)
    dep = t.deps[i]
    seg = t.segments
    return LeafArrays(t.phase[rows], t.stage[rows], t.count[rows] * p.alpha[rows],
                      t.count[rows], p.time_s[rows], p.power_w[rows], p.gap_s[rows],
                      p.wait_s[rows], np.where(comm, 0.0, tf / top), np.where(comm, 1.0, tb / top),
                      np.where(comm, 0.0, nbytes), comm, tp=dep.parallel.tp, dp=dep.parallel.dp,
                      pp=dep.parallel.pp, wait_w=p.wait_w,
                      idle_w=p.idle_w if p.gap_w is None else p.gap_w[rows],
                      hide_gaps=(bool(seg.hide_gaps[2 * i]), bool(seg.hide_gaps[2 * i + 1])),
                      limit=p.limit, limit_w=gpu.max_power_w)


# --- the response ------------------------------------------------------------------------
def natural_clock(fm: FreqModel, leaves: LeafArrays) -> np.ndarray:
    capped = leaves.p0 >= THROTTLE_FRACTION * fm.power_limit_w
    return np.where(capped, fm.v("f_throttled_mhz"), fm.f_max)


def response(fm: FreqModel, leaves: LeafArrays, clocks: np.ndarray,
             power_limit_w: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(time of one call, energy of one call incl. gap and wait), shape (leaves, clocks),
    for every leaf locked at each clock, with the GPU still obeying the power limit."""
    f0 = natural_clock(fm, leaves)[:, None]
    lock = np.asarray(clocks, float)[None, :]
    # a leaf the default limit already holds at f0 never runs faster than f0
    lock = np.minimum(np.broadcast_to(lock, (len(leaves), lock.shape[1])), f0)
    t_run, e_run = _at(fm, leaves, f0, lock)
    limit = fm.power_limit_w if power_limit_w is None else power_limit_w
    if limit >= fm.power_limit_w:  # the default limit: a leaf's natural state is what it is
        limit = np.maximum(limit, leaves.p0)[:, None]
    over = e_run > limit * t_run * (1 + 1e-9)
    if over.any():  # the firmware lowers the clock until the power fits
        grid = fm.clocks()
        t_g, e_g = _at(fm, leaves, f0, np.broadcast_to(grid[None, :], (len(leaves), len(grid))))
        fits = e_g <= limit * t_g * (1 + 1e-9)
        # highest grid clock that fits, per leaf (the lowest clock if none does)
        idx = np.where(fits.any(1), len(grid) - 1 - np.argmax(fits[:, ::-1], 1), 0)
        f_fit = grid[idx][:, None]
        lock = np.where(over, np.minimum(lock, f_fit), lock)
        t_run, e_run = _at(fm, leaves, f0, lock)
    t_wait = leaves.wait[:, None]
    v2 = (fm.voltage(lock) / fm.voltage(f0)) ** 2
    e_wait = t_wait * (fm.v("p_static_w") + (leaves.wait_w - fm.v("p_static_w")) * v2 * lock / f0)
    t = t_run + leaves.gap[:, None] + t_wait
    e = e_run + leaves.gap[:, None] * np.reshape(leaves.idle_w, (-1, 1)) + e_wait
    return t, e


def _at(fm: FreqModel, lv: LeafArrays, f0: np.ndarray, f: np.ndarray):
    """Kernel time and energy of one call at clock f (no power limit)."""
    t0, p0 = lv.t0[:, None], lv.p0[:, None]
    rc, rm = lv.r_c[:, None], lv.r_m[:, None]
    scale = np.maximum(rc * f0 / f, rm * fm._mem_slow(f) / fm._mem_slow(f0))
    scale = scale / np.maximum(np.maximum(rc, rm), 1e-12)
    t = t0 * scale
    p_static = fm.v("p_static_w")
    e0 = p0 * t0
    e_hbm = np.minimum(lv.hbm_bytes[:, None] * fm.v("hbm_j_per_byte"),
                       0.8 * np.maximum(e0 - p_static * t0, 0.0))
    e_sm0 = np.maximum(e0 - p_static * t0 - e_hbm, 0.0)
    floor = fm.params["op_floor"].value if "op_floor" in fm.params else 0.0
    a = np.clip(rc + floor * (1.0 - rc), 0.0, 1.0)
    v2 = (fm.voltage(f) / fm.voltage(f0)) ** 2
    e_sm = e_sm0 * v2 * (a + (1.0 - a) * (f * t) / (f0 * t0))
    return t, p_static * t + e_hbm + e_sm


@dataclass
class PhaseTotals:
    """Per-phase time (s) and energy (J, all GPUs) for a clock per phase."""
    time_s: np.ndarray    # (2,)
    energy_j: np.ndarray  # (2,)

    @property
    def total_time(self) -> float:
        return float(self.time_s.sum())

    @property
    def total_energy(self) -> float:
        return float(self.energy_j.sum())


def phase_totals(fm: FreqModel, lv: LeafArrays, t_call: np.ndarray, e_call: np.ndarray,
                 choice: np.ndarray) -> PhaseTotals:
    """Sum the chosen column per leaf (choice: index into the clock axis per leaf) into
    phase times (the timeline of `piep.predict.timeline`) and energies (with pipeline
    bubbles at the busy-poll power), each phase under the board's power limit as the
    predictor holds it."""
    time_s, energy_j = _totals(lv, t_call, e_call, np.asarray(choice)[None, :])
    return PhaseTotals(time_s[:, 0], energy_j[:, 0])


def totals_at_each_clock(lv: LeafArrays, t_call: np.ndarray,
                         e_call: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`phase_totals` with every leaf at the same clock, for each clock at once: phase
    times and energies, (2, clocks) each (the same sums, in the same order)."""
    clocks = t_call.shape[1]
    return _totals(lv, t_call, e_call,
                   np.broadcast_to(np.arange(clocks)[:, None], (clocks, len(lv))))


def _totals(lv: LeafArrays, t_call: np.ndarray, e_call: np.ndarray,
            choice: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Phase times and energies, (2, K), of K choices of a clock per leaf ((K, leaves)):
    each choice's two phases are two segments of one timeline."""
    k = len(choice)
    rows = np.arange(len(lv))
    gap = lv.gap * lv.count  # t_call holds the gap after each call
    busy = t_call[rows, choice] * lv.count - gap
    segment = (lv.phase[None, :] + 2 * np.arange(k)[:, None]).ravel()
    stage = np.tile(lv.stage, k)
    tl = lay_out(2 * k, segment, stage, busy.ravel(), np.tile(gap, k),
                 hide_gaps=np.tile(np.array(lv.hide_gaps), k), pp=np.full(2 * k, lv.pp))
    ns = tl.bubble_s.shape[1]
    gpu_e = np.bincount(segment * ns + stage, weights=(e_call[rows, choice] * lv.weight).ravel(),
                        minlength=2 * k * ns).reshape(2 * k, ns) + tl.bubble_s * lv.wait_w
    held_s, factor = lv.limit.hold(tl.time_s, gpu_e, lv.limit_w)
    energy_j = (gpu_e * factor).sum(1) * lv.tp * lv.dp
    return held_s.reshape(k, 2).T, energy_j.reshape(k, 2).T
