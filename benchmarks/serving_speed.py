"""Speed of `piep serve`: a 100,000-request trace at a load that keeps >= 64 requests in
flight, on this machine (target, issue 36: <= 2 s on 2 cores).

    python benchmarks/serving_speed.py [REQUESTS]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from piep.serving.serve import serve, serving_scenario  # noqa: E402
from piep.core.trace import poisson_trace  # noqa: E402


def timed(n: int = 100_000) -> tuple[dict, float, object]:
    """(`piep serve`'s document, seconds to simulate and price it, the trace) of `n`
    requests, after a stream of 100 (the predictor read from disk and the modules
    imported: what `piep serve` from the command line adds is measured there)."""
    def stream(requests):
        return serving_scenario("llama-3-8b", poisson_trace(
            rate_per_s=8.0, requests=requests, prompt_len="lognormal:256:0.6:2048",
            gen_len="lognormal:64:0.5:512", seed=0))
    serve(stream(100))
    scn = stream(n)
    trace = scn.requests()
    t0 = time.perf_counter()
    doc = serve(scn)
    return doc, time.perf_counter() - t0, trace


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    doc, dt, trace = timed(n)
    print(f"{n:,} requests ({trace.gen_tokens:,} generated tokens, {trace.arrival_s[-1]:.0f} s of "
          f"arrivals): {doc['iterations']:,} iterations, {doc['mean_requests_per_iteration']:.0f} "
          f"requests in flight on average, simulated and priced in {dt:.1f} s "
          f"(target 2 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
