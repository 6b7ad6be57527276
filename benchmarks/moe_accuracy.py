"""Mixtures of experts, held out: piep's predictions of transformers `generate()` runs on
MoE shapes (calibration/h200/moe: Qwen3-30B-A3B, Mixtral 8x7B, Qwen1.5-MoE-A2.7B and one
of our own), made before any was measured, against the measurements once a device call
has made them.

    python benchmarks/moe_accuracy.py --predict   # blind predictions of the design
    python benchmarks/moe_accuracy.py             # blind vs measured (where measured)

`--predict` writes `predictions_blind.jsonl` by the code of the commit it names: every
design row (`design_eager.jsonl`) priced as piep prices it now (the experts routed
uniformly, as random weights route; nothing fitted on a mixture of experts). The
measurements are the `piep.measurement` records of `raw/*.jsonl` (made by
`planned_run71.sh` when a device is lent).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep import api  # noqa: E402
from piep.core.artifacts import git_hash, read_jsonl, write_text  # noqa: E402

MOE = ROOT / "calibration" / "h200" / "moe"
DESIGN = MOE / "design_eager.jsonl"
BLIND = MOE / "predictions_blind.jsonl"


def key(row: dict) -> tuple:
    return (row["model"], row["engine"], row["batch"], row["prompt_len"], row["gen_len"])


def blind_predictions() -> list[dict]:
    out = []
    for row in read_jsonl(DESIGN):
        doc = api.predict(str(MOE / "configs" / f"{row['model']}.json"), engine=row["engine"],
                          tp=row["tp"], batch=row["batch"], prompt_len=row["prompt_len"],
                          gen_len=row["gen_len"])
        out.append({"model": row["model"], "engine": row["engine"], "batch": row["batch"],
                    "prompt_len": row["prompt_len"], "gen_len": row["gen_len"],
                    "energy_j": doc["energy_j"], "time_s": doc["time_s"],
                    "flags": doc["flags"], "commit": git_hash()})
    return out


def measured() -> dict[tuple, dict]:
    """The design's measured runs (their records' model, engine and workload)."""
    out = {}
    for path in sorted((MOE / "raw").glob("*.jsonl")):
        for r in read_jsonl(path):
            if r.get("schema") == "piep.measurement" and r.get("energy_j"):
                out[(r["model"], r["engine"]["name"], r["batch"], r["prompt_len"],
                     r["gen_len"])] = r
    return out


def main() -> int:
    if "--predict" in sys.argv:
        rows = blind_predictions()
        write_text(BLIND, "".join(json.dumps(r) + "\n" for r in rows))
        print(f"wrote {BLIND.relative_to(ROOT)} ({len(rows)} rows)")
        return 0
    blind, seen = read_jsonl(BLIND), measured()
    lines = ["| model | batch | prompt | gen | predicted J | predicted s | measured J | "
             "measured s |", "|---|---|---|---|---|---|---|---|"]
    errors = []
    for p in blind:
        m = seen.get(key(p))
        lines.append(f"| {p['model']} | {p['batch']} | {p['prompt_len']} | {p['gen_len']} | "
                     f"{p['energy_j']:.1f} | {p['time_s']:.3f} | "
                     + (f"{m['energy_j']:.1f} | {m['time_s']:.3f} |" if m else "- | - |"))
        if m:
            errors.append((p["energy_j"] / m["energy_j"] - 1, p["time_s"] / m["time_s"] - 1))
    print("\n".join(lines))
    if errors:
        print(f"\n{len(errors)} measured: energy {100 * statistics.mean(abs(e) for e, _ in errors):.1f} "
              f"%, time {100 * statistics.mean(abs(t) for _, t in errors):.1f} % (mean |error|)")
    else:
        print(f"\nnot measured yet: {len(blind)} blind predictions (commit "
              f"{blind[0]['commit'] if blind else '-'}) wait for planned_run71.sh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
