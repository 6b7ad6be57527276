"""What the subcommands share: deployment and workload flags, the scenario they describe,
and output (`--json` on stdout, a human table otherwise)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Callable

from piep.core.gpus import DEFAULT_GPU
from piep.report.table import fmt
from piep.core.scenario import DEFAULT_ENGINE

if TYPE_CHECKING:
    from piep.core.scenario import Scenario


def add_deployment_args(p: argparse.ArgumentParser, *, model: bool = True,
                        engines: tuple[str, ...] | None = None) -> None:
    if model:
        p.add_argument("--model",
                       help="shipped name (see `piep models`) or path to config.json / folder")
        p.add_argument("--scenario", metavar="FILE.json",
                       help="the whole request as one file (the 'scenario' of `piep predict "
                            "--json`); flags given beside it change its fields")
    p.add_argument("--gpu", default=DEFAULT_GPU, help=f"GPU type (default {DEFAULT_GPU})")
    add_layout_args(p)
    add_workload_args(p, engines=engines)


LAYOUT_HELP = {
    "tp": "tensor parallel degree (default 1)",
    "pp": "pipeline parallel degree (default 1)",
    "dp": "data parallel replicas (default 1)",
    "ep": "a mixture of experts' experts sharded whole over the tp GPUs: ep = tp, vLLM's "
          "--enable-expert-parallel (default 1: each expert split by width over them)"}


def add_layout_args(p: argparse.ArgumentParser, axes: tuple[str, ...] = ("tp", "pp", "dp",
                                                                          "ep")) -> None:
    """The layout's degrees, each a flag of its own (default 1)."""
    for axis in axes:
        p.add_argument(f"--{axis}", type=int, default=1, help=LAYOUT_HELP[axis])


def add_workload_args(p: argparse.ArgumentParser, *,
                      engines: tuple[str, ...] | None = None) -> None:
    """The workload flags and the engine (`engines`: those it may name; default every
    engine a prediction may name, the user's own too)."""
    from piep.core.scenario import engine_names
    p.add_argument("--batch", type=int, default=1, help="global batch (default 1)")
    p.add_argument("--prompt-len", type=int, default=512, help="prompt tokens (default 512)")
    p.add_argument("--gen-len", type=int, default=128, help="generated tokens (default 128)")
    names = engines or engine_names()
    p.add_argument("--engine", type=engine_arg(names, engines is None), default=None,
                   metavar="ENGINE",
                   help=f"the engine that runs the model: {', '.join(names)} "
                        f"(default {DEFAULT_ENGINE}; "
                        "`piep env` lists the engine profiles; an engine of your own: "
                        "`piep train --engine NAME --like ...`)")
    p.add_argument("--cache-len", type=int, default=None, metavar="N",
                   help="static-cache engines: KV-cache slots when larger than prompt + gen "
                        "(transformers keeps the cache of a longer earlier call)")
    p.add_argument("--host-probe-us", type=host_probe_arg, default=None, metavar="US|auto",
                   help="hf-eager, hf-static, hf-cb: the launch probe of the host that runs "
                        "the engine (`piep env --host-probe` on that host prints it; `auto`: "
                        "this machine's, measured once and kept); default: a typical host "
                        "of the profile's calibration machines")
    p.add_argument("--mode", choices=("graph", "eager"), default=None,
                   help="the reference runner's decode: CUDA-graph replay (piep-graph, the "
                        "default) or eager PyTorch (piep-eager)")


def engine_arg(names: tuple[str, ...], priced: bool = True):
    """The --engine flag's type: one of `names`, else one line on what an engine is
    (`priced`: engines a prediction names, the user's own among them)."""
    def check(value: str) -> str:
        if value in names:
            return value
        from piep.core.scenario import own_engine_hint
        how = own_engine_hint(value) if priced else \
            "another engine: meter its runs with `piep meter`"
        raise argparse.ArgumentTypeError(f"{value!r} is not an engine here ({', '.join(names)});"
                                         f" {how}")
    return check


def host_probe_arg(value: str) -> "float | str":
    """`--host-probe-us`: microseconds, or `auto` (this machine's, `auto_host_probe_us`)."""
    if value == "auto":
        return value
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is no number of microseconds; give "
                                         f"what `piep env --host-probe` prints, or auto")


