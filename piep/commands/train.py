"""`piep train`: fit the learned predictor on a GPU's committed calibration, refit it on
your own runs, or fit an engine profile."""

from __future__ import annotations

from pathlib import Path

from piep.commands.common import emit
from piep.core.gpus import DEFAULT_GPU


def configure(parser) -> None:
    from piep.core.engines import names
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
                             "hf-eager for eager decode, hf-cb for a serving engine's "
                             "replayed benchmarks (`piep meter --serving-result`)")
    parser.add_argument("--from-measurements", metavar="FILE.jsonl",
                        help="your own end-to-end records (piep.measurement JSONL): refit "
                             "the combiner and the gap terms on top of the shipped model, or "
                             "with --engine that engine's profile")
    parser.add_argument("--steady-states", metavar="FILE.jsonl",
                        help="with --engine vllm: measured steady states of a server held "
                             "full (piep.steady_measurement: `piep meter --serving-result "
                             "--gpu` of a run at --max-concurrency); fits the profile `piep "
                             "steady` reads (into the user data directory, or --out)")
    parser.add_argument("--add-kinds", action="store_true",
                        help="add to the shipped predictor a model for each kind group it has "
                             "none of yet (new module samples: FP8 projections, experts), "
                             "leaving every model it has, its combiner and terms as they are")
    parser.add_argument("--out", metavar="FOLDER",
                        help="where to write (default: calibration/<gpu>/predictor, or for "
                             "an engine calibration/<gpu>/engines/<engine>; a fit on your "
                             "own records goes to the user data directory)")


def run(args) -> int:
    from piep.predict.store import load_learned
    if args.steady_states:
        return _fit_steady(args)
    _check_engine(args)
    out = _claim_output(args)  # before minutes of fitting: writable, no other piep on it
    if args.engine:
        from piep.fit.train import engine_profile
        doc = engine_profile(gpu=args.gpu, engine=args.engine, like=args.like,
                             from_measurements=args.from_measurements, out=str(out))
    elif args.add_kinds:
        from piep.predict.store import save
        from piep.fit.predictor import add_kinds
        model, counts = add_kinds(args.gpu)
        save(model, out, command=f"piep train --gpu {args.gpu} --add-kinds")
        doc = {"predictor": str(out), "added_kinds": counts or "none (every group has one)"}
    elif args.from_measurements:
        from piep.predict.store import save
        from piep.fit.predictor import refit_on_measurements
        model, n = refit_on_measurements(args.gpu, Path(args.from_measurements))
        save(model, out, refit_from=args.from_measurements)
        doc = {"predictor": str(out), "refit_records": n,
               "host_launch_s": model.host.host_launch_s,
               "gap_graph_s": model.host.gap_graph_s,
               "moves_shipped": model.meta.get("moves_shipped")}
        if doc["moves_shipped"]:
            import logging
            m = doc["moves_shipped"]
            logging.getLogger("piep.train").warning(
                "the refit moves %s of %s by %+.1f %% against the shipped predictor, beyond "
                "its %.1f %% band; its answers are flagged refit_moves_shipped", m["quantity"],
                m["deployment"], m["moved_pct"], m["band_pct"])
    else:
        from piep.predict.store import save
        from piep.fit.predictor import train_shipped
        from piep.fit.workers import Pace
        model, rows = train_shipped(args.gpu, progress=Pace("leave-one-model-out"))
        save(model, out, command=f"piep train --gpu {args.gpu}")
        doc = {"predictor": str(out), "e2e_runs": len(rows),
               "module_samples": model.meta["module_samples"],
               "intervals_energy_log": model.intervals, "data_hash": model.meta["data_hash"]}
    load_learned.cache_clear()
    emit(args, doc, lambda d: "\n".join(f"{k}: {v}" for k, v in d.items()))
    return 0


