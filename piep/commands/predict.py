"""`piep predict`: joules and seconds of one deployment, with an interval."""

from __future__ import annotations

import argparse

from piep.commands.common import add_deployment_args, emit, scenario_from_args
from piep.report.table import fmt, table


def configure(parser) -> None:
    add_deployment_args(parser)
    parser.add_argument("--request-rate", type=float, default=None, metavar="R",
                        help=argparse.SUPPRESS)  # went: `piep serve` answers request streams
    parser.add_argument("--predictor", choices=("auto", "learned", "roofline"), default="auto",
                        help="which predictor answers (default: learned if trained, else roofline)")
    parser.add_argument("--allow-uncalibrated", action="store_true",
                        help="a GPU without calibration: predict from its spec sheet "
                             "(calibration/spec_sheets.json), flagged, wide interval")
    parser.add_argument("--modules", type=int, default=8, metavar="N",
                        help="modules listed in the table (default 8)")


def summary(doc: dict, top: int = 8) -> str:
    w, lay = doc["workload"], doc["layout"]
    iv = doc["interval"]
    lines = [
        f"{doc['model']} on {lay['gpus']}x {doc['gpu']} (tp={lay['tp']} pp={lay['pp']} "
        f"dp={lay['dp']}), batch {w['batch']}, prompt {w['prompt_len']}, gen {w['gen_len']}, "
        f"{w['mode']}  [predictor: {doc['predictor']}; energy boundary: GPU boards only]",
        "",
        table([
            ["energy_j", doc["energy_j"], f"[{fmt(iv['energy_j'][0])}, {fmt(iv['energy_j'][1])}]"],
            ["time_s", doc["time_s"], f"[{fmt(iv['time_s'][0])}, {fmt(iv['time_s'][1])}]"],
            ["prefill (J / TTFT s)", doc["prefill"]["energy_j"], doc["prefill"]["time_s"]],
            ["decode (J / s)", doc["decode"]["energy_j"], doc["decode"]["time_s"]],
            ["tpot_s", doc["decode"]["tpot_s"], ""],
            ["j_per_token", doc["j_per_token"], ""],
            ["tokens_per_s", doc["tokens_per_s"], ""],
        ], ["", "value", f"interval ({iv['level']})"]),
        "",
        "breakdown_j: " + ", ".join(f"{k} {fmt(v)}" for k, v in doc["breakdown_j"].items()),
    ]
    if top:
        rows = [[m["path"], m["kind"], m["energy_j"], 100 * m["energy_j"] / doc["energy_j"],
                 m["time_s"]] for m in doc["modules"][:top]]
        lines += ["", table(rows, ["module (attributed)", "kind", "energy_j", "share_%",
                                   "time_s"])]
    if doc["flags"]:
        lines.append("flags: " + ", ".join(doc["flags"]))
    return "\n".join(lines)


def run(args) -> int:
    from piep import api
    if args.request_rate is not None:
        from piep.errors import ConfigError
        raise ConfigError("--request-rate went: a request stream is `piep serve --model M "
                          f"--rate {args.request_rate:g}` (continuous batching, per-request "
                          "energy)")
    doc = api.predict(scenario_from_args(args), predictor=args.predictor)
    emit(args, doc, lambda d: summary(d, args.modules))
    return 0
