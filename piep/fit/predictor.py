"""Training of the learned predictor from a GPU's committed calibration, and the
leave-one-model-out evaluation that sizes its conformal intervals."""

from __future__ import annotations

import logging
import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from piep.core.config import ModelSpec, Parallel, Workload
from piep.core.gpus import DEFAULT_GPU, GPU, load_gpu
from piep.core.layout import Deployment
from piep.predict.collectives import Collectives
from piep.core.dataset import Calibration, reference_host
from piep.predict.host import HostTerms
from piep.predict.learned import FEATURES as ALPHA_FEATURES
from piep.predict.learned import Combiner, LearnedModel, interval_group
from piep.predict.module_models import (ModuleModels, ModuleOutputs, fit_module_models,
                                        training_rows)
from piep.predict.pricing import Priced, partition, price
from piep.predict.table import KIND_ID, PHASES, LeafTable, TableBuilder, select
from piep.tree import build_tree
from piep.tree.builder import LINEAR_KINDS, shape_key
from piep.tree.nodes import COMPUTE_KINDS
from piep.core.records import Measurement, merge_repeats
from piep.core.samples import ModuleSample

log = logging.getLogger("piep.train")
ALPHA_RIDGE = 0.05


@dataclass
class Case:
    """A measured run and the deployment it is priced as."""
    run: Measurement
    dep: Deployment

    @property
    def energy_j(self) -> float:
        return self.run.energy_j

    @property
    def time_s(self) -> float:
        return self.run.time_s


def cases(cal: Calibration, gpu: GPU) -> list[Case]:
    """The reference runner's runs (repeats merged), each as it ran."""
    return [Case(m, m.deployment(gpu)) for m in merge_repeats(cal.e2e)]


# --- which module samples belong to a model alone (for leave-one-model-out) -----------
def signatures(spec: ModelSpec, gpu: GPU) -> set[tuple]:
    """Token-free kernel shapes of a model's trees over TP degrees."""
    sig: set[tuple] = set()
    for tp in (1, 2, 4, 8):
        if spec.num_heads % tp or (spec.num_kv_heads % tp and tp % spec.num_kv_heads):
            continue
        dep = Deployment(spec, Parallel(tp=tp), Workload(batch=1, prompt_len=16, gen_len=2), gpu)
        for _, _, leaf in build_tree(dep).leaves():
            if leaf.kind in COMPUTE_KINDS:
                sig.add(sample_signature(shape_key(leaf)))
    return sig


def sample_signature(s: dict[str, Any]) -> tuple:
    k = s["kind"]
    if k in LINEAR_KINDS:
        return (k, s["d_in"], s["d_out"])
    if "kv_heads" in s:  # attention, masked SDPA, KV-cache copies
        return (k, s["heads"], s["kv_heads"])
    return (k, s.get("width", s.get("vocab")))


def _shape_tuple(spec: ModelSpec) -> tuple:
    return (spec.hidden_size, spec.num_heads, spec.num_kv_heads, spec.intermediate_size,
            spec.vocab_size)


def exclusive_filter(held_out: ModelSpec, gpu: GPU) -> Callable[[ModuleSample], bool]:
    """True for module samples whose kernel shape only the held-out model (or a model of
    identical shape) has, among every model the sampler drew shapes from."""
    from piep.core.models import load_model, shipped_models, synthetic_specs
    others = [load_model(m.name) for m in shipped_models()] + synthetic_specs()
    others = [o for o in others if not o.is_moe and _shape_tuple(o) != _shape_tuple(held_out)]
    shared = set().union(*(signatures(o, gpu) for o in others)) if others else set()
    mine = signatures(held_out, gpu) - shared
    return lambda sample: sample_signature(sample.shape) in mine


# --- fitting ----------------------------------------------------------------------------
@dataclass
class TrainingSet:
    """End-to-end cases as one leaf table, with the module models' outputs for it: the
    host terms and the combiner are fitted by re-pricing this table, not by rebuilding it."""
    cases: list[Case]
    table: LeafTable
    modules: ModuleOutputs

    @classmethod
    def build(cls, model: LearnedModel, cases_: list[Case]) -> "TrainingSet":
        table = TableBuilder().table([c.dep for c in cases_])
        return cls(cases_, table, model.modules.predict(table, model.gpu))

    def price(self, model: LearnedModel) -> Priced:
        return partition(self.table, model.price(self.table, self.modules), model)

    def subset(self, keep: np.ndarray) -> "TrainingSet":
        """The cases where `keep` is true, with their rows (no new GBDT call)."""
        idx = np.flatnonzero(keep)
        rows = np.isin(self.table.cfg, idx)
        table = select(self.table, idx)
        return TrainingSet([self.cases[i] for i in idx], table, self.modules.take(rows))