def _claim_output(args) -> Path:
    """The folder the fit writes (--out, else a user's fit goes to the user data
    directory, the shipped fit to calibration/), checked and claimed before it starts."""
    from piep.core.artifacts import writable, writable_folder
    if args.engine:
        from piep.predict.engines import shipped_profile_dir, user_profile_dir
        folder = Path(args.out or (user_profile_dir(args.gpu, args.engine)
                                   if args.from_measurements
                                   else shipped_profile_dir(args.gpu, args.engine)))
        writable(folder / "profile.json", "--out")
        return folder
    from piep.predict.store import predictor_dir, user_predictor_dir
    from piep.predict.store import SIGNATURE
    folder = Path(args.out or (user_predictor_dir(args.gpu) if args.from_measurements
                               else predictor_dir(args.gpu)))
    return writable_folder(folder, "--out", SIGNATURE)


def _fit_steady(args) -> int:
    """An engine's steady-state profile (`piep steady`) fitted on measured steady states,
    written where `piep steady` finds it (the user data directory, or --out)."""
    from piep.core.artifacts import read_records, user_gpu_dir, writable, write_json
    from piep.core.errors import ConfigError
    from piep.fit.steady import RECORD_SCHEMA, fit_records
    from piep.core.engines import names
    from piep.predict.steady import PROFILE_SCHEMA
    if args.engine not in names(profile="steady"):
        raise ConfigError(f"--steady-states fits the profile of an engine `piep steady` "
                          f"prices: --engine {'|'.join(names(profile='steady'))}")
    if args.like or args.from_measurements:
        raise ConfigError("--steady-states fits the engine's own steady-state profile: no "
                          "--like, no --from-measurements")
    path = Path(args.out) / "steady.json" if args.out else \
        user_gpu_dir(args.gpu) / "engines" / args.engine / "steady.json"
    writable(path, "--out")
    records = read_records(args.steady_states, RECORD_SCHEMA, given=True)
    profile, info = fit_records(records, engine=args.engine, gpu=args.gpu,
                                source=str(args.steady_states))
    write_json(path, PROFILE_SCHEMA, 1,
               {"profile": profile.to_json(), "fit": info,
                "data": {"records": str(args.steady_states), "gpu": args.gpu,
                         "command": f"piep train --engine {args.engine} --gpu {args.gpu} "
                                    f"--steady-states {args.steady_states}"}},
               command="piep train")
    doc = {"steady_profile": str(path), "records": info["cases"],
           "time_scale": profile.time_scale, "step_host_s": profile.step_host_s,
           "power_scale": profile.power_scale, "rms_log": info["rms_log"],
           "interval": list(profile.interval) if profile.interval else info.get("interval")}
    emit(args, doc, lambda d: "\n".join(f"{k}: {v}" for k, v in d.items()))
    return 0


def _check_engine(args) -> None:
    """The engine flags, before anything is read or fitted: one line where they clash."""
    from piep.core.engines import ENGINES, names
    from piep.core.errors import ConfigError
    if args.like and not args.engine:
        raise ConfigError("--like goes with --engine NAME (the engine of your own it prices)")
    if args.add_kinds and (args.engine or args.from_measurements or args.steady_states):
        raise ConfigError("--add-kinds adds module models to the shipped predictor; run it "
                          "alone (without --engine, --from-measurements, --steady-states)")
    if args.engine in ENGINES and ENGINES[args.engine].profile == "steady":
        raise ConfigError(f"{args.engine} is fitted on whole runs held at a concurrency: "
                          f"piep train --engine {args.engine} --gpu GPU --steady-states "
                          f"FILE.jsonl (piep meter --serving-result makes them)")
    if not args.engine or (args.engine in ENGINES and not ENGINES[args.engine].reference):
        if args.like:
            raise ConfigError(f"--engine {args.engine} is piep's own; --like prices an engine "
                              f"of yours: give it a name of yours (--engine my-vllm)")
        return
    if args.engine in ENGINES:
        raise ConfigError(f"{args.engine} is piep's reference runner: `piep train` without "
                          f"--engine fits it")
    from piep.core.artifacts import USER_NAME
    if not USER_NAME.fullmatch(args.engine):
        raise ConfigError(f"--engine {args.engine!r}: an engine of your own is named in lower "
                          f"case letters, digits, '.', '-' and '_' (e.g. vllm-0.11)")
    if not (args.like and args.from_measurements):
        raise ConfigError(f"--engine {args.engine} is an engine of your own: fit it on your "
                          f"runs, priced as a built-in engine: --like "
                          f"{'|'.join(names(like_base=True))} --from-measurements FILE.jsonl")
