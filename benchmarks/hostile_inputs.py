"""Hostile inputs, as a new user (or a broken tool) gives them: every file piep reads
(scenario, trace, policy, config.json, measurements, a benchmark's result, a replay log, a
plan) filled with JSON nested past any reason, integers of thousands of digits, NaN and
Infinity, strings where numbers belong, empty lists, torn lines and a file of zeros;
sizes beyond any model; records no board could make; paths that leave the data folder.

Each runs as its own process (`python -m piep`, 120 s at most) and is counted as:
answered (exit 0, where an answer is right), refused in one line (exit 2 or 3), or a
failure: a traceback, a hang, a refusal of several lines, a bad input accepted, or an
error suggesting a flag the command does not have.

    python benchmarks/hostile_inputs.py [--root CHECKOUT] [--jobs 2] [--show]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = json.loads((ROOT / "model_trees/llama-2-7b/config.json").read_text())
REF = (ROOT / "calibration/h200/e2e/raw/e2e_2gpu.jsonl").read_text().splitlines()[:6]
DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INT = "1" * 5000


def _vllm(**over) -> dict:
    """A vLLM `bench serve --save-result --save-detailed` result of three requests."""
    return {"date": "20261203-101500", "endpoint_type": "vllm", "backend": "vllm",
            "model_id": "meta-llama/Llama-2-7b-hf", "num_prompts": 3, "request_rate": 2.0,
            "burstiness": 1.0, "max_concurrency": None, "duration": 0.9, "completed": 3,
            "gpu_energy_j": 80.0, "input_lens": [100, 200, 50], "output_lens": [10, 5, 2],
            "ttfts": [0.05, 0.04, 0.04], "itls": [[0.01] * 9, [0.01] * 4, [0.01]],
            "latencies": [0.14, 0.08, 0.05], "start_times": [1000.5, 1000.0, 1000.7],
            "errors": ["", "", ""], **over}


def _ref(**over) -> str:
    rows = [json.loads(r) for r in REF]
    rows[2].update(over)
    return "".join(json.dumps(r) + "\n" for r in rows)


SCENARIO = {"schema": "piep.scenario", "schema_version": 1, "model": "llama-2-7b", "gpu": "h200",
            "layout": {"tp": 1, "pp": 1, "dp": 1}, "engine": {"name": "piep-graph"},
            "workload": {"batch": 1, "prompt_len": 512, "gen_len": 128}}
TRACE = '{"arrival_s": 0, "prompt_len": 100, "gen_len": 10}\n' \
        '{"arrival_s": 1, "prompt_len": 200, "gen_len": 20}\n'

# a file input: where it goes (the argv around {f}) and a valid body to spoil
INPUTS = {
    "scenario": (["predict", "--scenario", "{f}"], json.dumps(SCENARIO)),
    "trace": (["serve", "--model", "llama-3-8b", "--trace", "{f}"], TRACE),
    "policy": (["serve", "--model", "llama-3-8b", "--rate", "2", "--requests", "5", "--policy",
                "{f}"], json.dumps({"block_size": 16})),
    "config": (["predict", "--model", "{f}"], json.dumps(CONFIG)),
    "measurements": (["train", "--from-measurements", "{f}", "--out", "{d}/p"], "".join(REF)),
    "result": (["meter", "--serving-result", "{f}", "--model", "llama-2-7b", "--engine", "vllm",
                "--engine-version", "1", "--out", "{d}/m.jsonl"], json.dumps(_vllm())),
    "replay": (["optimize", "--model", "llama-2-7b", "--replay", "{f}"], "{}"),
    "plan": (["apply", "{f}"], "{}"),
}
SPOILS = {
    "nested": DEEP,
    "nested_in_a_key": lambda body: body.replace('"', '"x": ' + "[" * 900 + "]" * 900 + ', "', 1)
    if body.startswith("{") else body,
    "huge_int": lambda body: body.replace("512", HUGE_INT, 1).replace("100", HUGE_INT, 1),
    "nan": lambda body: body.replace("512", "NaN", 1).replace("100", "NaN", 1),
    "infinity": lambda body: body.replace("512", "Infinity", 1).replace("100", "-Infinity", 1),
    "string_number": lambda body: body.replace("512", '"512"', 1).replace("100", '"x"', 1),
    "empty": "",
    "not_utf8": b"\xff\xfe\xfa\x00" * 10,
    "zeros_64mb": None,  # written separately (a file of zero bytes)
}


def cases() -> list[tuple[str, list[str], dict[str, object], str]]:
    """(name, argv, files to write, what is right: 'refuse' or 'any')."""
    out = []
    for inp, (argv, body) in INPUTS.items():
        name = "config.json" if inp == "config" else "in.jsonl" if inp in (
            "trace", "measurements", "replay") else "in.json"
        for spoil, how in SPOILS.items():
            if isinstance(how, bytes):
                content: object = how
            elif spoil == "zeros_64mb":
                if inp not in ("trace", "scenario", "measurements"):
                    continue
                content = b"\0" * (64 * 1024 ** 2 + 10)
            else:
                content = how(body) if callable(how) else how
                if content == body:
                    continue
            # (an unknown key nested deep in a file that ignores unknown keys is fine)
            expect = "any" if spoil == "nested_in_a_key" and inp in ("result", "config",
                                                                      "trace") else "refuse"
            out.append((f"{inp}:{spoil}", [a.replace("{f}", "{d}/" + name) for a in argv],
                        {name: content}, expect))
        if name.endswith(".jsonl"):  # a torn last line: skipped, or refused; never a crash
            out.append((f"{inp}:torn_last_line", [a.replace("{f}", "{d}/" + name) for a in argv],
                        {name: body.rstrip("\n")[:-7]}, "any"))
    sized = [("heads_1e12", {"num_attention_heads": 10 ** 12, "num_key_value_heads": 10 ** 12},
              []), ("layers_1e12_pp3", {"num_hidden_layers": 10 ** 12}, ["--pp", "3"]),
             ("hidden_1e30", {"hidden_size": 10 ** 30}, []),
             ("vocab_1e9", {"vocab_size": 10 ** 9}, [])]
    for name, change, extra in sized:
        out.append((f"size:{name}", ["predict", "--model", "{d}/config.json", *extra],
                    {"config.json": json.dumps({**CONFIG, **change})}, "refuse"))
    for name, argv in (("batch_1e26", ["predict", "--model", "llama-2-7b", "--batch", "9" * 26]),
                       ("prompt_1e26", ["predict", "--model", "llama-2-7b", "--prompt-len",
                                        "9" * 26]),
                       ("requests_1e12", ["serve", "--model", "llama-2-7b", "--rate", "1",
                                          "--requests", "1000000000000"]),
                       ("gpu_path", ["train", "--gpu", "../x", "--from-measurements",
                                     "{d}/ok.jsonl"]),
                       ("gpu_slash", ["predict", "--model", "llama-2-7b", "--gpu", "a/b"])):
        out.append((f"size:{name}", argv, {"ok.jsonl": "".join(REF)}, "refuse"))
    for name, over in (("time_1e308", {"time_s": 1e308}), ("batch_1e30", {"batch": 10 ** 30}),
                       ("energy_1e30", {"energy_j": 1e30}), ("negative_time", {"time_s": -1}),
                       ("prompt_past_context", {"prompt_len": 10 ** 7})):
        out.append((f"record:{name}", ["train", "--from-measurements", "{d}/r.jsonl", "--out",
                                       "{d}/p"], {"r.jsonl": _ref(**over)}, "refuse"))
    meter = ["meter", "--serving-result", "{d}/r.json", "--model", "llama-2-7b", "--engine",
             "vllm", "--engine-version", "1", "--out", "{d}/m.jsonl"]
    for name, over in (("negative_len", {"input_lens": [-100, 200, 50]}),
                       ("nan_arrival", {"start_times": [float("nan"), 1000.0, 1000.7]}),
                       ("energy_1e30", {"gpu_energy_j": 1e30}),
                       ("latency_below_ttft", {"latencies": [0.01, 0.08, 0.05]}),
                       ("prompt_past_context", {"input_lens": [10 ** 7, 200, 50]}),
                       ("string_len", {"input_lens": ["100", 200, 50]}),
                       ("string_ttft", {"ttfts": ["fast", 0.04, 0.04]}),
                       ("empty_lists", {k: [] for k in ("input_lens", "output_lens", "ttfts",
                                                         "itls", "latencies", "start_times",
                                                         "errors")}),
                       ("itl_strings", {"itls": [["a"], [], []]}),
                       ("negative_duration", {"duration": -1}),
                       ("string_energy", {"gpu_energy_j": "80"}),
                       ("null_lists", {"itls": None}),
                       ("nested_itls", {"itls": [[[0.01]], [], []]})):
        out.append((f"result:{name}", meter, {"r.json": json.dumps(_vllm(**over))}, "refuse"))
    for cmd in ("plan", "report", "optimize", "compare", "tree"):
        argv = {"compare": ["compare", "llama-2-7b", "--gpu", "a100"],
                "tree": ["tree", "llama-2-7b", "--gpu", "a100"]}.get(
            cmd, [cmd, "--model", "llama-2-7b", "--gpu", "a100"] + (
                ["--out", "{d}/r"] if cmd == "report" else []))
        out.append((f"suggests:{cmd}", argv, {}, "refuse"))
    return out


def run_case(case, root: Path) -> tuple[str, str, str]:
    """(case name, outcome, first line of stderr)."""
    name, argv, files, expect = case
    with tempfile.TemporaryDirectory() as d:
        for rel, content in files.items():
            path = Path(d) / rel
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, errors="surrogateescape")
        env = {**os.environ, "PIEP_DATA_DIR": f"{d}/data", "PYTHONPATH": str(root)}
        args = [a.replace("{d}", d) for a in argv]
        try:
            p = subprocess.run([sys.executable, "-m", "piep", *args], capture_output=True,
                               text=True, timeout=120, env=env, cwd=d)
        except subprocess.TimeoutExpired:
            return name, "hang", ""
        err = p.stderr.strip()
        first = err.splitlines()[0][:160] if err else ""
        if "Traceback" in err:
            return name, "traceback", err.splitlines()[-1][:160]
        if p.returncode == 0:
            outside = Path(d) / "x"  # PIEP_DATA_DIR/../x
            if name == "size:gpu_path" and outside.exists():
                return name, "wrote outside", ""
            return name, "answered" if expect == "any" else "accepted", first
        if p.returncode not in (2, 3):
            return name, f"exit {p.returncode}", first
        if err.count("\n") > 0 and not all(line.startswith("piep: ") for line in
                                           err.splitlines()[:-1]):
            return name, "several lines", first
        lacks = name.startswith("suggests:") and "--allow-uncalibrated" in err \
            and "piep predict" not in err
        return name, "suggests a flag it lacks" if lacks else "refused", first


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose piep runs")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--show", action="store_true", help="every case's outcome")
    args = ap.parse_args()
    todo = cases()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: run_case(c, args.root.resolve()), todo))
    good = ("answered", "refused")
    by_kind: dict[str, list[str]] = {}
    for name, outcome, line in results:
        by_kind.setdefault(outcome, []).append(name)
        if args.show or outcome not in good:
            print(f"{outcome:>24}  {name}  {line}")
    print(f"\n{len(results)} hostile inputs: " + ", ".join(
        f"{k} {len(v)}" for k, v in sorted(by_kind.items(), key=lambda kv: kv[0] not in good)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
