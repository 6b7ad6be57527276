"""`piep serve`: energy of a request stream under continuous batching (no GPU needed)."""

from __future__ import annotations

from piep.commands.common import (add_facility_args, add_layout_args, dtypes_words,
                                  emit_facility, flag_lines, host_note, host_probe_arg,
                                  out_of_range_lines, outcome_lines, resolve_auto_probe,
                                  scenario_file)
from piep.core.gpus import DEFAULT_GPU
from piep.report.table import fmt, table


SERVE_SIGNATURE = "serving.json"  # the file that marks a serve --out folder


def configure(parser) -> None:
    from piep.core.engines import ENGINES, names
    add_facility_args(parser)
    parser.add_argument("--model",
                        help="shipped name (see `piep models`) or path to config.json / folder")
    parser.add_argument("--scenario", metavar="FILE.json",
                        help="the whole request as one file (the 'scenario' of `piep serve "
                             "--json`: a stream of requests, or a batch arriving at once); "
                             "flags given beside it change its fields")
    parser.add_argument("--gpu", default=DEFAULT_GPU, help=f"GPU type (default {DEFAULT_GPU})")
    add_layout_args(parser, ("tp", "ep"))
    serving = names(kind="stream")
    parser.add_argument("--engine", default=None, metavar="NAME",
                        help=f"the serving engine (default {serving[0]}: "
                             f"{ENGINES[serving[0]].description}; or one of your own, "
                             f"fitted on its benchmarks: piep train --engine NAME --like "
                             f"{serving[0]})")
    src = parser.add_argument_group("requests (a trace, or Poisson arrivals)")
    src.add_argument("--trace", metavar="FILE",
                     help="JSONL or CSV with arrival_s, prompt_len, gen_len[, id]")
    src.add_argument("--rate", type=float, metavar="R", help="Poisson arrivals, requests/s")
    src.add_argument("--requests", type=int, default=100, metavar="N",
                     help="with --rate: how many requests (default 100)")
    src.add_argument("--prompt-len", default=None, metavar="DIST",
                     help="with --rate: N, lognormal:MEDIAN:SIGMA[:MAX] or uniform:LO:HI "
                          "(default lognormal:512:0.6:4096, its MAX lowered so that a "
                          "request fits the model's context)")
    src.add_argument("--gen-len", default=None, metavar="DIST",
                     help="with --rate: generated tokens per request, same forms (default "
                          "lognormal:128:0.6:1024, its MAX at most a quarter of the "
                          "model's context)")
    src.add_argument("--seed", type=int, default=0, help="with --rate: the draw (default 0)")
    parser.add_argument("--host-probe-us", type=host_probe_arg, default=None,
                        metavar="US|auto",
                        help="the launch probe of the host that runs the engine (`piep env "
                             "--host-probe` on that host prints it; `auto`: this machine's, "
                             "measured once and kept); default: a typical host of the "
                             "profile's calibration machines")
    parser.add_argument("--policy", metavar="FILE.json",
                        help="another engine's scheduler and host time (block_size, "
                             "kv_memory_share or num_blocks, max_batch_tokens, "
                             "max_requests_per_batch, safety_margin, host: {step_host_s, "
                             "request_host_s, ...}); flagged unvalidated_engine. With "
                             "--engine vllm: its server's max_requests_per_batch "
                             "(max_num_seqs), max_batch_tokens (max_num_batched_tokens), "
                             "block_size")
    parser.add_argument("--predictor", choices=("auto", "learned", "roofline"), default="auto")
    parser.add_argument("--allow-uncalibrated", action="store_true",
                        help="a GPU without calibration: price the stream from its spec sheet "
                             "(the reference GPU's engine profile and scheduler on its "
                             "memory), flagged uncalibrated_gpu, fixed x0.5-x2 band")
    parser.add_argument("--out", metavar="DIR", help="also write serving.json and the trace")
    parser.add_argument("--vllm-result", metavar="FILE.json",
                        help="also write the answer as the result file `vllm bench serve "
                             "--save-result --save-detailed` writes (its keys and units, "
                             "gpu_energy_j): diff it with a measured one; `piep meter "
                             "--serving-result FILE` reads it back")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="requests in flight and power over the window")
    parser.add_argument("--requests-shown", type=int, default=5, metavar="N",
                        help="per-request rows in the table (default 5)")


