"""How much H200 boards differ on identical work, and what that does to a prediction.

    python benchmarks/boards.py [--write]   # --write: reports/boards.md

Three measurements, each from committed data:

* the same end-to-end configuration of piep's reference runner (graph decode, one GPU)
  measured on two or more boards (`calibration/h200/e2e/raw/`, the clock plans' dry run
  `dvfs/clockplan_dryrun.jsonl`, and device call 58's repeats on another board,
  `boards/e2e_s58_boards.jsonl`): energy and time of each board against the
  configuration's mean;
* the repeat-check kernel shapes (`modules/repeat_check_s{0,1}.jsonl`, boards ff30712c and
  55e8be14) measured again on call 58's board (`boards/repeat_boards_s58.jsonl`): power
  per call of one board against the other on the same kernel;
* the shipped predictor's energy error on every single-GPU graph run, by board (in sample
  for the training runs: a board's bias, not an accuracy figure).
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.core.artifacts import read_jsonl, write_text  # noqa: E402

CAL = ROOT / "calibration" / "h200"
E2E_FILES = (sorted((CAL / "e2e" / "raw").glob("*.jsonl"))
             + [CAL / "dvfs" / "clockplan_dryrun.jsonl", CAL / "boards" / "e2e_s58_boards.jsonl"])
REPEAT_OLD = (CAL / "modules" / "repeat_check_s0.jsonl", CAL / "modules" / "repeat_check_s1.jsonl")
REPEAT_NEW = CAL / "boards" / "repeat_boards_s58.jsonl"


def board(rec: dict) -> str:
    return rec["per_gpu"][0]["uuid"][4:12]


def e2e_runs() -> list[dict]:
    """Single-GPU graph runs of the reference runner, with the file each came from."""
    return [{**r, "file": f.name} for f in E2E_FILES for r in read_jsonl(f)
            if r.get("schema") == "piep.measurement" and r.get("energy_j")
            and r["gpus"] == 1 and r["mode"] == "graph"]


def same_work(runs: list[dict]) -> list[tuple[str, dict[str, tuple[float, float]]]]:
    """Configurations measured on two or more boards: key -> board -> (energy, time), a
    board's repeats by their median."""
    by: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        key = f"{r['model']} b{r['batch']} p{r['prompt_len']} g{r['gen_len']}"
        by[key][board(r)].append((r["energy_j"], r["time_s"]))
    out = []
    for key, boards in sorted(by.items()):
        if len(boards) >= 2:
            out.append((key, {b: (statistics.median(e for e, _ in v),
                                  statistics.median(t for _, t in v))
                              for b, v in sorted(boards.items())}))
    return out


def _shape_key(r: dict) -> str:
    return repr(sorted((f, r[f]) for f in r["shape_fields"]))


def kernel_power() -> list[tuple[str, str, int, float, float, float]]:
    """(old board, new board, shapes, median power ratio new/old - 1, its quartiles) of the
    repeat-check shapes; each board's passes by their median."""
    def per_shape(path):
        rows: dict[str, list] = defaultdict(list)
        for r in read_jsonl(path):
            if r.get("schema") == "piep.module_sample":
                rows[_shape_key(r)].append(r)
        return rows
    new = per_shape(REPEAT_NEW)
    new_board = next(iter(new.values()))[0]["gpu_uuid"][4:12]
    out = []
    for path in REPEAT_OLD:
        old = per_shape(path)
        ratios = []
        for key, rows in old.items():
            if key in new:
                def power(rs):
                    return statistics.median(r["energy_j"] for r in rs) / \
                        statistics.median(r["time_s"] for r in rs)
                ratios.append(power(new[key]) / power(rows) - 1)
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        out.append((next(iter(old.values()))[0]["gpu_uuid"][4:12], new_board, len(ratios),
                    statistics.median(ratios), q1, q3))
    return out


