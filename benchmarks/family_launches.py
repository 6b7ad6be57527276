"""Launches a layer, tree against transformers: the operators transformers' generate()
dispatches per decoder layer of every priced family (a kernel census on the CPU, where
`piep.sampling.census` counts top-level aten operators), beside the kernel launches the
tree prices for the same layers.

    python benchmarks/family_launches.py --run     # the census, on this CPU (minutes;
                                                   # torch and transformers), into DATA
    python benchmarks/family_launches.py --run --gpu OUT.jsonl   # on a GPU: CUDA kernels
    python benchmarks/family_launches.py           # the table, from DATA
    python benchmarks/family_launches.py --write   # ... into reports/launches.md

Each family runs the small decoder its family test builds (`tests/_families.py`: SMALL
and the family's OWN_KEYS), batch 2, prompt 16, 4 new tokens, random weights. The
census's layers are the model's third and fourth (count at 4 layers minus at 2, halved);
the tree's launches are read over the same two layers. Operators that launch no kernel
on a GPU (views, reshapes, `to` and `contiguous` where nothing moves) are left out, and
`linear` counts as its one GEMM, so a count stands near the kernels a GPU would launch.
On a GPU the census counts CUDA kernels (`GPU_DATA`, an H100 with the H200 image's torch
and transformers: the kernels are the H200's), which the tree's launches stand for without
a baseline. On the CPU, Llama's own difference is the baseline: a family whose difference stands far from it
(`OFF`, launches a layer) runs operators the tree does not price, or prices launches its
code does not make. An eager engine's decode steps wait on their host, which issues every
launch: a miscount of a dozen a layer moves a small model's decode time by tens of per cent.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from piep.core.artifacts import read_jsonl, write_text  # noqa: E402
from piep.core.config import Parallel, Workload  # noqa: E402
from piep.core.families import FAMILIES, PRICED  # noqa: E402
from _families import small  # noqa: E402  (tests/_families.py)

DATA = ROOT / "benchmarks" / "data" / "family_census_cpu.jsonl"
VL_DATA = ROOT / "benchmarks" / "data" / "vl_census_cpu.jsonl"
GPU_DATA = sorted((ROOT / "calibration" / "h100" / "families").glob("census_families_s*.jsonl"))
REPORT = ROOT / "reports" / "launches.md"
WORKLOAD = Workload(batch=2, prompt_len=16, gen_len=5)
LAYERS = (2, 4)
OFF = 5.0
# operators that move no data on a GPU (or only where a layout must change: counted out)
NO_KERNEL = {"aten::view", "aten::reshape", "aten::transpose", "aten::slice", "aten::alias",
             "aten::unsqueeze", "aten::expand", "aten::t", "aten::split", "aten::chunk",
             "aten::select", "aten::as_strided", "aten::permute", "aten::squeeze",
             "aten::unbind", "aten::detach", "aten::split_with_sizes", "aten::_unsafe_view",
             "aten::narrow", "aten::expand_as", "aten::flatten", "aten::view_as",
             "aten::lift_fresh", "aten::to", "aten::contiguous", "aten::dropout"}
# (MLA's tiny shape is not one transformers' DeepSeek attention accepts: its kv heads)
SKIP = ("deepseek_v2", "deepseek_v3")


def families() -> list[str]:
    """The families the census builds as themselves (a VL text decoder's own model is
    censused beside its stand-in by vl_text_ab.py: `vl_section`)."""
    return [t for t in PRICED if not FAMILIES[t].remote_code and not FAMILIES[t].runs_as
            and t not in SKIP]


def run(out: Path, device: str) -> None:
    """The census of every family, on `device`, into `out`."""
    import torch

    from piep.sampling.census import census
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for model_type in families():
        try:
            rec = census(small(model_type), "hf-eager", WORKLOAD, torch.device(device),
                         layers=LAYERS)
        except Exception as exc:  # (one family's failure leaves the others' counts)
            print(f"{model_type}: failed: {exc!r}"[:300], flush=True)
            continue
        lines.append(json.dumps({k: rec[k] for k in ("model", "engine", "batch",
                                                      "prompt_len", "gen_len", "layers",
                                                      "unit")}
                                | {p: {"per_layer_by_name": rec[p]["per_layer_by_name"]}
                                   for p in ("prefill", "decode_step")}))
        print(f"{model_type}: censused", flush=True)
    import transformers
    lines.insert(0, json.dumps({"torch": torch.__version__,
                                "transformers": transformers.__version__}))
    write_text(out, "\n".join(lines) + "\n")


def kernels(by_name: dict[str, float]) -> float:
    return sum(n for name, n in by_name.items() if name not in NO_KERNEL)


def tree_launches(model_type: str) -> tuple[float, float]:
    """The tree's launches a layer over the census's layers: (prefill, a decode step)."""
    from piep.core.layout import validate
    from piep.core.gpus import load_gpu
    from piep.tree import build_tree

    def total(n: int) -> dict[str, float]:
        dep = validate(small(model_type).first_layers(n), Parallel(), WORKLOAD,
                       load_gpu("h200"), engine="hf-eager", check_memory=False)
        out = {"prefill": 0.0, "decode": 0.0}
        for path, mult, leaf in build_tree(dep).leaves():
            if "/layer" in path:
                out[leaf.phase] += mult * leaf.launches
        return out
    a, b = total(LAYERS[0]), total(LAYERS[1])
    span = LAYERS[1] - LAYERS[0]
    return ((b["prefill"] - a["prefill"]) / span,
            (b["decode"] - a["decode"]) / span / (WORKLOAD.gen_len - 1))


def gpu_counts() -> dict[str, tuple[float, float]]:
    """family -> the GPU census's kernels a layer (prefill, a decode step)."""
    out = {}
    for path in GPU_DATA:
        for rec in list(read_jsonl(path))[1:]:
            out[rec["model"]] = tuple(sum(rec[p]["per_layer_by_name"].values())
                                      for p in ("prefill", "decode_step"))
    return out