HOST_PROBE_FILE = "host_probe.json"  # in the user data directory: one entry per machine
HOST_PROBES = 9  # probes whose median a host's figure is (~0.3 s in all)


def machine_key() -> str:
    """This machine, as the host-probe file knows it: its name and CPU model."""
    import platform
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f
                        if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{platform.node()}|{cpu}"


def auto_host_probe_us(measure=None) -> float:
    """This machine's launch probe in microseconds: measured once (torch and a CUDA GPU
    here; `measure`: what measures it, `host_probe_here` by default) and kept per machine
    in the user data directory, from where later answers read it."""
    import json
    import sys
    import time

    from piep.core.artifacts import load_json, user_data_dir, write_text
    from piep.core.errors import ConfigError
    path, key = user_data_dir() / HOST_PROBE_FILE, machine_key()
    try:
        known = load_json(path) if path.is_file() else {}
    except ConfigError:  # a damaged file is measured anew
        known = {}
    entry = known.get(key) if isinstance(known, dict) else None
    if isinstance(entry, dict) and isinstance(entry.get("launch_add_us"), (int, float)):
        return float(entry["launch_add_us"])
    probe = (measure or host_probe_here)(repeats=HOST_PROBES)
    if probe is None:
        raise ConfigError("--host-probe-us auto measures this machine's host, which needs "
                          "torch and a CUDA GPU here; elsewhere give the figure `piep env "
                          "--host-probe` prints on the host that runs the engine")
    us = 1e6 * probe["launch_add_s"]
    known = {**(known if isinstance(known, dict) else {}),
             key: {"launch_add_us": us, "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                   "probe": probe}}
    write_text(path, json.dumps(known, indent=1) + "\n")
    print(f"piep: this host's launch probe: {us:.2f} us (measured now, kept in {path})",
          file=sys.stderr)
    return us


def resolve_auto_probe(args: argparse.Namespace) -> None:
    """`--host-probe-us auto` made this machine's figure, before the scenario is built."""
    if getattr(args, "host_probe_us", None) == "auto":
        args.host_probe_us = auto_host_probe_us()


# the flags that describe a scenario (Scenario.build's fields of the same names)
SCENARIO_FLAGS = ("gpu", "tp", "pp", "dp", "ep", "engine", "mode", "batch", "prompt_len",
                  "gen_len", "cache_len", "host_probe_us")


def scenario_from_args(args: argparse.Namespace, *, model: str | None = None) -> "Scenario":
    """The validated scenario of the deployment and workload flags, or of `--scenario
    FILE.json` with the flags given beside it (those not at their defaults) changing it."""
    from piep.core.errors import ConfigError
    from piep.core.scenario import Scenario
    resolve_auto_probe(args)
    flags = {k: getattr(args, k) for k in SCENARIO_FLAGS}
    uncalibrated = getattr(args, "allow_uncalibrated", False)
    model = model if model is not None else getattr(args, "model", None)
    if getattr(args, "scenario", None):
        return scenario_file(args, SCENARIO_FLAGS,
                             **({"model": model} if model is not None else {}))
    if model is None:
        raise ConfigError("give --model (a shipped name or a config path) or --scenario "
                          "FILE.json")
    return Scenario.build(model, allow_uncalibrated=uncalibrated, **flags)


def scenario_file(args: argparse.Namespace, flags: tuple[str, ...], *,
                  stream_refused: str | None = None, **changes: Any) -> "Scenario":
    """`--scenario FILE.json` with the flags among `flags` given beside it (those not at
    their defaults) and `changes` changing its fields; `stream_refused`: why the command
    refuses a file holding a stream of requests."""
    from piep.core.artifacts import load_json
    from piep.core.errors import ConfigError
    from piep.core.scenario import Scenario
    resolve_auto_probe(args)
    base = Scenario.from_json(load_json(args.scenario), args.scenario)
    if stream_refused and base.is_stream:
        raise ConfigError(f"{args.scenario}: {stream_refused}")
    given = {k: getattr(args, k) for k in flags
             if getattr(args, k) != args.subparser.get_default(k)}
    if "gpu" in given and getattr(args, "allow_uncalibrated", False):
        given["allow_uncalibrated"] = True
    return base.replace(**given, **changes)


def host_probe_here(gpu: int = 0, repeats: int = 1) -> dict[str, float] | None:
    """This host's probes as measurement records carry them (the median of `repeats`),
    on CUDA GPU `gpu`; None where torch is missing or sees no GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    from piep.sampling.hf import host_probe, median_probe
    return median_probe([host_probe(torch.device("cuda", gpu)) for _ in range(repeats)])


def board_probe_here(gpu: int = 0, fake=None, **probe: Any) -> dict[str, float] | None:
    """This GPU board's probe (the power of a decode-like GEMM and of an HBM copy, each
    over a metered window), as engine runs record it, on CUDA GPU `gpu` (`fake`: a fake
    NVML device on the CPU and `probe` smaller kernels, tests); None where torch is
    missing or sees no GPU."""
    try:
        import torch
    except ImportError:
        return None
    if fake is None and not torch.cuda.is_available():
        return None
    from piep.sampling.hf import gpu_probe
    from piep.sampling.runner import RankMeter
    device = torch.device("cpu") if fake is not None else torch.device("cuda", gpu)
    return gpu_probe(device, RankMeter(device, fake=fake), **probe)


def add_json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine output on stdout")


def add_facility_args(p: argparse.ArgumentParser) -> None:
    """Facility energy, carbon and cost beside the boards' energy (piep.core.results: Facility)."""
    g = p.add_argument_group("facility, carbon and cost (board energy x PUE; intervals "
                             "carried)")
    g.add_argument("--pue", type=float, default=None, metavar="X",
                   help="power usage effectiveness of the facility (>= 1; default 1 when "
                        "carbon or price is given)")
    g.add_argument("--carbon-intensity", type=float, default=None, metavar="G_PER_KWH",
                   help="the grid's gCO2eq per kWh: kgCO2eq of the facility's energy")
    g.add_argument("--price-per-kwh", type=float, default=None, metavar="P",
                   help="the price of a kWh: the cost of the facility's energy")


def facility_of(args: argparse.Namespace):
    """The facility the flags describe, or None where none was given."""
    from piep.core.results import Facility
    pue = getattr(args, "pue", None)
    carbon, price = getattr(args, "carbon_intensity", None), getattr(args, "price_per_kwh",
                                                                     None)
    if pue is None and carbon is None and price is None:
        return None
    return Facility(pue=1.0 if pue is None else pue, carbon_g_per_kwh=carbon,
                    price_per_kwh=price)


def emit_facility(args: argparse.Namespace, doc: Any, human: Callable[[Any], str]) -> None:
    """`emit` with the facility's figures in the document (and a line under the human
    answer) where the facility flags were given."""
    from piep.core.results import with_facility
    facility = facility_of(args)
    if facility is None:
        emit(args, doc, human)
        return
    with_facility(doc, facility)

    def lines(d):
        found = [("", d["facility"])] if "facility" in d else \
            [(f"{c['candidate']}: ", c["facility"]) for c in d.get("candidates", [])] + \
            [(f"{k}: ", d[k]["facility"]) for k in ("reference", "chosen")
             if isinstance(d.get(k), dict) and "facility" in d[k]]
        return "".join(f"\n{who}{facility.line(f)}" for who, f in found)
    emit(args, doc, lambda d: human(d) + lines(d))


def emit(args: argparse.Namespace, doc: Any, human: Callable[[Any], str]) -> None:
    if getattr(args, "json", False):  # one write: json.dump writes each piece alone
        from piep.core.artifacts import json_text
        sys.stdout.write(json_text(doc) + "\n")
    else:
        print(human(doc))


def options_from_args(cls: type, args: argparse.Namespace, **values: Any) -> Any:
    """A frozen options dataclass from the parsed flags of the same names (plus `values`)."""
    from dataclasses import fields
    for f in fields(cls):
        if f.name not in values and hasattr(args, f.name):
            values[f.name] = getattr(args, f.name)
    return cls(**values)


def host_note(doc: dict) -> str | None:
    """The lines that say which host an answer's host time is for and how far the answer
    moves between the fastest and slowest hosts of the engine's calibration, where the
    user gave no host probe; and the command that measures theirs."""
    ref = doc.get("engine_ref") or {}
    if not ref.get("host_probe_ref_us") or ref.get("host_probe_source") == "given":
        return None
    whose = "a typical host of the calibration machines" \
        if ref.get("host_probe_source") == "default" else "the profile's host"
    line = (f"host: {ref['name']} waits on its host; this answer is for {whose} (launch "
            f"probe {ref.get('host_probe_us', ref['host_probe_ref_us']):.1f} us)")
    dep = doc.get("host_dependence")
    if dep:
        (fast, slow), (e0, e1), (t0, t1) = dep["probe_us"], dep["energy_j"], dep["time_s"]
        line += (f"; on the fastest and slowest hosts the calibration saw ({fast:.1f} and "
                 f"{slow:.1f} us) it is {fmt(e0)} and {fmt(e1)} J, {fmt(t0)} and {fmt(t1)} s")
    return line + ". For yours: `piep env --host-probe` on it, then --host-probe-us US"


def dtypes_words(doc: dict) -> str:
    """'bf16 weights and KV cache' (and the checkpoint's dtype where it differs)."""
    d = doc.get("dtypes") or {}
    if d.get("weights", "bf16") != "bf16":  # (FP8 layers)
        return f"weights {d['weights']}, {d.get('kv_cache', 'bf16')} KV cache"
    kept = d.get("checkpoint") in (None, "bfloat16")
    return "bf16 weights and KV cache" + (
        "" if kept else f" (its {d['checkpoint']} checkpoint priced in bf16)")


def outcome_lines(doc: dict) -> list[str]:
    """What a prediction and a served stream both state, as tables: energy, time and the
    per-token and per-request figures with their 90 % interval, the latencies over the
    requests, and where the energy goes (by phase; by compute, communication, wait,
    idle)."""
    from piep.report.table import fmt, table
    from piep.core.results import label
    iv = doc.get("interval") or {}
    e_iv, t_iv = iv.get("energy_j"), iv.get("time_s")

    def scaled(band, by):  # an energy band per token or request
        return [None, None] if band is None else [band[0] / by, band[1] / by]
    rows = [[label("energy_j"), doc["energy_j"], *(e_iv or [None, None])],
            [label("time_s"), doc["time_s"], *(t_iv or [None, None])],
            [label("j_per_output_token"), doc["j_per_output_token"],
             *scaled(e_iv, doc["output_tokens"])],
            [label("j_per_request"), doc["j_per_request"], *scaled(e_iv, doc["requests"])],
            [label("output_tokens_per_s"), doc["output_tokens_per_s"], None, None]]
    latency = [[label(k), *(doc[k][q] for q in ("p50", "p90", "p99"))]
               for k in ("ttft_s", "tpot_s", "e2e_s")]
    lines = [table(rows, ["", "value", "90 % low", "90 % high"])]
    if iv.get("level"):
        lines.append(f"interval: {iv['level']}")
    lines += ["", table(latency, ["latency over the requests", "p50", "p90", "p99"]),
              "per token: output tokens, the prefill's first included (prompt tokens not "
              "counted)", "",
              "phases (J): " + ", ".join(
                  f"{k.replace('_', ' ')} {fmt(doc[k]['energy_j'])} ({fmt(doc[k]['time_s'])} s)"
                  for k in ("prefill", "decode", "no_request")),
              "breakdown (J): " + ", ".join(f"{k} {fmt(v)}"
                                            for k, v in doc["breakdown_j"].items())]
    return lines


def out_of_range_lines(doc: dict) -> list[str]:
    """The kinds a document's out_of_range flag is about, as a line (none where it has
    no such flag)."""
    kinds = doc.get("out_of_range_kinds")
    return ["  out_of_range here: the module models extrapolate for " + ", ".join(kinds)] \
        if kinds else []


def flag_lines(flags) -> list[str]:
    """Each distinct flag's registered meaning, as lines under a human table."""
    from piep.predict.flags import lines
    return lines(flags)
