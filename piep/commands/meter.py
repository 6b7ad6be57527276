"""`piep meter -- CMD`: the energy of a command on this machine's GPUs, as a measurement
record of a foreign engine (one window around the command; `--prefill-cmd` adds the
prefill split); with `--serving-result FILE`, a serving benchmark's run (vLLM's or
SGLang's result file, piep.sampling.bench_results) as a replayed trace."""

from __future__ import annotations

import shlex
import subprocess

from piep.commands.common import emit, host_probe_here
from piep.core.errors import ConfigError


def configure(parser) -> None:
    parser.add_argument("--model", required=True,
                        help="shipped name or config.json the command runs")
    parser.add_argument("--engine", required=True, help="the engine's name (e.g. vllm)")
    parser.add_argument("--engine-version", required=True, help="its version")
    parser.add_argument("--batch", type=int, help="prompts in the call")
    parser.add_argument("--prompt-len", type=int, help="tokens per prompt")
    parser.add_argument("--gen-len", type=int,
                        help="new tokens per prompt (the prefill's included)")
    parser.add_argument("--serving-result", metavar="FILE|DIR",
                        help="a serving benchmark's result file, written by the command "
                             "(`vllm bench serve --save-result --save-detailed`, SGLang's "
                             "`bench_serving --output-file F --output-details`): the record "
                             "is that run replayed (its requests and timings), its energy "
                             "the window around the command (or, without a command, the "
                             "file's own gpu_energy_j); a folder: every run=N.json of `vllm "
                             "bench sweep serve`, each with its own gpu_energy_j; no "
                             "--batch/--prompt-len/--gen-len")
    parser.add_argument("--gpu", metavar="NAME",
                        help="with --serving-result of a run held at --max-concurrency: the "
                             "GPU type it ran on (e.g. h100); the record is a steady state "
                             "that fits `piep steady` (piep train --engine vllm "
                             "--steady-states)")
    parser.add_argument("--run", type=int, default=-1, metavar="N",
                        help="with --serving-result: which run of the file (1 = first; "
                             "default the last)")
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
    from piep.sampling.meter import window
    return window(gpus)


def _metered(cmd: list[str], gpus):
    with _window(gpus) as w:
        code = subprocess.call(cmd)
    if code != 0:
        raise ConfigError(f"`{shlex.join(cmd)}` exited with {code}; nothing written")
    return w


def run(args) -> int:
    from piep.sampling.meter import record
    from piep.core.writer import append_record as append
    cmd = list(args.passthrough)
    if args.serving_result:
        return _serving(args, cmd)
    if None in (args.batch, args.prompt_len, args.gen_len):
        raise ConfigError("give --batch, --prompt-len and --gen-len of the metered call (or "
                          "--serving-result FILE for a serving benchmark)")
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


def _serving(args, cmd: list[str]) -> int:
    """A serving benchmark's run as a replay: metered around `cmd` (which writes the result
    file), or read with the file's own energy; a folder of `vllm bench sweep serve` is
    every run it holds, each with its own energy."""
    from pathlib import Path
    if args.tp < 1 or args.run == 0:
        raise ConfigError("--tp is a positive integer; --run counts from 1 (or -1, the last)")
    folder = Path(args.serving_result)
    if not folder.is_dir():
        return _serving_file(args, cmd)
    if cmd:
        raise ConfigError(f"{folder}: a folder of many runs cannot share one meter window; "
                          f"read their own gpu_energy_j (no command), or meter each run")
    runs = sorted(folder.rglob("run=*.json"))
    if not runs:
        raise ConfigError(f"{folder}: no run=N.json (the runs `vllm bench sweep serve` "
                          f"writes in its output folder)")
    import copy
    for path in runs:  # (each checked before any is written: one fails, none is kept)
        _serving_file(copy.copy(args), [], dry=True, path=str(path))
    for path in runs:
        one = copy.copy(args)
        one.quiet = True
        _serving_file(one, [], path=str(path))
    emit(args, {"out": args.out, "records": len(runs),
                "runs": [str(p.relative_to(folder)) for p in runs]},
         lambda d: f"{d['records']} runs of {folder} -> {d['out']}")
    return 0


def _serving_file(args, cmd: list[str], *, dry: bool = False, path: str | None = None) -> int:
    """One result file's run (`_serving`); `dry`: only build the record (a check)."""
    from pathlib import Path
    from piep.sampling.bench_results import held_at, replay_record
    from piep.core.writer import append_record as append
    if path is not None:
        args.serving_result, args.run = path, -1
    run_index = args.run - 1 if args.run > 0 else args.run
    window, result = None, Path(args.serving_result)
    if cmd:
        before = result.stat().st_mtime if result.exists() else None
        whole = _metered(cmd, args.gpus)
        if not result.exists() or result.stat().st_mtime == before:
            raise ConfigError(f"`{shlex.join(cmd)}` wrote no {args.serving_result}: give the "
                              f"file the benchmark saves its result to; nothing written")
        idle_w = sum(g["idle_power_w"] for g in whole.per_gpu)
        window = {"energy_j": whole.energy_j, "time_s": whole.time_s, "idle_power_w": idle_w,
                  "command": shlex.join(cmd)}
    if held_at(args.serving_result, run_index) is not None:
        return _steady(args, run_index, window, dry=dry)
    rec = replay_record(args.serving_result, model=args.model, engine=args.engine,
                        engine_version=args.engine_version, tp=args.tp, run_index=run_index,
                        energy_j=window and window["energy_j"], window=window)
    if window is not None:  # the command's start-up and tear-down at idle power
        outside = max(window["time_s"] - rec["time_s"], 0.0)
        rec["energy_j"] = window["energy_j"] - window["idle_power_w"] * outside
        rec["idle_power_w"] = window["idle_power_w"]
        window["outside_s"] = outside
    return _kept(args, rec, dry, append,
                 lambda r: (f"{r['model']} on {r['engine']['name']} "
                            f"{r['engine']['version']}: {r['requests']} requests "
                            f"({r['failed_requests']} failed, left out), "
                            f"{r['energy_j']:.1f} J over {r['time_s']:.2f} s -> {args.out}"))


def _kept(args, rec: dict, dry: bool, append_to, words) -> int:
    """`rec` appended to --out by `append_to` (not on a dry run), and said in `words`
    unless --quiet."""
    if not dry:
        append_to(args.out, rec)
        if not getattr(args, "quiet", False):
            emit(args, rec, words)
    return 0


def _steady(args, run_index: int, window: dict | None, *, dry: bool = False) -> int:
    """A run held at its max_concurrency: a steady-state record (piep.steady_measurement),
    its energy the window around the command less its start-up and tear-down at idle."""
    from piep.core.artifacts import append_jsonl, check_document
    from piep.sampling.bench_results import steady_record
    if not args.gpu:
        raise ConfigError(f"{args.serving_result}: a run held at max_concurrency is a steady "
                          f"state: give --gpu (the GPU type it ran on, e.g. h100)")
    rec = steady_record(args.serving_result, model=args.model, engine=args.engine,
                        engine_version=args.engine_version, gpu=args.gpu.lower(), tp=args.tp,
                        run_index=run_index, window=window)
    check_document(rec, args.out)
    return _kept(args, rec, dry, append_jsonl,
                 lambda r: (f"{r['model']} on {r['engine']['name']} "
                            f"{r['engine']['version']}, held at "
                            f"{r['server']['max_num_seqs']}: {r['output_tokens_per_s']:.1f} "
                            f"tokens/s, {r['j_per_output_token']:.4g} J per output token "
                            f"({r['requests']} requests) -> {args.out}"))