def measured_phases(cases_: list[Case], key: str) -> np.ndarray:
    """Each case's measured `key` (energy_j, time_s) of prefill and decode, (cases, 2);
    NaN where the run has no phase split."""
    values = [[getattr(c.run.phase(name), key) for name in PHASES] for c in cases_]
    return np.array([[np.nan if v is None else v for v in row] for row in values], float)


def _time_error(ts: TrainingSet, model: LearnedModel) -> float:
    """Mean squared log error of total time and (at a quarter weight) of each phase's
    time: a short prefill must not hide in a total."""
    priced = ts.price(model)
    meas = np.array([c.time_s for c in ts.cases])
    errs = [np.log(priced.time_s / meas) ** 2]
    measured = measured_phases(ts.cases, "time_s")
    for ph in range(len(PHASES)):
        m_ph = measured[:, ph]
        p_ph = priced.phase_time_s[:, ph]
        ok = (m_ph > 0) & (p_ph > 0)
        errs.append(0.25 * np.log(p_ph[ok] / m_ph[ok]) ** 2)
    values = np.concatenate(errs)
    return float(values.mean())


# host terms fitted in log space (positive); the others as they are
_LINEAR_TERMS = ("decode_batch_exponent",)


def fit_host_terms(model: LearnedModel, ts: TrainingSet, names: tuple[str, ...], *,
                   maxiter: int, restarts: int = 0) -> None:
    """Nelder-Mead on the log-time error of `ts` over the host terms `names` (e.g.
    `host_launch_s`, `time_scale.decode`), started from their current values; restarted
    from its best point up to `restarts` times while that lowers the error
    (`piep.stats.search`)."""
    from piep.stats.search import nelder_mead
    host = model.host
    log_space = [n not in _LINEAR_TERMS for n in names]
    x0 = [math.log(host.term(n)) if lg else host.term(n)
          for n, lg in zip(names, log_space)]

    def apply(theta):
        for n, lg, v in zip(names, log_space, theta):
            host.set_term(n, float(math.exp(v)) if lg else float(v))
    apply(nelder_mead(lambda th: (apply(th), _time_error(ts, model))[1], x0, xatol=0.01,
                      fatol=1e-6, maxiter=maxiter, restarts=restarts))


def fit_time_terms(model: LearnedModel, ts: TrainingSet) -> None:
    """The reference runner's host terms, in two steps so that noisy eager runs do not
    bend the graph fit: on graph runs the graph gap per kernel, the host time per kernel of
    (eager) prefill, the in-situ / isolated kernel time ratio per phase and its drift with
    the tokens of a decode step (a power law); then, on eager runs, the host time per
    kernel of an eager decode step."""
    eager_runs = np.array([c.dep.workload.mode == "eager" for c in ts.cases])
    graph, eager = ts.subset(~eager_runs), ts.subset(eager_runs)
    model.host.time_scale = dict(model.host.time_scale)
    if graph.cases:
        fit_host_terms(model, graph, ("gap_graph_s", "host_launch_s", "time_scale.prefill",
                                      "time_scale.decode", "decode_batch_exponent"),
                       maxiter=300)
    if eager.cases:
        fit_host_terms(model, eager, ("eager_decode_launch_s",), maxiter=100)


# where the board-limit fit starts (the H200's prefills: ~1.07x the limit over short
# windows, the clock's slowdown ~0.8 of a power law in the excess)
BOARD_LIMIT_START = {"burst_power_ratio": 1.07, "power_stretch_exponent": 0.8, "burst_s": 0.7}


def fit_board_limit(model: LearnedModel, ts: TrainingSet) -> None:
    """How the board holds its power limit (`piep.predict.power`): Nelder-Mead on the
    squared log errors of each measured phase's energy and time (runs with a phase
    split; the phases under the limit do not move), from BOARD_LIMIT_START."""
    from scipy.optimize import minimize
    host = model.host
    names = tuple(BOARD_LIMIT_START)
    meas = {k: measured_phases(ts.cases, k) for k in ("energy_j", "time_s")}
    ok = np.isfinite(meas["energy_j"]) & np.isfinite(meas["time_s"]) \
        & (meas["energy_j"] > 0) & (meas["time_s"] > 0)
    if not ok.any():
        return

    def error(theta):
        ratio, exponent, burst_s = theta
        if not (ratio >= 1.0 and exponent >= 0.0 and 0.05 <= burst_s <= 0.95):
            return 1e9
        for n, v in zip(names, theta):
            setattr(host, n, float(v))
        priced = ts.price(model)
        e = np.log(priced.phase_energy_j[ok] / meas["energy_j"][ok])
        t = np.log(priced.phase_time_s[ok] / meas["time_s"][ok])
        return float(np.mean(e ** 2 + t ** 2))
    res = minimize(error, [BOARD_LIMIT_START[n] for n in names], method="Nelder-Mead",
                   options={"xatol": 1e-3, "fatol": 1e-8, "maxiter": 300})
    for n, v in zip(names, res.x):
        setattr(host, n, float(v))


