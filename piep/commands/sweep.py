"""`piep sweep`: predictions over a grid (or random draws) of deployments, as CSV or JSON."""

from __future__ import annotations

import csv
import sys

from piep.commands.common import emit
from piep.gpus import DEFAULT_GPU

FIELDS = ("model", "tp", "pp", "dp", "batch", "prompt_len", "gen_len", "mode", "engine",
          "energy_j", "time_s", "j_per_token", "tokens_per_s", "ttft_s", "tpot_s", "error")


def configure(parser) -> None:
    parser.add_argument("--model", nargs="+", required=True)
    parser.add_argument("--gpu", default=DEFAULT_GPU)
    for flag, default in (("--tp", [1]), ("--pp", [1]), ("--dp", [1]), ("--batch", [1]),
                          ("--prompt-len", [512]), ("--gen-len", [128])):
        parser.add_argument(flag, type=int, nargs="+", default=default)
    from piep.scenario import ENGINE_MODES
    parser.add_argument("--mode", nargs="+", choices=("graph", "eager"), default=None,
                        help="the reference runner's decode (alias of --engine piep-graph|"
                             "piep-eager; default graph)")
    parser.add_argument("--engine", nargs="+", choices=tuple(ENGINE_MODES), default=None,
                        help="engines to sweep (default piep-graph)")
    parser.add_argument("--predictor", choices=("auto", "learned", "roofline"), default="auto")


def run(args) -> int:
    from piep.sweep import grid, sweep
    configs = grid(models=args.model, tp=args.tp, pp=args.pp, dp=args.dp, batch=args.batch,
                   prompt_len=args.prompt_len, gen_len=args.gen_len,
                   mode=args.mode or [None], engine=args.engine or [None])
    rows = sweep(configs, gpu=args.gpu, predictor=args.predictor, progress=not args.json)
    if args.json:
        emit(args, {"schema": "piep.sweep", "schema_version": 1, "boundary": "gpu_board",
                    "rows": rows}, str)
        return 0
    writer = csv.DictWriter(sys.stdout, fieldnames=FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return 0
