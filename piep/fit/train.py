"""`piep train`'s work: fit an engine's profile on its runs (piep's records, or runs of
another harness that fit its tensor-parallel path), save it, and say what was fitted.
The command parses and prints; this is where the fits are put together."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, NamedTuple


def tp_path(*, gpu: str, engine: str, from_measurements: str, out: str | None = None,
            like: str | None = None) -> dict[str, Any]:
    """Runs of another harness (`piep.core.foreign.ForeignRun`): the tensor-parallel path of the
    engine's current profile (yours, else the shipped one) fitted on them."""
    from piep.core.errors import ConfigError
    from piep.core.foreign import load_foreign
    from piep.fit.tp_path import Pricer, with_tp_path
    from piep.predict.engines import save_profile, shipped_profile_dir, user_profile_dir
    from piep.predict.resolve import engine_profile as current_profile
    from piep.core.engines import names
    paths = names(tp_path=True)
    if engine not in paths or like:
        raise ConfigError(f"{from_measurements}: runs of another harness (no piep schema) "
                          f"fit the tensor-parallel path of {' and '.join(paths)}; "
                          f"other engines are fitted on piep's records (piep meter / measure)")
    runs = load_foreign(from_measurements)
    base = current_profile(gpu, engine)
    profile = with_tp_path(base, runs, Pricer(gpu), from_measurements)
    out = Path(out) if out else user_profile_dir(gpu, engine)
    # the profile it was fitted on top of, and how that was made
    for folder in (user_profile_dir(gpu, engine),
                   shipped_profile_dir(gpu, engine)):
        if (folder / "profile.json").is_file():
            from piep.core.artifacts import read_json
            prov = read_json(folder / "profile.json", "piep.engine_profile") \
                .get("provenance", {})
            profile.meta.tp_path["on_top_of"] = prov.get("on_top_of") or {
                k: prov.get(k) for k in ("command", "git", "source")}
            break
    path = save_profile(profile, out, source=from_measurements,
                        command=f"piep train --gpu {gpu} --engine {engine} "
                                f"--from-measurements {from_measurements}")
    tp = profile.meta.tp_path
    return {"profile": str(path), "engine": profile.name, "version": profile.version,
            "runs": len(runs), "tp_measured": profile.meta.tp_measured,
            "terms": tp["terms"], "harness_probe_us": tp["harness_probe_us"],
            "leave_one_run_out_energy_mape": tp.get("energy_mape"),
            "leave_one_run_out_time_mape": tp.get("time_mape")}


def engine_profile(*, gpu: str, engine: str, like: str | None = None,
                   from_measurements: str | None = None,
                   out: str | None = None) -> dict[str, Any]:
    """Fit an engine's profile (on the shipped runs, or yours), save it (yours to the user
    data directory unless `out`) and say what was fitted."""
    from piep import api
    from piep.core.engines import ENGINES
    from piep.core.errors import ConfigError
    from piep.fit.engines import (engine_records, host_probe_range_us)
    from piep.predict.engines import save_profile, shipped_profile_dir, user_profile_dir
    from piep.predict.learned import LearnedModel
    from piep.core.records import read_runs
    from piep.core.artifacts import read_json
    base = api.cost_model(gpu, "learned")
    if not isinstance(base, LearnedModel):
        raise ConfigError(f"an engine profile is fitted over the learned predictor; none "
                          f"is trained for {gpu}: piep train --gpu {gpu}")
    record = ENGINES[like or engine]  # what fits it: its own record, or its base's
    from piep.core.foreign import is_foreign
    if from_measurements and is_foreign(from_measurements):
        return tp_path(gpu=gpu, engine=engine, from_measurements=from_measurements,
                       out=out, like=like)
    if from_measurements:
        records = [r for r in read_runs(from_measurements, record.record_schema, given=True)
                   if r.energy_j is not None]
        FITTERS[record.kind].check(records, base.gpu, record.name)
        out = Path(out) if out else user_profile_dir(gpu, engine)
        source = from_measurements
    else:
        records = engine_records(gpu, engine)
        out = Path(out) if out else shipped_profile_dir(gpu, engine)
        source = f"calibration/{gpu}/engines/{engine}/raw"
    # a shipped profile predicts an unknown host as the calibration machines' typical one;
    # a user's, fitted on their own runs, as the host of those runs
    fit = {"default_host_s": None} if from_measurements else {}
    profile = FITTERS[record.kind].fit(base, records, engine, like, fit)
    if from_measurements:  # yours: too few held out to size a band -> the base engine's
        from piep.fit.engines import widened_to_base
        from piep.predict.engines import EngineProfile
        shipped = shipped_profile_dir(gpu, like or engine) / "profile.json"
        theirs = EngineProfile.from_json(read_json(shipped, "piep.engine_profile")) \
            if shipped.is_file() else None
        profile = widened_to_base(profile, theirs, profile.meta.lomo_runs or 0)
    if (hosts := host_probe_range_us(records)) is not None:
        profile.meta.host_probe_range_us = hosts
    if not from_measurements and not like:  # the shipped tensor-parallel runs
        from piep.fit.tp_path import Pricer, shipped_runs, with_tp_path
        runs = shipped_runs(gpu)
        if any(r.engine == engine and r.tp > 1 for r in runs):
            from piep.fit.workers import log
            log.info("%s: fitting its tensor-parallel path on the tp=2 runs", engine)
            profile = with_tp_path(profile, runs, Pricer(gpu),
                                   f"calibration/{gpu}/engines/tp2")
    path = save_profile(profile, out, source=source,
                        command=f"piep train --gpu {gpu} --engine {engine}"
                                + (f" --like {like}" if like else "")
                                + (f" --from-measurements {source}" if from_measurements
                                   else ""))
    return {"profile": str(path), "engine": profile.name, "version": profile.version,
            **({"like": profile.like} if profile.like else {}),
            "runs": profile.meta.runs,
            "terms": {k: profile.host.term(k) for k in profile.meta.fitted_terms},
            "lomo_energy_mape": profile.meta.lomo_energy_mape,
            "lomo_time_mape": profile.meta.lomo_time_mape}