def fit_combiner(model: LearnedModel, ts: TrainingSet, *, phase_weight: float = 0.0) -> None:
    """alpha(c) = 1 + tanh(W.f(c) + b)/tau over the module energies of each training run
    (every leaf that runs, and every stage's pipeline bubbles); the features of a module
    take the tokens of its phase (replica batch x prompt in prefill, the replica batch in
    decode). `phase_weight`: the log errors of each phase's energy count too, at this
    weight beside the whole run's (runs with a measured prefill/decode split)."""
    from scipy.optimize import least_squares
    model.combiner = Combiner()
    priced = ts.price(model)
    t = ts.table
    b = np.array([c.dep.replica_batch for c in ts.cases], float)
    prompt = np.array([c.dep.workload.prompt_len for c in ts.cases], float)
    phase_tokens = np.column_stack([b * prompt, b])
    run = t.count > 0
    seg = t.segments
    bubble = priced.timeline.bubble_s > 0
    seg_of, _ = np.nonzero(bubble)
    case = np.concatenate([t.cfg[run], seg.cfg[seg_of]])
    kind_id = np.concatenate([t.kind_id[run], np.full(len(seg_of), KIND_ID["pipeline_wait"])])
    phase = np.concatenate([t.phase[run], seg.phase[seg_of]])
    energy = np.concatenate([priced.row_energy_j[run], priced.bubble_energy_j[bubble]])
    f = Combiner.features(kind_id, phase == 1, t.eager[case], phase_tokens[case, phase])
    measured = np.array([c.energy_j for c in ts.cases])
    n = len(ts.cases)
    by_phase = measured_phases(ts.cases, "energy_j")
    split = np.isfinite(by_phase).all(1) & (by_phase > 0).all(1) if phase_weight else \
        np.zeros(n, bool)

    def resid(theta):
        alpha = Combiner(theta[:-1], theta[-1]).weights(f)
        pred = np.bincount(case, weights=alpha * energy, minlength=n)
        phases = np.bincount(case * 2 + phase, weights=alpha * energy,
                             minlength=2 * n).reshape(n, 2)
        return np.concatenate([np.log(pred / measured),
                               phase_weight * np.log(phases[split] / by_phase[split]).ravel(),
                               math.sqrt(ALPHA_RIDGE) * theta[:-1]])
    res = least_squares(resid, np.zeros(len(ALPHA_FEATURES) + 1))
    model.combiner = Combiner(res.x[:-1], float(res.x[-1]))


def fit(cal: Calibration, gpu: GPU, train: list[Case], *,
        module_filter: Callable[[ModuleSample], bool] | None = None) -> LearnedModel:
    keep = [not (module_filter and module_filter(r)) for r in cal.modules]
    samples = [r for r, k in zip(cal.modules, keep) if k]
    kept = cal.feature_cache.get(gpu.name)  # every sample's row, for the fits on subsets
    if kept is None or kept[0] is not cal.modules:
        kept = cal.feature_cache[gpu.name] = (cal.modules, training_rows(cal.modules, gpu))
    rows = [t for t, k in zip(kept[1], keep) if k]
    comm = Collectives.from_calibration(cal.collectives, cal.wait_fits, cal.collective_samples)
    host = reference_host(cal.host)
    launch_s = host.launch_s if host and host.launch_s is not None else None
    terms = HostTerms(host_launch_s=(gpu.kernel_gap_eager_s if launch_s is None
                                     else launch_s) * 3,
                      launch_gap_w=statistics.median([h.launch_gap_power_w
                                                      for h in cal.host])
                      if cal.host else gpu.idle_power_w,
                      busy_wait_w=gpu.wait_power_w, comm_w=gpu.comm_power_w,
                      **BOARD_LIMIT_START)
    model = LearnedModel(gpu, ModuleModels(fit_module_models(samples, gpu, rows)),
                         comm, terms)
    ts = TrainingSet.build(model, train)
    fit_time_terms(model, ts)
    fit_combiner(model, ts)  # the board limit is fitted on combiner-weighted energies
    fit_board_limit(model, ts)
    fit_combiner(model, ts)
    model.meta = {"module_samples": len(samples), "e2e_train": len(train),
                  "host_launch_measured_s": launch_s}
    return model


