"""The transformers engines at tp=2, from the supplied runs of another harness
(`calibration/h200/engines/tp2/`, measured as SUPPLIED.md there says).

Each tp=2 run is predicted by the tensor-parallel path fitted without it
(`piep.fit.tp_path.leave_one_out`): through its increment over the same harness's tp=1
run (what the fit matches: the harness offset cancels) and absolute (piep's prediction
at the harness's host probe, what a user with that host gets). Beside them the run's
repeat spread, and whether the shipped profile's interval (predicted at the harness probe)
holds it: in sample, as that interval is sized on these runs' leave-one-run-out errors (no
coverage is measured). Then the comparison the project exists for, at batch 1 and 16.

    python benchmarks/engines_tp2.py [--out reports/engines_tp2.md]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from piep import api
    from piep.fit.tp_path import Pricer, harness_probe_us, leave_one_out, shipped_runs
    runs = shipped_runs("h200")
    priced = Pricer("h200")
    probe = harness_probe_us(runs, priced)
    rows = leave_one_out(runs, priced, probe)
    lines = ["# transformers engines at tp=2 (llama-2-7b, prompt 512, 128 new tokens)", "",
             "Runs: `calibration/h200/engines/tp2/hf-generate-tp2-h200.jsonl` (another "
             "harness; SUPPLIED.md there). Fitted: host time per sharded module call, per "
             "compiled decode step at tp>1 and the board power in the gaps they add "
             "(`piep.fit.tp_path`); structure: `calibration/h200/engines/census/"
             "tp_census_cpu.json`.",
             f"Harness host: launch probe {probe:.2f} us (where piep's tp=1 times of the "
             f"same harness's tp=1 runs fit best).", "",
             "Leave one run out (errors in %; spread: (max - min) / median of the run's 3 "
             "repeats):", "",
             "| run | measured J | s | via tp=1: energy | time | absolute: energy | time | "
             "spread energy | time | inside the interval, in sample (energy, time) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    errors: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        run = next(x for x in runs if x.label == r["run"])
        doc = api.predict(run.model, engine=run.engine, tp=run.tp, batch=run.batch,
                          prompt_len=run.prompt_len, gen_len=run.gen_len, host_probe_us=probe)
        (elo, ehi), (tlo, thi) = doc["interval"]["energy_j"], doc["interval"]["time_s"]
        cover = (elo <= run.energy_j <= ehi, tlo <= run.time_s <= thi)
        via_e = 100 * (r["via_tp1_energy_j"] / r["energy_j"] - 1)
        via_t = 100 * (r["via_tp1_time_s"] / r["time_s"] - 1)
        abs_e = 100 * (r["pred_energy_j"] / r["energy_j"] - 1)
        abs_t = 100 * (r["pred_time_s"] / r["time_s"] - 1)
        errors.setdefault(r["engine"], []).append((abs(abs_e), abs(abs_t)))
        lines.append(f"| {r['run']} | {r['energy_j']:.0f} | {r['time_s']:.3f} | {via_e:+.1f} | "
                     f"{via_t:+.1f} | {abs_e:+.1f} | {abs_t:+.1f} | "
                     f"{100 * r['energy_spread']:.1f} | {100 * r['time_spread']:.1f} | "
                     f"{'yes' if cover[0] else 'NO'}, {'yes' if cover[1] else 'NO'} |")
    lines += ["", "Mean absolute error of the absolute predictions (target: energy <= 10 %, "
              "time <= 12 %):", ""]
    for engine, errs in errors.items():
        e = sum(x for x, _ in errs) / len(errs)
        t = sum(y for _, y in errs) / len(errs)
        lines.append(f"* {engine}: energy {e:.1f} %, time {t:.1f} % ({len(errs)} runs)")
    lines += ["", "The comparison (`piep compare`, default host):", "",
              "| engine | batch | llama-2-7b@tp2 J | llama-2-13b@tp1 J | best for energy |",
              "|---|---|---|---|---|"]
    from piep.compare import compare
    from piep.core.scenario import Scenario
    for engine in ("hf-eager", "hf-static"):
        for batch in (1, 16):
            base = Scenario.build("llama-2-7b", engine=engine, tp=2, batch=batch)
            doc = compare([f"llama-2-7b@tp2:{engine}", f"llama-2-13b@tp1:{engine}"], base)
            a, b = doc["candidates"]
            lines.append(f"| {engine} | {batch} | {a['energy_j']:.0f} | {b['energy_j']:.0f} | "
                         f"{doc['recommendation']['energy']} |")
    lines += ["", "Made by `python benchmarks/engines_tp2.py --out reports/engines_tp2.md`."]
    text = "\n".join(lines) + "\n"
    print(text)
    if "--out" in sys.argv:
        Path(sys.argv[sys.argv.index("--out") + 1]).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
