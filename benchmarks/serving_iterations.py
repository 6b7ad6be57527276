"""hf-cb's logged iterations against their prices: measured / predicted duration of every
iteration the replays logged (calibration/h200/engines/hf-cb/raw), priced by the shipped
profile at the iteration's own query tokens, requests and keys and the replay's host
probe, as its time fit prices them. Medians by queries x keys, apart for iterations that
only decode (a query a request) and those that prefill: where one attention scale is not
enough, the ratio drifts with the attention's work.

    python benchmarks/serving_iterations.py
    python benchmarks/serving_iterations.py --by-replay   # per replay, beside its probe

`--by-replay`: each replay's median measured / predicted iteration time beside the host
probe it was priced at and its device call; where a probe misreads the host (one reading,
beside the replay), the whole replay's ratio moves with it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.fit import serving as fs  # noqa: E402
from piep.predict.resolve import engine_profile  # noqa: E402
from piep.predict.store import load_learned  # noqa: E402

EDGES = (0, 1e4, 1e5, 1e6, 3e6, 1e7, 3e7, 1e8, 3e8, np.inf)


def iterations() -> dict[str, np.ndarray]:
    """Per logged iteration: query tokens, requests, keys, measured / predicted time."""
    base = load_learned("h200")
    profile = engine_profile("h200", "hf-cb")
    model = profile.apply(base)
    records = [r for r in fs.shipped_replays("h200") if r.iterations is not None]
    s = profile.meta.scheduler
    cases = fs._cases(base, records, s["reserved_gib"], True, pickup=s.get("pickup_s", 0.0))
    logged = fs._Logged(cases)
    parts = [(c.iterations, pt) for c, pt in zip(cases, logged.times.times(model))]
    q, n, k = (np.concatenate([it[i] for it, _ in parts]) for i in range(3))
    ratio = np.concatenate([it[3] / pt for it, pt in parts])
    by_replay = [(c.rep, float(np.median(it[3] / pt))) for (it, pt), c in zip(parts, cases)]
    return {"q": q, "n": n, "k": k, "ratio": ratio, "replays": np.array(len(parts)),
            "by_replay": by_replay}


def replay_table(it: dict) -> list[str]:
    """Per replay: its device call, shape, trace, launch probe and median measured /
    predicted iteration time."""
    lines = ["| call | shape | trace | probe us | measured / predicted (median) |",
             "|---|---|---|---|---|"]
    for rep, ratio in sorted(it["by_replay"], key=lambda x: (x[0].source, x[0].trace or "")):
        call = re.search(r"call\d+", rep.source)
        lines.append(f"| {call.group(0) if call else '-'} | {rep.model} | "
                     f"{Path(rep.trace or '-').name} | "
                     f"{'-' if rep.host_probe_s is None else f'{1e6 * rep.host_probe_s:.2f}'} | "
                     f"{ratio:.2f} |")
    return lines


def table(it: dict[str, np.ndarray]) -> list[str]:
    work = it["q"] * it["k"]
    lines = ["| iterations | queries x keys | count | measured / predicted (p25, median, "
             "p75) | median queries | median keys |", "|---|---|---|---|---|---|"]
    for label, rows in (("decoding only", it["q"] == it["n"]),
                        ("with prompt tokens", it["q"] > it["n"])):
        for lo, hi in zip(EDGES[:-1], EDGES[1:]):
            m = rows & (work >= lo) & (work < hi)
            if m.sum() < 20:
                continue
            r = it["ratio"][m]
            lines.append(f"| {label} | {lo:.0e} - {hi:.0e} | {int(m.sum())} | "
                         f"{np.percentile(r, 25):.2f}, {np.median(r):.2f}, "
                         f"{np.percentile(r, 75):.2f} | {np.median(it['q'][m]):.0f} | "
                         f"{np.median(it['k'][m]):.0f} |")
    return lines


def main() -> int:
    it = iterations()
    print(f"{len(it['ratio'])} iterations of {int(it['replays'])} replays")
    print("\n".join(replay_table(it) if "--by-replay" in sys.argv[1:] else table(it)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
