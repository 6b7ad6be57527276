"""Prediction throughput of `piep sweep` / the Python API on this machine.

    python benchmarks/speed.py [N] [--repeat R]
    python benchmarks/speed.py --write    # every speed target of issue 36 -> reports/speed.md

With --repeat R each predictor's sweep runs R times and the median is printed (the
figure to compare between commits, run back to back).

Draws N distinct random configurations (model x layout x workload x mode), predicts them
with the shipped predictor (learned if trained) and prints predictions per second, all
configurations and valid ones only (refusals are answered too, with their reason). No
prediction, leaf cost or GBDT output is reused between configurations or sweeps; the
process keeps tree skeletons per (model, tp, pp, GPU, engine), structure the tree builder
gives: the first sweep builds them (its time printed apart), the figure is of the sweeps
after it. Target: >= 10,000 valid predictions per second on 2 cores.

`--write` measures every speed target in one run (about 11 minutes on 2 cores): the
command line's start (benchmarks/startup.py), the sweep, `piep serve` of 100,000 requests
(simulated, benchmarks/serving_speed.py, and from the command line), a sweep of hf-cb
batches (each the stream its scheduler runs), `piep train`, each
engine-profile fit (`piep train --engine`, and whether it refits the shipped profile to
1e-6), an engine of one's own fitted on benchmark files (one fit, and with its held-out
folds), and the default test tier's CPU seconds; each figure beside its target, in
reports/speed.md.
"""

from __future__ import annotations

import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

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


def valid_per_s(configs: list[dict], predictor: str = "auto", repeat: int = 1
                ) -> tuple[str, int, float, float]:
    """(predictor, valid configurations, seconds of the first sweep of them in the process
    (their skeletons built), median seconds of `repeat` sweeps more (skeletons kept))."""
    from piep.predict import table
    sweep(configs[:50], predictor=predictor)  # load and warm up outside the timing
    table._skeletons.clear()
    times = []
    for _ in range(1 + repeat):
        t0 = time.perf_counter()
        rows = sweep(configs, predictor=predictor)
        times.append(time.perf_counter() - t0)
    name = next(r["predictor"] for r in rows if "predictor" in r)
    return name, sum("energy_j" in r for r in rows), times[0], statistics.median(times[1:])


