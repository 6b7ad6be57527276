"""Where a mixture of experts' layers spend their GPU time, kernel by kernel, against the
tree: the kernel census of transformers' generate() on the MoE shapes
(calibration/h200/moe/census_moe_s*.jsonl and calibration/h100/moe/census_moe_s*.jsonl,
`python -m piep.sampling.census`) beside the tree's launches and its per-module prices.

    python benchmarks/moe_census.py        # prints the section reports/moe.md carries

A model censused on an H200 is read there; one censused only on an H100 (no H200 came
those sessions) is read on the H100, with the H200 image's torch and transformers: its
kernels and their counts are the H200's, their durations the H100's. Compute-bound
kernels run alike on both cards (same SMs and clocks: the dense GEMMs' row shows it),
memory-bound ones about 1.43x longer on the H100 (HBM 3.35 against 4.8 TB/s). So a family
whose H100 census time stands far above the tree's H200 price times that ratio is priced
short on the H200 too.
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep import api  # noqa: E402
from piep.core.artifacts import read_jsonl  # noqa: E402

H100 = ROOT / "calibration" / "h100" / "moe"
H200 = ROOT / "calibration" / "h200" / "moe"
CENSUS = {"H200": sorted(H200.glob("census_moe_s*.jsonl")),
          "H100": sorted(H100.glob("census_moe_s*.jsonl"))}
AB = sorted(H100.glob("moe_kernels_ab_s*.jsonl")) + sorted(H200.glob("moe_kernels_ab_s*.jsonl"))
TABLE_AB = sorted(H100.glob("experts_table_ab_s*.jsonl")) + \
    sorted(H200.glob("experts_table_ab_s*.jsonl"))
CONFIGS = ROOT / "calibration" / "h200" / "moe" / "configs"
# kernel families: (name, the kernel-name pattern, the tree's leaves by name or kind)
FAMILIES = (
    ("experts' grouped GEMMs", r"GroupProblemShape|prepare_grouped_gemm",
     ("experts_gate_up", "experts_down")),
    ("masks of the routed rows (masked_fill)", r"masked_fill", ("moe_mask",)),
    ("row gathers and scatters", r"gather_kernel|index_elementwise|index_put",
     ("moe_permute", "moe_unpermute")),
    ("dense GEMMs (projections, router)", r"nvjet|gemv|splitKreduce|cutlass|sm90_xmma",
     ("q_proj", "k_proj", "v_proj", "o_proj", "router", "qkv_proj", "gate_proj", "up_proj",
      "down_proj", "shared_gate_proj", "shared_up_proj", "shared_down_proj",
      "shared_expert_gate")),
    ("attention", r"sdpa|flash|fmha", ("attention",)),
    ("routing: softmax, top-k, sort, histogram, offsets",
     r"softmax|TopK|bitonicSort|radix_sort|Scan|Histogram|Memset|arange|fill_reverse|"
     r"FillFunctor|compare_scalar|clamp|div_floor", ("routing",)),
)
OTHER = "elementwise and copies (norms, rope, activation, residuals, combine)"


def family(kernel: str) -> str:
    """The family of a census kernel name (the first pattern it matches)."""
    for name, pattern, _ in FAMILIES:
        if re.search(pattern, kernel):
            return name
    return OTHER


def tree_family(path: str, kind: str) -> str:
    leaf = path.rsplit("/", 1)[-1]
    for name, _, leaves in FAMILIES:
        if leaf in leaves or kind in leaves:
            return name
    return OTHER


# a decoder layer of the tree that runs the experts (not a dense layer among them: the
# census's layers are its third and fourth, sparse in every census'd model)
SPARSE_LAYER = re.compile(r"/layer(?!_dense)[^/]*/")


def census_scenario(rec: dict):
    """The census's model and workload, resolved as `piep predict` resolves them."""
    from piep.predict.resolve import resolve
    return resolve(api.scenario(str(CONFIGS / f"{rec['model']}.json"), engine=rec["engine"],
                                batch=rec["batch"], prompt_len=rec["prompt_len"],
                                gen_len=rec["gen_len"]))


def sparse_layers(dep) -> int:
    """The decoder layers that run the experts (not the dense ones among them)."""
    return dep.model.num_layers - len(dep.model.dense_layers)


