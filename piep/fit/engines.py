"""Fitting an engine's profile: its host terms (and combiner) over piep's module models on
the engine's end-to-end runs, leave-one-model-out intervals, the hosts of its runs. What a
prediction reads (the profile, its loading) stays in piep.predict.engines."""

from __future__ import annotations

import copy
import functools
import logging
import math
import statistics
from dataclasses import replace
from typing import Any

from piep.core.errors import ArtifactError, ConfigError
from piep.core.engines import ENGINES, engine as engine_record, names as engine_names
from piep.predict.engines import EngineProfile, ProfileMeta, shipped_profile_dir
from piep.core.records import REFERENCE, Measurement, merge_repeats, read_runs
from piep.core.scenario import EngineRef

log = logging.getLogger("piep.engines")
# where a fit starts a term the reference runner lacks
START = {"step_host_s": 1e-3, "call_host_s": 1e-2}
COMBINER_PHASE_WEIGHT = 0.5  # each phase's log energy error beside the whole run's


def engine_records(gpu: str, engine: str) -> list:
    """The shipped end-to-end runs of an engine (every measurement with energy): batch
    runs (`Measurement`s), or replayed request traces for a serving engine
    (`ServingReplay`s)."""
    schema = engine_record(engine).record_schema
    rows = []
    for f in sorted((shipped_profile_dir(gpu, engine) / "raw").glob("*.jsonl")):
        rows += [r for r in read_runs(f, schema) if r.energy_j is not None]
    return rows


# --- fitting -----------------------------------------------------------------------------
def host_reference_s(records: list) -> float | None:
    """The calibration host of a set of runs: the median of their host probes."""
    probes = [r.host_probe_s for r in records if r.host_probe_s]
    return statistics.median(probes) if probes else None


@functools.lru_cache(maxsize=None)  # every fold of a leave-one-out fit asks for it
def typical_host_s(gpu: str) -> float | None:
    """The typical host of a GPU's calibration machines: the median launch probe of every
    shipped run of every engine fitted per host (the hosts drift from machine to machine
    and over time; one host for all engines keeps them comparable). A shipped profile
    predicts a deployment of unknown host for it."""
    return host_reference_s([r for e in engine_names(host_fitted=True)
                             for r in engine_records(gpu, e)])


def profile_hosts(records: list, gpu: str,
                  default_host_s: float | str | None) -> tuple[float | None, float | None]:
    """(reference, default) launch probes of a profile fitted per host on `records`: their
    median, and the host a deployment of unknown probe is predicted for ("typical":
    `typical_host_s`; None: the reference itself); (None, None) without probes."""
    ref = host_reference_s(records)
    if default_host_s == "typical":
        default_host_s = typical_host_s(gpu)
    return ref, default_host_s if ref else None


def _cases(records: list[Measurement], gpu, engine: str, on_their_hosts: bool = False,
           like: str | None = None):
    """The runs as training cases (repeats merged), their trees built as `like`'s (default:
    `engine`'s); `on_their_hosts`: each with its host probe."""
    from piep.fit.predictor import Case
    _own_runs(records, engine)
    return [Case(m, m.deployment(gpu, engine=like or engine, on_its_host=on_their_hosts))
            for m in merge_repeats(records)]


def _own_runs(records: list, engine: str) -> None:
    """Every record is a run of `engine` (or names none)."""
    for r in records:
        if r.engine not in (None, engine):
            raise ArtifactError(f"a record of {r.engine!r} among the runs of {engine!r}; "
                                + ("piep's reference runner is fitted by `piep train "
                                   "--from-measurements` (no --engine)" if r.engine == REFERENCE
                                   else "fit each engine on its own runs"))


def engine_version(records: list, engine: str) -> str:
    """The one version of `engine` its runs were measured with: runs of several versions
    are refused (a profile never mixes them silently)."""
    versions = sorted({str(r.engine_version or "unknown") for r in records})
    if len(versions) > 1:
        raise ConfigError(f"the runs of {engine} come from {len(versions)} of its versions "
                          f"({', '.join(versions)}): a profile is fitted on one; keep the "
                          "runs of one version (each record's engine.version)")
    return versions[0] if versions else "unknown"


