"""vLLM as a stream against vLLM held full: the public steady states (ML.ENERGY Benchmark
v3 rows, `calibration/public/mlenergy-v3/steady.jsonl`) priced twice by the shipped
profile of their GPU, as `piep steady` prices them (a server held at its concurrency, in
closed form) and as `piep serve --engine vllm` does (each benchmark's requests sent at
once to a server of the row's settings, scheduled iteration by iteration with vLLM's
chunked prefill and recompute preemption, and measured over the benchmark's steady
window: from when its first `max_num_seqs` requests have started to when all but
`max_num_seqs` + 1 have finished).

Both are in-sample (the profile was fitted on these rows by the closed form): what this
shows is whether the iteration-level simulation, which prices streams below saturation,
agrees with the closed form where both apply, and where it does not (preemption).

    python benchmarks/vllm_stream.py [--gpu h100] [--limit N] [--write]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep import api  # noqa: E402
from piep.core.artifacts import read_jsonl, write_text  # noqa: E402
from piep.fit.steady import cases_from_records, lengths_of  # noqa: E402
from piep.serving import paged  # noqa: E402
from piep.serving.simulate import simulate  # noqa: E402
from piep.serving.steady import PagedServer  # noqa: E402
from piep.core.trace import make_trace  # noqa: E402

RECORDS = ROOT / "calibration" / "public" / "mlenergy-v3" / "steady.jsonl"
REPORT = ROOT / "reports" / "vllm_stream.md"


def stream_row(rec: dict, seed: int = 0) -> dict:
    """One record's benchmark as a stream: J and time per output token over its window."""
    lengths = lengths_of(rec["workload"], rec.get("source", "record"))
    n = int(rec["requests"])
    rng = np.random.default_rng(seed)
    out = rng.permutation(np.resize(np.asarray(lengths.sample), n)).round().clip(1)
    prompt = np.full(n, round(lengths.prompt_len))
    trace = make_trace(np.zeros(n), prompt, out)
    scn = api.scenario(rec["model"], gpu=rec["gpu"], tp=rec["tp"], engine="vllm",
                       trace=trace)
    res = api.resolve(scn)
    dep = res.scenario.deployment
    server = PagedServer.defaults(dep.gpu.name, dep.gpu.memory_gib, **(rec.get("server") or {}))
    _, pol, costs = paged.priced(res, server)
    sim = simulate(trace, costs, pol)
    slots = server.max_num_seqs
    starts = np.sort(sim.first_token_s)  # (a request starts with its prompt's iteration)
    a = starts[min(slots, n) - 1] if n > slots else 0.0
    b = np.sort(sim.last_token_s)[max(n - slots - 2, 0)]
    end = sim.it_start_s + sim.it_time_s
    w = (sim.it_start_s >= a) & (end <= b)
    tokens = sim.it_decode_tokens[w].sum()
    energy = (sim.it_kernel_j + sim.it_gap_j)[w].sum()
    span = sim.it_time_s[w].sum()
    return {"j_per_output_token": float(energy / tokens), "output_tokens_per_s":
            float(tokens / span), "preempted": sim.preempted, "iterations": int(w.sum())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    recs = [r for r in read_jsonl(RECORDS) if r["gpu"] == args.gpu][:args.limit]
    steady = cases_from_records(recs)
    from piep.serving.steady import load_profile
    profile, _ = load_profile("vllm", args.gpu)
    lines = ["| row | measured J/tok | steady | stream | stream/steady | preempted |",
             "|---|---|---|---|---|---|"]
    err = {"steady": [], "stream": [], "ratio": [], "ratio_t": [], "preempting": []}
    for rec, case in zip(recs, steady):
        s = case.parts.outcome(profile)
        o = stream_row(rec)
        m = rec["j_per_output_token"]
        err["steady"].append(abs(s["j_per_output_token"] / m - 1))
        err["stream"].append(abs(o["j_per_output_token"] / m - 1))
        err["ratio"].append(o["j_per_output_token"] / s["j_per_output_token"])
        err["ratio_t"].append(o["output_tokens_per_s"] / s["output_tokens_per_s"])
        if o["preempted"]:
            err["preempting"].append(len(err["ratio"]) - 1)
        lines.append(f"| {rec['source']} tp{rec['tp']} b{rec['server']['max_num_seqs']} | "
                     f"{m:.4f} | {s['j_per_output_token']:.4f} | "
                     f"{o['j_per_output_token']:.4f} | {err['ratio'][-1]:.3f} | "
                     f"{o['preempted']} |")
        print(lines[-1], flush=True)
    r = np.array(err["ratio"])
    calm = np.setdiff1d(np.arange(len(r)), err["preempting"])
    summary = [
        f"{len(recs)} {args.gpu} rows: energy error (mean absolute, in-sample) steady "
        f"{100 * statistics.mean(err['steady']):.1f} %, stream "
        f"{100 * statistics.mean(err['stream']):.1f} %",
        f"stream / steady J per output token: median {np.median(r):.3f}, "
        f"range {r.min():.3f}-{r.max():.3f}; throughput median "
        f"{np.median(err['ratio_t']):.3f}",
        f"rows without preemption ({len(calm)}): median {np.median(r[calm]):.3f}"
        if len(calm) else "every row preempted",
        f"rows with preemption ({len(err['preempting'])}): median "
        f"{np.median(r[err['preempting']]):.3f}" if err["preempting"] else "no row preempted"]
    print("\n".join(summary))
    if args.write:
        write_text(REPORT, "# vLLM as a stream and held full (public steady states)\n\n"
                   + __doc__.split("\n\n")[0] + "\n\n" + "\n".join(f"* {s}" for s in summary)
                   + "\n\n" + "\n".join(lines)
                   + f"\n\nMade by `python benchmarks/vllm_stream.py --gpu {args.gpu} "
                     f"--write`.\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
