"""Fit the H200 frequency model and check it against the published figures.

    python benchmarks/dvfs_fit.py

Writes calibration/h200/dvfs/freq_model.json (parameters with provenance and bands),
calibration/h200/dvfs/README.md (the literature rows, the fit, every check with its
outcome) and calibration/h200/dvfs/figures/response.png.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.core.gpus import load_gpu  # noqa: E402
from piep.fit import freq as fit  # noqa: E402
from piep.plan.freq import freq_model_path  # noqa: E402

OUT = ROOT / "calibration" / "h200" / "dvfs"
PROBE_GEMM_W, PROBE_GEMM_MHZ = 703.0, 1650.0  # probe: 8192^3 GEMM, 703 W at 1575-1725 MHz


def checks(fm) -> list[tuple[str, str, bool]]:
    """(literature id, what the model gives, holds?) for every `check` row."""
    out = []
    for row in fit.literature_rows("h200"):
        if not row["use"].startswith("check"):
            continue
        if row["quantity"] == "full_load_power_at_locked_clock":
            f = 1830.0 if "1830" in row["id"] else 1500.0
            p = fit.full_load_power(fm, f, PROBE_GEMM_W, PROBE_GEMM_MHZ)
            lo = float(row["low"]) if row["low"] else None
            hi = float(row["high"]) if row["high"] else None
            ok = (lo is None or p > lo) and (hi is None or p <= hi)
            out.append((row["id"], f"8192^3 GEMM locked at {f:.0f} MHz: {p:.0f} W "
                                   f"(limit 700 W)", ok))
        elif row["quantity"] == "decode_board_power":
            powers = decode_powers()
            lo, hi = float(row["low"]), float(row["high"])
            ok = all(lo * 0.8 <= p <= hi * 1.2 for p in powers.values())
            text = ", ".join(f"batch {b}: {p:.0f} W" for b, p in powers.items())
            meas = measured_decode_powers()
            out.append((row["id"], f"predicted decode power per GPU, {fit.REFERENCE['model']} "
                                   f"({text}); reported {lo:.0f}-{hi:.0f} W. Our own tp1 "
                                   f"measurements: graph {meas['graph']}, eager {meas['eager']} "
                                   "— the published range matches our launch-bound eager "
                                   "decode, not graph replay", ok))
    return out


def decode_powers() -> dict[int, float]:
    from piep import api
    out = {}
    for b in fit.REFERENCE["batches"]:
        doc = api.predict(fit.REFERENCE["model"], batch=b, prompt_len=512, gen_len=128)
        out[b] = doc["decode"]["energy_j"] / doc["decode"]["time_s"]
    return out


def measured_decode_powers() -> dict[str, str]:
    from piep.core.config import Parallel
    from piep.core.dataset import load_calibration
    from piep.core.records import merge_repeats
    out = {}
    for mode in ("graph", "eager"):
        p = [r.decode.energy_j / r.decode.time_s
             for r in merge_repeats(load_calibration("h200").e2e)
             if r.mode == mode and r.parallel == Parallel() and r.decode.time_s > 0]
        out[mode] = f"{min(p):.0f}-{max(p):.0f} W ({len(p)} runs)" if p else "none"
    return out


def figure(fm) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from piep.plan.planner import phase_curves
    leaves = fit.reference_leaves("h200")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for b, lv in zip(fit.REFERENCE["batches"], leaves):
        cv = phase_curves(fm, lv)
        for ax, ph in zip(axes, (0, 1)):
            t, e = cv.time_s[ph] / cv.time_s[ph, -1], cv.energy_j[ph] / cv.energy_j[ph, -1]
            ax.plot(cv.clocks, e, label=f"energy, batch {b}")
            ax.plot(cv.clocks, t, "--", label=f"time, batch {b}")
    for ax, name in zip(axes, ("prefill", "decode")):
        ax.set_title(f"{fit.REFERENCE['model']} {name} locked at one SM clock (model-based)")
        ax.set_xlabel("SM clock (MHz)")
        ax.set_ylabel("relative to default boost")
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.set_ylim(0.4, 2.5)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    (OUT / "figures").mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT / "figures" / "response.png", dpi=110)


def split_lines(fm) -> str:
    """What the assumed energy split and the fit each contribute to the decode saving."""
    leaves = fit.reference_leaves("h200")
    lo, hi = fm.params["op_floor"].band
    at = {(v, f): fit.max_reference_saving(fm.with_values(v_ratio=v, op_floor=f), leaves)
          for v in (1.0, fm.v("v_ratio")) for f in (lo, hi)}
    v = fm.v("v_ratio")
    return (f"The best decode saving at <= {fit.DECODE_SLOWDOWN_OK:.0%} slowdown over the "
            f"reference workloads, by the two least-known inputs: no voltage scaling "
            f"(v_ratio 1) gives {at[1.0, lo]:.1%} with op_floor {lo:g} and {at[1.0, hi]:.1%} "
            f"with op_floor {hi:g}; the fitted v_ratio {v:.3f} gives {at[v, lo]:.1%} and "
            f"{at[v, hi]:.1%}. So the savings `piep plan` reports restate the 32 % figure "
            f"through an assumed split of SM energy into per-cycle and per-operation parts; "
            f"op_floor is banded ({lo:g}-{hi:g}) and every plan's saving band covers it. "
            f"Only a measured clock sweep (`piep plan --validate` where clocks may be set) "
            f"can replace both.")


def main() -> None:
    gpu = load_gpu("h200")
    fm, report = fit.fit_literature(gpu)
    fit.write_model(fm, report, freq_model_path("h200"))
    results = checks(fm)
    figure(fm)
    lines = [
        "# H200 frequency model (model-based; clocks cannot be set on our GPUs)",
        "",
        "Regenerate: `python benchmarks/dvfs_fit.py` (writes `freq_model.json`, this file, "
        "`figures/response.png`). Model: `piep/plan/freq.py`; fit: `piep/fit/freq.py`.",
        "",
        "## Parameters",
        "",
        "| parameter | value | provenance | band | source |",
        "|---|---|---|---|---|",
    ]
    for k, p in fm.params.items():
        band = f"{p.band[0]:.4g}-{p.band[1]:.4g}" if p.band else ""
        lines.append(f"| {k} | {p.value:.4g} | {p.provenance} | {band} | {p.source} |")
    lines += [
        "",
        "## Fit",
        "",
        f"Target: the largest decode-energy saving at <= {fit.DECODE_SLOWDOWN_OK:.0%} decode "
        f"slowdown over {fit.REFERENCE['model']} (tp1, graph, prompt 512, gen 128, batches "
        f"{list(fit.REFERENCE['batches'])}) equals {report['target']:.0%} "
        f"(arXiv:2605.11999). Result: v_ratio = {report['v_ratio']:.3f} "
        f"(band {report['v_ratio_band'][0]:.3f}-{report['v_ratio_band'][1]:.3f} for targets "
        f"{report['target'] - report['tolerance']:.0%}-{report['target'] + report['tolerance']:.0%}).",
        "",
        f"Without any voltage scaling (v_ratio = 1) the model already gives "
        f"{report['saving_without_voltage_scaling']:.1%}: with our assumed energy split, most of "
        "the decode saving comes from clock-tree/stall energy that scales with the clock, not "
        "from voltage. Best decode saving per batch at the fit: "
        + ", ".join(f"batch {b}: {s:.1%}" for b, s in report["per_batch"].items()) + ".",
        "",
        "### How much of a plan's saving is this fit",
        "",
        split_lines(fm),
        "",
        "This is one published figure fitting one parameter. No published H100/H200 per-clock "
        "power table was found through the search tool (queries and sources in the session "
        "note); `piep plan --validate` refits `v_ratio` and `f_mem_sat_mhz` on a measured "
        "clock sweep where clocks may be set.",
        "",
        "## Checks against the literature rows",
        "",
        "| id | model | holds |",
        "|---|---|---|",
    ]
    lines += [f"| {i} | {text} | {'yes' if ok else 'NO'} |" for i, text, ok in results]
    lines += ["", "The two TileOPs checks follow from our probe (8192^3 GEMM at 703 W, 1575-1725 "
              "MHz) for any board power that rises with the clock: they constrain no parameter "
              "and are shown for context. The decode-power check fails: the published decode "
              "powers are below what we measure for graph-replayed decode, so the fitted "
              "saving may not carry over to our workloads."]
    lines += ["", "## Literature rows (`literature.csv`)", ""]
    for row in fit.literature_rows("h200"):
        lines.append(f"* **{row['id']}** ({row['gpu']}; {row['use']}): {row['quantity']} "
                     f"{row['low']}-{row['high']} {row['unit']} — {row['condition']}. "
                     f"{row['citation']}, {row['url']}")
    lines += ["", "![response](figures/response.png)", ""]
    (OUT / "README.md").write_text("\n".join(lines))
    print(f"v_ratio {report['v_ratio']:.3f} band {report['v_ratio_band']}")
    for i, text, ok in results:
        print(f"{'ok ' if ok else 'NO '} {i}: {text}")


if __name__ == "__main__":
    main()
