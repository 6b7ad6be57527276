"""Public measurements of vLLM (The ML.ENERGY Benchmark v3, ML.ENERGY Leaderboard data):
what piep answers of them today, row by row, with each row's translation written down.

    python benchmarks/public_mlenergy.py --import LEADERBOARD_GIT_DIR  # (re)make the rows
    python benchmarks/public_mlenergy.py            # the table and the summary
    python benchmarks/public_mlenergy.py --write    # reports/public.md

The rows (`calibration/public/mlenergy-v3/rows.jsonl`) are supplied, not piep's own: the
per-configuration summaries the ML.ENERGY Leaderboard publishes
(`public/data/models/*.json` of github.com/ml-energy/leaderboard at the commit in
SOURCE.md), kept for the dense bf16 language models whose configs piep has. Each is a
vLLM server (0.11.x; async scheduling, chunked prefill at 8,192 tokens, CUDA graphs)
held at `max_num_seqs` concurrent requests of a task: `lm-arena-chat` (chat) or `gpqa`
(reasoning, long outputs).

The translation (no vLLM engine in piep yet): a row is a batch of `max_num_seqs`
requests of the row's mean output length, prompts of PROMPT_LEN[task] tokens (the
leaderboard publishes no prompt lengths: an assumption, its sensitivity printed at half
and twice), priced by piep's batch route on the row's GPU (a spec-sheet transfer from
H200: `--allow-uncalibrated`) and layout, for each engine of ENGINES. Compared: energy per
request (the batch's energy over its requests) and output throughput (the batch's tokens
over its time); rows whose batch piep's memory check refuses are counted as refused.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep import api  # noqa: E402
from piep.artifacts import read_jsonl, write_text  # noqa: E402
from piep.errors import PiepError  # noqa: E402

DATA = ROOT / "calibration" / "public" / "mlenergy-v3"
ROWS = DATA / "rows.jsonl"
REPORT = ROOT / "reports" / "public.md"
CENSUS = ROOT / "benchmarks" / "data" / "model_census"
# the leaderboard's model -> the config piep reads (Llama 3.3 70B: Llama 3.1 70B's
# architecture, the same config.json but for its name)
MODELS = {"meta-llama/Llama-3.1-8B-Instruct": CENSUS / "Llama-3.1-8B-Instruct.json",
          "meta-llama/Llama-3.1-70B-Instruct": CENSUS / "Llama-3.1-70B-Instruct.json",
          "meta-llama/Llama-3.3-70B-Instruct": CENSUS / "Llama-3.1-70B-Instruct.json",
          "Qwen/Qwen3-8B": CENSUS / "Qwen3-8B.json", "Qwen/Qwen3-14B": CENSUS / "Qwen3-14B.json",
          "Qwen/Qwen3-32B": CENSUS / "Qwen3-32B.json"}
TASKS = ("lm-arena-chat", "gpqa")
# assumed prompt tokens per task (unpublished): a chat turn, a GPQA question with choices
PROMPT_LEN = {"lm-arena-chat": 256, "gpqa": 512}
ENGINES = ("piep-graph", "hf-static")
KEEP = ("model_id", "task", "gpu_model", "max_num_seqs", "avg_batch_size", "avg_output_len",
        "avg_power_watts", "energy_per_request_joules", "energy_per_token_joules",
        "output_throughput_tokens_per_sec", "median_itl_ms", "p90_itl_ms", "num_gpus")


def import_rows(repo: Path) -> None:
    """Keep MODELS' rows of TASKS from the leaderboard's git folder (HEAD), with their
    source file; write rows.jsonl and SOURCE.md."""
    def show(path: str) -> str:
        return subprocess.run(["git", "--git-dir", str(repo), "show", f"HEAD:{path}"],
                              capture_output=True, text=True, check=True).stdout
    commit = subprocess.run(["git", "--git-dir", str(repo), "rev-parse", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    rows = []
    for model in MODELS:
        for task in TASKS:
            path = f"public/data/models/{model.replace('/', '__')}__{task}.json"
            try:
                doc = json.loads(show(path))
            except subprocess.CalledProcessError:
                continue
            for c in doc["configurations"]:
                rows.append({"model_id": model, "task": task, **{k: c[k] for k in KEEP if k in c},
                             "tp": c["parallelization"]["tensor_parallel"],
                             "weight_precision": doc["weight_precision"], "source": path})
    write_text(ROWS, "".join(json.dumps(r) + "\n" for r in rows))
    write_text(DATA / "SOURCE.md", "\n".join([
        "# ML.ENERGY Benchmark v3 rows (supplied, not piep's own)", "",
        f"Read from github.com/ml-energy/leaderboard at {commit}, files "
        "`public/data/models/<org>__<model>__<task>.json` (each row names its file), by "
        "`python benchmarks/public_mlenergy.py --import <its git dir>`. Measured by the "
        "ML.ENERGY team with vLLM on H100 and B200 GPUs (The ML.ENERGY Benchmark, "
        "github.com/ml-energy/benchmark: `configs/vllm/<task>/<model>/<gpu>/` hold each "
        "run's vLLM settings); cite: Chung et al., The ML.ENERGY Benchmark, NeurIPS "
        "Datasets and Benchmarks 2025.", "",
        f"{len(rows)} rows: {', '.join(sorted({r['model_id'] for r in rows}))}; tasks "
        f"{', '.join(TASKS)}.", ""]))


def priced(row: dict, engine: str, prompt_len: int) -> dict:
    """piep's batch-route answer for a row (see the module doc), or why it refused."""
    batch, gen = row["max_num_seqs"], max(1, round(row["avg_output_len"]))
    try:
        doc = api.predict(str(MODELS[row["model_id"]]), gpu=row["gpu_model"].lower(),
                          allow_uncalibrated=True, tp=row["tp"], engine=engine, batch=batch,
                          prompt_len=prompt_len, gen_len=gen)
    except PiepError as exc:
        return {"refused": str(exc).splitlines()[0]}
    return {"energy_per_request_j": doc["energy_j"] / batch,
            "throughput_tok_s": batch * gen / doc["time_s"],
            "power_w": doc["energy_j"] / doc["time_s"]}  # all the row's GPUs, as published


