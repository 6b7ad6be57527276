"""New families, held out: piep's predictions of transformers runs on the shapes of
families its predictor and profiles never saw (calibration/h200/families: Qwen3, Gemma 3,
Phi-4, OLMo 2, GLM-4, SmolLM3, Granite, two shapes of our own), against the measurements.

    python benchmarks/families_accuracy.py            # the table and the errors
    python benchmarks/families_accuracy.py --json     # the same as JSON
    python benchmarks/families_accuracy.py --predict  # blind predictions, before a call
    python benchmarks/families_accuracy.py --write    # reports/families.md

`--predict` writes `predictions_blind.jsonl`: hf-static's design rows
(`design_static.jsonl`, each with the static cache its place in the design leaves) and
hf-cb's replays of three traces on two shapes, by the code of the commit it names, before
they are measured (device call 68); the table then shows them beside today's.

Nothing piep ships was fitted on these runs: every prediction leaves its family out (the
predictor's module models and the engines' profiles were fitted on Llama, Mistral and
Qwen2 shapes only). Each run is priced at the host probe it measured (`--host-probe-us`).
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
from piep.core.artifacts import git_hash, read_jsonl, write_text  # noqa: E402
from piep.core.records import Measurement  # noqa: E402

FAMILIES = ROOT / "calibration" / "h200" / "families"
BLIND = FAMILIES / "predictions_blind.jsonl"
TRACES = ROOT / "calibration" / "h200" / "engines" / "hf-cb" / "traces"
CB_SHAPES, CB_TRACES = ("qwen3-8b-shape", "phi4-shape"), ("code", "tiny", "sparse")


def blind_predictions() -> list[dict]:
    """Predictions of the runs of device call 68, made before it (typical host)."""
    out, cache = [], {}
    for r in read_jsonl(FAMILIES / "design_static.jsonl"):
        # transformers keeps a static cache of the longest earlier call on the model
        longest = cache.get(r["model"], 0)
        need = r["prompt_len"] + r["gen_len"]
        cache[r["model"]] = max(longest, need)
        doc = api.predict(str(FAMILIES / "configs" / f"{r['model']}.json"), engine=r["engine"],
                          batch=r["batch"], prompt_len=r["prompt_len"], gen_len=r["gen_len"],
                          cache_len=longest if longest > need else None)
        out.append({"model": r["model"], "engine": r["engine"], "batch": r["batch"],
                    "prompt_len": r["prompt_len"], "gen_len": r["gen_len"],
                    "energy_j": doc["energy_j"], "time_s": doc["time_s"],
                    "flags": doc["flags"]})
    for shape in CB_SHAPES:
        for trace in CB_TRACES:
            doc = served(shape, f"{trace}.jsonl")
            out.append({"model": shape, "engine": "hf-cb", "trace": f"{trace}.jsonl",
                        "energy_j": doc["energy_j"], "time_s": doc["time_s"],
                        "tpot_p50_s": doc["tpot_s"]["p50"], "flags": doc["flags"]})
    commit = git_hash()
    return [{**p, "commit": commit} for p in out]


def runs() -> list[Measurement]:
    """The measured generate() runs of the new families (every file of raw/ but the
    serving replays)."""
    return [Measurement.from_json(r) for f in sorted((FAMILIES / "raw").glob("*.jsonl"))
            for r in read_jsonl(f) if r.get("schema") == "piep.measurement"
            and r.get("energy_j") and "replay" not in r]


def predicted(m: Measurement) -> dict:
    return api.predict(m.spec, engine=m.engine, tp=m.parallel.tp, batch=m.batch,
                       prompt_len=m.prompt_len, gen_len=m.gen_len, cache_len=m.cache_len,
                       host_probe_us=None if m.host_probe_s is None else 1e6 * m.host_probe_s)


def rows() -> list[dict]:
    out = []
    for m in runs():
        doc = predicted(m)
        out.append({"model": m.model, "family": m.spec.model_type, "engine": m.engine,
                    "facts": sorted(m.spec.facts()),
                    "batch": m.batch, "prompt_len": m.prompt_len, "gen_len": m.gen_len,
                    "energy_j": m.energy_j, "predicted_energy_j": doc["energy_j"],
                    "time_s": m.time_s, "predicted_time_s": doc["time_s"],
                    "prefill_energy_j": m.prefill.energy_j,
                    "predicted_prefill_energy_j": doc["prefill"]["energy_j"],
                    "flags": doc["flags"]})
    return out


def replays() -> list[dict]:
    """The measured hf-cb replays: shape, trace, energy, time, median TPOT, host probe."""
    from piep.fit.serving import observed
    from piep.core.records import read_runs
    out = []
    for f in sorted((FAMILIES / "raw").glob("*_cb_*.jsonl")):
        for rec in read_runs(f, "piep.serving_measurement"):
            e, tpot, _ = observed(rec)
            out.append({"model": rec.model, "trace": Path(rec.trace).name, "energy_j": e,
                        "time_s": rec.time_s, "tpot_p50_s": tpot,
                        "probe_us": None if rec.host_probe_s is None
                        else 1e6 * rec.host_probe_s})
    return out


def served(shape: str, trace: str, probe_us: float | None = None) -> dict:
    """`piep serve --json` of a shape on a trace (typical host, or `probe_us`)."""
    extra = [] if probe_us is None else ["--host-probe-us", str(probe_us)]
    return json.loads(subprocess.run(
        [sys.executable, "-m", "piep", "serve", "--model",
         str(FAMILIES / "configs" / f"{shape}.json"), "--engine", "hf-cb",
         "--trace", str(TRACES / trace), "--json", *extra],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout)


def blind_rows(table: list[dict], serving: list[dict]) -> list[dict]:
    """Each blind prediction (made before its run) beside the run it predicted."""
    runs_by = {(r["model"], r["engine"], r["batch"], r["prompt_len"], r["gen_len"]): r
               for r in table}
    cb_by = {(r["model"], r["trace"]): r for r in serving}
    out = []
    for p in read_jsonl(BLIND) if BLIND.exists() else []:
        key = (p["model"], p["trace"]) if p["engine"] == "hf-cb" else \
            (p["model"], p["engine"], p["batch"], p["prompt_len"], p["gen_len"])
        m = (cb_by if p["engine"] == "hf-cb" else runs_by).get(key)
        if m is not None:
            out.append({"model": p["model"], "engine": p["engine"],
                        "what": p.get("trace") or f"B{p['batch']} P{p['prompt_len']} "
                                                   f"G{p['gen_len']}",
                        "energy_j": m["energy_j"], "predicted_energy_j": p["energy_j"],
                        "time_s": m["time_s"], "predicted_time_s": p["time_s"],
                        "commit": p["commit"]})
    return out


def _err(r: dict, key: str) -> float:
    return r[f"predicted_{key}"] / r[key] - 1


def summary(table: list[dict]) -> dict:
    """Mean absolute errors per engine, per family within it, and over all runs."""
    out: dict = {}
    for engine in sorted({r["engine"] for r in table}):
        mine = [r for r in table if r["engine"] == engine]
        fams = {}
        for fam in sorted({r["family"] for r in mine}):
            f = [r for r in mine if r["family"] == fam]
            fams[fam] = {k: statistics.mean(abs(_err(r, k)) for r in f)
                         for k in ("energy_j", "time_s")} | {"runs": len(f)}
        out[engine] = {"runs": len(mine), "families": fams,
                       **{k: statistics.mean(abs(_err(r, k)) for r in mine)
                          for k in ("energy_j", "time_s")}}
    return out


REPORT = ROOT / "reports" / "families.md"


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def report(table: list[dict], serving: list[dict], blind: list[dict]) -> str:
    """reports/families.md: every held-out run, per family and engine, and the blind set."""
    lines = ["# New families, held out", "",
             "Made by `python benchmarks/families_accuracy.py --write` from the runs in "
             "`calibration/h200/families/raw/` (device calls 66, 68, 69, 70; scripts and logs in "
             "`calibration/h200/device/run66.sh`, `run68.sh`, `run70.sh`). The shapes "
             "(`calibration/h200/families/configs/`) are built by transformers from each "
             "family's own config; nothing piep ships was fitted on them: the predictor's "
             "module models and the engines' profiles were fitted on Llama, Mistral and "
             "Qwen2 shapes, so every figure here leaves its family out. Runs are priced at "
             "the host probe they measured.", "",
             "## Per family (mean |error|)", "",
             "| family | engine | runs | energy | time | what its layers run beyond Llama's "
             "(ModelSpec.facts) |",
             "|---|---|---|---|---|---|"]
    for engine, s in summary(table).items():
        for fam, f in s["families"].items():
            facts = ", ".join(sorted({k for r in table if r["family"] == fam
                                      for k in r["facts"]}))
            lines.append(f"| {fam} | {engine} | {f['runs']} | {100 * f['energy_j']:.1f} % | "
                         f"{100 * f['time_s']:.1f} % | {facts or 'per-model facts only'} |")
        lines.append(f"| all | {engine} | {s['runs']} | {100 * s['energy_j']:.1f} % | "
                     f"{100 * s['time_s']:.1f} % | |")
    if serving:
        mean = statistics.mean(abs(_err(r, "energy_j")) for r in serving)
        lines.append(f"| all | hf-cb | {len(serving)} replays | {100 * mean:.1f} % | | |")
    lines += ["", "## Every run", "",
              "| shape | family | engine | batch | prompt | gen | energy J (meas / pred) | "
              "error | time s (meas / pred) | error |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r['model']} | {r['family']} | {r['engine']} | {r['batch']} | "
                     f"{r['prompt_len']} | {r['gen_len']} | {r['energy_j']:.1f} / "
                     f"{r['predicted_energy_j']:.1f} | {_pct(_err(r, 'energy_j'))} | "
                     f"{r['time_s']:.3f} / {r['predicted_time_s']:.3f} | "
                     f"{_pct(_err(r, 'time_s'))} |")
    lines += ["", "## Serving replays (hf-cb, at the replay's host probe)", "",
              "| shape | trace | energy J (meas / pred) | error | time s (meas / pred) | "
              "median TPOT s (meas / pred) |", "|---|---|---|---|---|---|"]
    for r in serving:
        lines.append(f"| {r['model']} | {r['trace']} | {r['energy_j']:.0f} / "
                     f"{r['predicted_energy_j']:.0f} | {_pct(_err(r, 'energy_j'))} | "
                     f"{r['time_s']:.1f} / {r['predicted_time_s']:.1f} | "
                     f"{r['tpot_p50_s']:.3f} / {r['predicted_tpot_p50_s']:.3f} |")
    lines += ["", "## Blind: predicted before the run", "",
              f"`{BLIND.relative_to(ROOT)}`, written by `--predict` at the commit it names "
              "(typical host), before device calls 68 to 70.", "",
              "| shape | engine | run | energy error | time error | commit |",
              "|---|---|---|---|---|---|"]
    for r in blind:
        lines.append(f"| {r['model']} | {r['engine']} | {r['what']} | "
                     f"{_pct(_err(r, 'energy_j'))} | {_pct(_err(r, 'time_s'))} | "
                     f"{r['commit'][:7]} |")
    lines += ["", "## Limits", "",
              "- The new modules (q/k norms, GeGLU, scalar multiplies) have no module "
              "samples of their own yet: q/k norms are priced by the RMSNorm models at their "
              "rows and widths, GeGLU's gate as SwiGLU's, a scalar multiply as a residual "
              "add; fused projections by the GEMM models at their widths.",
              "- hf-static (compiled) has one run of a new family (Qwen3 8B shape); its "
              "Gemma 3, Phi-4 and local-global rows ran out of device time (compiling a "
              "local-global model's step took over 150 s).",
              "- hf-cb replays: the Qwen3 8B and Phi-4 shapes, two traces each (the third "
              "ran out of time); no serving run of a local-global model.",
              "- Quantized weights (FP8, AWQ, GPTQ, ...) and mixtures of experts are refused "
              "in one line; Gemma 2 (attention soft-capping) too.", ""]
    return "\n".join(lines)


def main() -> int:
    if "--predict" in sys.argv:
        preds = blind_predictions()
        write_text(BLIND, "".join(json.dumps(p) + "\n" for p in preds))
        print(f"wrote {len(preds)} predictions to {BLIND.relative_to(ROOT)}")
        return 0
    table, serving = rows(), replays()
    for r in serving:  # today's serving predictions, at the replay's host probe
        doc = served(r["model"], r["trace"], r["probe_us"])
        r.update(predicted_energy_j=doc["energy_j"], predicted_time_s=doc["time_s"],
                 predicted_tpot_p50_s=doc["tpot_s"]["p50"])
    blind = blind_rows(table, serving)
    if "--write" in sys.argv:
        write_text(REPORT, report(table, serving, blind))
        print(f"wrote {REPORT.relative_to(ROOT)}")
        return 0
    if "--json" in sys.argv:
        print(json.dumps({"runs": table, "summary": summary(table), "serving": serving,
                          "blind": blind}, indent=1))
        return 0
    print(f"{'model':27s} {'engine':9s} {'B':>3s} {'P':>5s} {'G':>4s} {'E meas':>7s} "
          f"{'E pred':>7s} {'err':>6s} {'t meas':>6s} {'t pred':>6s} {'err':>6s} "
          f"{'prefill':>7s}")
    for r in table:
        print(f"{r['model']:27s} {r['engine']:9s} {r['batch']:3d} {r['prompt_len']:5d} "
              f"{r['gen_len']:4d} {r['energy_j']:7.1f} {r['predicted_energy_j']:7.1f} "
              f"{100 * _err(r, 'energy_j'):+5.1f}% {r['time_s']:6.3f} "
              f"{r['predicted_time_s']:6.3f} {100 * _err(r, 'time_s'):+5.1f}% "
              f"{100 * _err(r, 'prefill_energy_j'):+6.1f}%")
    print(f"\n{'hf-cb replay':37s} {'E meas':>8s} {'E pred':>8s} {'err':>6s} {'t meas':>6s} "
          f"{'t pred':>6s} {'TPOT meas':>9s} {'pred':>6s}")
    for r in serving:
        print(f"{r['model'] + ' ' + r['trace']:37s} {r['energy_j']:8.0f} "
              f"{r['predicted_energy_j']:8.0f} {100 * _err(r, 'energy_j'):+5.1f}% "
              f"{r['time_s']:6.1f} {r['predicted_time_s']:6.1f} {r['tpot_p50_s']:9.3f} "
              f"{r['predicted_tpot_p50_s']:6.3f}")
    if serving:
        print(f"hf-cb: {len(serving)} replays, mean |error| energy "
              f"{100 * statistics.mean(abs(_err(r, 'energy_j')) for r in serving):.1f} %")
    print("\nblind (predicted before the run, typical host; commit named in "
          f"{BLIND.name}):")
    for r in blind:
        print(f"  {r['model']:16s} {r['engine']:9s} {r['what']:18s} energy "
              f"{r['predicted_energy_j']:8.1f} vs {r['energy_j']:8.1f} "
              f"({100 * _err(r, 'energy_j'):+5.1f} %), time {r['predicted_time_s']:7.3f} vs "
              f"{r['time_s']:7.3f} ({100 * _err(r, 'time_s'):+5.1f} %)  [{r['commit'][:7]}]")
    for engine, s in summary(table).items():
        print(f"\n{engine}: {s['runs']} runs, mean |error| energy {100 * s['energy_j']:.1f} %, "
              f"time {100 * s['time_s']:.1f} %")
        for fam, f in s["families"].items():
            print(f"  {fam:12s} {f['runs']:2d} runs  energy {100 * f['energy_j']:5.1f} %  "
                  f"time {100 * f['time_s']:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
