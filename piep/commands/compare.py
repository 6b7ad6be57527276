"""`piep compare A B ...`: deployments side by side and a recommendation per goal."""

from __future__ import annotations

from piep.commands.common import add_workload_args, emit
from piep.gpus import DEFAULT_GPU
from piep.report.table import table


def configure(parser) -> None:
    parser.add_argument("candidates", nargs="+", metavar="MODEL@LAYOUT",
                        help="e.g. llama-2-7b@tp2 llama-2-13b@tp1 llama-3-70b@tp2pp2")
    parser.add_argument("--gpu", default=DEFAULT_GPU)
    add_workload_args(parser)
    parser.add_argument("--predictor", choices=("auto", "learned", "roofline"), default="auto")


def run(args) -> int:
    from piep.compare import compare, parse_candidate
    from piep.scenario import Scenario
    model, fields = parse_candidate(args.candidates[0])
    fields.pop("engine", None)  # the base carries the command's engine; candidates may not
    base = Scenario.build(model, gpu=args.gpu, engine=args.engine, mode=args.mode,
                          batch=args.batch, prompt_len=args.prompt_len, gen_len=args.gen_len,
                          cache_len=args.cache_len, host_probe_us=args.host_probe_us,
                          **fields)
    doc = compare(args.candidates, base, predictor=args.predictor)

    def human(d):
        keys = ["candidate", "gpus", "energy_j", "time_s", "ttft_p50_s", "tpot_p50_s",
                "j_per_output_token", "j_per_request", "memory_headroom_gib"]
        body = table([[r[k] for k in keys] for r in d["candidates"]], keys)
        rec = "\n".join(f"best for {goal}: {cand}" for goal, cand in d["recommendation"].items())
        return f"{body}\n\n{rec}\n(energy boundary: GPU boards only)"
    emit(args, doc, human)
    return 0