# --- evaluation -------------------------------------------------------------------------
def leave_one_model_out(cal: Calibration, gpu: GPU, all_cases: list[Case], *,
                        strict_modules: bool = True, progress=None,
                        train_cases: list[Case] | None = None) -> list[dict[str, Any]]:
    """Predict every run with a predictor that saw no end-to-end run of its model (and,
    with `strict_modules`, no module sample of a kernel shape only that model has), fitted
    on the other models' runs among `train_cases` (default: every run)."""
    models = sorted({c.run.model for c in all_cases})
    out = []
    for i, name in enumerate(models):
        held = [c for c in all_cases if c.run.model == name]
        train = [c for c in (all_cases if train_cases is None else train_cases)
                 if c.run.model != name]
        filt = exclusive_filter(held[0].dep.model, gpu) if strict_modules else None
        model = fit(cal, gpu, train, module_filter=filt)
        out += rows_of(held, model)
        if progress:
            progress(i + 1, len(models), name)
    return out


def rows_of(cases_: list[Case], model) -> list[dict[str, Any]]:
    """Measured beside predicted, one row per case."""
    priced = price([c.dep for c in cases_], model)
    compute_only = np.bincount(priced.table.cfg, weights=np.where(
        priced.table.is_comm, 0.0, priced.row_energy_j), minlength=len(cases_))
    out = []
    for i, c in enumerate(cases_):
        r = c.run
        out.append({
            "model": r.model, "key": r.key, "mode": r.mode,
            "layout": interval_group(r.mode, c.dep.parallel).split("/")[1],
            "tp": r.parallel.tp, "pp": r.parallel.pp, "dp": r.parallel.dp, "batch": r.batch,
            "prompt_len": r.prompt_len, "gen_len": r.gen_len,
            "energy_j": r.energy_j, "time_s": r.time_s,
            "pred_energy_j": float(priced.energy_j[i]), "pred_time_s": float(priced.time_s[i]),
            "pred_raw_j": float(priced.raw_j[i]),
            "pred_prefill_j": float(priced.phase_energy_j[i, 0]),
            "prefill_j": r.prefill.energy_j,
            "pred_decode_j": float(priced.phase_energy_j[i, 1]),
            "decode_j": r.decode.energy_j,
            "pred_compute_only_j": float(compute_only[i]),
            "flags": priced.flags(i)})
    return out


def conformal(rows: list[dict[str, Any]], level: float = 0.9) -> tuple[dict, dict, dict]:
    """q-quantile of |log(pred/measured)| per (mode, layout) group, pooled where small, and
    what each band is (`piep.stats.conformal.basis`)."""
    from piep.stats.conformal import band, basis

    def q(values):
        return band(values, level)
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(f"{r['mode']}/{r['layout']}", []).append(r)
    words = "leave-one-model-out residuals"
    qe = {"all": q([abs(math.log(r["pred_energy_j"] / r["energy_j"])) for r in rows])}
    qt = {"all": q([abs(math.log(r["pred_time_s"] / r["time_s"])) for r in rows])}
    how = {"all": basis(len(rows), words, "all")}
    for g, rs in groups.items():
        if len(rs) >= 8:
            qe[g] = q([abs(math.log(r["pred_energy_j"] / r["energy_j"])) for r in rs])
            qt[g] = q([abs(math.log(r["pred_time_s"] / r["time_s"])) for r in rs])
            how[g] = basis(len(rs), words, g)
    return qe, qt, how


def train_shipped(gpu_name: str = DEFAULT_GPU, progress=None) -> tuple[LearnedModel, list[dict]]:
    """Fit on every run; intervals from leave-one-model-out residuals."""
    from piep.core.dataset import load_calibration
    gpu = load_gpu(gpu_name)
    cal = load_calibration(gpu_name)
    if not cal.modules or not cal.e2e:
        from piep.core.errors import ArtifactError
        raise ArtifactError(f"no training data for {gpu_name} here (module samples, end-to-end "
                            f"runs): `piep train` fits on a checkout's calibration/ "
                            f"(PIEP_HOME=CHECKOUT), an installed piep carries only the "
                            f"trained predictor")
    all_cases = cases(cal, gpu)
    rows = leave_one_model_out(cal, gpu, all_cases, progress=progress)
    model = fit(cal, gpu, all_cases)
    model.intervals, model.time_intervals, model.interval_basis = conformal(rows)
    model.meta["data_hash"] = cal.data_hash()
    return model, rows


