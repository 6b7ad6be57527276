"""`piep compare A B ...`: deployments side by side and a recommendation per goal."""

from __future__ import annotations

import re

from piep.cli import add_workload_args, emit
from piep.errors import ConfigError
from piep.report.table import table

_LAYOUT = re.compile(r"^(?:(tp|pp|dp)(\d+))+$")


def parse_candidate(text: str) -> tuple[str, dict[str, int]]:
    """`llama-2-7b@tp2`, `llama-3-70b@tp2pp2`, or a bare model (tp=pp=dp=1)."""
    model, _, layout = text.partition("@")
    degrees = {"tp": 1, "pp": 1, "dp": 1}
    if layout:
        if not _LAYOUT.match(layout):
            raise ConfigError(f"candidate {text!r}: layout after '@' must look like tp2, tp2pp2 "
                              f"or tp1dp2")
        for key, value in re.findall(r"(tp|pp|dp)(\d+)", layout):
            degrees[key] = int(value)
    if not model:
        raise ConfigError(f"candidate {text!r} names no model")
    return model, degrees


def configure(parser) -> None:
    parser.add_argument("candidates", nargs="+", metavar="MODEL@LAYOUT",
                        help="e.g. llama-2-7b@tp2 llama-2-13b@tp1")
    parser.add_argument("--gpu", default="h200")
    add_workload_args(parser)
    parser.add_argument("--predictor", choices=("auto", "learned", "roofline"), default="auto")


def compare(candidates: list[str], *, gpu: str, predictor: str = "auto", **workload) -> dict:
    from piep import api
    from piep.gpus import load_gpu
    gpu_mem = load_gpu(gpu).memory_gib
    rows = []
    for cand in candidates:
        model, deg = parse_candidate(cand)
        doc = api.predict(model, gpu=gpu, predictor=predictor, **deg, **workload)
        used = max(g["memory_gib"] for g in doc["per_gpu"])
        rows.append({"candidate": cand, "model": doc["model"], "gpus": doc["layout"]["gpus"],
                     "energy_j": doc["energy_j"], "time_s": doc["time_s"],
                     "ttft_s": doc["prefill"]["time_s"], "tpot_s": doc["decode"]["tpot_s"],
                     "j_per_token": doc["j_per_token"], "tokens_per_j": 1 / doc["j_per_token"],
                     "memory_gib_per_gpu": used, "memory_headroom_gib": gpu_mem - used,
                     "predictor": doc["predictor"], "flags": doc["flags"],
                     "interval_energy_j": doc["interval"]["energy_j"]})
    recs = {
        "latency": min(rows, key=lambda r: r["time_s"])["candidate"],
        "energy": min(rows, key=lambda r: r["j_per_token"])["candidate"],
        "memory": max(rows, key=lambda r: r["memory_headroom_gib"])["candidate"],
    }
    return {"schema": "piep.comparison", "schema_version": 1, "boundary": "gpu_board",
            "workload": workload, "candidates": rows, "recommendation": recs}


def run(args) -> int:
    doc = compare(args.candidates, gpu=args.gpu, predictor=args.predictor, batch=args.batch,
                  prompt_len=args.prompt_len, gen_len=args.gen_len, mode=args.mode)

    def human(d):
        keys = ["candidate", "gpus", "energy_j", "time_s", "ttft_s", "tpot_s", "j_per_token",
                "tokens_per_j", "memory_headroom_gib"]
        body = table([[r[k] for k in keys] for r in d["candidates"]], keys)
        rec = "\n".join(f"best for {goal}: {cand}" for goal, cand in d["recommendation"].items())
        return f"{body}\n\n{rec}\n(energy boundary: GPU boards only)"
    emit(args, doc, human)
    return 0
