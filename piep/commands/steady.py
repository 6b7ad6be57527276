"""`piep steady`: a server held full (vLLM at its concurrency): J per output token, tokens
per second, power, and the concurrency its paged KV cache allows (no GPU needed)."""

from __future__ import annotations

from piep.commands.common import add_layout_args, emit, flag_lines
from piep.report.table import fmt


def configure(parser) -> None:
    from piep.core.engines import ENGINES, names
    steady = names(profile="steady")
    parser.add_argument("--model", required=True,
                        help="shipped name (see `piep models`), model ID, or path to "
                             "config.json / folder")
    parser.add_argument("--engine", default=steady[0], choices=steady,
                        help=f"the serving engine (default {steady[0]}: "
                             f"{ENGINES[steady[0]].description}, a server held full)")
    parser.add_argument("--gpu", default="h100",
                        help="GPU type (default h100, where the shipped vllm profile was "
                             "fitted; another GPU is priced with it, flagged)")
    add_layout_args(parser, ("tp", "ep"))
    parser.add_argument("--max-num-seqs", type=int, default=None, metavar="N",
                        help="requests running at once (vLLM's; default its own: 1024 on "
                             "boards of >= 70 GiB but A100s, else 256)")
    parser.add_argument("--max-num-batched-tokens", type=int, default=None, metavar="N",
                        help="tokens per iteration (vLLM's; default 8192 on boards of >= 70 "
                             "GiB but A100s, else 2048)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9, metavar="F",
                        help="share of the board vLLM takes (default 0.9)")
    parser.add_argument("--block-size", type=int, default=16, metavar="N",
                        help="KV-cache block in tokens (default 16)")
    parser.add_argument("--prompt-len", default="256", metavar="DIST",
                        help="prompt tokens: N, lognormal:MEDIAN:SIGMA[:MAX] or uniform:LO:HI "
                             "(default 256)")
    parser.add_argument("--output-len", default="400", metavar="DIST",
                        help="output tokens, same forms (default 400); their spread matters: "
                             "long outputs hold their slots longer")
    parser.add_argument("--seed", type=int, default=0, help="the draw of the lengths (default 0)")
    parser.add_argument("--predictor", choices=("auto", "learned", "roofline"), default="auto")


def run(args) -> int:
    from piep import api
    doc = api.steady(args.model, engine=args.engine, gpu=args.gpu, tp=args.tp, ep=args.ep,
                     prompt_len=args.prompt_len, output_len=args.output_len,
                     max_num_seqs=args.max_num_seqs,
                     max_num_batched_tokens=args.max_num_batched_tokens,
                     gpu_memory_utilization=args.gpu_memory_utilization,
                     block_size=args.block_size, seed=args.seed, predictor=args.predictor)
    emit(args, doc, summary)
    return 0


def summary(d: dict) -> str:
    s, w, mem = d["server"], d["workload"], d["memory_gib_per_gpu"]
    band = d.get("interval") or {}
    lo, hi = band.get("j_per_output_token") or (None, None)
    limited = " (the KV cache's limit)" if d["kv_limited"] else ""
    lines = [f"{d['model']} on {d['layout']['gpus']}x {d['gpu']}, {d['engine']} held full: "
             f"max_num_seqs {s['max_num_seqs']}, max_num_batched_tokens "
             f"{s['max_num_batched_tokens']}; prompts {w['prompt_len']:.0f} tokens, outputs "
             f"{w['output_len_mean']:.0f} on average  [energy boundary: GPU boards only]", "",
             f"running requests    {d['running_requests']:.1f}{limited}",
             f"J per output token  {fmt(d['j_per_output_token'])}"
             + (f"  (90 % band {fmt(lo)} - {fmt(hi)}, {band['from']})" if lo else ""),
             f"J per request       {fmt(d['j_per_request'])}",
             f"output tokens/s     {fmt(d['output_tokens_per_s'])}",
             f"power, all GPUs     {fmt(d['power_w'])} W",
             f"iteration           {1e3 * d['iteration_s']:.2f} ms",
             f"memory per GPU      weights {mem['weights']:.1f}, activations "
             f"{mem['activations']:.1f}, runtime {mem['runtime']:.1f}, KV cache "
             f"{mem['kv_cache']:.1f} GiB ({d['kv_cache_tokens']:,.0f} tokens) of "
             f"{mem['budget']:.1f}",
             f"profile             {d['profile']['name']} on {d['profile']['gpu']}: "
             f"{d['profile']['source'] or 'fitted by the user'}"]
    return "\n".join(lines + flag_lines(d["flags"]))
