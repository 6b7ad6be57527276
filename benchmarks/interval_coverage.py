"""Coverage of every 90 % interval piep prints, on held-out and blind data: how often the
measurement fell inside. Computed here where the committed predictions carry their
intervals (the blind serving sets); read from the report that measured it elsewhere
(each report names its script); and said plainly where nothing measures it.

    python benchmarks/interval_coverage.py [--write]   # --write: the table into reports/accuracy.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from docs import report_match  # noqa: E402  (benchmarks/docs.py)

BEGIN, END = "<!-- coverage: benchmarks/interval_coverage.py -->", "<!-- end coverage -->"


def _blind_serving() -> list[tuple[str, int, int]]:
    """(set, inside, predictions) of the blind serving sets' energy intervals (the sets
    with a replay of a prediction)."""
    import serving_blind as sb
    out = []
    for name, (path, _, _) in sb.SETS.items():
        preds = {(p["model"], p["trace"]): p for p in sb.read_jsonl(path)}
        inside = n = 0
        for row in sb.blind_rows(path):
            band = preds[(row["model"], row["trace"])].get("interval_energy_j")
            if band:
                n += 1
                inside += band[0] <= row["energy_j"] <= band[1]
        if n:
            out.append((name, inside, n))
    return out


def table() -> str:
    """The coverage table (Markdown)."""
    ref = report_match("reports/accuracy.md", r"coverage when each model's interval is sized without "
                r"its own residuals: energy\s+([\d.]+) %, time ([\d.]+) % \((\d+) runs\)")
    rows = [("piep's reference runner", "leave one model out, each interval sized without "
             "the model's own residuals", f"{ref.group(1)} %", f"{ref.group(2)} %",
             ref.group(3), "reports/accuracy.md")]
    for engine in ("hf-eager", "hf-static"):
        m = report_match("reports/engines.md", rf"\| {engine} \| (\d+) % \| (\d+) % \|[^\n]*\| "
                         r"(\d+) \| [\d.]+ \| [\d.]+ \| [\d.]+ \|")
        rows.append((f"{engine}, tp=1", "leave one model out, cross-conformal", f"{m.group(1)} %",
                     f"{m.group(2)} %", m.group(3), "reports/engines.md"))
    tp2 = (ROOT / "reports/engines_tp2.md").read_text()
    runs = re.findall(r"^\| hf-\w+ tp2 b\d+ \|.*\| (yes|NO), (yes|NO) \|$", tp2, re.M)
    rows.append(("hf-eager, hf-static, tp=2", "none: the interval is sized on these runs' "
                 "leave-one-run-out errors", f"{sum(e == 'yes' for e, _ in runs)}/{len(runs)} "
                 "(in sample)", f"{sum(t == 'yes' for _, t in runs)}/{len(runs)} (in sample)",
                 str(len(runs)), "reports/engines_tp2.md"))
    m = report_match("reports/serving.md", r"cross-conformal: each replay, predicted at its "
                     r"own host probe, [^:]*: energy (\d+) %, window time (\d+) % \((\d+) "
                     r"replays\)")
    rows.append(("piep serve (hf-cb)", "leave one shape out, cross-conformal, each replay at "
                 "its host probe", f"{m.group(1)} %", f"{m.group(2)} %", m.group(3),
                 "reports/serving.md"))
    for name, what in (("moe", "hf-eager, mixtures of experts"),
                       ("fp8", "hf-eager, FP8 checkpoints")):
        m = report_match(f"reports/{name}.md", r"the measurement inside in (\d+) of (\d+) "
                         r"runs \(energy\), (\d+) of \d+ \(time\)")
        e, n, t = int(m.group(1)), int(m.group(2)), int(m.group(3))
        rows.append((what, "the set's runs train no fit", f"{e}/{n} ({100 * e / n:.0f} %)",
                     f"{t}/{n} ({100 * t / n:.0f} %)", str(n), f"reports/{name}.md"))
    sets = _blind_serving()
    for name, inside, n in sets:
        note = " (the profile form shipped now: fitted per host)" if name == sets[-1][0] else ""
        rows.append((f"piep serve, blind set {name}{note}", "predicted before the replays "
                     "existed", f"{inside}/{n} ({100 * inside / n:.0f} %)", "not recorded",
                     str(n), "calibration/h200/engines/hf-cb/predictions_blind*.jsonl"))
    inside, n = sum(s[1] for s in sets), sum(s[2] for s in sets)
    call49 = report_match("reports/serving.md", r"\| blind: predicted before call 49[^|]*\| \d+ \| "
                   r"([\d.]+) %")
    rows.append(("piep serve, every blind set", "", f"{inside}/{n} ({100 * inside / n:.0f} %)",
                 "", str(n), "benchmarks/serving_blind.py"))
    lines = [BEGIN, "## Coverage of every 90 % interval", "",
             "How often the measurement fell inside the 90 % interval piep printed, on data the "
             "interval was not sized on (`python benchmarks/interval_coverage.py --write`).", "",
             "| interval | held out | energy | time | runs | source |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    lines += ["", "Not measured anywhere: the x1.5 widening beyond 2 GPUs (no machine of more "
              "than 2 GPUs was lent), the fixed x0.5-x2 band of a spec-sheet GPU (no other "
              "GPU was lent), the x1.5 widening of an engine at a tp degree it never ran, the "
              "x1.5 widening of out-of-range leaves (engines: flagged runs err more, "
              "reports/engines.md, but their coverage is not counted apart), and the bands of "
              "clock-plan savings (clocks cannot be set on the lent machines). Blind sets 1-3 "
              "of `piep serve` were predicted by earlier forms of the hf-cb profile (set 3, "
              f"device call 49, missed by {call49.group(1)} % on three shapes no replay had; the "
              "profile has since been refit per host); the form shipped now covered "
              f"{sets[-1][1]} of {sets[-1][2]} blind replays - too few to recalibrate on, so "
              "no interval was recalibrated.", END]
    return "\n".join(lines)


def write() -> str:
    """The table, put in reports/accuracy.md (in place of the one there); returned."""
    text = table()
    path = ROOT / "reports" / "accuracy.md"
    old = path.read_text()
    if BEGIN in old:
        old = old[:old.index(BEGIN)] + old[old.index(END) + len(END):].lstrip("\n")
    path.write_text(old.rstrip("\n") + "\n\n" + text + "\n")
    return text


def main() -> int:
    print(write() if "--write" in sys.argv else table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
