"""`piep predict`: joules and seconds of one deployment, with an interval."""

from __future__ import annotations

import argparse

from piep.commands.common import (add_deployment_args, add_facility_args, dtypes_words,
                                  emit_facility, flag_lines, host_note, out_of_range_lines,
                                  outcome_lines, scenario_from_args)
from piep.report.table import fmt, table


def configure(parser) -> None:
    add_facility_args(parser)
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
    ep = f" ep={lay['ep']}" if "ep" in lay else ""
    lines = [
        f"{doc['model']} on {lay['gpus']}x {doc['gpu']} (tp={lay['tp']} pp={lay['pp']} "
        f"dp={lay['dp']}{ep}), batch {w['batch']}, prompt {w['prompt_len']}, gen {w['gen_len']}, "
        f"{w['mode']}, {dtypes_words(doc)}  [predictor: {doc['predictor']}; energy boundary: GPU "
        f"boards only]",
        "",
        *outcome_lines(doc),
        *([f"priced as {doc['priced_as']}"] if doc.get("priced_as") else []),
        "per GPU: " + _per_gpu(doc["per_gpu"]),
    ]
    if top:
        rows = [[m["path"], m["kind"], m["energy_j"], 100 * m["energy_j"] / doc["energy_j"],
                 m["time_s"]] for m in doc["modules"][:top]]
        lines += ["", table(rows, ["module (attributed)", "kind", "energy_j", "share_%",
                                   "time_s"])]
    lines += flag_lines(doc["flags"]) + out_of_range_lines(doc)
    if note := host_note(doc):
        lines.append(note)
    return "\n".join(lines)


def _per_gpu(gpus: list[dict]) -> str:
    """Mean board power and memory per pipeline stage (every GPU of a stage alike)."""
    stages: dict[int, dict] = {}
    for g in gpus:
        stages.setdefault(g["stage"], g)
    return "; ".join(f"stage {s}: {fmt(g['power_w_mean'])} W, {fmt(g['memory_gib'])} GiB"
                     for s, g in sorted(stages.items()))


def run(args) -> int:
    from piep import api
    if args.modules < 0:
        from piep.core.errors import ConfigError
        raise ConfigError(f"--modules={args.modules} must be >= 0")
    if args.request_rate is not None:
        from piep.core.errors import ConfigError
        raise ConfigError("--request-rate went: a request stream is `piep serve --model M "
                          f"--rate {args.request_rate:g}` (continuous batching, per-request "
                          "energy)")
    doc = api.predict(scenario_from_args(args), predictor=args.predictor)
    emit_facility(args, doc, lambda d: summary(d, args.modules))
    return 0