def _run(argv: list[str], limit_s: float | None = None) -> tuple[float, float, bool]:
    """(wall seconds, CPU seconds of the child, finished within `limit_s`) of a command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        subprocess.run(argv, cwd=ROOT, capture_output=True, check=True, timeout=limit_s)
        done = True
    except subprocess.TimeoutExpired:
        done = False
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - t0, cpu, done


def same_profile(path: Path, shipped: Path, rel: float = 1e-6) -> bool:
    """A profile refitted here has the shipped one's numbers (terms, intervals, held-out
    errors, the tensor-parallel path) to `rel`: the same terms, and every number both
    give (provenance, sources and commands aside: the shipped one may have been made in
    steps)."""
    import json
    import math

    def close(a, b) -> bool:
        if isinstance(a, dict) and isinstance(b, dict):
            return all(close(a[k], b[k]) for k in a.keys() & b.keys())
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return math.isclose(a, b, rel_tol=rel, abs_tol=0.0)
        return True
    got, want = (json.loads(p.read_text()) for p in (path, shipped))
    return got["terms"].keys() == want["terms"].keys() and \
        all(close(got[k], want[k]) for k in want if k != "provenance")


def foreign_fit() -> tuple[float, float, int, int]:
    """(seconds of one fit of an engine of one's own on the benchmark files of hf-cb's
    replays, seconds of its leave-one-shape-out folds, shapes, files), as `piep train
    --engine NAME --like hf-cb` fits."""
    import serving_foreign
    from piep.fit.serving import Shared, fit_cb_profile, held_out_on_hosts
    from piep.predict.store import load_learned
    base = load_learned("h200")
    _, reps = serving_foreign.foreign_replays()
    shared = Shared()
    t0 = time.perf_counter()
    fit_cb_profile(base, reps, name=serving_foreign.NAME, like="hf-cb", default_host_s=None,
                   shared=shared)
    t1 = time.perf_counter()
    held_out_on_hosts(base, reps, by="model", shared=shared, default_host_s=None,
                      hosts=(False,))
    return t1 - t0, time.perf_counter() - t1, len({r.model for r in reps}), len(reps)


def hf_cb_sweep(repeat: int = 3) -> tuple[int, float]:
    """(points, median seconds) of sweeps of hf-cb batches over two models, two layouts and
    workloads (issue 53: a batch priced as the stream it is, at sweep speed)."""
    from piep.sweep import grid
    configs = grid(models=["llama-3-8b", "qwen2.5-7b"], tp=[1, 2], pp=[1], dp=[1],
                   batch=[1, 4, 16, 64], prompt_len=[128, 512, 2048],
                   gen_len=[32, 128, 512], engine=["hf-cb"])
    sweep(configs[:2])  # load and warm up outside the timing
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sweep(configs)
        times.append(time.perf_counter() - t0)
    return len(configs), statistics.median(times)


def report() -> str:
    """Every speed target of issue 36 measured in one run, as a table."""
    import serving_speed
    import startup
    piep = [sys.executable, "-m", "piep"]
    rows = []  # (what, figure, unit, target, met)
    med, same_answer = startup.measure(9)
    bare = med["bare interpreter"]
    rows.append(("`python -c pass` (the reference)", f"{bare:.3f}", "s", "", None))
    for name, target in startup.TARGETS.items():
        rows.append((f"`{' '.join(startup.CASES[name][2:])}`, x the bare start",
                     f"{med[name] / bare:.1f}", "x", f"<= {target:g}", med[name] / bare <= target))
    name, ok, cold, dt = valid_per_s(draw(4000), repeat=9)
    rows.append((f"sweep of 4,000 random configurations ({name}), valid predictions/s, "
                 f"the process's first (skeletons built)", f"{ok / cold:,.0f}", "/s", "", None))
    rows.append((f"the same sweep again ({name}; the skeletons kept), valid predictions/s",
                 f"{ok / dt:,.0f}", "/s", ">= 10,000", ok / dt >= 10_000))
    points, cb_s = hf_cb_sweep()
    rows.append((f"sweep of {points} hf-cb batches (each a stream its scheduler runs, "
                 "the iteration costs shared by the workloads of a model and layout), points/s",
                 f"{points / cb_s:,.0f}", "/s", ">= 200", points / cb_s >= 200))
    sim_s = statistics.median(serving_speed.timed(100_000)[1] for _ in range(3))
    rows.append(("`piep serve`, 100,000 requests, simulation (benchmarks/serving_speed.py)",
                 f"{sim_s:.2f}", "s", "<= 2", sim_s <= 2))
    serve = piep + ["serve", "--model", "llama-3-8b", "--rate", "200", "--requests", "100000"]
    for label, extra in (("table", []), ("`--json`", ["--json"])):
        wall = statistics.median(_run(serve + extra)[0] for _ in range(3))
        rows.append((f"`piep serve --model llama-3-8b --rate 200 --requests 100000`, {label}",
                     f"{wall:.2f}", "s", "<= 3", wall <= 3))
    with tempfile.TemporaryDirectory() as tmp:
        wall = _run(piep + ["train", "--out", f"{tmp}/p"])[0]
        rows.append(("`piep train` (the predictor)", f"{wall:.1f}", "s", "<= 20", wall <= 20))
        for engine in ("hf-eager", "hf-static", "hf-cb"):
            wall, _, done = _run(piep + ["train", "--engine", engine, "--out", f"{tmp}/{engine}"],
                                 600.0)
            same = done and same_profile(Path(tmp, engine, "profile.json"),
                                         ROOT / "calibration/h200/engines" / engine / "profile.json")
            rows.append((f"`piep train --engine {engine}` (its fit and held-out intervals; "
                         f"the shipped profile to 1e-6: {'yes' if same else 'no'})",
                         f"{wall:.1f}" if done else "> 600 (stopped)", "s", "<= 60",
                         done and wall <= 60))
    one, folds, shapes, files = foreign_fit()
    rows.append((f"an engine of your own fitted `--like hf-cb` on {files} benchmark files (hf-cb's "
                 "replays as vLLM's result files, benchmarks/serving_foreign.py), one fit",
                 f"{one:.1f}", "s", "<= 60", one <= 60))
    rows.append((f"the same with its held-out intervals ({shapes} shapes left out, as `piep "
                 f"train --engine NAME --like hf-cb` fits them)", f"{one + folds:.1f}", "s",
                 "<= 60", one + folds <= 60))
    _, cpu, _ = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
                      "not gpu and not slow"])
    rows.append(("default test tier, CPU seconds (user + system)", f"{cpu:.0f}", "CPU-s",
                 "<= 90", cpu <= 90))
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    lines = [f"# How fast piep is (commit {commit}, {os.cpu_count()} cores)", "",
             "| what | measured | unit | target | met |", "|---|---|---|---|---|"]
    lines += [f"| {w} | {f} | {u} | {t} | {'' if m is None else ('yes' if m else 'no')} |"
              for w, f, u, t, m in rows]
    lines += ["", "Command-line starts: medians of 9 interleaved runs, bytecode caches on; the "
              f"sweep: the median of 9 sweeps after the first; predict's answer the same bytes "
              f"every run: {same_answer}. Serve, simulated and from the command line: medians "
              "of 3. Made by `python benchmarks/speed.py --write`.", ""]
    return "\n".join(lines)


def main() -> int:
    if "--write" in sys.argv:
        text = report()
        print(text)
        (ROOT / "reports" / "speed.md").write_text(text)
        return 0
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 1
    if "--repeat" in sys.argv:
        args.remove(str(repeat))
    n = int(args[0]) if args else 4000
    configs = draw(n)
    for predictor in ("auto", "roofline"):
        name, ok, cold, dt = valid_per_s(configs, predictor, repeat)
        print(f"{name:9s}: {n} distinct configurations ({ok} valid, {n - ok} refused with a "
              f"reason) in {dt:.2f} s: {n / dt:,.0f} answers/s, {ok / dt:,.0f} valid "
              f"predictions/s (target 10,000)" + (f"; median of {repeat}" if repeat > 1 else "")
              + f"; the first sweep (skeletons built) {cold:.2f} s, {ok / cold:,.0f} valid/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
