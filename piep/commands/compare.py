"""`piep compare A B ...`: deployments side by side and a recommendation per goal."""

from __future__ import annotations

from piep.commands.common import (add_facility_args, add_workload_args, emit_facility,
                                  flag_lines, scenario_file)
from piep.core.gpus import DEFAULT_GPU
from piep.report.table import fmt, table


def configure(parser) -> None:
    add_facility_args(parser)
    parser.add_argument("candidates", nargs="+", metavar="MODEL@LAYOUT",
                        help="e.g. llama-2-7b@tp2 llama-2-13b@tp1 llama-3-70b@tp2pp2")
    parser.add_argument("--gpu", default=DEFAULT_GPU)
    parser.add_argument("--scenario", metavar="FILE.json",
                        help="the GPU, engine and workload as one file (the 'scenario' of "
                             "`piep predict --json`); the candidates give model and layout, "
                             "flags given beside it change its fields")
    add_workload_args(parser)
    parser.add_argument("--predictor", choices=("auto", "learned", "roofline"), default="auto")


def run(args) -> int:
    from piep.compare import compare, parse_candidate
    from piep.core.scenario import Scenario
    model, fields = parse_candidate(args.candidates[0])
    fields.pop("engine", None)  # the base carries the command's engine; candidates may not
    names = ("gpu", "engine", "mode", "batch", "prompt_len", "gen_len", "cache_len",
             "host_probe_us")
    if args.scenario:
        base = scenario_file(args, names, model=model, **fields,
                             stream_refused="compare prices a batch on each candidate; a "
                                            "stream of requests is served (piep serve "
                                            "--scenario)")
    else:
        base = Scenario.build(model, **{k: getattr(args, k) for k in names}, **fields)
    doc = compare(args.candidates, base, predictor=args.predictor)

    def human(d):
        def band(v):
            return f"[{fmt(v[0])}, {fmt(v[1])}]"
        rows = [[r["candidate"], r["gpus"], r["energy_j"], band(r["interval_energy_j"]),
                 r["time_s"], band(r["interval_time_s"]), r["j_per_output_token"],
                 r["ttft_p50_s"], r["tpot_p50_s"], r["memory_headroom_gib"],
                 ", ".join(r["flags"]) or "-"] for r in d["candidates"]]
        body = table(rows, ["candidate", "gpus", "energy_j", "90 %", "time_s", "90 %",
                            "J per output token", "TTFT p50", "TPOT p50",
                            "headroom GiB/GPU", "flags"])
        rec = "\n".join(f"{goal}: {dec['why']}" for goal, dec in d["decisions"].items())
        flags = flag_lines(f for r in d["candidates"] for f in r["flags"])
        return "\n".join([body, "", rec, *flags, "(energy boundary: GPU boards only)"])
    emit_facility(args, doc, human)
    return 0
