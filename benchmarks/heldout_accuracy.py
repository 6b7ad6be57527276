"""Held-out sets measured on H200 that no fit of piep has seen: mixtures of experts
(calibration/h200/moe: Qwen3-30B-A3B, Mixtral 8x7B, Qwen1.5-MoE-A2.7B shapes and one of
our own) and FP8 checkpoints (calibration/h200/fp8: Llama 3.1 8B, Qwen3 8B and one shape
of our own, the layers' projections in row-wise FP8), run with transformers `generate()`
(hf-eager). Module samples of their new kernels train the module models; no end-to-end
run of either set trains anything (the hf-eager profile was fitted on bf16 Llama, Mistral
and Qwen2 runs), so every error here leaves its model, its family and its set out.

    python benchmarks/heldout_accuracy.py moe --predict design_eager2.jsonl  # blind, once
    python benchmarks/heldout_accuracy.py moe            # blind and now, vs measured
    python benchmarks/heldout_accuracy.py moe --write    # ... into reports/moe.md
    python benchmarks/heldout_accuracy.py fp8 --write    # reports/fp8.md
    python benchmarks/heldout_accuracy.py moe --phases   # prefill and decode apart

`--predict DESIGN` writes that design's `predictions_blind*.jsonl` (design_eager2.jsonl ->
predictions_blind2.jsonl) by the code of the commit it names, before its runs are
measured, and never over a file already there (MoE: f411e6a before device call 71);
`--again TAG` writes a later commit's beside it (predictions_blind_ep_TAG.jsonl), still
before the runs, and the report scores each file.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from piep import api  # noqa: E402
from piep.core.artifacts import git_hash, read_jsonl, write_text  # noqa: E402

SETS = {
    "moe": ("Mixtures of experts, held out",
            "device calls 71 (`calibration/h200/device/run71.sh`: module samples of the "
            "router, routing and grouped GEMMs; the runs), 72 (`run72.sh`: module samples "
            "of generate()'s decode-step experts, `experts_batched`), 77 (`run77.sh`: the "
            "grouped GEMMs in transformers' weight layout and its masks' masked_fill "
            "sampled; gpt-oss-20b, OLMoE and 20-layer Llama 4 Scout shapes), 73 (`run73.sh`: "
            "the kernel census below, on the H200), 83-84 (`run83.sh`, `run84.sh`: "
            "workloads in no earlier design), 85 (`run85.sh`: designs 5 and 6, DeepSeek "
            "V2-Lite and V3, Qwen3-235B, GLM-4.5-Air and ERNIE 4.5 shapes, their blind "
            "predictions committed before; `experts_batched` again on a second board; "
            "gpt-oss's sinks attention and Llama 4's bmm experts sampled), 86 (`run86.sh`: "
            "`experts_batched` over seven shapes; a kernel census on the H200) and 87 "
            "(`calibration/h100/device/run87.sh`: a census of gpt-oss-20b and "
            "DeepSeek-V2-Lite on an H100). Random weights route "
            "near-uniformly, as piep "
            "assumes; trained routers skew (docs/models.md)",
            "The blind predictions priced every step's experts as grouped GEMMs. Read in "
            "transformers after the runs (not fitted to them): generate() switches a mixture "
            "of experts to `batched_mm` for its decode steps on a GPU (each (token, expert) "
            "pair's weights gathered, then a batched GEMV: the Mixtral steps growing with the "
            "batch), and its grouped path masks the rows past the routed ones before and "
            "after each grouped GEMM and unpermutes the output (four passes); the tree "
            "prices both since. The combiner counts the decode-step experts as projections "
            "(set after the first comparison; reports/moe.md at 12179df shows the errors "
            "before it). Set after call 77's runs and call 73's census (`python "
            "benchmarks/heldout_accuracy.py moe` at commit 30cd722, where these runs are "
            "in, gives the errors before: energy 16.1 %, time 10.2 %): Llama 4's experts "
            "run torch.bmm over every expert, equal problems, priced since as one "
            "projection of all experts' weights "
            "(not a grouped GEMM: Scout's time error 30.3 -> 5.7 %); and a grouped GEMM "
            "computes each expert's rows in whole blocks of two tiles (torch's grouped_mm "
            "on Hopper: 64- or 128-row tiles on 2-CTA clusters), so a router's binomial "
            "counts cost more rows than the module sampler's even split (x1.48 at "
            "Qwen3-30B-A3B's 256 rows an expert, where the census measured x1.51 the "
            "samples' price): the samples' time is learned over the rows their kernel "
            "computes, and a deployment's grouped GEMMs priced at the rows expected under "
            "its routing (`piep.tree.builder.routed_grouped_rows`). Set in session 37, "
            "from the code and call 87's census, before any run of this set was priced "
            "with them: Llama 4's bmm and gpt-oss's eager attention are leaves of their own "
            "(`experts_bmm`, each expert's copy of the tokens read; `sinks_attention`, its "
            "passes over rows of keys + 1, unaligned, where the census found the sinks' "
            "concat alone ~5x the tree's pass), each with a sampler op that runs what "
            "transformers runs; until they are sampled on an H200 they are priced by the "
            "projections' and the masked SDPA's models (`python "
            "benchmarks/heldout_accuracy.py moe` at commit e3d4cfc gives the errors before "
            "the attention leaf: energy 12.0 %, time 7.6 %). Since calls 85 and 86, those "
            "two kinds and `experts_batched` have models of their own, the last trained on "
            "three draws over two boards (`piep train --gpu h200 --add-kinds`; `python "
            "benchmarks/heldout_accuracy.py moe` at commit 801db21, where call 85's runs are "
            "in, gives the errors before: energy 10.9 %, time 6.8 %). Set in session 46 "
            "from call 94's A/B on an H100 (the census below), before any run of this set "
            "was priced with it: those samples gathered each pair's weights from a table of "
            "8 experts, generate() gathers from its rank's own, slower the more experts it "
            "holds; the decode-step experts are priced x the A/B's ratio at that count "
            "(`python benchmarks/heldout_accuracy.py moe` at commit dee1405 gives the errors "
            "before: energy 9.0 %, time 7.3 %). In session 47 the ratio became the median "
            "over that A/B and call 97's (an H100 again, batch 8-192: lower at many pairs), "
            "after call 96 ran design 9 on the H100 (`reports/h100.md`), no run of this set "
            "looked at (`python benchmarks/heldout_accuracy.py moe` at commit f1441a3 gives "
            "the errors before: energy 5.5 %, time 6.3 %)."),
    "fp8": ("FP8 checkpoints, held out",
            "device call 72 (`calibration/h200/device/run72.sh`: module samples of row-wise "
            "FP8 projections, `fp8_linear`, drawn from the shipped dense models' trees; the "
            "runs, each model's projections built as row-wise FP8 from random weights by "
            "`piep.sampling.fp8`: dynamic per-token activations, torch._scaled_mm)",
            "transformers' own FP8 kernels (DeepGEMM, the Hub's finegrained-fp8 Triton "
            "kernel, FBGEMM) cannot be fetched on the device machine, so the runs and the "
            "samples are of piep's row-wise FP8 layer, the scheme of fbgemm_fp8 and "
            "compressed-tensors FP8-dynamic checkpoints. Set after the first comparison: "
            "an FP8 projection's launches, 9 (its kernel sequence counted in "
            "piep.sampling.fp8; 5 before), which eager decode's host time follows."),
}


def folder(name: str) -> Path:
    return ROOT / "calibration" / "h200" / name


def key(row: dict) -> tuple:
    """A run's configuration (a layout of one GPU unless its row says otherwise)."""
    engine = row.get("engine", "hf-eager")  # a design's name, a record's {"name": ...}
    return (row["model"], engine["name"] if isinstance(engine, dict) else engine,
            row.get("tp", 1), row.get("ep", 1), row["batch"], row["prompt_len"],
            row["gen_len"])


