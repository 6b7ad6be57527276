"""Command line: parse, call one library function, print. Errors become one line."""

from __future__ import annotations

import argparse
import logging
import re
import sys

from piep import __version__
from piep.commands.common import add_json_arg
from piep.core.errors import MissingExtraError, OutputError, PiepError

log = logging.getLogger("piep")
# optional package -> how to get it
EXTRAS = {"torch": "pip install 'piep[gpu]' (on a GPU machine)",
          "pynvml": "pip install 'piep[gpu]' (nvidia-ml-py)",
          "transformers": "pip install 'piep[hf]'", "accelerate": "pip install accelerate",
          "safetensors": "pip install safetensors", "lightgbm": "pip install lightgbm"}

# subcommand -> (module under piep.commands, help)
COMMANDS: dict[str, tuple[str, str]] = {
    "predict": ("predict", "energy and time of one deployment (no GPU needed)"),
    "compare": ("compare", "compare deployments side by side, with a recommendation per goal"),
    "sweep": ("sweep", "many predictions over a design space"),
    "serve": ("serve", "energy of a request stream under continuous batching (no GPU needed)"),
    "steady": ("steady", "a server held full (vLLM at its concurrency): J per token, tokens/s, "
                         "the concurrency its KV cache allows (no GPU needed)"),
    "tree": ("tree", "print or save the model tree of a deployment"),
    "models": ("models", "list the shipped model configs"),
    "env": ("env", "versions, GPUs seen, calibrations present"),
    "measure": ("measure", "measure real inference energy on GPUs (torchrun)"),
    "meter": ("meter", "energy of any command on this machine's GPUs, as a measurement "
                       "record of a foreign engine"),
    "calibrate": ("calibrate", "module and waiting-time sampling on GPUs"),
    "train": ("train", "train the predictor from calibration data"),
    "report": ("report", "per-module energy hotspot report (HTML + Markdown)"),
    "plan": ("plan", "GPU clock plan for a deployment"),
    "apply": ("apply", "apply a clock plan through NVML"),
    "optimize": ("optimize", "batch x power limit x SM clock search"),
    "export": ("export", "a deployment's predictions as Prometheus metrics (port, textfile "
                         "or stdout)"),
}


class UsageError(Exception):
    """A flag the command line cannot take: one line, then exit 2."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line naming the flag, the value and the fix (never
    the usage block)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # `--allow` is not --allow-uncalibrated
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        raise UsageError(f"{self.prog}: error: {message}{_fix(message, self.prog)}")


def _fix(message: str, prog: str) -> str:
    """What to do about an argparse error message."""
    flag = re.match(r"argument ([^:]+):", message)
    if re.search(r"expected (one|at least one) argument", message) and flag:
        return (f" (give it a value; one that starts with '-' is given as "
                f"{flag.group(1).split('/')[-1]}=VALUE)")
    if "invalid int value" in message:
        return " (give a whole number)"
    if "invalid float value" in message:
        return " (give a number)"
    if message.startswith(("the following arguments are required", "unrecognized arguments",
                           "one of the arguments")) or "not allowed with argument" in message:
        return f"; `{prog} --help` lists its flags"
    return ""


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given `argv`, only the command it names is configured
    (the others are listed by name: a start imports one command's module, not all)."""
    import importlib
    parser = Parser(prog="piep", description=__doc__)
    parser.add_argument("--version", action="version", version=f"piep {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    named = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if argv is None or name == named:
            mod = importlib.import_module(f"piep.commands.{module}")
            mod.configure(p)
            add_json_arg(p)
            p.set_defaults(handler=mod.run, subparser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:  # `piep apply PLAN -- CMD ...`: everything after -- is the command
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:]
    verbose = any(a in ("-v", "--verbose") for a in argv)  # before or after the command
    argv = [a for a in argv if a not in ("-v", "--verbose")]
    parser = build_parser(argv)
    try:
        args, extra = parser.parse_known_args(argv)
        if not getattr(args, "command", None):
            raise UsageError(f"piep: error: give a command: {', '.join(COMMANDS)}; "
                             "`piep --help` describes them")
        if extra:  # said by the subcommand's parser: its name, its --help
            args.subparser.error(f"unrecognized arguments: {' '.join(extra)}")
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help, --version
        return int(exc.code or 0)
    args.passthrough = passthrough
    args.verbose = verbose
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="piep: %(message)s", stream=sys.stderr)
    from piep.core.artifacts import recover_outputs
    from piep.core.outputs import release_claims
    try:
        recover_outputs()  # what a killed run left halfway through its commit
        return int(args.handler(args) or 0)
    except PiepError as exc:
        print(f"piep {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `piep ... | head`
        return 0
    except ModuleNotFoundError as exc:  # an optional package a command needs
        err = MissingExtraError(f"needs the Python package {exc.name!r}: "
                                f"{EXTRAS.get(str(exc.name).split('.')[0], 'pip install it')}")
        print(f"piep {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code
    except OSError as exc:  # a path the user gave (a figure, a log) cannot be written/read
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"piep {args.command}: error: cannot use{where}: {exc.strerror or exc}",
              file=sys.stderr)
        return OutputError.exit_code
    except KeyboardInterrupt:
        print(f"piep {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        release_claims()