def layer_prices(rec: dict) -> tuple[dict[str, float], int, int]:
    """The tree's H200 prefill time per sparse decoder layer by family (us; prefill only: a
    module's price holds its launch gaps, and eager decode steps wait on their host, which
    the census's GPU time leaves out), its launches per layer in prefill and per decode
    step, at the census's workload (a model of several layer kinds: their mean)."""
    from piep.tree.builder import build_tree
    res = census_scenario(rec)
    dep = res.deployment
    layers = sparse_layers(dep)
    out: dict[str, float] = {}
    for m in api.predict(res, hosts=False)["modules"]:
        if m["phase"] == "prefill" and SPARSE_LAYER.search(m["path"]):
            f = tree_family(m["path"], m["kind"])
            out[f] = out.get(f, 0.0) + 1e6 * m["time_s"] / layers
    launches = {"prefill": 0.0, "decode": 0.0}
    for path, mult, leaf in build_tree(dep).leaves():
        if SPARSE_LAYER.search(path):
            launches[leaf.phase] += mult * leaf.launches / layers
    return (out, round(launches["prefill"]),
            round(launches["decode"] / max(rec["gen_len"] - 1, 1)))


def decode_kernels(rec: dict) -> tuple[float, float]:
    """The tree's H200 kernel time per sparse decoder layer in one decode step (us; its
    launch gaps left out, as the census's GPU time leaves them), and the part of it in the
    decode-step experts (`experts_batched`), at the census's workload."""
    import numpy as np
    from piep.predict.table import KIND_NAMES, TableBuilder
    res = census_scenario(rec)
    table = TableBuilder().table([res.deployment], detail=True)
    prices = res.cost_model.price(table)
    sparse = np.array([p.startswith("decode/") and bool(SPARSE_LAYER.search(p))
                       for p in table.path])
    per_call = 1e6 * prices.time_s * table.count / (
        sparse_layers(res.deployment) * max(rec["gen_len"] - 1, 1))
    experts = KIND_NAMES[table.kind_id] == "experts_batched"
    return float(per_call[sparse].sum()), float(per_call[sparse & experts].sum())


def decode_lines(cards: dict[str, list[dict]]) -> list[str]:
    """GPU time a layer in a decode step, the census's beside the tree's kernels."""
    rows = [(card, r, decode_kernels(r)) for card, rs in cards.items() for r in rs
            if r["decode_step"].get("per_layer_us")]
    if not rows:
        return []
    lines = ["", "GPU time a layer in a decode step (us): the census's beside the tree's "
             "kernels on the H200 (their launch gaps left out: eager decode steps also wait "
             "on the host, which the census's GPU time does not hold), of which the "
             "decode-step experts (`experts_batched`, gathered weights and a batched GEMV); "
             "the census's row gathers (`vectorized_gather_kernel`) alone beside them.", "",
             "| model | card | census | tree | census / tree | tree's experts_batched | "
             "census's gathers |", "|---|---|---|---|---|---|---|"]
    for card, r, (tree, experts) in rows:
        got = r["decode_step"]["per_layer_us"]
        gathers = sum(us for k, us in r["decode_step"]["per_layer_us_by_name"].items()
                      if "gather_kernel" in k)
        lines.append(f"| {r['model']} | {card} | {got:.0f} | {tree:.0f} | x{got / tree:.2f} | "
                     f"{experts:.0f} | {gathers:.0f} |")
    ratios = [r["decode_step"]["per_layer_us"] / tree for _, r, (tree, _) in rows]
    return lines + ["", "The tree prices the decode-step experts at their samples' time x the "
                    "table A/B's ratio (below) at the deployment's experts on a rank "
                    "(`piep.predict.module_models.BATCHED_TABLE_TIME`): the module sampler "
                    "gathers from a table of 8 experts, generate() from all of them. The "
                    "census, measured apart from that A/B (another card, another call), "
                    f"stands x{min(ratios):.2f}-{max(ratios):.2f} the tree's kernels; "
                    "`python benchmarks/moe_census.py` at commit dee1405, before the ratio, "
                    "gives x1.00-1.21."]


def table_ab_lines() -> list[str]:
    """What the decode-step experts' table A/B measured (experts_table_ab_s*.jsonl,
    `python benchmarks/moe_kernels_ab.py --decode`): per model, the gather + bmm from
    every expert over the same from the module sampler's table of 8."""
    out = []
    for path in TABLE_AB:
        rows = list(read_jsonl(path))
        by_model: dict[tuple[int, str], list[float]] = {}
        for r in rows:
            by_model.setdefault((r["experts"], r["model"]), []).append(r["all_over_8"])
        card = "an H200" if path.parent == H200 else "an H100"
        cells = [f"{model} ({experts}) x{min(v):.2f}-{max(v):.2f}"
                 for (experts, model), v in sorted(by_model.items())]
        *most, last = sorted({r["batch"] for r in rows})
        batches = f"{', '.join(map(str, most))} and {last}" if most else str(last)
        out += ["", f"Each pair on one card, {card} (`{path.relative_to(ROOT)}`, `python "
                "benchmarks/moe_kernels_ab.py --decode`): generate()'s decode-step experts "
                f"(gather, then bmm) at batch {batches}, gathered from every expert of the "
                "model (each token's experts distinct) over gathered from the module "
                "sampler's table of 8, per model (its experts): " + "; ".join(cells) + "."]
    return out