def designs_of(name: str) -> list[Path]:
    """The set's designs, every engine's (design_eager*.jsonl, design_static*.jsonl)."""
    return sorted(folder(name).glob("design_*.jsonl"))


def blind_path(design: Path) -> Path:
    """Where a design's blind predictions go: design_eager2.jsonl -> predictions_blind2,
    design_static8.jsonl -> predictions_blind_static8."""
    stem = design.name.replace("design_eager", "predictions_blind")
    return design.with_name(stem.replace("design_", "predictions_blind_"))


def predictions(name: str, seen: dict[tuple, dict] | None = None,
                designs: list[Path] | None = None, **where) -> list[dict]:
    """Every row of the set's designs (or of `designs`) priced as piep prices it now: at
    the host probe its run measured where `seen` holds its run (as
    benchmarks/families_accuracy.py prices), else at the profile's typical host; `where`:
    more of `api.predict`'s fields (another GPU)."""
    out = []
    for row in (r for path in designs or designs_of(name) for r in read_jsonl(path)):
        probe = ((seen or {}).get(key(row)) or {}).get("host_probe", {}).get("launch_add_s")
        doc = api.predict(str(folder(name) / "configs" / f"{row['model']}.json"),
                          engine=row["engine"], tp=row["tp"], ep=row.get("ep", 1),
                          batch=row["batch"],
                          prompt_len=row["prompt_len"], gen_len=row["gen_len"], hosts=False,
                          host_probe_us=None if probe is None else 1e6 * probe, **where)
        out.append({**{k: row[k] for k in ("model", "engine", "batch", "prompt_len",
                                            "gen_len")},
                    **({k: row[k] for k in ("tp", "ep") if row.get(k, 1) != 1}),
                    "energy_j": doc["energy_j"], "time_s": doc["time_s"],
                    "interval_energy_j": doc["interval"]["energy_j"],
                    "interval_time_s": doc["interval"]["time_s"],
                    "flags": doc["flags"], "commit": git_hash()})
    return out