def fit_profile(base, records: list[Measurement], engine: str, *,
                refit_combiner: bool | None = None, terms: tuple[str, ...] | None = None,
                host_form: dict[str, Any] | None = None,
                default_host_s: float | str | None = "typical",
                like: str | None = None) -> EngineProfile:
    """Fit `engine`'s host terms (and, with `refit_combiner`, its combiner; by default
    where its registry record says `refit_combiner`) on its runs, over the module models
    of `base` (the shipped learned predictor). `terms` and `host_form` replace the
    record's fitted terms and host path: what the report's ablations fit.
    `default_host_s`: the launch probe of the host a deployment of unknown host is
    predicted for ("typical": `typical_host_s`, a shipped profile's; None: the runs' own
    host, a user's profile of their own runs). `like`: an engine of the user's own (a
    name no built-in has), fitted and priced as this built-in one (a `like_base`)."""
    from piep.fit.predictor import TrainingSet, fit_combiner, fit_host_terms
    # a user's engine: validated as every engine reference is
    recipe = EngineRef(name=engine, like=like).structure if like else engine
    fitted = engine_names(reference=False)
    if recipe not in fitted:
        raise ConfigError(f"no fit is defined for engine {engine!r}; engines: "
                          f"{', '.join(fitted)}, or one of your own priced as "
                          f"another (--like {'|'.join(engine_names(like_base=True))})")
    record = ENGINES[recipe]
    _own_runs(records, engine)  # before any fitting
    version = engine_version(records, engine)
    if refit_combiner is None:
        refit_combiner = record.refit_combiner
    ref, default = profile_hosts(records, base.gpu.name, default_host_s) \
        if record.host_fitted else (None, None)
    cases = _cases(records, base.gpu, engine, on_their_hosts=ref is not None, like=like)
    if len(cases) < 3:
        raise ArtifactError(f"fitting {engine} needs at least 3 end-to-end runs with energy, "
                            f"found {len(cases)}")
    terms = record.fitted_terms if terms is None else terms
    host = copy.deepcopy(base.host)
    host.host_probe_ref_s, host.host_probe_default_s = ref, default
    for name in terms:
        if name in START and not getattr(host, name):
            setattr(host, name, START[name])
    if record.compiled_decode:  # its fused kernels' in-situ time, from its census
        from piep.fit.census import fused_kernel_estimate
        shipped = [r for e in engine_names(host_fitted=True, kind="batch")
                   for r in engine_records(base.gpu.name, e)]
        specs = {r.model: r.spec for r in shipped + records}  # the censused models' shapes
        host.fused_kernel_s = float(fused_kernel_estimate(base.gpu, recipe, specs) or 0.0)
    for name, value in (dict(record.host_form) if host_form is None else host_form).items():
        setattr(host, name, value)
    model = replace(base, host=host)
    ts = TrainingSet.build(model, cases)
    # an engine's host terms trade off along flat directions (per call against per launch):
    # a single search stopped where hf-static's per-call time had run down to 0.06 ms; the
    # restarted one stops at a lower error. The reference runner's fit keeps one search: its
    # flat terms (the graph gap, the burst window) ran to their bounds when restarted
    fit_host_terms(model, ts, terms, maxiter=400, restarts=3)
    if refit_combiner:  # the prefill/decode split of its runs held too
        fit_combiner(model, ts, phase_weight=COMBINER_PHASE_WEIGHT)
    return EngineProfile(engine, version, base.gpu.name, model.host,
                         model.combiner if refit_combiner else None,
                         meta=ProfileMeta(
                             runs=len(cases), models=sorted({c.run.model for c in cases}),
                             tp_measured=sorted({c.run.parallel.tp for c in cases}),
                             window_measured=any(c.dep.past_window for c in cases),
                             fitted_terms=list(terms),
                             fused_kernel_from="kernel census" if host.fused_kernel_s
                             else None,
                             combiner="refit" if refit_combiner else "reference"),
                         like=like)