def ab_line() -> list[str]:
    """What call 80's A/Bs measured, from their file (moe_kernels_ab_s*.jsonl)."""
    rows = [r for path in AB for r in read_jsonl(path)]
    if not rows:
        return []
    out = []
    for path in AB:
        rows = list(read_jsonl(path))
        layout = [r["v2_over_v1"] for r in rows if r["kind"] != "moe_mask"]
        mask = [r["mask_over_gather"] for r in rows if r["kind"] == "moe_mask"]
        card = "an H200" if path.parent == H200 else "an H100"
        out += ["", f"Each pair on one card, {card} (`{path.relative_to(ROOT)}`, `python "
                f"benchmarks/moe_kernels_ab.py`), over {len(mask)} tensors of the MoE designs' "
                f"prefills: the masks' masked_fill runs x{min(mask):.2f}-{max(mask):.2f} "
                f"(median x{statistics.median(mask):.2f}) the row gather of the same bytes; "
                "the experts' weights in transformers' transposed layout run the grouped GEMM "
                f"in x{min(layout):.2f}-{max(layout):.2f} the other layout's time."]
    return out


def census_records() -> dict[str, list[dict]]:
    """Per card, the census records of the models it holds the latest census of: each
    model's H200 census where it has one, else its H100 census."""
    out: dict[str, dict[str, dict]] = {card: {} for card in CENSUS}
    for card, paths in CENSUS.items():
        for path in paths:
            for rec in read_jsonl(path):
                out[card][rec["model"]] = {**rec, "file": path}
    for model in out["H200"]:
        out["H100"].pop(model, None)
    return {card: list(recs.values()) for card, recs in out.items() if recs}


def census_lines() -> list[str]:
    """The section: launches per layer, the prefill's GPU time per layer by family, a
    decode step's per layer, and what the A/Bs measured."""
    cards = census_records()
    if not cards:
        return []
    recs = [r for rs in cards.values() for r in rs]
    priced = {r["model"]: layer_prices(r) for r in recs}
    files = sorted({r["file"] for r in recs})
    lines = ["## Where a layer's time goes: a kernel census", "",
             "Made by `python benchmarks/moe_census.py` (its docstring says how to read it) "
             "from " + ", ".join(f"`{p.relative_to(ROOT)}`" for p in files) + ": "
             "transformers' generate() under the torch profiler, hf-eager, batch "
             f"{recs[0]['batch']}, prompt {recs[0]['prompt_len']}; each model on an H200 "
             "where it was censused there, else on an H100 with the H200 image's torch and "
             "transformers (the kernels and their counts are the H200's, their durations "
             "the H100's).", "",
             "| model | card | launches a layer, prefill: tree / census | a decode step: "
             "tree / census |", "|---|---|---|---|"]
    for card, rs in cards.items():
        for r in rs:
            _, pre, dec = priced[r["model"]]
            lines.append(f"| {r['model']} | {card} | {pre} / {r['prefill']['per_layer']:.0f}"
                         f" | {dec} / {r['decode_step']['per_layer']:.0f} |")
    for card, rs in cards.items():
        lines += ["", f"GPU time a layer in prefill (us): the census's on the {card} beside "
                  "the tree's price on the H200, and their ratio (" + (
                      "about 1 where the tree prices a family right)." if card == "H200"
                      else "about 1 for compute-bound kernels, 1.43 for memory-bound ones "
                      "where the tree prices them right)."), "",
                  "| family | " + " | ".join(f"{r['model']} {card} / H200 tree" for r in rs)
                  + " |", "|---|" + "---|" * len(rs)]
        for name in [n for n, _, _ in FAMILIES] + [OTHER, "all"]:
            cells = []
            for r in rs:
                tree = priced[r["model"]][0]
                got = sum(us for k, us in r["prefill"]["per_layer_us_by_name"].items()
                          if name in ("all", family(k)))
                want = sum(tree.values()) if name == "all" else tree.get(name, 0.0)
                ratio = f" (x{got / want:.2f})" if want > 0 and got > 0 else ""
                cells.append(f"{got:.0f} / {want:.0f}{ratio}")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + decode_lines(cards) + table_ab_lines() + ab_line()


def main() -> int:
    print("\n".join(census_lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
