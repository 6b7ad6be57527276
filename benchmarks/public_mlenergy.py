"""Public measurements of vLLM (The ML.ENERGY Benchmark v3, ML.ENERGY Leaderboard data):
what piep answers of them today, row by row, with each row's translation written down.

    python benchmarks/public_mlenergy.py --import LEADERBOARD_GIT_DIR  # (re)make the rows
    python benchmarks/public_mlenergy.py            # the table and the summary
    python benchmarks/public_mlenergy.py --write    # reports/public.md
    python benchmarks/public_mlenergy.py --blind    # new models' rows, by the shipped profiles
    python benchmarks/public_mlenergy.py --fit      # steady.jsonl and the shipped vllm profiles

The rows (`calibration/public/mlenergy-v3/rows.jsonl`) are supplied, not piep's own: the
per-configuration summaries the ML.ENERGY Leaderboard publishes
(`public/data/models/*.json` of github.com/ml-energy/leaderboard at the commit in
SOURCE.md), kept for the language models whose configs piep has, of the checkpoint's
precision (bf16; gpt-oss's MXFP4; DeepSeek's FP8), and prices (dense, and mixtures of
experts: expert parallel rows as tp = ep = their GPUs). Each is a vLLM server (0.11.x;
async scheduling, chunked prefill at 8,192 tokens, CUDA graphs) held at `max_num_seqs`
concurrent requests of a task: `lm-arena-chat` (chat) or `gpqa` (reasoning, long
outputs).

Engine `vllm` (piep.serving.steady): a row is the steady state of a server held at
`max_num_seqs` (fewer where the paged KV cache holds fewer: the concurrency is predicted,
not read from the row), its prompts of PROMPT_LEN[task] tokens and its output lengths the
row's published histogram; priced on H100 by transfer and scaled by a profile fitted on
these rows (`--fit` writes the shipped one, fitted on all of them). Scored: leave one
model out (Llama 3.1 and 3.3 70B, one architecture, leave together), the profile refitted
on the other models' rows; its 90 % band of energy from held-out ratios only (nested: the
band used on a model comes from folds that never saw it).

The first-contact translation (the batch route): a row is a batch of `max_num_seqs`
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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep import api  # noqa: E402
from piep.core.artifacts import read_jsonl, write_text  # noqa: E402
from piep.core.errors import PiepError  # noqa: E402

DATA = ROOT / "calibration" / "public" / "mlenergy-v3"
ROWS = DATA / "rows.jsonl"
REPORT = ROOT / "reports" / "public.md"
CENSUS = ROOT / "model_trees" / "public"
# a leaderboard model whose config.json is another's (Llama 3.3 70B: Llama 3.1 70B's
# architecture, the same config.json but for its name)
SAME_CONFIG = {"meta-llama/Llama-3.3-70B-Instruct": "Llama-3.1-70B-Instruct",
               "Qwen/Qwen3-30B-A3B-Instruct-2507": "Qwen3-30B-A3B",
               "Qwen/Qwen3-30B-A3B-Thinking-2507": "Qwen3-30B-A3B",
               "Qwen/Qwen3-235B-A22B-Instruct-2507": "Qwen3-235B-A22B-Thinking-2507",
               # (the text model of the Instruct checkpoint, whose small vision encoder
               # vLLM also loads: the census's config is Llama4TextConfig's defaults)
               "meta-llama/Llama-4-Scout-17B-16E-Instruct": "Llama-4-Scout-17B-16E",
               # (DeepSeek-V3's architecture, its FP8 checkpoint's config: post-trained
               # releases of it, DeepseekV3ForCausalLM with V3's sizes)
               "deepseek-ai/DeepSeek-V3.1": "DeepSeek-V3",
               "deepseek-ai/DeepSeek-R1-0528": "DeepSeek-V3"}


class _Configs(dict):
    """The leaderboard's model -> the census config piep reads (named as the model's
    repository), for every model that has one."""

    def __missing__(self, model_id: str) -> Path:
        path = CENSUS / f"{SAME_CONFIG.get(model_id, model_id.split('/')[-1])}.json"
        if not path.exists():
            raise KeyError(model_id)
        return path


MODELS = _Configs()


def _priced(model_id: str) -> bool:
    """Whether the census has the model's config and piep prices it."""
    from piep.core.errors import PiepError
    from piep.core.models import load_model
    try:
        return load_model(str(MODELS[model_id])).unpriced is None
    except (KeyError, PiepError):
        return False