def rows() -> tuple[dict, list[dict]]:
    records = list(read_jsonl(DATA))
    versions, out, gpu = records[0], [], gpu_counts()
    for rec in records[1:]:
        pre, dec = tree_launches(rec["model"])
        out.append({"family": rec["model"], "tree_prefill": pre, "tree_decode": dec,
                    "census_prefill": kernels(rec["prefill"]["per_layer_by_name"]),
                    "census_decode": kernels(rec["decode_step"]["per_layer_by_name"]),
                    "gpu": gpu.get(rec["model"])})
    base = next(r for r in out if r["family"] == "llama")
    for r in out:
        for p in ("prefill", "decode"):
            r[f"off_{p}"] = (r[f"census_{p}"] - r[f"tree_{p}"]) - (
                base[f"census_{p}"] - base[f"tree_{p}"])
    return versions, out


def report() -> str:
    versions, out = rows()
    # (on a GPU, generate()'s decode step of a mixture of experts runs batched_mm: its
    # CPU census, grouped_mm in both phases, stands for its prefill only)
    far = [r["family"] for r in out if (abs(r["gpu"][1] - r["tree_decode"]) > OFF
                                         if r["gpu"] else abs(r["off_decode"]) > OFF)]
    lines = ["# Launches a layer: the tree against transformers' operators", "",
             f"Made by `python benchmarks/family_launches.py --write` from "
             f"`{DATA.relative_to(ROOT)}` (`--run`: a CPU census of generate(), torch "
             f"{versions['torch']}, transformers {versions['transformers']}; the script's "
             "docstring says how to read it). Counts a layer, over the census's third and "
             "fourth layers; `off`: the family's CPU census minus tree, less Llama's; the GPU's "
             "kernels (" + ", ".join(f"`{p.relative_to(ROOT)}`" for p in GPU_DATA)
             + ": an H100, the H200 image's torch and transformers) stand beside the tree "
             "without a baseline.", "",
             "| family | prefill: tree / census | off | a decode step: tree / census | off |"
             + (" GPU kernels: prefill / decode step | decode step: GPU - tree |"
                if GPU_DATA else ""),
             "|---|---|---|---|---|" + ("---|---|" if GPU_DATA else "")]
    for r in out:
        gpu = "" if not GPU_DATA else " - | - |" if r["gpu"] is None else \
            f" {r['gpu'][0]:.1f} / {r['gpu'][1]:.1f} | {r['gpu'][1] - r['tree_decode']:+.1f} |"
        lines.append(f"| {r['family']} | {r['tree_prefill']:.1f} / {r['census_prefill']:.1f} | "
                     f"{r['off_prefill']:+.1f} | {r['tree_decode']:.1f} / "
                     f"{r['census_decode']:.1f} | {r['off_decode']:+.1f} |{gpu}")
    lines += ["", f"A decode step off by more than {OFF:g} launches a layer (GPU kernels where "
              "censused, else the CPU's operators): "
              + (", ".join(f"`{f}`" for f in far) if far else "none") + "."]
    return "\n".join(lines + vl_section()) + "\n"


def vl_section() -> list[str]:
    """The vision-language text decoders: each VL model's own census beside the family's
    it runs as (`VL_DATA`), a decode step's operators, and the tree's difference."""
    records = list(read_jsonl(VL_DATA))
    census = {(r["model_type"], r["kind"]): r for r in records[1:]}
    lines = ["", "## Vision-language text decoders", "",
             f"From `{VL_DATA.relative_to(ROOT)}` (`python benchmarks/vl_text_ab.py --census`: "
             f"torch {records[0]['torch']}, transformers {records[0]['transformers']}, on the "
             "CPU; tiny configs `tests/data/vl/`): a decode step of each VL model's own "
             "generate() on text prompts beside the family's it is built as (`runs_as`), "
             "operators a layer and outside the layers. The tree prices the layer's "
             "difference; outside the layers (M-RoPE's positions, the VL forward's own "
             "steps) it prices the stand-in's.", "",
             "| model_type | runs as | a layer: own / stand-in | tree's difference | "
             "outside the layers: own / stand-in |", "|---|---|---|---|---|"]
    for t in sorted({t for t, _ in census}):
        own, stand = census[(t, "own")], census[(t, "runs_as")]
        runs_as = FAMILIES[t].runs_as
        tree = tree_launches(t)[1] - tree_launches(runs_as)[1]
        lines.append(f"| {t} | {runs_as} | "
                     f"{kernels(own['decode_step_per_layer_by_name']):.0f} / "
                     f"{kernels(stand['decode_step_per_layer_by_name']):.0f} | {tree:+.0f} | "
                     f"{kernels(own['decode_step_outside_by_name']):.0f} / "
                     f"{kernels(stand['decode_step_outside_by_name']):.0f} |")
    return lines


def main() -> int:
    if "--run" in sys.argv:
        gpu = "--gpu" in sys.argv
        out = Path(sys.argv[sys.argv.index("--gpu") + 1]) if gpu else DATA
        run(out, "cuda" if gpu else "cpu")
        print(f"wrote {out}")
        return 0
    text = report()
    if "--write" in sys.argv:
        write_text(REPORT, text)
        print(f"wrote {REPORT.relative_to(ROOT)}")
        return 0
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
