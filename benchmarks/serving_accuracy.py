"""Accuracy of `piep serve` on request traces replayed against transformers' continuous
batching on H200 (calibration/h200/engines/hf-cb/raw; the device calls its files name).

    python benchmarks/serving_accuracy.py      # prints, and writes reports/serving.md

* leave one shape out: every trace of a model predicted by the hf-cb profile fitted on
  the other models' traces (the module models are the shipped ones);
* held-out load levels: every replay of one trace file (one load level, on every shape)
  predicted by the profile fitted on the other trace files;
* blind: the traces predicted before they were replayed (`benchmarks/serving_blind.py`:
  the profiles shipped before device calls 19-20, 21, 49 and 53; the last also at each
  replay's own host probe, from predictions made at a grid of probes);
* the repeat spread (the same trace replayed twice, minutes apart).
Window energy and time, energy above the measured idle power, p50 TTFT, TPOT and
end-to-end latency; energy also by traffic class. Takes ~10 minutes (15 profile fits).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from serving_blind import OUT as BLIND1, OUT2 as BLIND2, OUT3 as BLIND3, OUT4 as BLIND4  # noqa: E402
from serving_blind import OUT5 as BLIND5, SETS  # noqa: E402
from serving_blind import blind_rows  # noqa: E402
from engines_blind import device_calls  # noqa: E402

from piep.fit.engines import engine_records  # noqa: E402
from piep.predict.store import load_learned  # noqa: E402
from piep.commands.common import HOST_PROBES  # noqa: E402
from piep.fit.serving import (SESSION_GAP_S, held_out, held_out_on_hosts,  # noqa: E402
                              pooled_host_probes)
from piep.stats.conformal import cross_coverage  # noqa: E402

REPORT = ROOT / "reports" / "serving.md"
KEYS = (("energy_j", "energy"), ("active_j", "active energy"), ("time_s", "window time"),
        ("ttft_s", "p50 TTFT"), ("tpot_s", "p50 TPOT"), ("e2e_s", "p50 end-to-end"))
# traffic classes by trace file: how the arrivals relate to what the engine serves
CLASSES = {"idle-heavy (night, low, light)": ("night", "low", "light"),
           "moderate (mid, medium)": ("mid", "medium"),
           "saturated (saturated, backlog)": ("saturated", "backlog"),
           "burst: all arrivals at 0 (burst, surge)": ("burst", "surge")}


def name(row) -> str:
    """The trace file's name of a replay (or of a result row)."""
    return Path(row["trace"] if isinstance(row, dict) else row.trace).stem


def flag_line(loso: list[dict]) -> str:
    """How many held-out replays `piep serve` flags out_of_range (reading rows farther
    from the module samples than the other shapes' replays did) and their errors."""
    far = [r for r in loso if r["out_of_range_kinds"]]
    near = [r for r in loso if not r["out_of_range_kinds"]]
    shapes = sorted({r["model"] for r in far})
    return (f"Flagged out_of_range when held out (a row farther from the module samples "
            f"than the other shapes' replays read, so the interval is widened x1.5): "
            f"{len(far)} of {len(loso)} replays ({', '.join(shapes) or 'none'}); energy "
            f"{mape(far, 'energy_j')} flagged, {mape(near, 'energy_j')} not; window time "
            f"{mape(far, 'time_s')} flagged, {mape(near, 'time_s')} not.")


def mape(rows, key) -> str:
    from piep.stats.conformal import mape_text
    return mape_text(rows, key)


def repeats(records) -> list[str]:
    """The replays of one (model, trace) measured more than once: their energy spread."""
    by: dict[tuple, list] = {}
    for r in records:
        by.setdefault((r.model, name(r)), []).append(r)
    out = []
    for (model, trace), rs in by.items():
        if len(rs) > 1:
            e = [r.energy_j for r in rs]
            t = [r.time_s for r in rs]
            out.append(f"{model} {trace}: energy {', '.join(f'{v:.0f}' for v in e)} J "
                       f"({100 * (max(e) / min(e) - 1):.1f} % apart), time "
                       f"{', '.join(f'{v:.2f}' for v in t)} s")
    return out


