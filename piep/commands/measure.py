"""`piep measure`: real inference energy on GPUs (launch with torchrun for several GPUs)."""

from __future__ import annotations

import logging

from piep.commands.common import add_deployment_args, emit, options_from_args

log = logging.getLogger("piep.measure")


def configure(parser) -> None:
    parser.add_argument("--model", help="shipped name or config.json path (single configuration)")
    from piep.core.engines import ENGINES
    add_deployment_args(parser, model=False, engines=tuple(ENGINES))
    parser.add_argument("--grid", metavar="DESIGN.jsonl",
                        help="measure every configuration of a design file (resumable)")
    parser.add_argument("--out", metavar="FILE.jsonl",
                        help="append one JSON record per configuration here")
    parser.add_argument("--budget-s", type=float, default=float("inf"),
                        help="stop the grid before this many seconds are spent")
    parser.add_argument("--shard", default="0/1", metavar="I/N",
                        help="take every N-th pending configuration starting at I")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (default 3)")
    parser.add_argument("--min-window-s", type=float, default=0.5,
                        help="shortest energy window; short phases repeat to fill it (default 0.5)")
    parser.add_argument("--idle-s", type=float, default=1.0, help="idle-power window (default 1)")
    parser.add_argument("--cooldown-s", type=float, default=0.0,
                        help="sleep between configurations (default 0)")
    parser.add_argument("--no-continuous", action="store_true",
                        help="skip the continuous prefill+decode check window")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--weights", metavar="FOLDER",
                        help="real weights from a local safetensors folder (default: random)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clock-plan", metavar="PLAN.json",
                        help="apply a `piep plan` file at the phase boundaries (single "
                             "configuration; dry-run unless --no-dry-run)")
    parser.add_argument("--dry-run", dest="clock_dry_run", action="store_true", default=True,
                        help="with --clock-plan: log the switches, set nothing (default)")
    parser.add_argument("--no-dry-run", dest="clock_dry_run", action="store_false",
                        help="with --clock-plan: really set clocks (root or CAP_SYS_ADMIN)")
    parser.add_argument("--trace", metavar="TRACE.jsonl", nargs="+", default=(),
                        help="with --engine hf-cb: replay these request traces (JSONL or CSV "
                             "of arrival_s, prompt_len, gen_len[, id]) in real time, one "
                             "after another on one model")
    parser.add_argument("--clock-state-dir", metavar="DIR",
                        help="with --clock-plan: runtime state files (default "
                             "~/.cache/piep/clock-state)")


def run(args) -> int:
    from piep.core.engines import names
    from piep.core.errors import ConfigError
    if not args.model and not args.grid:
        raise ConfigError("give --model (one configuration) or --grid DESIGN.jsonl")
    serving = names(kind="stream")
    if (args.engine in serving) != bool(args.trace):
        raise ConfigError(f"--engine {'|'.join(serving)} replays a request trace: give both "
                          f"--engine {serving[0]} and --trace FILE")
    if getattr(args, "ep", 1) != 1:
        raise ConfigError("--ep: piep's runners do not shard experts (the planned runs of "
                          "calibration/h200/moe/planned_ep.sh will); measure with --ep 1")
    if args.clock_plan and args.grid:
        raise ConfigError("--clock-plan applies to one configuration (--model), not --grid")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ConfigError("`piep measure` needs torch: pip install 'piep[gpu]'") from None
    from piep.sampling.cli_impl import measure_main
    from piep.sampling.options import MeasureOptions
    engine, mode = _engine(args.engine, args.mode)
    opts = options_from_args(MeasureOptions, args, engine=engine, mode=mode,
                             continuous=not args.no_continuous, trace=tuple(args.trace))
    opts.shard_index  # a bad --shard fails here, before torch starts
    doc = measure_main(opts)
    if doc is not None:
        emit(args, doc, _human)
    return 0


def _engine(engine: str | None, mode: str | None) -> tuple[str, str]:
    """(engine, reference-runner mode): the transformers engines measured here, or the
    reference runner (whose --mode is an alias of --engine piep-graph|piep-eager)."""
    from piep.core.engines import ENGINES
    from piep.core.scenario import engine_for
    if engine in ENGINES and not ENGINES[engine].reference:
        if mode is not None:
            from piep.core.errors import ConfigError
            raise ConfigError(f"--mode {mode} belongs to piep's reference runner; drop it "
                              f"with --engine {engine}")
        return engine, ENGINES[engine].decode
    ref = engine_for(engine, mode)
    return ref.name, ref.mode


def _human(doc) -> str:
    if "traces" in doc or "trace" in doc:  # replays of one trace or of several
        return "\n".join(f"{t['trace']}: {t['requests']} requests, {t['energy_j']} J, "
                         f"{t['time_s']:.2f} s (GPU boards only)"
                         for t in doc.get("traces", [doc]))
    if "records" in doc:
        return f"measured {doc['records']} configuration(s) into {doc['out']}"
    e = doc.get("energy_j")
    return (f"{doc['model']} tp={doc['tp']} pp={doc['pp']} dp={doc['dp']} batch={doc['batch']} "
            f"prompt={doc['prompt_len']} gen={doc['gen_len']} {doc['mode']}: "
            f"energy_j={e if e is None else round(e, 2)} time_s={doc['time_s']:.4f} "
            f"spread={doc.get('spread')} (GPU boards only)"
            + (f"\nclock plan ({'dry-run' if doc['clock_plan']['dry_run'] else 'applied'}): "
               f"{doc['clock_plan']['switches']} switch(es), {doc['clock_plan']['skipped_dwell']}"
               f" dwell skip(s), min gap {doc['clock_plan']['min_dwell_seen_s']}"
               if "clock_plan" in doc else ""))