TASKS = ("lm-arena-chat", "gpqa")
# the weights kept (the leaderboard's label -> the census config's quantization, which
# prices them): bf16; gpt-oss's MXFP4 experts; DeepSeek's FP8 (128 x 128 block scales)
PRECISIONS = {"bfloat16": None, "mxfp4": "MXFP4", "fp8": "FP8"}


def _precision_of(model_id: str) -> str | None:
    """The quantization of a model's census config, in words' first token (None: bf16)."""
    from piep.core.models import load_model
    quant = load_model(str(MODELS[model_id])).quantization
    return quant.split()[0] if quant else None
# assumed prompt tokens per task (unpublished): a chat turn, a GPQA question with choices
PROMPT_LEN = {"lm-arena-chat": 256, "gpqa": 512}
ENGINES = ("piep-graph", "hf-static")
KEEP = ("model_id", "task", "gpu_model", "max_num_seqs", "avg_batch_size", "avg_output_len",
        "avg_power_watts", "energy_per_request_joules", "energy_per_token_joules",
        "output_throughput_tokens_per_sec", "median_itl_ms", "p90_itl_ms", "num_gpus")


def layout_of(parallelization: dict, gpus: int) -> dict[str, int] | None:
    """A row's layout in piep's terms, or None for one piep does not price. The benchmark
    starts vLLM with `--tensor-parallel-size` = its GPUs (data parallel only where a
    model's config names data-parallel-size), so a row the leaderboard labels expert
    parallel over every GPU at tensor parallel 1 ran `--enable-expert-parallel` at tp = its
    GPUs: attention sharded over the tp ranks, the experts whole, ep = tp of them a rank."""
    tp, ep, dp = (parallelization.get(k, 1) for k in
                  ("tensor_parallel", "expert_parallel", "data_parallel"))
    if dp == 1 and tp == gpus and ep == 1:
        return {"tp": gpus}
    if dp == 1 and tp == 1 and ep == gpus > 1:
        return {"tp": gpus, "ep": gpus}
    return None


def import_rows(repo: Path) -> None:
    """Keep the rows of TASKS of every model of PRECISIONS with a census config that piep
    prices (dense, or a mixture of experts it models) from the leaderboard's git folder
    (HEAD), at the layouts `layout_of` translates (not data parallel), with their source file;
    write rows.jsonl and SOURCE.md."""
    def show(path: str) -> str:
        return subprocess.run(["git", "--git-dir", str(repo), "show", f"HEAD:{path}"],
                              capture_output=True, text=True, check=True).stdout
    commit = subprocess.run(["git", "--git-dir", str(repo), "rev-parse", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    listed = subprocess.run(["git", "--git-dir", str(repo), "ls-tree", "--name-only", "HEAD",
                             "public/data/models/"], capture_output=True, text=True,
                            check=True).stdout.split()
    rows = []
    for path in sorted(listed):
        task = Path(path).stem.rpartition("__")[2]
        if task not in TASKS:
            continue
        doc = json.loads(show(path))
        if doc.get("weight_precision") not in PRECISIONS or not _priced(doc["model_id"]) \
                or _precision_of(doc["model_id"]) != PRECISIONS[doc["weight_precision"]]:
            continue  # (a checkpoint piep has no config of, or one it would misprice)
        for c in doc["configurations"]:
            layout = layout_of(c["parallelization"], c["num_gpus"])
            if layout is None:
                continue  # (data parallel: a layout piep does not model yet)
            hist = c.get("output_length_distribution") or {}
            rows.append({"model_id": doc["model_id"], "task": task,
                         **{k: c[k] for k in KEEP if k in c}, **layout,
                         "weight_precision": doc["weight_precision"],
                         "output_len_bins": hist.get("bins"),
                         "output_len_counts": hist.get("counts"), "source": path})
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
        "Layouts: the benchmark starts vLLM with `--tensor-parallel-size` = its GPUs; rows "
        "the leaderboard labels expert parallel over every GPU at tensor parallel 1 ran "
        "with `enable-expert-parallel: true` in their `monolithic.config.yaml`, and are kept "
        "as tp = ep = their GPUs (`layout_of` in the script).", "",
        f"{len(rows)} rows: {', '.join(sorted({r['model_id'] for r in rows}))}; tasks "
        f"{', '.join(TASKS)}.", ""]))


