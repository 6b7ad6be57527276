"""A/B: a vision-language model's generate() on text prompts against the family piep runs
in its place (`Family.runs_as`: Qwen2.5-VL's text decoder as Qwen2's CausalLM, Qwen3-VL's
as Qwen3's, GLM-4.1V's as GLM-4's), on one GPU.

piep prices a VL model's text decoder as the layer of its stand-in family, the same module
for module (tests/core/test_families.py); what the stand-in does not run is the VL model's
own per-step work outside the layers: M-RoPE's three position sections (the rotary
embedding over (3, batch, positions), split and recomposed), the position ids its
generate() computes each step from `rope_deltas`. Under an eager engine a decode step
waits on every launch, so that work may show. Each pair runs in one process on one card:
random bf16 weights, the same prompt tokens, greedy decoding of exactly GEN tokens
(`--workloads`), A and B alternated `--reps` times after one warm-up each; energy on NVML's
counter through the sampler's meter (piep.sampling.runner.RankMeter, read-only), time on
the host after a synchronize. On a CPU (tests) it times only.

    python benchmarks/vl_text_ab.py --configs calibration/h100/families/vl/configs/*.json \
        --workloads 1x512x64,8x512x64 --out vl_text_ab.jsonl
    python benchmarks/vl_text_ab.py --configs ... --predict h100 --out predictions.jsonl
    python benchmarks/vl_text_ab.py --configs tests/data/vl/*.json --census \
        --out benchmarks/data/vl_census_cpu.jsonl   # the launches of each, on the CPU
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from piep.core.config import TEXT_TYPES, ModelSpec  # noqa: E402
from piep.core.families import FAMILIES  # noqa: E402
from piep.sampling.hf import _hf_config  # noqa: E402

OUTER = {text: outer for outer, text in TEXT_TYPES.items()}


def builds(config: dict, name: str):
    """(spec, the VL model's config, the stand-in's config) of a VL config.json."""
    from transformers import AutoConfig
    spec = ModelSpec.from_hf_config(config, name=name)
    stand_in = FAMILIES[spec.model_type].runs_as
    if not stand_in:
        raise SystemExit(f"{name}: model_type {spec.model_type!r} runs as itself (no "
                         f"vision-language text decoder)")
    own = AutoConfig.for_model(OUTER[spec.model_type],
                               **{k: v for k, v in config.items() if k != "model_type"})
    return spec, own, _hf_config(spec)


def make(kind: str, cfg, device, dtype):
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText
    auto = AutoModelForImageTextToText if kind == "own" else AutoModelForCausalLM
    torch.manual_seed(0)
    with torch.device(device):
        model = auto.from_config(cfg, dtype=dtype)
    return model.eval()


def generate_call(model, ids, gen: int, device):
    mask = torch.ones_like(ids)

    def call() -> None:
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=gen,
                                 min_new_tokens=gen, do_sample=False, pad_token_id=0)
        assert out.shape[1] == ids.shape[1] + gen
        if device.type == "cuda":
            torch.cuda.synchronize()
    return call


def one_model(path: Path, loads, reps: int, device, dtype, emit) -> None:
    """Both models of one VL config, built once, at each (batch, prompt, gen) of `loads`."""
    from piep.sampling.runner import RankMeter
    config = json.loads(path.read_text())
    spec, own_cfg, stand_cfg = builds(config, path.stem)
    meter = RankMeter(device)  # (NVML on a GPU; timing only on a CPU)
    idle = meter.idle(1.0)
    models = {"own": (make("own", own_cfg, device, dtype), own_cfg),
              "runs_as": (make("runs_as", stand_cfg, device, dtype), stand_cfg)}
    for batch, prompt, gen in loads:
        ids = torch.randint(1, spec.vocab_size - 1, (batch, prompt),
                            generator=torch.Generator().manual_seed(1)).to(device)
        calls = {kind: generate_call(m, ids, gen, device) for kind, (m, _) in models.items()}
        runs: dict[str, list[tuple[float, float | None]]] = {k: [] for k in calls}
        for call in calls.values():  # (warm-up)
            call()
        for _ in range(reps):
            for kind, call in calls.items():
                w = meter.window(call, lambda: None)
                runs[kind].append((w["duration_s"], w["energy_j"]))
        for kind, (model, cfg) in models.items():
            times = [t for t, _ in runs[kind]]
            joules = [e for _, e in runs[kind] if e is not None]
            emit({"config": _shown(path), "model_type": spec.model_type, "kind": kind,
                  "built": type(model).__name__, "config_type": cfg.model_type,
                  "batch": batch, "prompt_len": prompt, "gen_len": gen,
                  "time_s": times, "energy_j": joules or None,
                  "time_median_s": statistics.median(times),
                  "energy_median_j": statistics.median(joules) if joules else None,
                  "idle_power_w": idle, "device": torch.cuda.get_device_name(device)
                  if device.type == "cuda" else "cpu", "torch": torch.__version__})
        own, stand = (statistics.median(t for t, _ in runs[k]) for k in ("own", "runs_as"))
        print(f"{path.stem} b{batch} p{prompt} g{gen}: own {own:.3f} s, as "
              f"{FAMILIES[spec.model_type].runs_as} {stand:.3f} s: x{own / stand:.3f}",
              flush=True)
    del models
    if device.type == "cuda":
        torch.cuda.empty_cache()


def cut(config: dict, n: int) -> dict:
    """A VL config.json with its decoder cut to `n` layers."""
    text = "text_config" if isinstance(config.get("text_config"), dict) else None
    if text is None:
        return {**config, "num_hidden_layers": n}
    return {**config, text: {**config[text], "num_hidden_layers": n}}


def census(path: Path, device, gen: int = 5) -> list[dict]:
    """The operators (CPU) or kernels (GPU) a decode step of each model launches, per
    decoder layer and outside the layers (`piep.sampling.census`'s split: at 2 and 4
    layers), batch 2, prompt 16."""
    from piep.sampling.census import _launched, _per_step, split_counts
    config = json.loads(path.read_text())
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    ids = torch.randint(1, 200, (2, 16), generator=torch.Generator().manual_seed(1)).to(device)
    counts: dict[str, dict[int, Counter]] = {"own": {}, "runs_as": {}}
    for n in (2, 4):
        spec, own_cfg, stand_cfg = builds(cut(config, n), path.stem)
        for kind, cfg in (("own", own_cfg), ("runs_as", stand_cfg)):
            model = make(kind, cfg, device, dtype)
            first, whole = (generate_call(model, ids, g, device) for g in (1, gen))
            first(), whole()  # (warm-up)
            counts[kind][n] = _per_step(_launched(device, whole)[0],
                                        _launched(device, first)[0], gen - 1)
    out = []
    for kind, by_layers in counts.items():
        per_layer, outside = split_counts(by_layers)
        out.append({"config": _shown(path), "model_type": spec.model_type, "kind": kind,
                    "unit": "cuda_kernel" if device.type == "cuda" else "aten_op",
                    "decode_step_per_layer_by_name": dict(per_layer.most_common()),
                    "decode_step_outside_by_name": dict(outside.most_common())})
    return out


def _shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def predict(paths, loads, gpu: str, out: Path) -> None:
    """piep's hf-eager answers for each VL config as its own model_type prices it, before
    any run."""
    from piep import api
    from piep.core.artifacts import git_hash
    commit = git_hash() or "unknown"
    with out.open("w") as f:
        for path in paths:
            for batch, prompt, gen in loads:
                ans = api.predict(model=str(path), engine="hf-eager", gpu=gpu, batch=batch,
                                  prompt_len=prompt, gen_len=gen, allow_uncalibrated=True)
                f.write(json.dumps({"config": _shown(path), "gpu": gpu, "engine": "hf-eager",
                                    "batch": batch, "prompt_len": prompt, "gen_len": gen,
                                    "energy_j": ans["energy_j"], "time_s": ans["time_s"],
                                    "flags": ans["flags"], "commit": commit}) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="+", required=True, type=Path)
    ap.add_argument("--workloads", default="1x512x64,8x512x64",
                    help="BATCHxPROMPTxGEN, comma-separated")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--predict", metavar="GPU",
                    help="write piep's hf-eager answers on GPU (spec sheet) instead of running")
    ap.add_argument("--census", action="store_true",
                    help="count the operators (kernels on a GPU) a decode step launches, "
                         "per layer and outside the layers, instead of metering")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    loads = [tuple(int(v) for v in w.split("x")) for w in args.workloads.split(",")]
    if args.predict:
        predict(args.configs, loads, args.predict, args.out)
        return 0
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.census:
        import transformers
        rows = [{"torch": torch.__version__, "transformers": transformers.__version__}]
        rows += [r for path in args.configs for r in census(path, device)]
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return 0
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32

    def emit(rec: dict) -> None:  # one record, kept as soon as it is measured
        with args.out.open("a") as f:
            f.write(json.dumps(rec) + "\n")
    for path in args.configs:
        one_model(path, loads, args.reps, device, dtype, emit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
