"""Serving benchmarks of other engines, read as piep replays (`piep meter --serving-result`).

Two result files are read, in the formats their code writes (looked up in their sources):

* vLLM, `vllm bench serve --save-result --save-detailed` (vllm/benchmarks/serve.py): one
  JSON object per run (one per line with `--append-result`). Read: `model_id`,
  `request_rate` ("inf" or a number), `max_concurrency`, `duration` (s, first request
  sent to last token), and per request `input_lens`, `output_lens`, `ttfts` (s), `itls`
  (s, one list per request), `latencies` (s), `start_times` (s, the client's clock) and
  `errors`; `gpu_energy_j` where vLLM metered the GPUs itself. Without `--save-detailed`
  the per-request lists are dropped and the file cannot be read.
* SGLang, `python -m sglang.bench_serving --output-file F.jsonl --output-details`
  (sglang/bench_serving.py): one JSON line per run with `backend`, `dataset_name`,
  `request_rate`, `max_concurrency`, `duration`, and per request `input_lens`,
  `output_lens`, `ttfts`, `itls`, `errors`. It writes no send times: only a run at
  `--request-rate inf` (every request sent at once) gives its arrivals.

A request that failed (an error, or no output token) is left out, and counted. A run
under `max_concurrency` is not a stream of arrivals but a server held at that many
requests: it becomes a steady state (`steady_record`, piep.steady_measurement: its output
tokens per second and J per output token over the whole run, ramps included) that fits
`piep steady`'s profile (`piep train --engine vllm --steady-states`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from piep.core.config import size_problem
from piep.core.errors import ConfigError

PER_REQUEST = ("input_lens", "output_lens", "ttfts", "itls")
MAX_BOARD_W = 2000.0  # no GPU board draws more (the largest limits today: ~1,400 W)
DETAIL_FLAG = {"vllm": "--save-detailed", "sglang": "--output-details"}


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """The runs of a result file: one JSON object, or one per line."""
    from piep.core.artifacts import parse_json, parse_jsonl, read_text
    from piep.core.errors import ArtifactError
    text = read_text(path).strip()
    if not text:
        raise ConfigError(f"{path}: empty")
    try:
        # (their writers are Python's json: an infinite request rate is Infinity)
        doc = parse_json(text, str(path), constants=True)
        runs = doc if isinstance(doc, list) else [doc]
    except ArtifactError:  # one object per line
        runs = parse_jsonl(text, str(path), constants=True)
    if not all(isinstance(r, dict) for r in runs):
        raise ConfigError(f"{path}: a benchmark result is a JSON object per run")
    return runs


def result_format(run: dict[str, Any], where: str) -> str:
    """vllm or sglang, from the keys each writes."""
    if "model_id" in run or "endpoint_type" in run or "start_times" in run:
        return "vllm"
    if "dataset_name" in run or "total_output_tokens_retokenized" in run:
        return "sglang"
    raise ConfigError(f"{where}: neither a vLLM result (`vllm bench serve --save-result "
                      f"--save-detailed`: model_id, duration, input_lens, ...) nor an SGLang "
                      f"one (`sglang.bench_serving --output-file F --output-details`: "
                      f"dataset_name, duration, input_lens, ...)")


def _rate(value: Any) -> float:
    if value in (None, "inf", "Infinity"):
        return math.inf
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def requests_of(run: dict[str, Any], where: str) -> tuple[list[dict[str, Any]], int, str]:
    """(the served requests as a replay's rows, requests left out as failed, format)."""
    fmt = result_format(run, where)
    missing = [k for k in ("duration", *PER_REQUEST) if run.get(k) is None]
    if missing:
        raise ConfigError(f"{where}: {fmt} result without {', '.join(missing)}: run the "
                          f"benchmark with {DETAIL_FLAG[fmt]} (its per-request timings)")
    if run.get("max_concurrency") not in (None, 0):
        raise ConfigError(f"{where}: max_concurrency={run['max_concurrency']}: a server held "
                          f"at a concurrency is a steady state, not a stream of arrivals "
                          f"(piep meter makes it one with --gpu); for piep serve, run the "
                          f"benchmark without --max-concurrency")
    n = len(run["input_lens"])
    lists = {k: run[k] for k in PER_REQUEST}
    if run.get("start_times") is not None:
        lists["start_times"] = run["start_times"]
    elif math.isinf(_rate(run.get("request_rate"))):
        lists["start_times"] = [0.0] * n  # every request sent at once
    else:
        raise ConfigError(f"{where}: {fmt} result without start_times at request_rate="
                          f"{run.get('request_rate')}: its arrivals are unknown; "
                          + ("a vLLM that writes start_times (--save-detailed)" if fmt == "vllm"
                             else "run SGLang's benchmark at --request-rate inf"))
    if run.get("latencies") is not None:
        lists["latencies"] = run["latencies"]
    bad = [k for k, v in lists.items() if not isinstance(v, list) or len(v) != n]
    if bad:
        raise ConfigError(f"{where}: {', '.join(bad)} do not hold one entry per request "
                          f"({n} input_lens)")
    if not n:
        raise ConfigError(f"{where}: no requests (input_lens is empty)")
    duration = run["duration"]
    if not _number(duration) or duration <= 0:
        raise ConfigError(f"{where}: duration={duration!r} must be a finite number > 0 (s)")
    errors = run.get("errors") or [""] * n
    if not isinstance(errors, list):
        raise ConfigError(f"{where}: errors must be a list (one entry per request)")
    starts = lists["start_times"]
    if not all(_number(t) for t in starts):
        raise ConfigError(f"{where}: start_times must be finite numbers (s)")
    t0 = min(starts)
    rows, failed = [], 0
    for i in range(n):
        at = f"{where}: request {i}"
        out, ttft = lists["output_lens"][i], lists["ttfts"][i]
        if (errors[i] if i < len(errors) else "") or not out or ttft is None or ttft == 0:
            failed += 1
            continue
        prompt = lists["input_lens"][i]
        for name, v in (("input_lens", prompt), ("output_lens", out)):
            if problem := size_problem("prompt_len" if name == "input_lens" else "gen_len", v,
                                       key=name):
                raise ConfigError(f"{at}: {problem}")
        itl = lists["itls"][i] or []
        if not isinstance(itl, list) or not all(_number(x) and x >= 0 for x in itl):
            raise ConfigError(f"{at}: itls must be a list of finite numbers >= 0 (s)")
        e2e = lists["latencies"][i] if "latencies" in lists else \
            (ttft + sum(itl) if _number(ttft) else ttft)
        if not (_number(ttft) and ttft > 0 and _number(e2e) and e2e >= ttft):
            raise ConfigError(f"{at}: ttft={ttft!r} s, latency={e2e!r} s: finite, > 0, and "
                              f"the latency no shorter than the time to the first token")
        rows.append({"id": str(i), "arrival_s": float(starts[i] - t0),
                     "prompt_len": int(prompt), "gen_len": int(out),
                     "ttft_s": float(ttft), "e2e_s": float(e2e),
                     "tpot_s": float((e2e - ttft) / (out - 1)) if out > 1 else None})
    if not rows:
        raise ConfigError(f"{where}: every request failed ({failed})")
    return rows, failed, fmt


def _number(v: Any) -> bool:
    """A finite number (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def replay_record(path: str | Path, *, model, engine: str, engine_version: str,
                  tp: int = 1, run_index: int = -1, energy_j: float | None = None,
                  window: dict[str, Any] | None = None) -> dict[str, Any]:
    """A piep.serving_measurement record of one run of a result file (default its last):
    the requests and their timings from the file; energy `energy_j` (a piep meter window
    around the benchmark, idle-corrected to its duration), else the file's own
    `gpu_energy_j`. `model`: a name or config.json piep reads, or a ModelSpec."""
    from piep.core.config import ModelSpec
    from piep.sampling.meter import model_shape
    from piep.core.models import load_model
    runs = read_results(path)
    if not -len(runs) <= run_index < len(runs):
        raise ConfigError(f"{path}: --run {run_index}: the file holds {len(runs)} runs")
    where = f"{path} (run {run_index % len(runs) + 1} of {len(runs)})"
    run = runs[run_index]
    rows, failed, fmt = requests_of(run, where)
    if energy_j is None:
        energy_j = run.get("gpu_energy_j")
    if energy_j is None:
        raise ConfigError(f"{where}: no energy: run the benchmark under `piep meter "
                          f"--serving-result {path} ... -- CMD`, or a vLLM that meters its "
                          f"GPUs (gpu_energy_j)")
    watts = energy_j / run["duration"] / tp if _number(energy_j) else math.nan
    if not 1.0 <= watts <= MAX_BOARD_W:
        raise ConfigError(f"{where}: {energy_j!r} J over {run['duration']:.6g} s on {tp} "
                          f"GPU(s) is {watts:.4g} W a GPU; no board draws outside "
                          f"1-{MAX_BOARD_W:.0f} W")
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    longest = max(r["prompt_len"] + r["gen_len"] for r in rows)
    if longest > spec.max_position:
        raise ConfigError(f"{where}: a request of {longest:,} tokens (prompt + output) "
                          f"exceeds the context of {spec.name} ({spec.max_position:,}): "
                          f"is --model the model that served it?")
    return {"schema": "piep.serving_measurement", "schema_version": 1,
            "boundary": "gpu_board", "model": spec.name, "config_hash": spec.config_hash(),
            "shape": model_shape(spec), "tp": tp, "gpus": tp,
            "engine": {"name": engine, "version": engine_version},
            "requests": len(rows), "failed_requests": failed,
            "gen_tokens": sum(r["gen_len"] for r in rows),
            "energy_j": float(energy_j), "time_s": float(run["duration"]),
            "per_request": rows, "trace": f"{Path(path).name}#{run_index % len(runs) + 1}",
            "benchmark": {"format": fmt, "backend": run.get("backend"),
                          "request_rate": run.get("request_rate")},
            **({"window": window} if window else {"window": {"source": "gpu_energy_j"}})}


def _run(path: str | Path, run_index: int) -> tuple[int, dict[str, Any]]:
    """(how many runs the result file holds, its run `run_index`)."""
    runs = read_results(path)
    if not -len(runs) <= run_index < len(runs):
        raise ConfigError(f"{path}: --run {run_index}: the file holds {len(runs)} runs")
    return len(runs), runs[run_index]


def _held(run: dict[str, Any]) -> int | None:
    value = run.get("max_concurrency")
    return int(value) if _number(value) and value > 0 else None


def held_at(path: str | Path, run_index: int = -1) -> int | None:
    """The concurrency a run of a result file held its server at (`max_concurrency`), or
    None for a stream of arrivals."""
    return _held(_run(path, run_index)[1])


def steady_record(path: str | Path, *, model: str, engine: str, engine_version: str,
                  gpu: str, tp: int = 1, run_index: int = -1,
                  window: dict[str, Any] | None = None) -> dict[str, Any]:
    """A piep.steady_measurement record of a run held at `max_concurrency` requests (at an
    infinite request rate): its output tokens per second and J per output token over the
    whole run (ramps included: the more requests per slot, the closer to the steady
    state), its prompts' mean and its outputs' histogram. Energy: a meter `window` around
    the benchmark (its energy_j, time_s, idle_power_w) less the time outside the run at
    idle power, else the file's own `gpu_energy_j`."""
    import numpy as np
    from piep.core.models import load_model
    count, run = _run(path, run_index)
    where = f"{path} (run {run_index % count + 1} of {count})"
    held = _held(run)
    if held is None:
        raise ConfigError(f"{where}: no max_concurrency: a steady state is a server held "
                          f"at a concurrency (vllm bench serve --max-concurrency N "
                          f"--request-rate inf)")
    if not math.isinf(_rate(run.get("request_rate"))):
        raise ConfigError(f"{where}: request_rate={run.get('request_rate')}: a server held "
                          f"full is sent every request at once (--request-rate inf)")
    errors = run.get("errors") or [""] * len(run.get("output_lens") or [])
    ok = [(p, o) for p, o, e in zip(run.get("input_lens") or [], run.get("output_lens") or [],
                                   errors) if o and not e]
    if len(ok) <= held:
        raise ConfigError(f"{where}: {len(ok)} requests served at max_concurrency={held}: "
                          f"a steady state needs many more requests than slots (10x or more)")
    duration = run.get("duration")
    if not _number(duration) or duration <= 0:
        raise ConfigError(f"{where}: duration={duration!r} must be a finite number > 0 (s)")
    energy_j = run.get("gpu_energy_j") if window is None else \
        window["energy_j"] - window["idle_power_w"] * max(window["time_s"] - duration, 0.0)
    if not _number(energy_j) or not 1.0 <= energy_j / duration / tp <= MAX_BOARD_W:
        raise ConfigError(f"{where}: energy {energy_j!r} J over {duration:.6g} s on {tp} "
                          f"GPU(s): meter the benchmark (piep meter ... -- CMD) or give a "
                          f"run with gpu_energy_j")
    prompts = np.array([p for p, _ in ok], float)
    outputs = np.array([o for _, o in ok], float)
    counts, edges = np.histogram(outputs, bins=min(50, max(1, len(ok) // 10)))
    spec = load_model(model)
    return {"schema": "piep.steady_measurement", "schema_version": 1, "model": str(model),
            "config_hash": spec.config_hash(), "gpu": gpu, "tp": tp,
            "engine": {"name": engine, "version": engine_version},
            "server": {"max_num_seqs": held},
            "workload": {"prompt_len": float(prompts.mean()),
                         "output_len_bins": edges.tolist(),
                         "output_len_counts": counts.tolist()},
            "requests": len(ok), "failed_requests": len(errors) - len(ok),
            "output_tokens_per_s": float(outputs.sum() / duration),
            "j_per_output_token": float(energy_j / outputs.sum()),
            "power_w": float(energy_j / duration), "time_s": float(duration),
            "window": "the whole run (ramp up and down included)",
            **({"metered": window} if window is not None else {}),
            "source": f"{Path(path).name}#{run_index % count + 1}"}


def vllm_result(doc: dict[str, Any], trace) -> dict[str, Any]:
    """A `piep serve` answer as the result file `vllm bench serve --save-result
    --save-detailed` writes (vllm/benchmarks/serve.py's keys: seconds per request, ms in
    the summaries, `gpu_energy_j` as vLLM's own metering names it), so that a predicted run
    and a measured one diff with the same tools; `read_results` / `replay_record` read it
    back to the same totals. `trace`: the answer's requests (`Scenario.requests()`)."""
    import numpy as np
    rows = doc["per_request"]
    gen = [int(g) for g in trace.gen_len]
    ttft = [r["ttft_s"] for r in rows]
    tpot = [r["tpot_s"] for r in rows]
    e2e = [r["e2e_s"] for r in rows]
    itls = [[t] * (g - 1) for t, g in zip(tpot, gen)]
    flat_itl = [x for seq in itls for x in seq]

    def ms(values, prefix):
        v = np.asarray(values, float) * 1e3
        if not len(v):
            return {}
        return {f"mean_{prefix}_ms": float(v.mean()), f"median_{prefix}_ms": float(np.median(v)),
                f"std_{prefix}_ms": float(v.std()), f"p99_{prefix}_ms": float(np.percentile(v, 99))}
    rate = doc.get("load", {}).get("arrival_rate_per_s")
    duration, tokens = doc["time_s"], doc["output_tokens"]
    return {"date": None, "endpoint_type": "piep", "backend": "vllm", "label": "piep serve",
            "model_id": doc["model"], "tokenizer_id": None,
            "num_prompts": len(rows), "request_rate": rate if rate else "inf",
            "burstiness": 1.0, "max_concurrency": None, "duration": duration,
            "completed": len(rows), "failed": 0,
            "total_input_tokens": int(sum(int(p) for p in trace.prompt_len)),
            "total_output_tokens": int(sum(gen)),
            "request_throughput": len(rows) / duration if duration else 0.0,
            "output_throughput": tokens / duration if duration else 0.0,
            **ms(ttft, "ttft"), **ms(tpot, "tpot"), **ms(flat_itl, "itl"), **ms(e2e, "e2el"),
            "input_lens": [int(p) for p in trace.prompt_len], "output_lens": gen,
            "ttfts": ttft, "itls": itls, "latencies": e2e,
            "start_times": [float(a) for a in trace.arrival_s],
            "errors": [""] * len(rows), "gpu_energy_j": doc["energy_j"],
            "gpu_avg_power_w": doc["energy_j"] / duration if duration else 0.0,
            "gpu_energy_per_output_token_j": doc["j_per_output_token"],
            "piep": {"schema": doc["schema"], "engine": doc.get("engine"),
                     "boundary": "gpu_board", "predicted": True}}