def priced(row: dict, engine: str, prompt_len: int) -> dict:
    """piep's batch-route answer for a row (see the module doc), or why it refused."""
    batch, gen = row["max_num_seqs"], max(1, round(row["avg_output_len"]))
    try:
        doc = api.predict(str(MODELS[row["model_id"]]), gpu=row["gpu_model"].lower(),
                          allow_uncalibrated=True, tp=row["tp"], ep=row.get("ep", 1),
                          engine=engine, batch=batch,
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
        return "long outputs (gpqa)" if r["gpu_model"] == "H100" else \
            f"{r['gpu_model']} long outputs (gpqa)"
    return f"{r['gpu_model']} {layout_name(r)} chat"


def layout_name(r: dict) -> str:
    return f"tp{r['tp']}" + (f" ep{r['ep']}" if r.get("ep", 1) > 1 else "")


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


PROFILES = ROOT / "calibration" / "public" / "engines" / "vllm"
GPUS = ("H100", "B200")  # the leaderboard's GPUs (each needs a spec sheet: H200 transfers)


def steady_record(row: dict) -> dict:
    """A row as a piep.steady_measurement record (the translation the module doc writes
    down): the server at the row's `max_num_seqs` and 8,192 batched tokens, its prompts of
    PROMPT_LEN[task] tokens, its output lengths' histogram, what it measured."""
    return {"schema": "piep.steady_measurement", "schema_version": 1,
            "model": str(MODELS[row["model_id"]].relative_to(ROOT)), "gpu": row["gpu_model"].lower(),
            "tp": row["tp"], **({"ep": row["ep"]} if row.get("ep", 1) > 1 else {}),
            "engine": {"name": "vllm", "version": "0.11.1"},
            "server": {"max_num_seqs": row["max_num_seqs"], "max_num_batched_tokens": 8192},
            "workload": {"prompt_len": PROMPT_LEN[row["task"]],
                         "output_len_bins": row["output_len_bins"],
                         "output_len_counts": row["output_len_counts"]},
            "requests": int(sum(row["output_len_counts"])),
            "output_tokens_per_s": row["output_throughput_tokens_per_sec"],
            "j_per_output_token": row["energy_per_token_joules"],
            "power_w": row["avg_power_watts"], "running_requests": row["avg_batch_size"],
            "slice": slice_of(row), "source": f"{row['model_id']} {row['task']} "
                                              f"({row['source']})"}


def steady_cases(rows: list[dict], *, prompt_scale: float = 1.0, window: bool = False):
    """Each row's steady state priced by the reference pricing (`SteadyCase`), in order,
    through its record; `window`: the benchmark's own finite window instead of an endless
    steady state."""
    from piep.fit.steady import cases_from_records
    return cases_from_records([steady_record(r) for r in rows], window=window,
                              prompt_scale=prompt_scale)


def by_model(case) -> str:
    return case.labels["model"]


def held_out_scores(cases, gpu: str) -> list[dict]:
    """Per case: its leave-one-model-out ratios (energy, throughput, power) and whether
    the nested band covers it."""
    from piep.fit import steady as fs
    outcomes = fs.held_out(cases, by_model, name="vllm", gpu=gpu)
    out = []
    for key in sorted({by_model(c) for c in cases}):
        others = [c for c in cases if by_model(c) != key]
        inner = fs.held_out(others, by_model, name="vllm", gpu=gpu)
        band = fs.interval(fs.energy_ratios(others, inner))
        for c, o in zip(cases, outcomes):
            if by_model(c) != key:
                continue
            ratio = o["j_per_output_token"] / c.j_per_token
            out.append({"case": c, "energy": ratio,
                        "throughput": o["output_tokens_per_s"] / c.tokens_per_s,
                        "power": o["power_w"] / c.labels["power_w"],
                        "covered": band[0] <= 1 / ratio <= band[1], "band": band})
    order = {id(c): i for i, c in enumerate(cases)}
    return sorted(out, key=lambda s: order[id(s["case"])])


STEADY = DATA / "steady.jsonl"  # the rows as steady-state records: what the fit reads


def fitted_rows(gpus=GPUS) -> list[dict]:
    """The rows the profiles are fitted on and scored by leaving one model out: those of
    `gpus` without expert parallelism, of bf16 weights. The expert-parallel rows stay out
    of the fit, priced by it blind (`--blind`): one profile for both moved the other rows'
    held-out error (this filter dropped: H100 all rows 10.2 -> 14.0 %, session 42), and
    piep has run no expert-parallel layout of its own to say which term differs; gpt-oss's
    MXFP4 rows, whose kernels piep has not sampled, likewise."""
    return [r for r in read_jsonl(ROWS) if r["gpu_model"] in gpus and r.get("ep", 1) == 1
            and r["weight_precision"] == "bfloat16"]
BLIND = DATA / "blind.jsonl"    # rows of models imported after the profiles were fitted


def _fitted_key(rec: dict) -> tuple:
    """A steady record's model, GPU and layout: what a profile fitted on it has seen."""
    return rec["model"], rec["gpu"].lower(), rec["tp"], rec.get("ep", 1)


def blind_predictions() -> list[dict]:
    """The rows of models, or of layouts of a model, the shipped profiles were not fitted
    on (not in steady.jsonl), priced by those profiles as committed (`git log` names the
    commit; `piep_commit`, the code's), before any refit."""
    from piep.fit.steady import cases_from_records
    from piep.serving.steady import load_profile
    fitted = {_fitted_key(json.loads(line)) for line in STEADY.read_text().splitlines()}
    seen = {_row_key(r) for r in read_jsonl(BLIND)}
    new = [r for r in read_jsonl(ROWS) if r["gpu_model"] in GPUS
           and _fitted_key(steady_record(r)) not in fitted and _row_key(r) not in seen]

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True,
                              cwd=ROOT).stdout.strip()
    commit, code = git("log", "-1", "--format=%h", "--", str(PROFILES)), git(
        "rev-parse", "--short=12", "HEAD")
    out = []
    for r in new:
        case = cases_from_records([steady_record(r)])[0]
        o = case.parts.outcome(load_profile("vllm", r["gpu_model"].lower())[0])
        out.append({"model_id": r["model_id"], "task": r["task"], "gpu": r["gpu_model"],
                    "tp": r["tp"], **({"ep": r["ep"]} if r.get("ep", 1) > 1 else {}),
                    "max_num_seqs": r["max_num_seqs"], "profiles_commit": commit,
                    "piep_commit": code,
                    "predicted": {"j_per_output_token": o["j_per_output_token"],
                                  "output_tokens_per_s": o["output_tokens_per_s"],
                                  "running": o["running"]},
                    "measured": {"j_per_output_token": r["energy_per_token_joules"],
                                 "output_tokens_per_s": r["output_throughput_tokens_per_sec"],
                                 "running": r["avg_batch_size"]}})
    return out