def main() -> int:
    base = load_learned("h200")
    records = engine_records("h200", "hf-cb")
    pooled = pooled_host_probes(records)  # each on its session's host, as the fit reads it
    shapes = sorted({r.model for r in records})
    loads = {name(r) for r in records}
    print(f"{len(records)} replays, {len(shapes)} shapes, {len(loads)} load levels: fitting "
          f"{len(shapes) + len(loads)} held-out profiles...")
    hosts = held_out_on_hosts(base, pooled, by="model", hosts=(True, False))
    loso = hosts[True]
    lolo = held_out(base, pooled, by="load")
    # the same fits, each replay predicted at the one probe taken beside it
    own = held_out_on_hosts(base, records, by="model", hosts=(True,), fitted_on=pooled)[True]
    blind = [("before calls 19-20 (fitted on call 18: llama-3-8b only)", blind_rows(BLIND1)),
             ("before call 21 (fitted on calls 18-20)", blind_rows(BLIND2)),
             ("before call 49 (fitted on calls 18-21)", blind_rows(BLIND3)),
             ("before call 53 (fitted per host on calls 18-51), at the typical host",
              blind_rows(BLIND4)),
             ("before call 53, at each replay's measured host probe",
              blind_rows(BLIND4, on_host=True)),
             ("before call 78 (packed attention in closed form), at each replay's host "
              "probe", blind_rows(BLIND5, on_host=True)),
             ("before call 99, on an H100 (no calibration: its spec sheet and the H200's "
              "profile), at the typical host", blind_rows(SETS["6"][0], gpu="h100")),
             ("before call 99, on an H100, at each replay's host probe",
              blind_rows(SETS["6"][0], on_host=True, gpu="h100"))]
    lines = ["# piep serve on transformers' continuous batching (H200)", "",
             "Generated by `python benchmarks/serving_accuracy.py` from the replays in "
             f"`calibration/h200/engines/hf-cb/raw/` ({len(records)} replays of "
             f"{len({name(r) for r in records})} trace files on {len(shapes)} shapes: "
             f"{', '.join(shapes)}; one GPU each; device calls "
             f"{device_calls(ROOT / 'calibration/h200/engines/hf-cb/raw')}, scripts "
             "and logs in `calibration/h200/device/runNN*`). Energy is GPU-board energy from "
             "the first arrival to the last token; active energy is that minus the idle "
             "power measured before each replay times the window.", "",
             "| held out | replays | " + " | ".join(n for _, n in KEYS) + " |",
             "|---|---|" + "---|" * len(KEYS)]
    for label, rows in (("one shape (every trace of it)", loso),
                        ("one load level (a trace file, on every shape)", lolo),
                        ("one shape, each replay at the one probe taken beside it", own),
                        ("one shape, no probe given (the typical host)", hosts[False])):
        lines.append(f"| {label} | {len(rows)} | "
                     + " | ".join(mape(rows, k) for k, _ in KEYS) + " |")
        print(f"{label}: " + ", ".join(f"{n} {mape(rows, k)}" for k, n in KEYS))
    for label, rows in blind:
        if rows:  # the predictions files hold energy, time and the p50 TPOT and end-to-end
            cells = [mape(rows, k) if k in ("energy_j", "time_s", "tpot_s", "e2e_s") else "-"
                     for k, _ in KEYS]
            lines.append(f"| blind: predicted {label} | {len(rows)} | " + " | ".join(cells)
                         + " |")
            print(f"blind {label}: energy {mape(rows, 'energy_j')}, time "
                  f"{mape(rows, 'time_s')}, TPOT {mape(rows, 'tpot_s')}")
    lines += ["", "Each replay's host is the median launch probe of its session (the "
              f"replays of one machine begun within {SESSION_GAP_S / 60:.0f} minutes of each "
              "other), in the fit and in the prediction alike "
              "(`piep.fit.serving.pooled_host_probes`): one probe reads the host at one "
              "moment, and within one device call the probes beside replays that ran as fast "
              "moved between about 6 and 9.5 us. `--host-probe-us auto` measures a host as "
              f"the median of {HOST_PROBES} probes, and a replay records the "
              "median of 10 since session 34. The third row predicts each replay at the "
              "single probe taken beside it instead (the fits unchanged); the fourth at no "
              "probe, on the calibration machines' typical host."]
    cov = {k: cross_coverage(loso, k) for k in ("energy_j", "time_s")}
    lines += ["", f"Coverage of the 90 % interval `piep serve` prints (a jackknife interval: "
              f"the full fit's prediction +- the 90 % quantile of held-out-shape residuals, "
              f"as the profile sizes it), cross-conformal: each "
              f"replay, predicted at its own host probe, against the band sized on the "
              f"other shapes' replays alone: energy "
              f"{100 * cov['energy_j']:.0f} %, window time {100 * cov['time_s']:.0f} % "
              f"({len(loso)} replays).", ""]
    print(f"cross-conformal 90 % coverage (held-out shape): energy "
          f"{100 * cov['energy_j']:.0f} %, time {100 * cov['time_s']:.0f} %")
    lines += [flag_line(loso), ""]
    print(flag_line(loso))
    lines += ["", "## Energy by traffic class (held-out shape)", "",
              "| class | replays | energy | active energy | window time |", "|---|---|---|---|---|"]
    for label, names in CLASSES.items():
        rows = [r for r in loso if name(r) in names]
        lines.append(f"| {label} | {len(rows)} | {mape(rows, 'energy_j')} | "
                     f"{mape(rows, 'active_j')} | {mape(rows, 'time_s')} |")
        print(f"{label}: energy {mape(rows, 'energy_j')}, active {mape(rows, 'active_j')}")
    lines += ["", "## Repeat spread", ""] + [f"* {r}" for r in repeats(records)]
    lines += ["", "## Every replay (held-out shape)", "",
              "| model | trace | requests | energy J | predicted | time s | predicted | "
              "p50 TPOT s | predicted | p50 e2e s | predicted |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in loso:
        lines.append(f"| {r['model']} | {name(r)} | {r['requests']} | {r['energy_j']:.0f} | "
                     f"{r['pred_energy_j']:.0f} | {r['time_s']:.2f} | {r['pred_time_s']:.2f} | "
                     f"{r['tpot_s']:.4f} | {r['pred_tpot_s']:.4f} | {r['e2e_s']:.2f} | "
                     f"{r['pred_e2e_s']:.2f} |")
    lines += ["", "What is fitted (`piep.fit.serving`): the engine's KV blocks come from a "
              "model of its memory handler (weights, K/V pages, the packed attention mask), "
              "with the memory it reserves read off the blocks each replay reports; every "
              "kernel is priced by the module models as generate()'s are, the packed "
              "attention (an SDPA under a float mask) in closed form until it is sampled "
              "(`PackedKernel`, docs/serving.md); its time scale and that of the K/V gather "
              "and expansion, the host time per kernel launch, per iteration and per request of an "
              "iteration are fitted on the duration of every iteration the engine logged "
              "(Σq, Σkv, requests); the power while the GPU waits for the host is fitted on "
              "the window energies. The scheduler itself (FIFO, decode first, split prompts, "
              "token budget, KV blocks, safety margin) is simulated, not fitted. Host-bound "
              "continuous batching depends on the host: its host terms are fitted per host "
              "(each replay's launch probe); a prediction for an unknown host assumes the "
              "calibration machines' typical one (`serve --host-probe-us` gives yours)."]
    from serving_foreign import BEGIN  # its section, written by serving_foreign.py, is kept
    old = REPORT.read_text() if REPORT.exists() else ""
    kept = "\n" + old[old.index(BEGIN):] if BEGIN in old else ""
    REPORT.write_text("\n".join(lines) + "\n" + kept)
    print(f"wrote {REPORT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
