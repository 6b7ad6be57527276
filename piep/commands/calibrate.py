"""`piep calibrate`: a GPU of your own in one command; module samples, waiting-time samples
and their Gamma fits (GPU)."""

from __future__ import annotations

from piep.commands.common import emit, options_from_args


def configure(parser) -> None:
    parser.add_argument("what", choices=("gpu", "modules", "repeat", "collectives", "waits",
                                         "insitu", "fit"),
                        help="gpu: calibrate this machine's GPU 0 under a name of yours "
                             "(--name; module samples and end-to-end runs, resumable; then "
                             "`piep train --gpu NAME`); "
                             "modules: isolated node kinds (1 GPU); repeat: re-measure the "
                             "repeat-check shapes twice; collectives: AllReduce/AllGather/"
                             "send-recv in isolation with energy (torchrun); waits: AllReduce "
                             "waiting times in real tp=N decoding (torchrun); insitu: module "
                             "kernel times inside real eager runs (profiler); fit: Gamma fits")
    parser.add_argument("--out", help="output JSONL (modules, waits) or JSON (fit); gpu: "
                        "none (it writes to the user data directory's calibration/NAME)")
    parser.add_argument("--name", help="gpu: the name your calibration answers to "
                        "(`--gpu NAME` everywhere), e.g. h100-sxm")
    parser.add_argument("--minutes", type=float, default=15.0,
                        help="gpu: device minutes the recipe plans (default 15; 60 %% module "
                             "samples, the rest end-to-end runs)")
    parser.add_argument("--samples", help="wait samples JSONL (for fit)")
    parser.add_argument("--budget-s", type=float, default=float("inf"))
    parser.add_argument("--shard", default="0/1", metavar="I/N")
    parser.add_argument("--models", nargs="+",
                        help="waits: the models decoded (default llama-2-7b llama-3-8b); "
                             "modules: draw shapes only from these models' trees (default "
                             "every shipped dense model and the synthetic shapes)")
    parser.add_argument("--tp", type=int, nargs="+", dest="tps", metavar="N",
                        help="modules: draw shapes only from layouts of these tensor parallel "
                             "degrees (default 1 2 4 8)")
    parser.add_argument("--kinds", nargs="+", help="modules: only these node kinds; "
                        "collectives: only these of allreduce, allgather, p2p")
    parser.add_argument("--sizes-from", type=int, default=0, metavar="BYTES",
                        help="collectives: only sizes from this many bytes (4 KiB-1 GiB, 2x)")
    parser.add_argument("--reduce-op", choices=("sum", "avg"), default="sum",
                        help="collectives: AllReduce op (default sum, as the runner)")
    parser.add_argument("--modes", nargs="+", choices=("graph", "eager"),
                        help="modules, collectives: only these modes")
    parser.add_argument("--min-window-s", type=float, default=0.3,
                        help="shortest energy window per point (default 0.3)")
    parser.add_argument("--captures", type=int, default=1,
                        help="repeat: median of N fresh builds for calls under 20 us")
    parser.add_argument("--tiny-only", action="store_true",
                        help="repeat: only the shapes whose calls were under 20 us")
    parser.add_argument("--seed", type=int, default=0,
                        help="modules: which random draw of shapes (default 0)")
    parser.add_argument("--per-kind", type=int, default=28,
                        help="modules: shapes per (kind, phase) (default 28; attention 2x)")
    parser.add_argument("--head-dims", type=int, nargs="+",
                        help="modules: only attention and rope shapes of these head dims")
    parser.add_argument("--repeat-every", type=int, default=10,
                        help="modules: measure every N-th shape twice (default 10)")


def run(args) -> int:
    from piep.core.errors import ConfigError
    if args.what == "gpu":
        doc = _gpu(args)
    elif not args.out:
        raise ConfigError(f"calibrate {args.what} needs --out FILE")
    elif args.what == "fit":
        if not args.samples:
            raise ConfigError("calibrate fit needs --samples WAITS.jsonl")
        from piep.fit.waits import fit_all
        from pathlib import Path
        doc = {"fits": len(fit_all(Path(args.samples), Path(args.out))), "out": args.out}
    else:
        try:
            import torch
        except ImportError:
            raise ConfigError("`piep calibrate` needs torch: pip install 'piep[gpu]'") from None
        if not torch.cuda.is_available():
            raise ConfigError(f"`piep calibrate {args.what}` needs a CUDA GPU")
        from piep.sampling.calibrate import main
        from piep.sampling.options import CalibrateOptions
        tup = (lambda v: tuple(v) if v else None)  # noqa: E731
        opts = options_from_args(CalibrateOptions, args, models=tup(args.models),
                                 tps=tup(args.tps),
                                 kinds=tup(args.kinds), modes=tup(args.modes),
                                 head_dims=tup(args.head_dims))
        opts.shard_index  # a bad --shard fails here
        doc = main(args.what, opts)
    if doc is not None:
        emit(args, doc, lambda d: ", ".join(f"{k}: {v}" for k, v in d.items()))
    return 0


def _gpu(args) -> dict:
    """`calibrate gpu`: the name checked (before torch is imported), then the calibration
    with a line of progress on stderr."""
    from piep.core.errors import ConfigError
    from piep.sampling.options import check_gpu_name
    if not args.name:
        raise ConfigError("calibrate gpu needs --name NAME (what `--gpu NAME` will answer to)")
    check_gpu_name(args.name)
    if not args.minutes > 0:
        raise ConfigError(f"--minutes {args.minutes}: give a number of minutes > 0")
    try:
        import torch
    except ImportError:
        raise ConfigError("`piep calibrate` needs torch: pip install 'piep[gpu]'") from None
    if not torch.cuda.is_available():
        raise ConfigError("`piep calibrate gpu` needs a CUDA GPU (it measures GPU 0)")
    from piep.sampling.gpu_calibration import Bench, Recipe, calibrate_gpu
    return calibrate_gpu(args.name, Bench.cuda(), recipe=Recipe(minutes=args.minutes),
                         budget_s=args.budget_s, progress=ProgressLine())


class ProgressLine:
    """One line on stderr, rewritten in place on a terminal (else a line per 5 %)."""

    def __init__(self):
        import sys
        self.stream, self.last = sys.stderr, -1

    def __call__(self, p: dict) -> None:
        share = p["done_s"] / max(p["total_s"], 1e-9)
        line = (f"[{p['index']:>4}/{p['tasks']}] {100 * share:3.0f} %  "
                f"~{p['left_s'] / 60:.1f} min left  {p['task']}")
        if self.stream.isatty():
            self.stream.write("\r" + line.ljust(78)[:120])
            self.stream.flush()
        elif int(20 * share) > self.last:
            self.last = int(20 * share)
            self.stream.write(line + "\n")