def _row_key(r: dict) -> tuple:
    """A row (of rows.jsonl or blind.jsonl): its model, task, GPU, layout, max_num_seqs
    and what it measured (a configuration the benchmark ran twice has two rows)."""
    measured = r["measured"]["j_per_output_token"] if "measured" in r \
        else r["energy_per_token_joules"]
    return (r["model_id"], r["task"], r.get("gpu") or r["gpu_model"], r["tp"], r.get("ep", 1),
            r["max_num_seqs"], round(measured, 12))


def now_ratios(blind: list[dict]) -> dict[tuple, tuple[float, float, bool]]:
    """The blind rows the profiles were never fitted on, priced by today's code and the
    shipped profiles: energy ratio piep / measured, time per token measured / piep, and
    whether the answer's 90 % band of energy holds the measurement, by `_row_key` (a
    change made after the blind prediction shows here; the blind column keeps what was
    committed)."""
    from piep.serving.steady import answer_band, load_profile
    fitted = {_row_key(r) for r in fitted_rows()}
    source = {_row_key(r): r for r in read_jsonl(ROWS)}
    out = {}
    for gpu in GPUS:
        mine = [source[k] for k in (_row_key(r) for r in blind)
                if k not in fitted and k in source and k[2] == gpu]
        profile = load_profile("vllm", gpu.lower())[0]
        for r, case in zip(mine, steady_cases(mine)):
            o = case.parts.outcome(profile)
            ratio = o["j_per_output_token"] / case.j_per_token
            band, _ = answer_band(profile, case.labels["flags"])  # (as its answer's)
            out[_row_key(r)] = (ratio, case.tokens_per_s / o["output_tokens_per_s"],
                                band[0] <= 1 / ratio <= band[1])
    return out