def profile_lomo(base, records: list[Measurement], engine: str, *,
                 hosts: tuple[bool, ...] = (False, True), **fit: Any
                 ) -> dict[bool, list[dict[str, Any]]]:
    """Every run predicted by a profile fitted on the other models' runs of the engine
    (the module models are the shipped ones, fitted on isolated samples), for each of
    `hosts` (True: each run on its own host; False: on the profile's reference host, as
    a prediction without a host probe) from the same held-out fits (one per model);
    `fit`: the keywords of `fit_profile`."""
    from piep.fit.workers import Pace
    cases = _cases(records, base.gpu, engine, like=fit.get("like"))
    out: dict[bool, list[dict[str, Any]]] = {h: [] for h in hosts}
    models = sorted({c.run.model for c in cases})
    pace = Pace(f"{engine} leave-one-model-out" + ("" if True in hosts else
                                                   " (no host probe)"))
    for i, name in enumerate(models):
        prof = fit_profile(base, [c.run for c in cases if c.run.model != name], engine, **fit)
        test = [c.run for c in cases if c.run.model == name]
        for h in hosts:
            out[h] += _predicted(base, prof, test, engine, h, fit.get("like"))
        pace(i + 1, len(models), name)
    return out


def profile_rows(base, train: list[Measurement], test: list[Measurement], engine: str,
                 *, with_host: bool = True, **fit: Any) -> list[dict[str, Any]]:
    """The runs `test` predicted by a profile of `engine` fitted on the runs `train`
    (`fit`: the keywords of `fit_profile`): each on its own host (its probe over the
    profile's reference), or with `with_host=False` on the profile's reference host (a
    prediction without a host probe)."""
    return _predicted(base, fit_profile(base, train, engine, **fit), test, engine, with_host,
                      fit.get("like"))


def _predicted(base, profile: EngineProfile, test: list[Measurement], engine: str,
               with_host: bool, like: str | None) -> list[dict[str, Any]]:
    """The runs `test` beside their prediction by `profile` (`profile_rows`)."""
    from piep.fit.predictor import rows_of
    return rows_of(_cases(test, base.gpu, engine, on_their_hosts=with_host, like=like),
                   profile.apply(base))


def with_intervals(profile: EngineProfile, rows: list[dict[str, Any]],
                   held_out: str = "leave-one-model-out residuals") -> EngineProfile:
    """The 90 % half-widths of |log(pred/measured)| over held-out rows (`held_out`: of
    what, in words), pooled (an engine has too few runs per layout to split them)."""
    from piep.stats.conformal import band as q
    from piep.stats.conformal import basis, mape
    qe = q([abs(math.log(r["pred_energy_j"] / r["energy_j"])) for r in rows])
    qt = q([abs(math.log(r["pred_time_s"] / r["time_s"])) for r in rows])
    meta = {**profile.meta.to_json(), "lomo_runs": len(rows),
            "interval_basis": {"all": basis(len(rows), held_out)},
            "lomo_energy_mape": mape(rows, "energy_j"), "lomo_time_mape": mape(rows, "time_s")}
    return replace(profile, intervals={"all": qe}, time_intervals={"all": qt},
                   meta=ProfileMeta.from_json(meta))


def widened_to_base(profile: EngineProfile, base: EngineProfile | None,
                    held_out: int) -> EngineProfile:
    """A user's profile whose fit left fewer than MIN_HELD_OUT held-out residuals cannot
    size its own band: each of its bands becomes the wider of its own and its base
    engine's (the shipped profile it is priced as), marked so that answers flag it."""
    from piep.stats.conformal import MIN_HELD_OUT
    if held_out >= MIN_HELD_OUT or base is None:
        return profile

    def wider(own: dict[str, float], theirs: dict[str, float]) -> dict[str, float]:
        return {g: max(own.get(g, own.get("all", 0.0)), theirs.get(g, theirs.get("all", 0.0)))
                for g in {*own, *theirs}}
    meta = {**profile.meta.to_json(),
            "interval_from": {"engine": base.name, "held_out": held_out},
            "interval_basis": {g: f"{base.name}'s 90 % band or this fit's own largest "
                                  f"held-out error, the wider ({held_out} held-out residuals "
                                  f"are too few to size a band; {MIN_HELD_OUT} needed)"
                               for g in {*profile.intervals, *base.intervals}}}
    return replace(profile, intervals=wider(profile.intervals, base.intervals),
                   time_intervals=wider(profile.time_intervals, base.time_intervals),
                   meta=ProfileMeta.from_json(meta))


def host_probe_range_us(records: list) -> list[float] | None:
    """The fastest and slowest hosts among a profile's runs (launch probes, us): how far
    an answer fitted per host may move with the host that runs it."""
    probes = [r.host_probe_s for r in records if r.host_probe_s]
    return [1e6 * min(probes), 1e6 * max(probes)] if probes else None
