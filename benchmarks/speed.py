"""Prediction throughput of `piep sweep` / the Python API on this machine.

    python benchmarks/speed.py [N] [--repeat R]

With --repeat R each predictor's sweep runs R times and the median is printed (the
figure to compare between commits, run back to back).

Draws N distinct random configurations (model x layout x workload x mode), predicts them
with the shipped predictor (learned if trained) and prints predictions per second, all
configurations and valid ones only (refusals are answered too, with their reason). No
prediction, leaf cost or GBDT output is reused between configurations; the learned
path keeps only tree skeletons per (model, tp, pp), built from the tree builder on first
use and counted in the time. Target: >= 2,000 per second on 2 cores.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from piep.sweep import sweep  # noqa: E402

MODELS = ("llama-2-7b", "llama-2-13b", "llama-3-8b", "mistral-7b", "qwen2.5-7b", "qwen2.5-14b",
          "qwen2.5-32b", "mistral-small-24b", "vicuna-33b", "llama-3-70b", "qwen2.5-72b")


def draw(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    seen, out = set(), []
    while len(out) < n:
        cfg = {"model": rng.choice(MODELS), "tp": rng.choice((1, 2, 4, 8)),
               "pp": rng.choice((1, 2)), "dp": rng.choice((1, 2)),
               "batch": rng.choice((1, 2, 4, 8, 16, 32, 64, 128)),
               "prompt_len": rng.randint(64, 4096), "gen_len": rng.randint(16, 1024),
               "mode": rng.choice(("graph", "eager"))}
        key = tuple(cfg.values())
        if key not in seen:
            seen.add(key)
            out.append(cfg)
    return out


def main() -> int:
    import statistics
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 1
    if "--repeat" in sys.argv:
        args.remove(str(repeat))
    n = int(args[0]) if args else 4000
    configs = draw(n)
    for predictor in ("auto", "roofline"):
        sweep(configs[:50], predictor=predictor)  # load and warm up outside the timing
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            rows = sweep(configs, predictor=predictor)
            times.append(time.perf_counter() - t0)
        dt = statistics.median(times)
        ok = sum("energy_j" in r for r in rows)
        name = next(r["predictor"] for r in rows if "predictor" in r)
        print(f"{name:9s}: {n} distinct configurations ({ok} valid, {n - ok} refused with a "
              f"reason) in {dt:.2f} s: {n / dt:,.0f} answers/s, {ok / dt:,.0f} valid "
              f"predictions/s (target 2,000)" + (f"; median of {repeat}" if repeat > 1 else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