def blind_lines() -> list[str]:
    """The blind predictions' errors, per model and GPU (from blind.jsonl), and today's
    errors on those never fitted since."""
    rows = read_jsonl(BLIND)
    if not rows:
        return []
    now = now_ratios(rows)
    lines = ["## Blind: models imported after the profiles were fitted", "",
             "Priced by the profiles as committed (the commit named; fitted on the other "
             "models' rows only) before they were refitted with these rows (`--blind` wrote "
             f"{BLIND.relative_to(ROOT)}). The last column: the rows no profile has been "
             "fitted on since, priced by today's code and profiles (\"-\": refitted since, "
             "so no longer held out):", "",
             "| model | GPU | layouts | profiles at | rows | energy error | energy ratio | "
             "throughput ratio | energy error now |", "|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["model_id"], r["gpu"], r["profiles_commit"]), []).append(r)
    for (model, gpu, commit), mine in sorted(groups.items()):
        e = [r["predicted"]["j_per_output_token"] / r["measured"]["j_per_output_token"]
             for r in mine]
        t = [r["predicted"]["output_tokens_per_s"] / r["measured"]["output_tokens_per_s"]
             for r in mine]
        tps = ", ".join(sorted({layout_name(r) for r in mine}))
        today = [now[_row_key(r)][0] for r in mine if _row_key(r) in now]
        lines.append(f"| {model} | {gpu} | {tps} | {commit} | {len(mine)} | "
                     f"{100 * statistics.median(abs(x - 1) for x in e):.1f} % | "
                     f"{statistics.median(e):.2f} | {statistics.median(t):.2f} | "
                     + (f"{100 * statistics.median(abs(x - 1) for x in today):.1f} % |"
                        if len(today) == len(mine) else "- |"))
    for name, mine, flag in (
            ("Expert parallel (vLLM's `--enable-expert-parallel`, tp = ep: the rows with "
             "ep)", [r for r in rows if r.get("ep", 1) > 1], "unmeasured_expert_parallel"),
            ("MXFP4 experts (gpt-oss, run as stored by vLLM's fused MoE)",
             [r for r in rows if "gpt-oss" in r["model_id"]], "mxfp4_unsampled")):
        if not mine:
            continue
        err = [abs(r["predicted"]["j_per_output_token"] / r["measured"]["j_per_output_token"]
                   - 1) for r in mine]
        per_token = [abs(r["measured"]["output_tokens_per_s"]
                         / r["predicted"]["output_tokens_per_s"] - 1) for r in mine]
        today = [now[_row_key(r)] for r in mine if _row_key(r) in now]
        lines += ["", f"{name}: {len(mine)} rows, {len({r['model_id'] for r in mine})} "
                  f"models, energy error {100 * statistics.mean(err):.1f} % mean absolute "
                  f"({100 * statistics.median(err):.1f} % median), time per token "
                  f"{100 * statistics.mean(per_token):.1f} %; today "
                  f"{100 * statistics.mean(abs(e - 1) for e, _, _ in today):.1f} % energy, "
                  f"{100 * statistics.mean(abs(t - 1) for _, t, _ in today):.1f} % time per "
                  f"token ({len(today)} rows), their answers' 90 % bands holding "
                  f"{sum(c for *_, c in today)} (the bands widened by the flag below, a "
                  f"choice made after these rows). They "
                  f"stay out of the profiles' fit (`fitted_rows` in the script), so these "
                  f"stand as held out; such answers carry `{flag}`."]
    return lines + [""]


def carried_lines(rows: list[dict], source_gpu: str) -> list[str]:
    """The rows of another GPU priced with `source_gpu`'s profile fitted on all its rows
    (held out: a GPU the profile never saw), and with no profile at all."""
    from piep.fit import steady as fs
    from piep.serving.steady import SteadyProfile
    cases = steady_cases(rows)
    source = fitted_rows((source_gpu,))
    carried, _ = fs.fit(steady_cases(source), name="vllm", gpu=source_gpu.lower())
    lines = []
    for label, profile in ((f"the {source_gpu} profile carried over", carried),
                           ("no profile (piep's transfer alone)",
                            SteadyProfile.neutral(source_gpu))):
        e = [c.parts.outcome(profile)["j_per_output_token"] / c.j_per_token for c in cases]
        t = [c.parts.outcome(profile)["output_tokens_per_s"] / c.tokens_per_s for c in cases]
        lines.append(f"* {label}: energy error {100 * statistics.median(abs(x - 1) for x in e):.1f} "
                     f"% (median; ratio {statistics.median(e):.2f}), throughput ratio "
                     f"{statistics.median(t):.2f}")
    return lines


def steady_lines(rows: list[dict], gpu: str) -> list[str]:
    from piep.fit import steady as fs
    cases = steady_cases(rows)
    profile, info = fs.fit(cases, name="vllm", gpu=gpu)
    scores = held_out_scores(cases, gpu)
    models = len({by_model(c) for c in cases})
    lines = [f"## Engine vllm on {gpu.upper()} (a server held full, profile fitted on these "
             "rows)", "",
             f"Fitted on all {info['cases']} rows: time scales "
             + ", ".join(f"{k} x{v:.2f}" for k, v in profile.time_scale.items())
             + f", host {1e3 * profile.step_host_s:.2f} ms per iteration, power "
             f"x{profile.power_scale:.2f} (rms log error {info['rms_log']:.3f}; at a bound: "
             f"{', '.join(info['at_bounds']) or 'none'}). Every row is admitted (the paged "
             "KV cache's concurrency is predicted). The prior on each log scale (sd "
             f"{fs.PRIOR_LOG_SD:g}; the collectives' {fs.PRIOR_LOG_SD_COMM:g}) was chosen by "
             + ("these same held-out errors (sd among 0.25, 0.5, 1, 2 and none; then the "
                "collectives' loosened, which on the first 77 rows took tp4 from 15.3 % to "
                "13.1 %), so they are somewhat optimistic." if gpu == "h100"
                else "the H100 rows' held-out errors, not these.")
             + (" A mixture of experts' experts are priced as vLLM's fused MoE kernel "
                "(GEMMs reading the experts reached, rows padded to its block), a choice "
                "made after these rows: priced by the models of torch's grouped GEMM "
                "(commits 87d397d to 497a391; `python benchmarks/public_mlenergy.py` at "
                "497a391 gives H100 all rows 13.8 %), Qwen3-30B-A3B's rows were priced far "
                "above their energy; the rows by model are below." if gpu == "h100"
                else ""), "",
             "Leave one model out (each model's rows priced by a profile fitted on the "
             "others'):", "",
             "| slice | rows | energy error | energy ratio | throughput error | power ratio "
             "| 90 % band covers |", "|---|---|---|---|---|---|---|"]
    for name in sorted({s["case"].labels["slice"] for s in scores}):
        mine = [s for s in scores if s["case"].labels["slice"] == name]
        e = [s["energy"] for s in mine]
        lines.append(f"| {name} | {len(mine)} | "
                     f"{100 * statistics.median(abs(x - 1) for x in e):.1f} % | "
                     f"{statistics.median(e):.2f} | "
                     f"{100 * statistics.median(abs(s['throughput'] - 1) for s in mine):.1f} % | "
                     f"{statistics.median(s['power'] for s in mine):.2f} | "
                     f"{sum(s['covered'] for s in mine)}/{len(mine)} |")
    covered = sum(s["covered"] for s in scores)
    energy_mape = statistics.mean(abs(s["energy"] - 1) for s in scores)
    time_mape = statistics.mean(abs(1 / s["throughput"] - 1) for s in scores)
    lines += ["", f"| {gpu.upper()} all rows (mean absolute) | {len(scores)} rows, {models} "
              f"models | energy {100 * energy_mape:.1f} % | time per token "
              f"{100 * time_mape:.1f} % | | | |"]
    lines += ["", "| model | rows | energy error (mean absolute) | energy ratio (median) |",
              "|---|---|---|---|"]
    for model in sorted({by_model(s["case"]) for s in scores}):
        e = [s["energy"] for s in scores if by_model(s["case"]) == model]
        lines.append(f"| {model} | {len(e)} | {100 * statistics.mean(abs(x - 1) for x in e):.1f}"
                     f" % | {statistics.median(e):.2f} |")
    lines += ["", f"Nested 90 % bands cover {covered} of {len(scores)} held-out rows "
              f"({100 * covered / len(scores):.0f} %).", "",
              "Concurrency where the KV cache, not `max_num_seqs`, limits it (predicted / "
              "measured running requests):", ""]
    for c in cases:
        measured = c.labels["measured_running"]
        if measured < 0.97 * c.labels["max_num_seqs"] or c.parts.running < c.labels["max_num_seqs"]:
            lines.append(f"* {c.labels['model']} {c.labels['slice']} max_num_seqs="
                         f"{c.labels['max_num_seqs']}: {c.parts.running:.0f} / {measured:.0f}")
    lines += ["", "Sensitivity (median held-out energy ratio, all rows):", ""]
    for label, kwargs in (("prompts x0.5", {"prompt_scale": 0.5}), ("prompts x1", None),
                          ("prompts x2", {"prompt_scale": 2.0}),
                          ("the benchmark's finite window (requests sent at once)",
                           {"window": True})):
        if kwargs is None:  # the translation above: its held-out ratios, already scored
            ratio = np.array([s["energy"] for s in scores])
        else:
            other = steady_cases(rows, **kwargs)
            ratio = fs.energy_ratios(other, fs.held_out(other, by_model, name="vllm", gpu=gpu))
        lines.append(f"* {label}: {statistics.median(ratio):.2f} (median error "
                     f"{100 * statistics.median(abs(ratio - 1)):.1f} %)")
    return lines + [""]


def main() -> int:
    import os
    os.chdir(ROOT)  # (the records name their model configs from the repository's root)
    if "--blind" in sys.argv:  # (appended: earlier blind rows keep their profiles' commit)
        rows = read_jsonl(BLIND) + blind_predictions()
        write_text(BLIND, "".join(json.dumps(r) + "\n" for r in rows))
        print(f"wrote {BLIND.relative_to(ROOT)} ({len(rows)} rows)")
        return 0
    if "--fit" in sys.argv:
        from piep.core.artifacts import write_json
        from piep.fit.steady import fit_records
        records = [steady_record(r) for r in fitted_rows()]
        write_text(STEADY, "".join(json.dumps(r) + "\n" for r in records))
        print(f"wrote {STEADY.relative_to(ROOT)}")
        for gpu in GPUS:
            profile, info = fit_records(records, engine="vllm", gpu=gpu.lower(),
                                        source=f"{STEADY.relative_to(ROOT)} (supplied: "
                                               f"ML.ENERGY Benchmark v3, vLLM 0.11.1)")
            path = PROFILES / f"{gpu.lower()}.json"
            write_json(path, "piep.steady_profile", 1,
                       {"profile": profile.to_json(), "fit": info,
                        "data": {"records": str(STEADY.relative_to(ROOT)), "gpu": gpu,
                                 "command": "python benchmarks/public_mlenergy.py --fit"}})
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    if "--import" in sys.argv:
        import_rows(Path(sys.argv[sys.argv.index("--import") + 1]))
        print(f"wrote {ROWS.relative_to(ROOT)}")
        return 0
    rows = fitted_rows(("H100",))
    lines = ["# Public measurements: vLLM on H100 and B200 (ML.ENERGY Benchmark v3)", "",
             "Made by `python benchmarks/public_mlenergy.py --write` from "
             f"`{ROWS.relative_to(ROOT)}` (supplied: {DATA.relative_to(ROOT)}/SOURCE.md). "
             ""
             "The first sections are piep's vllm engine (`piep steady`) on each GPU; the "
             "last two are H100's first contact (no vLLM engine, no H100 calibration), kept "
             "for comparison, "
             "through the batch route the module doc of the script writes down (a batch of "
             "`max_num_seqs` requests, prompts of "
             + ", ".join(f"{v} tokens ({k})" for k, v in PROMPT_LEN.items())
             + ", priced on H100 by spec-sheet transfer from H200), on which nothing was "
             "fitted. Errors are medians over the rows of a slice; ratios are piep / "
             "measured (energy per request, throughput, board power of all the row's GPUs).", ""]
    lines += blind_lines()
    lines += steady_lines(rows, "h100")
    b200 = fitted_rows(("B200",))
    lines += steady_lines(b200, "b200")
    lines += ["The B200 rows priced with the H100 profile fitted on every H100 row (held out: "
              "a GPU that profile never saw):", "", *carried_lines(b200, "H100"), "",
              "Until session 45 the spec-sheet transfer scaled every kernel's power by the "
              "TDP ratio; since, where bytes bound a kernel, it keeps the energy above idle "
              "it drew on the H200 (`piep.predict.transfer`, chosen on piep's own H100 runs, "
              "reports/h100.md, before these figures were computed with it). Before "
              "(`python benchmarks/public_mlenergy.py` at commit aed2e41): the H100 profile "
              "carried over 28.8 % (ratio 0.73), no profile 15.8 % (ratio 0.90); the H100 "
              "rows' leave-one-model-out 10.2 % (now above), the B200's 19.4 %.", "",
              "The steady state describes the B200 runs less well (in-sample rms above): their "
              "long outputs run slower than the board's bandwidth allows (Qwen3-8B at 8 "
              "requests: 32 ms an iteration and 294 W on B200, 9.8 ms on H100), and where the "
              "KV cache should limit their concurrency they ran nearly all `max_num_seqs`; "
              "read the B200 profile's band, not its point.", ""]
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