def bias_by_board(runs: list[dict]) -> list[tuple[str, int, float, str]]:
    """(board, runs, median energy error of the shipped predictor, files) per board."""
    from piep.core.gpus import load_gpu
    from piep.predict.store import predictor_dir
    from piep.predict.pricing import price
    from piep.predict.store import load
    from piep.core.records import Measurement
    gpu = load_gpu("h200")  # the shipped predictor, not a user's refit
    priced = price([Measurement.from_json(r).deployment(gpu) for r in runs],
                   load(predictor_dir("h200"), gpu))
    by: dict[str, list] = defaultdict(list)
    for i, r in enumerate(runs):
        by[board(r)].append((priced.energy_j[i] / r["energy_j"] - 1, r["file"]))
    return [(b, len(v), statistics.median(e for e, _ in v), ", ".join(sorted({f for _, f in v})))
            for b, v in sorted(by.items())]


def report() -> str:
    runs = e2e_runs()
    pairs = same_work(runs)
    spreads = []
    lines = ["# Board to board (generated)", "",
             "Made by `python benchmarks/boards.py --write` from committed data. H200 boards "
             "of the same model draw different power for the same work at the same speed; "
             "piep predicts the average of the boards it was calibrated on.", "",
             "## The same run on several boards", "",
             "piep's reference runner, graph decode, one GPU; each board's energy and time "
             "against the configuration's mean over its boards.", "",
             "| configuration | board | energy (J) | vs mean | time (s) | vs mean |",
             "|---|---|---|---|---|---|"]
    for key, boards in pairs:
        e_mean = statistics.mean(e for e, _ in boards.values())
        t_mean = statistics.mean(t for _, t in boards.values())
        for b, (e, t) in boards.items():
            lines.append(f"| {key} | {b} | {e:,.1f} | {100 * (e / e_mean - 1):+.1f} % | "
                         f"{t:.3f} | {100 * (t / t_mean - 1):+.1f} % |")
        es = [e for e, _ in boards.values()]
        ts = [t for _, t in boards.values()]
        spreads.append((max(es) / min(es) - 1, max(ts) / min(ts) - 1))
    e_spread = sorted(s for s, _ in spreads)
    t_spread = sorted(s for _, s in spreads)
    lines += ["", f"Over {len(pairs)} configurations, the largest board's energy over the "
              f"smallest's: median {100 * statistics.median(e_spread):.1f} %, largest "
              f"{100 * e_spread[-1]:.1f} %; time: median {100 * statistics.median(t_spread):.1f} %, "
              f"largest {100 * t_spread[-1]:.1f} %.", "",
              "## The same kernels on two boards", "",
              "The repeat-check shapes (1 s windows, two passes each), power per call "
              "(energy per call / time per call) of the newer board over the older one:", "",
              "| older board | newer board | shapes | median | quartiles |", "|---|---|---|---|---|"]
    for old, new, n, med, q1, q3 in kernel_power():
        lines.append(f"| {old} | {new} | {n} | {100 * med:+.1f} % | "
                     f"{100 * q1:+.1f} .. {100 * q3:+.1f} % |")
    lines += ["", "## The shipped predictor by board", "",
              "Energy error of the shipped predictor on every single-GPU graph run of each "
              "board (training runs in sample: this shows a board's bias, not piep's "
              "accuracy, which `accuracy.md` measures on held-out models).", "",
              "| board | runs | median energy error | files |", "|---|---|---|---|"]
    for b, n, med, files in bias_by_board(runs):
        lines.append(f"| {b} | {n} | {100 * med:+.1f} % | {files} |")
    default = dict(next(b for k, b in pairs if k == "llama-2-7b b1 p512 g128"))
    lo, hi = min(e for e, _ in default.values()), max(e for e, _ in default.values())
    lines += ["", "What it means for a prediction: piep's intervals are sized on runs of "
              "several boards, so they hold part of this spread; a user's board can sit "
              f"at either end of it. piep's default workload (llama-2-7b, batch 1, prompt "
              f"512, 128 tokens) measured {lo:,.1f}-{hi:,.1f} J on {len(default)} boards "
              f"({100 * (hi / lo - 1):.1f} % apart).", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = report()
    if "--write" in argv:
        write_text(ROOT / "reports" / "boards.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