def run(args) -> int:
    from piep.core.errors import ConfigError
    from piep.serving.policy import read_policy
    from piep.serving.serve import load_curve, serve_simulated
    if args.requests_shown < 0:
        raise ConfigError(f"--requests-shown={args.requests_shown} must be >= 0")

    from piep.core.artifacts import figure_path, writable, writable_folder
    if args.plot:
        figure_path(args.plot)
    if args.vllm_result:
        writable(args.vllm_result, "--vllm-result")
    if args.out:
        writable_folder(args.out, "--out", SERVE_SIGNATURE)
    policy = read_policy(args.policy) if args.policy else None
    scn = _scenario(args)
    doc, sim = serve_simulated(scn, predictor=args.predictor, user_policy=policy)
    from piep.core.artifacts import output_set, write_json, write_text
    with output_set() as tx:  # serving.json, the trace and the figure: all of them or none
        if args.out:
            stage = tx.folder(args.out, SERVE_SIGNATURE)
            body = {k: v for k, v in doc.items() if k not in ("schema", "schema_version")}
            write_json(stage / SERVE_SIGNATURE, doc["schema"], doc["schema_version"],
                       body, command="piep serve")
            write_text(stage / "trace.jsonl", scn.requests().to_jsonl())
        if args.vllm_result:
            from piep.core.artifacts import json_text
            from piep.sampling.bench_results import vllm_result
            write_text(tx.file(args.vllm_result),
                       json_text(vllm_result(doc, scn.requests())) + "\n")
            doc["vllm_result"] = args.vllm_result
        if args.plot:
            curve = load_curve(scn, predictor=args.predictor, user_policy=policy)
            _plot(scn, sim, doc, curve, tx.file(args.plot))
            doc["plot"] = args.plot
    emit_facility(args, doc, lambda d: summary(d, args.requests_shown))
    return 0


def _scenario(args):
    """The served scenario: --scenario FILE.json with the flags given beside it, or the
    model, layout and engine flags with --trace or --rate."""
    from piep.core.engines import names
    from piep.core.errors import ConfigError
    from piep.core.scenario import Scenario
    from piep.core.trace import poisson_trace, read_trace
    if args.trace and args.rate is not None:
        raise ConfigError("give --trace FILE or --rate R, not both")
    prompt, gen = default_lengths(args.model if not args.scenario else None)
    trace = read_trace(args.trace) if args.trace else None if args.rate is None else \
        poisson_trace(rate_per_s=args.rate, requests=args.requests,
                      prompt_len=args.prompt_len or prompt, gen_len=args.gen_len or gen,
                      seed=args.seed)
    names_ = ("gpu", "tp", "ep", "engine", "host_probe_us")
    if args.scenario:
        return scenario_file(args, names_, **({"model": args.model} if args.model else {}),
                             **({"trace": trace} if trace is not None else {}))
    if not args.model:
        raise ConfigError("give --model (a shipped name or a config path) or --scenario "
                          "FILE.json")
    if trace is None:
        raise ConfigError("give --trace FILE or --rate R (with --requests, --prompt-len, "
                          "--gen-len, --seed), or --scenario FILE.json")
    resolve_auto_probe(args)
    flags = {k: getattr(args, k) for k in names_}
    return Scenario.build(args.model, trace=trace, allow_uncalibrated=args.allow_uncalibrated,
                          **{**flags, "engine": args.engine or names(kind="stream")[0]})


