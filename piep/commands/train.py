"""`piep train`: fit the learned predictor on a GPU's committed calibration, refit it on
your own runs, or fit an engine profile."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from piep.commands.common import emit
from piep.gpus import DEFAULT_GPU

log = logging.getLogger("piep.train")


def configure(parser) -> None:
    from piep.engines import names
    parser.add_argument("--gpu", default=DEFAULT_GPU)
    parser.add_argument("--engine", metavar="NAME",
                        help="fit this engine's profile (host terms over piep's module "
                             f"models) on its end-to-end runs: {', '.join(names(reference=False))} on the "
                             "shipped runs or yours (--from-measurements), or an engine of "
                             "your own (a name of yours, with --like and --from-measurements)")
    parser.add_argument("--like", choices=names(like_base=True),
                        help="an engine of your own (vLLM, SGLang, ...: runs you metered with "
                             "`piep meter`) is priced as this built-in engine: its model tree "
                             "(KV cache, decode mode) and host path, with terms fitted on your "
                             "runs; hf-static for CUDA-graph decode over a preallocated cache, "
                             "hf-eager for eager decode")
    parser.add_argument("--from-measurements", metavar="FILE.jsonl",
                        help="your own end-to-end records (piep.measurement JSONL): refit "
                             "the combiner and the gap terms on top of the shipped model, or "
                             "with --engine that engine's profile")
    parser.add_argument("--out", metavar="FOLDER",
                        help="where to write (default: calibration/<gpu>/predictor, or for "
                             "an engine calibration/<gpu>/engines/<engine>; a fit on your "
                             "own records goes to the user data directory)")


def run(args) -> int:
    from piep.artifacts import writable
    from piep.predict.learned import load_learned, predictor_dir
    _check_engine(args)
    if args.out:  # before minutes of fitting
        writable(Path(args.out) / "predictor.json", "--out")
    if args.engine:
        doc = _engine(args)
    elif args.from_measurements:
        from piep.predict.learned import user_predictor_dir
        from piep.predict.store import save
        from piep.predict.train import refit_on_measurements
        out = Path(args.out) if args.out else user_predictor_dir(args.gpu)
        model, n = refit_on_measurements(args.gpu, Path(args.from_measurements))
        save(model, out, refit_from=args.from_measurements)
        doc = {"predictor": str(out), "refit_records": n,
               "host_launch_s": model.host.host_launch_s,
               "gap_graph_s": model.host.gap_graph_s}
    else:
        from piep.predict.store import save
        from piep.predict.train import train_shipped
        out = Path(args.out) if args.out else predictor_dir(args.gpu)

        def progress(i, n, name):
            log.info("leave-one-model-out %d/%d (held out: %s)", i, n, name)
        model, rows = train_shipped(args.gpu, progress=progress)
        save(model, out, command=f"piep train --gpu {args.gpu}")
        doc = {"predictor": str(out), "e2e_runs": len(rows),
               "module_samples": model.meta["module_samples"],
               "intervals_energy_log": model.intervals, "data_hash": model.meta["data_hash"]}
    load_learned.cache_clear()
    emit(args, doc, lambda d: "\n".join(f"{k}: {v}" for k, v in d.items()))
    return 0


# an engine of the user's own names a folder of the user data directory
ENGINE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def _check_engine(args) -> None:
    """The engine flags, before anything is read or fitted: one line where they clash."""
    from piep.engines import ENGINES
    from piep.errors import ConfigError
    if args.like and not args.engine:
        raise ConfigError("--like goes with --engine NAME (the engine of your own it prices)")
    if not args.engine or (args.engine in ENGINES and not ENGINES[args.engine].reference):
        if args.like:
            raise ConfigError(f"--engine {args.engine} is piep's own; --like prices an engine "
                              f"of yours: give it a name of yours (--engine my-vllm)")
        return
    if args.engine in ENGINES:
        raise ConfigError(f"{args.engine} is piep's reference runner: `piep train` without "
                          f"--engine fits it")
    if not ENGINE_NAME.fullmatch(args.engine):
        raise ConfigError(f"--engine {args.engine!r}: an engine of your own is named in lower "
                          f"case letters, digits, '.', '-' and '_' (e.g. vllm-0.11)")
    if not (args.like and args.from_measurements):
        raise ConfigError(f"--engine {args.engine} is an engine of your own: fit it on your "
                          f"runs, priced as a built-in engine: --like hf-static|hf-eager "
                          f"--from-measurements FILE.jsonl")


def _tp_path(args) -> dict:
    """Runs of another harness (`piep.fit.foreign`): the tensor-parallel path of the
    engine's current profile (yours, else the shipped one) fitted on them."""
    from piep.errors import ConfigError
    from piep.fit.foreign import load_foreign
    from piep.fit.tp_path import Pricer, with_tp_path
    from piep.predict.engines import save_profile, shipped_profile_dir, user_profile_dir
    from piep.resolve import engine_profile
    from piep.engines import names
    paths = names(tp_path=True)
    if args.engine not in paths or args.like:
        raise ConfigError(f"{args.from_measurements}: runs of another harness (no piep schema) "
                          f"fit the tensor-parallel path of {' and '.join(paths)}; "
                          f"other engines are fitted on piep's records (piep meter / measure)")
    runs = load_foreign(args.from_measurements)
    base = engine_profile(args.gpu, args.engine)
    profile = with_tp_path(base, runs, Pricer(args.gpu), args.from_measurements)
    out = Path(args.out) if args.out else user_profile_dir(args.gpu, args.engine)
    # the profile it was fitted on top of, and how that was made
    for folder in (user_profile_dir(args.gpu, args.engine),
                   shipped_profile_dir(args.gpu, args.engine)):
        if (folder / "profile.json").is_file():
            from piep.artifacts import read_json
            prov = read_json(folder / "profile.json", "piep.engine_profile") \
                .get("provenance", {})
            profile.meta["tp_path"]["on_top_of"] = prov.get("on_top_of") or {
                k: prov.get(k) for k in ("command", "git", "source")}
            break
    path = save_profile(profile, out, source=args.from_measurements,
                        command=f"piep train --gpu {args.gpu} --engine {args.engine} "
                                f"--from-measurements {args.from_measurements}")
    tp = profile.meta["tp_path"]
    return {"profile": str(path), "engine": profile.name, "version": profile.version,
            "runs": len(runs), "tp_measured": profile.meta["tp_measured"],
            "terms": tp["terms"], "harness_probe_us": tp["harness_probe_us"],
            "leave_one_run_out_energy_mape": tp.get("energy_mape"),
            "leave_one_run_out_time_mape": tp.get("time_mape")}


