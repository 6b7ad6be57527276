"""A serving engine fitted from its own benchmark alone, checked on an engine piep knows
(issue 35): every committed hf-cb replay is rewritten as the result file `vllm bench serve
--save-result --save-detailed` would have saved of it (per request: prompt and output
lengths, TTFT, inter-token latencies, end-to-end latency, send time; the window's energy as
vLLM's own `gpu_energy_j`), read back by `piep meter --serving-result`'s reader, and fitted
`--like hf-cb` as an engine of one's own would be: no iteration log, no KV-cache size, no
host probe. Leave one shape out (every replay of a model held out of the fit that predicts
it), against the built-in fit's figure in the same report.

    python benchmarks/serving_foreign.py [--write] [--maxiter N] [--jobs N]

--write replaces the section between its markers at the end of reports/serving.md.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.core.artifacts import read_text, write_text  # noqa: E402

REPORT = ROOT / "reports" / "serving.md"
BEGIN, END = "<!-- foreign: benchmarks/serving_foreign.py -->", "<!-- end foreign -->"
NAME = "hf-cb-as-foreign"
ROWS = ROOT / "reports" / "serving_foreign.json"


def as_vllm_result(rep) -> dict:
    """What vLLM's benchmark would have saved of a replay (its send times, lengths and
    timings; the window energy as its own GPU metering)."""
    rq = rep.requests
    return {"date": "replay", "endpoint_type": "vllm", "backend": "vllm", "model_id": rep.model,
            "request_rate": "replayed trace", "max_concurrency": None,
            "duration": rep.time_s, "completed": len(rq), "failed": 0,
            "input_lens": [r.prompt_len for r in rq], "output_lens": [r.gen_len for r in rq],
            "ttfts": [r.ttft_s for r in rq], "latencies": [r.e2e_s for r in rq],
            "itls": [[r.tpot_s] * (r.gen_len - 1) if r.tpot_s else [] for r in rq],
            "start_times": [r.arrival_s for r in rq], "errors": [""] * len(rq),
            "gpu_energy_j": rep.energy_j}


def foreign_replays():
    """(the built-in replays, the same as benchmark replays read back)."""
    from piep.sampling.bench_results import replay_record
    from piep.fit.engines import engine_records
    from piep.core.records import ServingReplay
    built_in = engine_records("h200", "hf-cb")
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, rep in enumerate(built_in):
            path = Path(tmp) / f"{i:02d}_{Path(rep.trace or 'trace').stem}.json"
            path.write_text(json.dumps(as_vllm_result(rep)))
            out.append(ServingReplay.from_json(replay_record(
                path, model=rep.spec, engine=NAME, engine_version="5.17.0")))
    return built_in, out


def _held_out(job):
    """Rows of one shape's replays, predicted by a fit on the other shapes' replays."""
    shape, maxiter = job
    from piep.fit.serving import _cases, case_row, fit_cb_profile
    from piep.predict.store import load_learned
    base = load_learned("h200")
    _, reps = foreign_replays()
    train = [r for r in reps if r.model != shape]
    profile = fit_cb_profile(base, train, maxiter=maxiter, default_host_s=None, name=NAME,
                             like="hf-cb")
    test = [r for r in reps if r.model == shape]
    rows = [case_row(c, profile.apply(base)) for c in
            _cases(base, test, profile.meta.scheduler["reserved_gib"], False,
                   pickup=profile.meta.scheduler.get("pickup_s", 0.0))]
    print(f"{shape}: energy " + ", ".join(f"{100 * (r['pred_energy_j'] / r['energy_j'] - 1):+.1f}"
                                          for r in rows) + " %", flush=True)
    return rows


def mape(rows, key: str) -> str:
    from piep.stats.conformal import mape_text
    return mape_text(rows, key)


def built_in_row() -> str:
    """The built-in fit's leave-one-shape-out row of reports/serving.md."""
    for line in read_text(REPORT).splitlines():
        if line.startswith("| one shape"):
            return line
    raise SystemExit("reports/serving.md has no leave-one-shape-out row")


def main(argv: list[str]) -> int:
    maxiter = int(argv[argv.index("--maxiter") + 1]) if "--maxiter" in argv else 400
    jobs = int(argv[argv.index("--jobs") + 1]) if "--jobs" in argv else 1
    built_in, reps = foreign_replays()
    shapes = sorted({r.model for r in reps})
    work = [(s, maxiter) for s in shapes]
    if jobs > 1:
        from multiprocessing import Pool
        with Pool(jobs) as pool:
            parts = pool.map(_held_out, work)
    else:
        parts = [_held_out(w) for w in work]
    rows = [r for p in parts for r in p]
    write_text(ROWS, json.dumps(rows, indent=1, default=float) + "\n")
    return write_section(rows, maxiter, len(built_in), "--write" in argv)


def write_section(rows: list[dict], maxiter: int, replays: int, write: bool) -> int:
    """The section (a benchmark gives no idle power: no energy-above-idle column)."""
    keys = {"energy_j": "energy", "time_s": "window time", "ttft_s": "p50 TTFT",
            "tpot_s": "p50 TPOT", "e2e_s": "p50 end-to-end"}
    def shape_error(m: str) -> float:
        return 100 * statistics.mean(abs(r["pred_energy_j"] / r["energy_j"] - 1)
                                     for r in rows if r["model"] == m)
    worst = sorted({r["model"] for r in rows}, key=shape_error, reverse=True)[:3]
    lines = [BEGIN, "", "## hf-cb fitted as if it were a foreign engine", "",
             f"Generated by `python benchmarks/serving_foreign.py --write --maxiter {maxiter}`"
             f" (held-out rows in `reports/serving_foreign.json`). Each of the {replays} "
             "replays above rewritten as the result file "
             "`vllm bench serve --save-result --save-detailed` would have saved of it "
             "(per request: lengths, TTFT, inter-token latencies, end-to-end latency, send "
             "time; the window energy as vLLM's `gpu_energy_j`), read back by `piep meter "
             "--serving-result`'s reader and fitted as `piep train --engine NAME --like hf-cb` "
             "fits an engine of one's own: no iteration log (the time terms and the power "
             "in host gaps are fitted together on each replay's median TPOT, median "
             "end-to-end latency and window energy), no KV-cache size (the default reserve), "
             "no host probe. Leave one shape out, beside the built-in fit's row above "
             "(iteration logs, cache sizes, each replay on its host).", "",
             "| fit, leave one shape out | replays | " + " | ".join(keys.values()) + " |",
             "|---|---|" + "---|" * len(keys),
             "| as a foreign engine | " + f"{len(rows)} | "
             + " | ".join(mape(rows, k) for k in keys) + " |",
             "| built in (the first row above) | " + " | ".join(
                 c.strip() for i, c in enumerate(built_in_row().split("|")[2:-1])
                 if i != 2) + " |",  # its energy-above-idle column left out
             "", "The shapes the foreign fit misses most (mean energy error): "
             + ", ".join(f"{m} {shape_error(m):.1f} %" for m in worst) + ".", "", END]
    section = "\n".join(lines)
    print(section)
    if write:
        text = read_text(REPORT)
        if BEGIN in text:
            text = text[:text.index(BEGIN)].rstrip("\n") + "\n"
        write_text(REPORT, text.rstrip("\n") + "\n\n" + section + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