def score(rows: list[dict], engine: str, scale: float = 1.0) -> list[dict]:
    out = []
    for r in rows:
        p = priced(r, engine, max(1, round(PROMPT_LEN[r["task"]] * scale)))
        out.append({**r, **p})
    return out


def slice_of(r: dict) -> str:
    if r["task"] == "gpqa":
        return "long outputs (gpqa)"
    return f"{r['gpu_model']} tp{r['tp']} chat"


def summary(scored: list[dict]) -> dict[str, dict]:
    """Per slice: rows, refused, median |energy error|, median piep / measured (energy per
    request), median |throughput error|, median power ratio."""
    out = {}
    for name in sorted({slice_of(r) for r in scored}):
        mine = [r for r in scored if slice_of(r) == name]
        ok = [r for r in mine if "refused" not in r]
        ratio = [r["energy_per_request_j"] / r["energy_per_request_joules"] for r in ok]
        thr = [r["throughput_tok_s"] / r["output_throughput_tokens_per_sec"] for r in ok]
        power = [r["power_w"] / r["avg_power_watts"] for r in ok]
        out[name] = {"rows": len(mine), "refused": len(mine) - len(ok),
                     **({"energy_err": statistics.median(abs(x - 1) for x in ratio),
                         "energy_ratio": statistics.median(ratio),
                         "throughput_err": statistics.median(abs(x - 1) for x in thr),
                         "power_ratio": statistics.median(power)} if ok else {})}
    return out


def _line(name: str, s: dict) -> str:
    if "energy_err" not in s:
        return f"| {name} | {s['rows']} | {s['refused']} | - | - | - | - |"
    return (f"| {name} | {s['rows']} | {s['refused']} | {100 * s['energy_err']:.1f} % | "
            f"{s['energy_ratio']:.2f} | {100 * s['throughput_err']:.1f} % | "
            f"{s['power_ratio']:.2f} |")


def main() -> int:
    if "--import" in sys.argv:
        import_rows(Path(sys.argv[sys.argv.index("--import") + 1]))
        print(f"wrote {ROWS.relative_to(ROOT)}")
        return 0
    rows = [r for r in read_jsonl(ROWS) if r["gpu_model"] == "H100"]
    lines = ["# Public measurements: vLLM on H100 (ML.ENERGY Benchmark v3)", "",
             "Made by `python benchmarks/public_mlenergy.py --write` from "
             f"`{ROWS.relative_to(ROOT)}` (supplied: {DATA.relative_to(ROOT)}/SOURCE.md). "
             "piep has no vLLM engine and no H100 calibration yet: this is its first contact, "
             "through the batch route the module doc of the script writes down (a batch of "
             "`max_num_seqs` requests, prompts of "
             + ", ".join(f"{v} tokens ({k})" for k, v in PROMPT_LEN.items())
             + ", priced on H100 by spec-sheet transfer from H200). Nothing was fitted on "
             "these rows. Errors are medians over the rows of a slice; ratios are piep / "
             "measured (energy per request, throughput, board power of all the row's GPUs).", ""]
    for engine in ENGINES:
        scored = score(rows, engine)
        lines += [f"## Engine {engine}", "",
                  "| slice | rows | refused | energy error | energy ratio | throughput error "
                  "| power ratio |", "|---|---|---|---|---|---|---|"]
        lines += [_line(k, s) for k, s in summary(scored).items()]
        refused = [r for r in scored if "refused" in r]
        if refused:  # the memory check sizes a static batch; vLLM pages its KV cache
            lines += ["", f"Refused: {len(refused)} rows, e.g. {refused[0]['model_id']} "
                      f"max_num_seqs={refused[0]['max_num_seqs']} ({refused[0]['task']}): "
                      f"{refused[0]['refused'].split(': ', 1)[-1]}"]
        lines += ["", "Prompt-length sensitivity (energy ratio, median over all rows "
                  "answered):", ""]
        for scale in (0.5, 1.0, 2.0):
            s = [r for r in score(rows, engine, scale) if "refused" not in r]
            ratio = statistics.median(r["energy_per_request_j"] / r["energy_per_request_joules"]
                                      for r in s)
            lines.append(f"* prompts x{scale:g}: {ratio:.2f} ({len(s)} rows)")
        lines.append("")
    text = "\n".join(lines)
    if "--write" in sys.argv:
        write_text(REPORT, text)
        print(f"wrote {REPORT.relative_to(ROOT)}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