def _engine(args) -> dict:
    from piep import api
    from piep.artifacts import read_records
    from piep.engines import ENGINES
    from piep.errors import ConfigError
    from piep.predict.engines import (engine_records, fit_profile, host_probe_range_us,
                                      profile_lomo, save_profile, shipped_profile_dir,
                                      user_profile_dir, with_intervals)
    from piep.predict.learned import LearnedModel
    from piep.predict.train import get_term
    base = api.cost_model(args.gpu, "learned")
    if not isinstance(base, LearnedModel):
        raise ConfigError("an engine profile is fitted over the learned predictor "
                          "(pip install lightgbm)")
    record = ENGINES[args.like or args.engine]  # what fits it: its own record, or its base's
    from piep.fit.foreign import is_foreign
    if args.from_measurements and is_foreign(args.from_measurements):
        return _tp_path(args)
    if args.from_measurements:
        records = [r for r in read_records(args.from_measurements, record.record_schema,
                                           given=True) if r["energy_j"] is not None]
        out = Path(args.out) if args.out else user_profile_dir(args.gpu, args.engine)
        source = args.from_measurements
    else:
        records = engine_records(args.gpu, args.engine)
        out = Path(args.out) if args.out else shipped_profile_dir(args.gpu, args.engine)
        source = f"calibration/{args.gpu}/engines/{args.engine}/raw"
    # a shipped profile predicts an unknown host as the calibration machines' typical one;
    # a user's, fitted on their own runs, as the host of those runs
    fit = {"default_host_s": None} if args.from_measurements else {}
    if record.serves:  # a serving engine: fitted on replayed request traces
        from piep.serving.fit import fit_cb_profile, held_out_on_hosts
        profile = fit_cb_profile(base, records, **fit)
        if len(records) >= 3:  # intervals from leave-one-shape-out (else -trace-out) residuals
            by = "model" if len({r["model"] for r in records}) >= 2 else "trace"
            # predicted without a host probe, and with each replay's (same held-out fits)
            rows = held_out_on_hosts(base, records, by=by, **fit,
                                     hosts=(False, True) if profile.host.host_probe_ref_s
                                     else (False,))
            profile = with_intervals(profile, rows[False])
            profile.meta["held_out"] = by
            if True in rows:
                hosted = with_intervals(profile, rows[True])
                profile.meta.update({f"{k}_host_probe": hosted.meta[k] for k in
                                     ("lomo_energy_mape", "lomo_time_mape")})
    else:
        if args.like:  # an engine of the user's own, priced as a built-in one
            fit["like"] = args.like
        profile = fit_profile(base, records, args.engine, **fit)
        models = {r["model"] for r in records}
        if len(models) >= 2:  # intervals from leave-one-model-out residuals, predicted
            # as a user without a host probe would (on the profile's default host)
            profile = with_intervals(profile, profile_lomo(base, records, args.engine,
                                                           with_host=False, **fit))
            if profile.host.host_probe_ref_s:  # and with each run's host probe
                hosted = with_intervals(profile, profile_lomo(base, records, args.engine,
                                                              **fit))
                profile.meta.update({f"{k}_host_probe": hosted.meta[k] for k in
                                     ("lomo_energy_mape", "lomo_time_mape")})
    if (hosts := host_probe_range_us(records)) is not None:
        profile.meta["host_probe_range_us"] = hosts
    if not args.from_measurements and not args.like:  # the shipped tensor-parallel runs
        from piep.fit.tp_path import Pricer, shipped_runs, with_tp_path
        runs = shipped_runs(args.gpu)
        if any(r.engine == args.engine and r.tp > 1 for r in runs):
            profile = with_tp_path(profile, runs, Pricer(args.gpu),
                                   f"calibration/{args.gpu}/engines/tp2")
    path = save_profile(profile, out, source=source,
                        command=f"piep train --gpu {args.gpu} --engine {args.engine}"
                                + (f" --like {args.like}" if args.like else "")
                                + (f" --from-measurements {source}" if args.from_measurements
                                   else ""))
    return {"profile": str(path), "engine": profile.name, "version": profile.version,
            **({"like": profile.like} if profile.like else {}),
            "runs": profile.meta["runs"], "terms": {k: get_term(profile.host, k)
                                                    for k in profile.meta["fitted_terms"]},
            "lomo_energy_mape": profile.meta.get("lomo_energy_mape"),
            "lomo_time_mape": profile.meta.get("lomo_time_mape")}
