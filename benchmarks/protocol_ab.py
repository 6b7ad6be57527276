"""The samplers before and after their captures and timings became one protocol
(`piep/sampling/protocol.py`), measured on one board in one device call each.

    python benchmarks/protocol_ab.py [--write]   # --write: calibration/h200/protocol/README.md

Device call 64 (`calibration/h200/device/run64.sh`) ran the code before (a git archive of
commit 6cb9577) and after (5859386) in ABBA order: the reference runner on the 9
configurations of `e2e/design_boards.jsonl` (the decode step's capture), the repeat-check
module shapes (the module sampler's capture and timing) and the device probe. Call 65
(`run65.sh`) ran the collective sampler's capture on a one-rank NCCL group, twice each.
Printed: after / before - 1, per configuration or shape.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.core.artifacts import read_jsonl, write_text  # noqa: E402

DIR = ROOT / "calibration" / "h200" / "protocol"


def _ratios(old: dict, new: dict, field) -> list[float]:
    return [field(new[k]) / field(old[k]) - 1 for k in old if k in new]


def _summary(xs: list[float]) -> str:
    return (f"median {100 * statistics.median(xs):+.2f} %, mean abs "
            f"{100 * statistics.mean(map(abs, xs)):.2f} %, max abs {100 * max(map(abs, xs)):.2f} %")


def runs() -> dict[str, dict]:
    return {v: {json.dumps([r[k] for k in ("model", "batch", "prompt_len", "gen_len")]): r
                for r in read_jsonl(DIR / f"e2e_s64_{v}.jsonl")} for v in ("old", "new")}


def module_samples() -> dict[str, dict]:
    return {v: {json.dumps([r["kind"], r["mode"], [r[f] for f in r["shape_fields"]],
                            r.get("repeat", 0)]): r
                for r in read_jsonl(DIR / f"repeat_s64_{v}.jsonl")
                if r.get("schema") == "piep.module_sample"} for v in ("old", "new")}


def collectives() -> dict[str, dict]:
    return {v: {json.dumps([r["kind"], r["mode"], r["size_bytes"]]): r
                for r in read_jsonl(DIR / f"collectives_s65_{v}.jsonl")}
            for v in ("old1", "old2", "new1", "new2")}


def report() -> str:
    e2e, mods, coll = runs(), module_samples(), collectives()
    energy = lambda r: r["energy_j"]  # noqa: E731
    time_ = lambda r: r["time_s"]  # noqa: E731
    lines = ["# The samplers' measurement protocol, before and after (generated)", "",
             "Made by `python benchmarks/protocol_ab.py --write` from the files here "
             "(device calls 64 and 65, `../device/run64.sh`, `run65.sh`): the code before "
             "the captures and timings became `piep/sampling/protocol.py` against the code "
             "after, on one board. After / before - 1:", "",
             "| what | n | energy | time |", "|---|---|---|---|"]
    n = sum(k in e2e["new"] for k in e2e["old"])
    lines.append(f"| reference runner, graph decode (`e2e_s64_*.jsonl`) | {n} | "
                 f"{_summary(_ratios(e2e['old'], e2e['new'], energy))} | "
                 f"{_summary(_ratios(e2e['old'], e2e['new'], time_))} |")
    n = sum(k in mods["new"] for k in mods["old"])
    lines.append(f"| module samples, repeat-check shapes (`repeat_s64_*.jsonl`) | {n} | "
                 f"{_summary(_ratios(mods['old'], mods['new'], energy))} | "
                 f"{_summary(_ratios(mods['old'], mods['new'], time_))} |")
    graph = {v: {k: r for k, r in c.items() if r["mode"] == "graph"} for v, c in coll.items()}
    per_gpu = lambda r: r["energy_j_per_gpu"][0]  # noqa: E731
    for a, b, what in (("old1", "new1", "after against before"),
                       ("old1", "old2", "before, pass 2 against pass 1 (the noise)")):
        lines.append(f"| collectives in a graph, one rank, {what} | {len(graph[a])} | "
                     f"{_summary(_ratios(graph[a], graph[b], per_gpu))} | "
                     f"{_summary(_ratios(graph[a], graph[b], time_))} |")
    probe = {v: json.loads((DIR / f"probe_s64_{v}.json").read_text())["ranks"][0]
             for v in ("old", "new")}
    for name in ("gemm_8192_bf16", "copy_1gib"):
        o, w = probe["old"][name], probe["new"][name]
        lines.append(f"| probe {name} | 1 | {100 * (w['power_w'] / o['power_w'] - 1):+.2f} % "
                     f"(power) | {100 * (w['per_call_s'] / o['per_call_s'] - 1):+.2f} % |")
    lines += ["", "Collectives at a world of one: `calibrate collectives` under `torchrun "
              "--nproc-per-node 1` fails before and after alike (piep's `Dist` starts no "
              "process group for one rank), so call 65 starts a one-rank NCCL group itself; "
              "eager calls at one rank are launch-bound and vary between passes by tens of "
              "per cent (`collectives_s65_*.jsonl`), so only the captured calls are compared.",
              ""]
    return "\n".join(lines)


def main() -> None:
    text = report()
    print(text)
    if "--write" in sys.argv[1:]:
        write_text(DIR / "README.md", text)


if __name__ == "__main__":
    main()
