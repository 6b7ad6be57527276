"""A serving engine's batch: the stream of its requests against the static-batch tree.

`piep predict --engine hf-cb --batch B` prices B requests arriving at once through the
engine's scheduler (the stream), as `piep serve` does; before, it priced them as one static
batch through hf-cb's kernels and profile (the tree). This prints both for every committed
hf-cb replay whose requests all arrived within 1 ms (a burst), beside the measured energy
and time. The tree takes one prompt and one generated length: the replay's means. Both use
the shipped hf-cb profile, which was fitted on these replays among others: in-sample, not
held out.

    python benchmarks/stream_vs_batch.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from piep.fit.engines import engine_records
    from piep.predict.pricing import price
    from piep.predict.resolve import resolve
    from piep.core.scenario import Scenario
    from piep.serving.serve import serve, serving_scenario
    from piep.core.trace import make_trace
    rows = []
    for rec in engine_records("h200", "hf-cb"):
        req = rec.requests
        arrivals = [r.arrival_s for r in req]
        if max(arrivals) - min(arrivals) > 1e-3:
            continue
        prompts, gens = [r.prompt_len for r in req], [r.gen_len for r in req]
        trace = make_trace([0.0] * len(req), prompts, gens)
        spec = rec.spec  # its shape (some are in no public list)
        stream = serve(serving_scenario(spec, trace))
        scn = Scenario.build(spec, engine="hf-cb", batch=len(req),
                             prompt_len=round(statistics.mean(prompts)),
                             gen_len=round(statistics.mean(gens)))
        tree = price([scn.deployment], resolve(scn).cost_model).summaries()[0]
        rows.append((rec.model, Path(rec.trace or "?").stem, len(req),
                     rec.energy_j, stream["energy_j"], tree["energy_j"],
                     rec.time_s, stream["time_s"], tree["time_s"]))
    print("| model | trace | requests | measured J | stream | tree | measured s | stream | "
          "tree |")
    print("|---|---|---|---|---|---|---|---|---|")
    err = {"stream": [], "tree": []}
    for m, t, n, e, es, et, s, ss, st in rows:
        print(f"| {m} | {t} | {n} | {e:,.0f} | {es:,.0f} ({100 * (es / e - 1):+.1f} %) | "
              f"{et:,.0f} ({100 * (et / e - 1):+.1f} %) | {s:.2f} | {ss:.2f} | {st:.2f} |")
        err["stream"].append(abs(es / e - 1))
        err["tree"].append(abs(et / e - 1))
    for k, v in err.items():
        print(f"{k}: energy MAPE {100 * statistics.mean(v):.1f} % over {len(v)} bursts "
              f"(in-sample profile)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
