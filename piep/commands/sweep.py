"""`piep sweep`: predictions over a grid (or random draws) of deployments, as CSV or JSON."""

from __future__ import annotations

import argparse
import csv
import re
import sys

from piep.commands.common import (add_facility_args, emit, engine_arg, facility_of,
                                  host_probe_arg, resolve_auto_probe)
from piep.core.gpus import DEFAULT_GPU

FIELDS = ("model", "tp", "pp", "dp", "batch", "prompt_len", "gen_len", "mode", "engine",
          "requests", "output_tokens", "energy_j", "time_s", "j_per_output_token",
          "j_per_request", "output_tokens_per_s", "ttft_p50_s", "tpot_p50_s", "e2e_p50_s",
          "flags", "error", "energy_boundary")
BOUNDARY = "gpu_board"  # what energy_j counts: GPU boards only (not CPU, DRAM, PSU)


class Whole(argparse.Action):
    """Whole numbers given apart or comma-joined (`--batch 1 8` or `--batch 1,8`)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        words = [w for value in values for w in value.split(",") if w]
        bad = [w for w in words if not re.fullmatch(r"-?\d+", w)]
        if bad or not words:
            raise argparse.ArgumentError(self, f"invalid int value: {(bad or values)[0]!r}")
        setattr(namespace, self.dest, [int(w) for w in words])


def configure(parser) -> None:
    add_facility_args(parser)
    parser.add_argument("--model", nargs="+",
                        help="shipped names or config paths (every combination is predicted)")
    parser.add_argument("--gpu", default=DEFAULT_GPU, help=f"GPU type (default {DEFAULT_GPU})")
    for flag, default, what in (("--tp", [1], "tensor parallel degrees"),
                                ("--pp", [1], "pipeline parallel degrees"),
                                ("--dp", [1], "data parallel replicas"),
                                ("--batch", [1], "global batches"),
                                ("--prompt-len", [512], "prompt lengths"),
                                ("--gen-len", [128], "generated tokens")):
        parser.add_argument(flag, nargs="+", action=Whole, default=default,
                            help=f"{what}, as `1 8 32` or `1,8,32` (default {default[0]})")
    from piep.core.scenario import engine_names
    parser.add_argument("--mode", nargs="+", choices=("graph", "eager"), default=None,
                        help="the reference runner's decode (alias of --engine piep-graph|"
                             "piep-eager; default graph)")
    parser.add_argument("--engine", nargs="+", type=engine_arg(engine_names()), default=None,
                        metavar="ENGINE", help=f"engines to sweep: {', '.join(engine_names())} "
                                               "(default piep-graph)")
    parser.add_argument("--host-probe-us", type=host_probe_arg, default=None,
                        metavar="US|auto",
                        help="engines fitted per host: the launch probe of the host that "
                             "runs them (`piep env --host-probe`; `auto`: this machine's, "
                             "measured once and kept); other engines ignore it")
    parser.add_argument("--predictor", choices=("auto", "learned", "roofline"), default="auto",
                        help="learned if trained (default), or the roofline baseline")
    parser.add_argument("--out", metavar="FILE",
                        help="write the rows to FILE (JSON if it ends in .json, else CSV), "
                             "whole or not at all; stdout then says what was written")
    parser.add_argument("--shard", metavar="I/N", default=None,
                        help="predict shard I of N of the grid (every N-th point from the "
                             "I-th), for one machine of many; --out FILE.json, then --merge")
    parser.add_argument("--merge", nargs="+", metavar="SHARD.json", default=None,
                        help="instead of predicting: the shards' files as one sweep, in the "
                             "grid's order (every shard once)")


def run(args) -> int:
    from piep.core.errors import ConfigError
    from piep.sweep import grid, grid_key, shard, sweep
    if args.out:
        from piep.core.artifacts import writable
        writable(args.out, "--out")  # before the work
    if args.merge:
        if args.model or args.shard:
            raise ConfigError("--merge joins finished shards: no --model, no --shard")
        from piep.core.artifacts import read_json
        from piep.sweep import merge
        return _write(args, merge([(p, read_json(p, "piep.sweep")) for p in args.merge]))
    if not args.model:
        raise ConfigError("give --model (the models to sweep), or --merge SHARD.json ...")
    configs = grid(models=args.model, tp=args.tp, pp=args.pp, dp=args.dp, batch=args.batch,
                   prompt_len=args.prompt_len, gen_len=args.gen_len,
                   mode=args.mode or [None], engine=args.engine or [None])
    part = None
    if args.shard:
        from piep.core.config import parse_shard
        index, of = parse_shard(args.shard)
        if not (args.out and str(args.out).lower().endswith(".json")):
            raise ConfigError("--shard writes a piece of the grid for --merge: give --out "
                              "FILE.json")
        part = {"index": index, "of": of, "configs": len(configs), "grid": grid_key(configs)}
        configs = shard(configs, index, of)
    resolve_auto_probe(args)
    if args.host_probe_us is not None:
        from piep.core.errors import ConfigError
        from piep.core.engines import names
        fitted = [c for c in configs if c.get("engine") in names(host_fitted=True)]
        if not fitted:
            raise ConfigError(f"--host-probe-us applies to engines fitted per host "
                              f"({', '.join(names(host_fitted=True))}); add one with --engine")
        for c in fitted:
            c["host_probe_us"] = args.host_probe_us
    rows = sweep(configs, gpu=args.gpu, predictor=args.predictor, progress=True)
    if rows and all("error" in r for r in rows) and part is None:
        raise ConfigError(f"no point of the grid is valid ({len(rows)} refused); the first: "
                          f"{rows[0]['error']}")
    doc = {"schema": "piep.sweep", "schema_version": 1, "boundary": BOUNDARY, "rows": rows}
    from piep.core.results import with_facility
    with_facility(doc, facility_of(args))  # (its columns in the CSV too)
    if part is not None:
        doc["shard"] = part
    return _write(args, doc)


def _write(args, doc: dict) -> int:
    """The sweep document to --out (JSON or CSV, whole or not at all), or to stdout."""
    rows = doc["rows"]
    if args.out:
        from piep.core.artifacts import json_text, write_text
        as_json = str(args.out).lower().endswith(".json")
        write_text(args.out, json_text(doc) + "\n" if as_json else _csv(rows))
        refused = sum("error" in r for r in rows)
        emit(args, {"out": str(args.out), "rows": len(rows), "refused": refused},
             lambda d: f"wrote {d['rows']:,} rows ({d['refused']:,} refused) to {d['out']}")
        return 0
    if args.json:
        emit(args, doc, str)
        return 0
    sys.stdout.write(_csv(rows))
    return 0


def _csv(rows: list[dict]) -> str:
    """The rows as CSV, a column per FIELDS entry (flags joined by ';')."""
    import io
    buf = io.StringIO()
    extra = [k for k in ("facility_energy_kwh", "kg_co2eq", "cost") if any(k in r for r in rows)]
    writer = csv.DictWriter(buf, fieldnames=FIELDS + tuple(extra), extrasaction="ignore")
    writer.writeheader()
    writer.writerows({**r, "flags": ";".join(r.get("flags", [])), "energy_boundary": BOUNDARY}
                     for r in rows)
    return buf.getvalue()