def summary(d: dict, shown: int) -> str:
    lines = [f"{d['model']} on {d['layout']['gpus']}x {d['gpu']}, {d['engine']}: {d['requests']} "
             f"requests, {d['output_tokens']} output tokens, {dtypes_words(d)}  [predictor: "
             f"{d['predictor']}; energy boundary: GPU boards only]", "", *outcome_lines(d),
             f"breakdown idle = GPUs waiting on the host inside iterations "
             f"{fmt(d['breakdown_j']['idle'] - d['no_request']['energy_j'])} + no request in "
             f"flight {fmt(d['no_request']['energy_j'])}",
             f"iterations {d['iterations']}, {d['mean_requests_per_iteration']:.1f} requests "
             f"per iteration on average"]
    w = d.get("steady_window")
    if w and w.get("j_per_output_token"):
        lines.append(f"steady window (held at its peak, {w['mean_requests_per_iteration']:.0f} "
                     f"requests per iteration): {fmt(w['j_per_output_token'])} J per output "
                     f"token, {fmt(w['output_tokens_per_s'])} tokens/s, from "
                     f"{w['start_s']:.3g} to {w['end_s']:.3g} s")
    if shown:
        top = sorted(d["per_request"], key=lambda r: -r["energy_j"])[:shown]
        lines += ["", table([[r["id"], r["energy_j"], r["ttft_s"], r["tpot_s"], r["e2e_s"]]
                             for r in top], ["request (most energy)", "energy_j", "ttft_s",
                                             "tpot_s", "e2e_s"])]
    load = d.get("load") or {}
    if load.get("sustainable_rate_per_s") is not None:
        lines += ["", f"overloaded: requests arrive at {load['arrival_rate_per_s']:.3g}/s; the "
                      f"engine sustains about {load['sustainable_rate_per_s']:.3g}/s at this "
                      f"mix (TTFT grows {load['ttft_growth_per_s']:.2f} s per s of arrivals)"]
    lines += flag_lines(d["flags"]) + out_of_range_lines(d)
    if note := host_note(d):
        lines.append(note)
    return "\n".join(lines)


def _plot(scn, sim, doc, curve, path) -> None:
    """Requests per iteration and power over the window, the per-request energy, and J per
    generated token against load (the same requests arriving faster or slower)."""
    import matplotlib
    matplotlib.use("Agg")

    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(2, 2, figsize=(11, 6))
    a, b, c, d = ax[0, 0], ax[1, 0], ax[0, 1], ax[1, 1]
    a.step(sim.it_start_s, sim.it_requests, where="post", lw=0.8)
    a.set_ylabel("requests per iteration")
    a.set_title(f"{scn.model.name} {scn.engine.name}: predicted (GPU boards only)", fontsize=9)
    power = (sim.it_kernel_j + sim.it_gap_j) / np.maximum(sim.it_time_s, 1e-12)
    b.plot(sim.it_start_s, power, lw=0.6)
    b.set_ylabel("board power, all GPUs (W)")
    b.set_xlabel("time from the first arrival (s)")
    b.sharex(a)
    per_request = [r["energy_j"] for r in doc["per_request"]]
    c.hist(per_request, bins=min(40, max(5, len(per_request) // 3)))
    c.set_xlabel("energy per request (J, attributed)")
    c.set_ylabel("requests")
    if curve:
        rate = [p["rate_per_s"] for p in curve]
        d.plot(rate, [p["j_per_output_token"] for p in curve], "o-")
        here = next(p for p in curve if p["factor"] == 1.0)
        d.plot([here["rate_per_s"]], [here["j_per_output_token"]], "r*", ms=12,
               label="this trace")
        d.set_xscale("log")
        d.minorticks_off()
        d.set_xticks(rate, [f"{r:.3g}" for r in rate])
        d.set_xlabel("arrival rate (requests/s; the same requests, rescaled in time)")
        d.legend(fontsize=8)
    else:
        d.text(0.5, 0.5, "all requests arrive at once:\nno rate to vary", ha="center",
               va="center", transform=d.transAxes)
    d.set_ylabel("J per output token")
    fig.tight_layout()
    from piep.core.artifacts import save_figure
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def default_lengths(model: str | None) -> tuple[str, str]:
    """The default length distributions of drawn requests: prompts of median 512 and
    generations of median 128 (lognormal, sigma 0.6), cut at 4,096 and 1,024 tokens, or
    lower where the model's context is shorter (a quarter of it for the generation, the
    rest for the prompt): every drawn request fits the model."""
    from piep.core.errors import ConfigError
    from piep.core.models import load_model
    prompt_max, gen_max = 4096, 1024
    if model:
        try:
            ctx = load_model(model).max_position
        except ConfigError:
            ctx = None  # the scenario's own check names a bad model
        if ctx:
            gen_max = max(1, min(gen_max, ctx // 4))
            prompt_max = max(1, min(prompt_max, ctx - gen_max))
    return (f"lognormal:{min(512, prompt_max)}:0.6:{prompt_max}",
            f"lognormal:{min(128, gen_max)}:0.6:{gen_max}")
