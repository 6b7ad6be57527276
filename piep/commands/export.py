"""`piep export`: a deployment's predictions as Prometheus metrics - served on a port,
written for node_exporter's textfile collector, or printed."""

from __future__ import annotations

from piep.commands.common import add_deployment_args, emit, scenario_from_args
from piep.core.errors import ConfigError


def configure(parser) -> None:
    add_deployment_args(parser)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--prometheus", type=int, metavar="PORT", default=None,
                       help="serve the metrics on this port (/metrics) until stopped")
    where.add_argument("--textfile", metavar="FILE.prom", default=None,
                       help="write them for node_exporter's textfile collector (atomically) "
                            "and exit")
    parser.add_argument("--predictor", choices=("auto", "learned", "roofline"), default="auto")


def run(args) -> int:
    from piep import api
    from piep.report.metrics import exposition, registry, values
    if args.prometheus is not None and not 0 < args.prometheus < 65536:
        raise ConfigError(f"--prometheus={args.prometheus}: a port in 1-65535")
    if args.textfile and not args.textfile.endswith(".prom"):
        raise ConfigError(f"--textfile {args.textfile}: node_exporter reads files ending in "
                          f".prom")
    doc = api.predict(scenario_from_args(args), predictor=args.predictor, hosts=False)
    if args.textfile:
        from prometheus_client import write_to_textfile
        from piep.core.artifacts import writable
        writable(args.textfile, "--textfile")
        write_to_textfile(args.textfile, registry(doc))
        emit(args, {"textfile": args.textfile, "metrics": values(doc)},
             lambda d: f"wrote {len(d['metrics'])} gauges to {d['textfile']}")
        return 0
    if args.prometheus is not None:
        import time

        from prometheus_client import start_http_server
        start_http_server(args.prometheus, registry=registry(doc))
        print(f"serving {len(values(doc))} gauges on :{args.prometheus}/metrics (Ctrl-C "
              f"stops)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0
    emit(args, {"metrics": values(doc)}, lambda d: exposition(doc).rstrip())
    return 0
