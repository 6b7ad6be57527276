"""Decode power, measured against priced, by how busy piep's tree keeps the GPU: hf-eager
runs on one GPU (the engines' dense runs, the new families' and the mixtures of experts'),
each priced at the host probe it measured. A run's gap share is the share of its priced
time the GPU spends in launch gaps (idle energy / launch-gap power / time). Where dense
runs keep the GPU busy (low gap share) their decode power is priced within a few per
cent; a mixture of experts' decode steps that run `experts_batched` are priced short.

    python benchmarks/decode_power_by_busy_share.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep import api  # noqa: E402
from piep.core.artifacts import read_jsonl  # noqa: E402
from piep.core.errors import PiepError  # noqa: E402

H200 = ROOT / "calibration" / "h200"
SETS = (("dense", sorted((H200 / "engines" / "hf-eager" / "raw").glob("*.jsonl")), None),
        ("families", sorted((H200 / "families" / "raw").glob("*eager*.jsonl")),
         H200 / "families" / "configs"),
        ("moe", sorted((H200 / "moe" / "raw").glob("*eager*.jsonl")), H200 / "moe" / "configs"))


def rows():
    """(set, model, batch, gap share, decode power: priced W, measured W)."""
    gap_w = api.resolve(api.scenario("llama-2-7b", engine="hf-eager")) \
        .cost_model.host.launch_gap_w  # (the engine profile's, one for every run)
    for name, paths, configs in SETS:
        for path in paths:
            for r in read_jsonl(path):
                if r.get("schema") != "piep.measurement" or not r.get("energy_j") \
                        or r.get("tp", 1) != 1 or not (r.get("decode") or {}).get("time_s"):
                    continue
                probe = (r.get("host_probe") or {}).get("launch_add_s")
                model = str(configs / f"{r['model']}.json") if configs else r["model"]
                try:
                    doc = api.predict(model, engine="hf-eager", batch=r["batch"],
                                      prompt_len=r["prompt_len"], gen_len=r["gen_len"],
                                      hosts=False,
                                      host_probe_us=None if probe is None else 1e6 * probe)
                except PiepError:  # (a shape of an unshipped config: not priced here)
                    continue
                share = doc["breakdown_j"]["idle"] / gap_w / doc["time_s"]
                d, m = doc["decode"], r["decode"]
                yield (name, r["model"], r["batch"], share, d["energy_j"] / d["time_s"],
                       m["energy_j"] / m["time_s"])


def main() -> int:
    out = list(rows())
    print("| runs | gap share | decode power, measured / priced - 1: median | runs |")
    print("|---|---|---|---|")
    for label, pick in (("dense and new families", lambda r: r[0] != "moe"),
                        ("mixtures of experts but Llama 4", lambda r: r[0] == "moe"
                         and "llama4" not in r[1]),
                        ("Llama 4 (no experts_batched)", lambda r: "llama4" in r[1])):
        for lo, hi in ((0.0, 0.2), (0.2, 0.5), (0.5, 1.01)):
            errs = [r[5] / r[4] - 1 for r in out if pick(r) and lo <= r[3] < hi]
            if errs:
                print(f"| {label} | {lo:.1f}-{min(hi, 1):.1f} | "
                      f"{100 * statistics.median(errs):+.1f} % | {len(errs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