def measured(name: str) -> dict[tuple, dict]:
    """The set's measured generate() runs (piep.measurement records of raw/*.jsonl)."""
    return runs_of(sorted((folder(name) / "raw").glob("*.jsonl")))


def runs_of(paths: list[Path]) -> dict[tuple, dict]:
    """The measured generate() runs (piep.measurement records) of `paths`, by run key."""
    return {key(r): r for path in paths for r in read_jsonl(path)
            if r.get("schema") == "piep.measurement" and r.get("energy_j")}


def bf16_twins(name: str, seen: dict[tuple, dict]) -> list[tuple]:
    """FP8 runs whose bf16 twin (the shape without `-fp8`) was measured at the same
    workload by the families' calls: (model, B, P, G, bf16 J, FP8 J, piep's FP8 / bf16
    at each run's host probe)."""
    if name != "fp8":
        return []
    families = ROOT / "calibration" / "h200" / "families"
    bf16 = {(r["model"], r["batch"], r["prompt_len"], r["gen_len"]): r
            for path in sorted((families / "raw").glob("*_eager.jsonl"))
            for r in read_jsonl(path) if r.get("energy_j")}
    out = []
    for (model, _, _, _, b, p, g), run in sorted(seen.items()):
        twin = bf16.get((model.replace("-fp8", ""), b, p, g))
        if twin is None:
            continue
        priced = []
        for path, rec in ((folder(name) / "configs" / f"{model}.json", run),
                          (families / "configs" / f"{twin['model']}.json", twin)):
            probe = rec["host_probe"]["launch_add_s"]
            priced.append(api.predict(str(path), engine="hf-eager", batch=b, prompt_len=p,
                                      gen_len=g, hosts=False,
                                      host_probe_us=1e6 * probe)["energy_j"])
        out.append((model, b, p, g, twin["energy_j"], run["energy_j"],
                    priced[0] / priced[1]))
    return out


def replay_rows(name: str) -> list[dict]:
    """The set's measured hf-cb replays (piep.serving_measurement records of raw/), each
    beside `piep serve` of its model and trace at the host probe it measured."""
    from piep.core.records import read_runs
    from piep.fit.serving import observed
    out = []
    for path in sorted((folder(name) / "raw").glob("*_cb*.jsonl")):
        for rec in read_runs(path, "piep.serving_measurement"):
            energy, tpot, _ = observed(rec)
            doc = api.serve(str(folder(name) / "configs" / f"{rec.model}.json"),
                            engine="hf-cb", trace=str(ROOT / rec.trace), hosts=False,
                            host_probe_us=None if rec.host_probe_s is None
                            else 1e6 * rec.host_probe_s)
            out.append({"model": rec.model, "trace": Path(rec.trace).name,
                        "energy_j": energy, "time_s": rec.time_s, "tpot_s": tpot,
                        "pred_j": doc["energy_j"], "pred_s": doc["time_s"],
                        "pred_tpot_s": doc["tpot_s"]["p50"]})
    return out


