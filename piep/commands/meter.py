"""`piep meter -- CMD`: the energy of a command on this machine's GPUs, as a measurement
record of a foreign engine (one window around the command; `--prefill-cmd` adds the
prefill split)."""

from __future__ import annotations

import shlex
import subprocess

from piep.commands.common import emit, host_probe_here
from piep.errors import ConfigError


def configure(parser) -> None:
    parser.add_argument("--model", required=True,
                        help="shipped name or config.json the command runs")
    parser.add_argument("--engine", required=True, help="the engine's name (e.g. vllm)")
    parser.add_argument("--engine-version", required=True, help="its version")
    parser.add_argument("--batch", type=int, required=True, help="prompts in the call")
    parser.add_argument("--prompt-len", type=int, required=True, help="tokens per prompt")
    parser.add_argument("--gen-len", type=int, required=True,
                        help="new tokens per prompt (the prefill's included)")
    parser.add_argument("--tp", type=int, default=1, help="tensor parallel degree")
    parser.add_argument("--mode", choices=("eager", "graph"), default="eager",
                        help="how the engine decodes (default eager)")
    parser.add_argument("--gpus", type=int, nargs="+", default=None,
                        help="NVML indices of the GPUs it runs on (default all)")
    parser.add_argument("--prefill-cmd", default=None, metavar="CMD",
                        help="the same call with one new token, metered too (the prefill "
                             "split)")
    parser.add_argument("--out", required=True, help="JSONL file the record is appended to")


def _window(gpus):
    from piep.meter import window
    return window(gpus)


def _metered(cmd: list[str], gpus):
    with _window(gpus) as w:
        code = subprocess.call(cmd)
    if code != 0:
        raise ConfigError(f"`{shlex.join(cmd)}` exited with {code}; nothing written")
    return w


def run(args) -> int:
    from piep.meter import append, record
    cmd = list(args.passthrough)
    if not cmd:
        raise ConfigError("give the command to meter after --: piep meter ... -- CMD ARGS")
    if min(args.batch, args.prompt_len, args.gen_len, args.tp) < 1:
        raise ConfigError("batch, prompt-len, gen-len and tp are positive integers")
    prefill = _metered(shlex.split(args.prefill_cmd), args.gpus) if args.prefill_cmd else None
    whole = _metered(cmd, args.gpus)
    rec = record(args.model, engine=args.engine, engine_version=args.engine_version,
                 batch=args.batch, prompt_len=args.prompt_len, gen_len=args.gen_len,
                 tp=args.tp, mode=args.mode, whole=whole, prefill=prefill,
                 command=shlex.join(cmd))
    probe = host_probe_here((args.gpus or [0])[0], repeats=3)
    if probe is not None:
        rec["host_probe"] = probe
    append(args.out, rec)

    def human(r):
        return (f"{r['model']} on {r['engine']['name']} {r['engine']['version']}: "
                f"{r['energy_j']:.1f} J, {r['time_s']:.3f} s over {len(r['per_gpu'])} GPU(s)"
                + (" (shorter than a counter tick: not trusted alone)" if r["flags"] else "")
                + f" -> {args.out}")
    emit(args, rec, human)
    return 0