def _fit_replays(base, records, engine: str, like: str | None, fit: dict[str, Any]):
    """A serving engine's profile, fitted on replayed request traces, with its bands from
    leave-one-shape-out (else leave-one-replay-out) residuals."""
    from piep.fit.engines import with_intervals
    from piep.fit.serving import Shared, fit_cb_profile, held_out_on_hosts, pooled_host_probes
    records = pooled_host_probes(records)  # each on its session's host, not one reading
    shared = Shared()  # the grids and reserved memory of these replays, for every fit
    profile = fit_cb_profile(base, records, name=engine, like=like, shared=shared, **fit)
    if len(records) >= 3:
        by = "model" if len({r.model for r in records}) >= 2 else "trace"
        # predicted without a host probe, and with each replay's (same held-out fits)
        rows = held_out_on_hosts(base, records, by=by, shared=shared, **fit, name=engine,
                                 hosts=(False, True) if profile.host.host_probe_ref_s
                                 else (False,))
        profile = with_intervals(profile, rows[False], f"leave-one-"
                                 f"{'shape' if by == 'model' else 'replay'}-out residuals")
        profile.meta.held_out = by
        profile = _with_host_probe_errors(profile, rows)
    return profile


def _fit_runs(base, records, engine: str, like: str | None, fit: dict[str, Any]):
    """A batch engine's profile, fitted on its end-to-end runs, with its bands from
    leave-one-model-out residuals (two models or more)."""
    from piep.fit.engines import fit_profile, profile_lomo, with_intervals
    if like:  # an engine of the user's own, priced as a built-in one
        fit = {**fit, "like": like}
    profile = fit_profile(base, records, engine, **fit)
    if len({r.model for r in records}) >= 2:
        # predicted as a user without a host probe would (on the profile's default host),
        # and with each run's host probe (the same held-out fits)
        rows = profile_lomo(base, records, engine, **fit,
                            hosts=(False, True) if profile.host.host_probe_ref_s
                            else (False,))
        profile = with_intervals(profile, rows[False])
        profile = _with_host_probe_errors(profile, rows)
    return profile


def _with_host_probe_errors(profile, rows):
    """The held-out errors with each run's host probe beside the profile's (where the
    rows have them)."""
    from piep.fit.engines import with_intervals
    if True in rows:
        hosted = with_intervals(profile, rows[True])
        profile.meta.lomo_energy_mape_host_probe = hosted.meta.lomo_energy_mape
        profile.meta.lomo_time_mape_host_probe = hosted.meta.lomo_time_mape
    return profile


def _check_runs(records, gpu, name: str) -> None:
    from piep.fit.plausible import check_runs
    check_runs(records, gpu, name)


def _check_replays(records, gpu, name: str) -> None:
    from piep.fit.plausible import check_replays
    check_replays(records, gpu)


class Fitter(NamedTuple):
    """How an engine kind's profile is fitted: its records checked, then fitted."""
    check: Callable[..., None]
    fit: Callable[..., Any]


# by the engine's kind (piep.core.engines): generate() runs, or replayed request traces
FITTERS = {"batch": Fitter(_check_runs, _fit_runs), "stream": Fitter(_check_replays, _fit_replays)}
