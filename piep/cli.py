"""Command line: parse, call one library function, print. Errors become one line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any, Callable

from piep import __version__
from piep.errors import PiepError

log = logging.getLogger("piep")

# subcommand -> (module under piep.commands, help)
COMMANDS: dict[str, tuple[str, str]] = {
    "predict": ("predict", "energy and time of one deployment (no GPU needed)"),
    "compare": ("compare", "compare deployments side by side, with a recommendation per goal"),
    "sweep": ("sweep", "many predictions over a design space"),
    "tree": ("tree", "print or save the model tree of a deployment"),
    "models": ("models", "list the shipped model configs"),
    "env": ("env", "versions, GPUs seen, calibrations present"),
    "measure": ("measure", "measure real inference energy on GPUs (torchrun)"),
    "calibrate": ("calibrate", "module and waiting-time sampling on GPUs"),
    "train": ("train", "train the predictor from calibration data"),
    "report": ("report", "per-module energy hotspot report (HTML + Markdown)"),
    "plan": ("plan", "GPU clock plan for a deployment"),
    "apply": ("apply", "apply a clock plan through NVML"),
    "optimize": ("optimize", "batch x power limit x SM clock search"),
}


def add_deployment_args(p: argparse.ArgumentParser, *, model: bool = True) -> None:
    if model:
        p.add_argument("--model", required=True,
                       help="shipped name (see `piep models`) or path to config.json / folder")
    p.add_argument("--gpu", default="h200", help="GPU type (default h200)")
    p.add_argument("--tp", type=int, default=1, help="tensor parallel degree (default 1)")
    p.add_argument("--pp", type=int, default=1, help="pipeline parallel degree (default 1)")
    p.add_argument("--dp", type=int, default=1, help="data parallel replicas (default 1)")
    add_workload_args(p)


def add_workload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=int, default=1, help="global batch (default 1)")
    p.add_argument("--prompt-len", type=int, default=512, help="prompt tokens (default 512)")
    p.add_argument("--gen-len", type=int, default=128, help="generated tokens (default 128)")
    p.add_argument("--mode", choices=("graph", "eager"), default="graph",
                   help="decode as CUDA-graph replay (default) or eager PyTorch")


def add_json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine output on stdout")


def emit(args: argparse.Namespace, doc: Any, human: Callable[[Any], str]) -> None:
    if getattr(args, "json", False):
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(human(doc))


def build_parser() -> argparse.ArgumentParser:
    import importlib
    parser = argparse.ArgumentParser(prog="piep", description=__doc__)
    parser.add_argument("--version", action="version", version=f"piep {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        mod = importlib.import_module(f"piep.commands.{module}")
        p = sub.add_parser(name, help=help_text, description=help_text)
        mod.configure(p)
        add_json_arg(p)
        p.set_defaults(handler=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:  # `piep apply PLAN -- CMD ...`: everything after -- is the command
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:]
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed one usage line
        return int(exc.code or 0)
    args.passthrough = passthrough
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="piep: %(message)s", stream=sys.stderr)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.handler(args) or 0)
    except PiepError as exc:
        print(f"piep {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"piep {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