def errors(pred: list[dict], seen: dict[tuple, dict]) -> list[tuple[float, float]]:
    return [(p["energy_j"] / seen[key(p)]["energy_j"] - 1,
             p["time_s"] / seen[key(p)]["time_s"] - 1) for p in pred if key(p) in seen]


def mean_abs(errs: list[tuple[float, float]], i: int) -> float:
    return 100 * statistics.mean(abs(e[i]) for e in errs)


def coverage_line(now: list[dict], seen: dict[tuple, dict]) -> str:
    """How often a run's measurement fell inside the 90 % interval piep printed for it."""
    rows = [(p, seen[key(p)]) for p in now if key(p) in seen]
    inside = [sum(lo <= m[q] <= hi for p, m in rows for lo, hi in [p[f"interval_{q}"]])
              for q in ("energy_j", "time_s")]
    widened = sum("out_of_range" in p["flags"] for p, _ in rows)
    return (f"90 % intervals, as `piep predict` prints them: the measurement inside in "
            f"{inside[0]} of {len(rows)} runs (energy), {inside[1]} of {len(rows)} (time); "
            f"{widened} of the intervals carry the x1.5 widening of out-of-range module "
            f"models.")


def report(name: str) -> str:
    title, source, after = SETS[name]
    seen = measured(name)
    now = predictions(name, seen)
    blind = {key(p): p for path in sorted(folder(name).glob("predictions_blind*.jsonl"))
             for p in read_jsonl(path)}
    lines = [f"# {title}", "",
             f"Made by `python benchmarks/heldout_accuracy.py {name} --write` from "
             f"`calibration/h200/{name}/raw/` ({source}). No end-to-end run of this set "
             f"trains any fit; errors are predicted / measured - 1, each run priced at the "
             f"host probe it measured (the blind predictions: at the profile's typical "
             f"host).", "", after, "",
             "| model | engine | batch | prompt | gen | measured J | now J | error | "
             "measured s | now s | error | blind J error | blind s error |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in now:
        m, b = seen.get(key(p)), blind.get(key(p))
        if not m:
            continue
        be = (f"{100 * (b['energy_j'] / m['energy_j'] - 1):+.1f} % | "
              f"{100 * (b['time_s'] / m['time_s'] - 1):+.1f} %") if b else "- | -"
        lines.append(f"| {p['model']} | {p['engine']} | {p['batch']} | {p['prompt_len']} | "
                     f"{p['gen_len']} | "
                     f"{m['energy_j']:.1f} | {p['energy_j']:.1f} | "
                     f"{100 * (p['energy_j'] / m['energy_j'] - 1):+.1f} % | "
                     f"{m['time_s']:.3f} | {p['time_s']:.3f} | "
                     f"{100 * (p['time_s'] / m['time_s'] - 1):+.1f} % | {be} |")
    lines += ["", "| model | engine | runs | energy (now) | time (now) |", "|---|---|---|---|---|"]
    # each model under each engine; every engine's runs where more than one was measured;
    # all runs
    summaries = [((m, e), [p for p in now if (p["model"], p["engine"]) == (m, e)])
                 for m, e in dict.fromkeys((p["model"], p["engine"]) for p in now)]
    engines = list(dict.fromkeys(p["engine"] for p in now if key(p) in seen))
    if len(engines) > 1:
        summaries += [(("all", e), [p for p in now if p["engine"] == e]) for e in engines]
    summaries.append((("all", "all"), now))
    for (model, engine), rows in summaries:
        errs = errors(rows, seen)
        if errs:
            lines.append(f"| {model} | {engine} | {len(errs)} | {mean_abs(errs, 0):.1f} % "
                         f"| {mean_abs(errs, 1):.1f} % |")
    lines += ["", coverage_line(now, seen)]
    if blind:
        measured_blind = [p for p in blind.values() if key(p) in seen]
        berrs = errors(measured_blind, seen)
        commits = sorted({p["commit"][:12] for p in measured_blind})
        waiting = len(blind) - len(measured_blind)
        if berrs:
            lines += ["", f"Blind (`predictions_blind*.jsonl`, commit {', '.join(commits)}, "
                          f"before the runs): energy {mean_abs(berrs, 0):.1f} %, time "
                          f"{mean_abs(berrs, 1):.1f} % (mean |error|, {len(berrs)} runs); "
                          "by file: " + "; ".join(
                              f"{path.name} (commit {sorted({p['commit'][:12] for p in ps})[0]})"
                              f" {mean_abs(errors(ps, seen), 0):.1f} %, "
                              f"{mean_abs(errors(ps, seen), 1):.1f} % ({len(ps)} runs)"
                              for path in sorted(folder(name).glob("predictions_blind*.jsonl"))
                              if (ps := [p for p in read_jsonl(path) if key(p) in seen])) + "."]
        if waiting:
            lines += ["", f"{waiting} more blind predictions wait for their runs "
                          f"(`predictions_blind*.jsonl`)."]
    twins = bf16_twins(name, seen)
    if twins:
        lines += ["", "## The same runs in bf16, measured", "",
                  "The FP8 shape's bf16 twin (calibration/h200/families/raw, hf-eager, device "
                  "call 66) at the same workload: in eager decode, FP8 with its unfused "
                  "per-token quantization (eight small kernels before each GEMM) costs more "
                  "energy than bf16. The two were measured on different hosts; piep prices "
                  "each at its own host probe.", "",
                  "| model | batch | prompt | gen | bf16 J | FP8 J | FP8 / bf16 (measured) | "
                  "FP8 / bf16 (piep) |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {m} | {b} | {p} | {g} | {e16:.1f} | {e8:.1f} | {e8 / e16:.2f} | "
                  f"{ratio:.2f} |" for m, b, p, g, e16, e8, ratio in twins]
    replays = replay_rows(name)
    if replays:
        lines += ["", "## Continuous-batching replays (hf-cb, at the replay's host probe)", "",
                  "| model | trace | energy J (meas / pred) | error | time s (meas / pred) | "
                  "median TPOT s (meas / pred) |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['model']} | {r['trace']} | {r['energy_j']:.0f} / {r['pred_j']:.0f} | "
                  f"{100 * (r['pred_j'] / r['energy_j'] - 1):+.1f} % | {r['time_s']:.1f} / "
                  f"{r['pred_s']:.1f} | {r['tpot_s']:.3f} / {r['pred_tpot_s']:.3f} |"
                  for r in replays]
    flags = sorted({f for p in now for f in p["flags"]})
    lines += ["", f"Flags on these answers: {', '.join(flags) or 'none'}."]
    if name == "moe":  # where the error sits, and what the kernels say of it
        from moe_census import census_lines
        lines += ["", "## Prefill and decode apart", "",
                  f"`python benchmarks/heldout_accuracy.py {name} --phases`: each run's "
                  "phases beside piep's, at the host probe the run measured; the last "
                  "column, the share of piep's phase time in the decode-step experts "
                  "(`experts_batched`, a kind sampled on one board; the boards below).", "",
                  *phase_lines(name), "", *census_lines(), "", *board_lines(name)]
    return "\n".join(lines) + "\n"


MOE_KINDS = ("experts_batched", "experts_gate_up", "experts_down", "moe_copy", "routing",
             "router", "moe_mask")


def board_probes() -> dict[str, float]:
    """Every H200 board a committed record probed: its UUID -> the median of its
    decode-GEMM probe powers (`piep.sampling.hf.gpu_probe`)."""
    seen: dict[str, list[float]] = {}
    for path in sorted((ROOT / "calibration" / "h200").rglob("*.jsonl")):
        for row in read_jsonl(path):
            for g in row.get("per_gpu") or []:
                w = (g.get("gpu_probe") or {}).get("decode_gemm_power_w") \
                    if isinstance(g, dict) else None
                if w and g.get("uuid"):
                    seen.setdefault(g["uuid"], []).append(w)
    return {u: statistics.median(ws) for u, ws in seen.items()}


def board_lines(name: str) -> list[str]:
    """The boards the set's runs ran on and those its MoE kinds were sampled on, by
    their decode-GEMM probe: a kind sampled on one board prices that board's power."""
    probes = board_probes()
    runs = sorted({g["uuid"] for r in measured(name).values() for g in r.get("per_gpu") or []})
    kinds: dict[str, set[str]] = {}
    for path in sorted((ROOT / "calibration" / "h200" / "modules").glob("*.jsonl")):
        for row in read_jsonl(path):
            if row.get("kind") in MOE_KINDS and row.get("gpu_uuid"):
                kinds.setdefault(row["kind"], set()).add(row["gpu_uuid"])

    def board(u: str) -> str:
        return f"{u[4:12]} ({probes[u]:.0f} W)" if u in probes else f"{u[4:12]} (no probe)"
    typical = statistics.median(probes.values())
    return ["## Boards", "",
            f"H200 boards draw different power for the same work (reports/boards.md). The "
            f"decode-GEMM probe of every board a committed record probed: median "
            f"{typical:.0f} W over {len(probes)} boards ({min(probes.values()):.0f}-"
            f"{max(probes.values()):.0f} W). This set's runs: {', '.join(map(board, runs))}; "
            f"its kinds' module samples: "
            + "; ".join(f"{k} on {', '.join(board(u) for u in sorted(us))}"
                        for k, us in sorted(kinds.items())) + ". A kind sampled on one board "
            "is priced at that board's power, and piep takes no board probe (scaling by "
            "it was tried on the engines' runs and undone, reports/engines.md)."]


def phase_lines(name: str) -> list[str]:
    """Each measured run's prefill and decode (time, energy, mean power) beside piep's,
    priced at the host probe the run measured: where a set's error sits."""
    lines = ["| model | batch | phase | measured s | piep s | error | measured W | piep W "
             "| energy error | piep's time in experts_batched |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for run in measured(name).values():
        probe = run.get("host_probe", {}).get("launch_add_s")
        doc = api.predict(str(folder(name) / "configs" / f"{run['model']}.json"),
                          engine=run["engine"]["name"], tp=run.get("tp", 1),
                          ep=run.get("ep", 1),
                          batch=run["batch"], prompt_len=run["prompt_len"],
                          gen_len=run["gen_len"], hosts=False,
                          host_probe_us=None if probe is None else 1e6 * probe)
        for phase in ("prefill", "decode"):
            m, p = run[phase], doc[phase]
            batched = sum(x["time_s"] for x in doc["modules"]
                          if x["phase"] == phase and x["kind"] == "experts_batched")
            lines.append(f"| {run['model']} | {run['batch']} | {phase} | {m['time_s']:.3f} | "
                         f"{p['time_s']:.3f} | {100 * (p['time_s'] / m['time_s'] - 1):+.1f} % "
                         f"| {m['energy_j'] / m['time_s']:.0f} | {p['energy_j'] / p['time_s']:.0f}"
                         f" | {100 * (p['energy_j'] / m['energy_j'] - 1):+.1f} % "
                         f"| {100 * batched / p['time_s']:.0f} % |")
    return lines


def main() -> int:
    args = sys.argv[1:]
    if not args or args[0] not in SETS:
        print(f"usage: heldout_accuracy.py {{{','.join(SETS)}}} "
              "[--predict DESIGN [--again TAG] | --write]", file=sys.stderr)
        return 2
    name = args[0]
    if "--predict" in args:  # --predict DESIGN: its blind predictions, never over others
        design = folder(name) / args[args.index("--predict") + 1]
        path = blind_path(design)
        if "--again" in args:  # --again TAG: a later commit's, beside the first file's
            path = path.with_name(f"{path.stem}_{args[args.index('--again') + 1]}.jsonl")
        if path.exists() or not design.is_file() or path == design:
            print(f"{path.relative_to(ROOT)} exists (blind predictions are written once), "
                  f"or {design.name} is no design_*.jsonl of {name}", file=sys.stderr)
            return 2
        rows = predictions(name, designs=[design])
        write_text(path, "".join(json.dumps(r) + "\n" for r in rows))
        print(f"wrote {path.relative_to(ROOT)} ({len(rows)} rows)")
        return 0
    if "--phases" in args:
        print("\n".join(phase_lines(name)))
        return 0
    text = report(name)
    print(text)
    if "--write" in args:
        out = ROOT / "reports" / f"{name}.md"
        write_text(out, text)
        print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