def add_kinds(gpu_name: str = DEFAULT_GPU) -> tuple[LearnedModel, dict[str, int]]:
    """The shipped predictor with a model for each kind group it has none of yet, fitted
    on the committed module samples (each as a full `piep train` would fit it); every
    model it has, its combiner, terms and intervals stay as they are, so no answer it
    priced from its own models moves. Returns it and the samples of each group added."""
    from piep.core.dataset import load_calibration
    from piep.predict.store import load, predictor_dir
    gpu = load_gpu(gpu_name)
    model = load(predictor_dir(gpu_name), gpu)
    samples = load_calibration(gpu_name).modules
    fitted = fit_module_models(samples, gpu)
    added = {g: km for g, km in fitted.items() if g not in model.modules.kinds}
    counts = {g: len(km.train_z) for g, km in added.items()}
    model.modules.kinds.update(added)
    model.meta = {**model.meta, "added_kinds": {**model.meta.get("added_kinds", {}),
                                                **counts}}
    return model, counts


def refit_on_measurements(gpu_name: str, path) -> tuple[LearnedModel, int]:
    """Keep the shipped module models; refit the gap terms and the combiner on a user's
    own end-to-end records (e.g. of their serving engine)."""
    from piep.core.errors import ArtifactError
    from piep.predict.store import predictor_dir
    from piep.core.records import read_runs
    from piep.predict.store import load
    gpu = load_gpu(gpu_name)
    folder = predictor_dir(gpu_name)
    model = load(folder, gpu) if (folder / "predictor.json").is_file() else None
    if model is None:
        raise ArtifactError(f"no shipped predictor for {gpu_name}; run `piep train` first")
    runs = [m for m in read_runs(path, "piep.measurement", given=True)
            if m.energy_j is not None]
    if len(runs) < 3:
        raise ArtifactError(f"{path}: needs at least 3 piep.measurement records with energy_j, "
                            f"found {len(runs)}")
    from piep.fit.plausible import check_runs
    check_runs(runs, gpu)
    train = [Case(m, m.deployment(gpu)) for m in merge_repeats(runs)]
    ts = TrainingSet.build(model, train)
    fit_time_terms(model, ts)
    fit_combiner(model, ts)
    model.meta = {**model.meta, "refit_records": len(train)}
    moved = moves_beyond_band(load(folder, gpu), model, [c.dep for c in train])
    if moved:
        model.meta["moves_shipped"] = moved
    return model, len(train)


# deployments a refit is checked on besides its own runs' (the README's and a few layouts)
PROBES = ({"model": "llama-2-7b", "tp": 2, "batch": 16},
          {"model": "llama-2-7b", "batch": 1, "mode": "eager"},
          {"model": "llama-2-13b", "pp": 2, "batch": 8, "prompt_len": 1024},
          {"model": "llama-3-8b", "dp": 2, "batch": 32, "gen_len": 256})


def moves_beyond_band(shipped: LearnedModel, refit: LearnedModel,
                      deps: list) -> dict[str, Any] | None:
    """Where a refit moves the shipped predictor's energy or time beyond the refit's own
    90 % band (its intervals are the shipped ones: not sized on the new runs), the
    largest such move (on the runs' deployments and `PROBES`), else None."""
    from piep.core.scenario import Scenario
    probes = [Scenario.build(gpu=shipped.gpu, check_memory=False, **p).deployment
              for p in PROBES]
    deps = list(deps) + probes
    old, new = price(deps, shipped), price(deps, refit)
    worst = None
    for i, dep in enumerate(deps):
        group = interval_group(dep.workload.mode, dep.parallel)
        for key, ours, theirs, bands in (
                ("energy_j", new.energy_j[i], old.energy_j[i], refit.intervals),
                ("time_s", new.time_s[i], old.time_s[i], refit.time_intervals)):
            moved = abs(math.log(ours / theirs))
            band = bands.get(group, bands.get("all", 0.2))
            if moved > band and (worst is None or moved - band > worst["beyond_log"]):
                worst = {"quantity": key, "moved_pct": float(100 * (ours / theirs - 1)),
                         "band_pct": 100 * (math.exp(band) - 1),
                         "beyond_log": float(moved - band),
                         "deployment": dep.describe()}
    return worst
