"""An H100 priced before and after its own calibration: piep's spec-sheet answers
(`--allow-uncalibrated`: the H200's predictor on a profile scaled by spec-sheet ratios,
nothing measured on an H100) and the quick calibration `piep calibrate gpu` measured on an
H100 SXM (device call 91, `calibration/h100/device/run91.sh`), both scored on the H100's
own end-to-end runs of piep's reference runner.

    python benchmarks/h100_quick.py            # the tables
    python benchmarks/h100_quick.py --write    # ... into reports/h100.md
    python benchmarks/h100_quick.py --predict  # the MoE and family designs, blind, once

The last section: transformers generate() on mixtures of experts, the H200's design 7
(`calibration/h200/moe/design_eager7.jsonl`, hf-eager) and its compiled design
(`design_static8.jsonl`, hf-static) run on the H100 (device call 92,
`calibration/h100/device/run92.sh`; the section appears once its runs are in
`calibration/h100/moe/raw/`), priced by spec sheet before the runs
(`calibration/h100/moe/predictions_blind_h100_*.jsonl`, `--predict`) and now at the host
probe each run measured; beside the same runs on the H200 where they were measured there
(device call 90).

The spec-sheet column fits nothing to the H100: no H100 measurement enters it (its power
rule, though, was chosen in session 45 after these runs were seen: the report says so).
The calibration's column is leave one model out (each model's runs predicted by a
predictor fitted on the H100's module samples, less those of kernel shapes only that model
has, and on the other models' H100 runs), as reports/calibration_cost.md scores the H200's quick calibrations.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.predict.transfer import TransferredModel  # noqa: E402

FOLDER = ROOT / "calibration" / "h100" / "quick" / "h100-quick"
# the H200's quick calibration of the same recipe and seed: the same module shapes drawn
H200_QUICK = ROOT / "calibration" / "h200" / "quick15" / "h200-quick15"
REPORT = ROOT / "reports" / "h100.md"
# the H200's designs run on the H100 -> piep's spec-sheet answers for them, before the runs
MOE_DESIGNS = {ROOT / "calibration" / "h200" / "moe" / name:
               ROOT / "calibration" / "h100" / "moe" / blind
               for name, blind in (("design_eager7.jsonl", "predictions_blind_h100_7.jsonl"),
                                   ("design_static8.jsonl",
                                    "predictions_blind_h100_static8.jsonl"),
                                   ("design_eager9.jsonl", "predictions_blind_h100_9.jsonl"))}
MOE_DESIGN_9 = next(d for d in MOE_DESIGNS if d.name == "design_eager9.jsonl")
# the runs of those designs: on the H100 (device calls 92, 96), on the H200 (90, 95)
MOE_RUNS = ROOT / "calibration" / "h100" / "moe" / "raw"
H200_RUNS = ROOT / "calibration" / "h200" / "moe" / "raw"


def folder_gpu(folder: Path):
    """The folder's GPU profile as `--gpu NAME` reads it (a user data directory holding the
    folder under its name)."""
    import os
    import tempfile
    from piep.core.gpus import load_gpu
    home = Path(tempfile.mkdtemp(prefix="piep-h100-"))
    (home / "calibration").mkdir()
    (home / "calibration" / folder.name).symlink_to(folder.resolve())
    os.environ["PIEP_DATA_DIR"] = str(home)
    return load_gpu(folder.name)


def calibrated_rows(folder: Path) -> tuple[dict, list[dict]]:
    """(calibrate.json, every run of the folder predicted leave one model out by the
    folder's own calibration; each row's `spec` the model it ran)."""
    from piep.core.dataset import load_calibration
    from piep.core.records import merge_repeats
    from piep.fit.predictor import Case, leave_one_model_out
    state = json.loads((folder / "calibrate.json").read_text())
    gpu = folder_gpu(folder)
    cal = load_calibration(folder.name, root=folder)
    runs = [Case(m, m.deployment(gpu)) for m in merge_repeats(cal.e2e)]
    rows = leave_one_model_out(cal, gpu, runs)
    by_key = {c.run.key: c for c in runs}
    return state, [{**r, "spec": by_key[r["key"]].dep.model,
                    "decode_s": by_key[r["key"]].run.decode.time_s} for r in rows]


def resolved(row: dict, gpu: str = "h100"):
    """One run's scenario resolved as piep answers it on `gpu` (an H100: by spec sheet)."""
    from piep.predict.resolve import resolve, scenario
    engine = "piep-graph" if row["mode"] == "graph" else "piep-eager"
    return resolve(scenario(row["spec"], gpu=gpu, allow_uncalibrated=True, engine=engine,
                            tp=row["tp"], pp=row["pp"], dp=row["dp"], batch=row["batch"],
                            prompt_len=row["prompt_len"], gen_len=row["gen_len"]))


class TdpPower(TransferredModel):
    """The transfer's power rule until session 45, beside the shipped one: every kernel's
    board power times the TDP ratio, whatever bounds it."""

    def memory_share(self, table):
        import numpy as np
        return np.zeros(len(table))


def moe_prices(seen: dict[tuple, dict] | None = None,
               designs: list[Path] | None = None) -> list[dict]:
    """The MoE designs' runs (or `designs`') as piep prices them on an H100 (spec sheet):
    at the host probe each run of `seen` measured, else the profile's typical host."""
    from heldout_accuracy import predictions
    return predictions("moe", seen, designs=designs or list(MOE_DESIGNS), gpu="h100",
                       allow_uncalibrated=True)


def batched_h100_over_h200() -> str:
    """The decode-step experts' op (gather + bmm from the sampler's table of 8) on the H100
    over the H200, at every shape both timed: the H100's table A/Bs (its table-of-8 arm,
    eager) against the H200's module samples (the fastest of each shape)."""
    from piep.core.artifacts import read_jsonl
    h200: dict[tuple, float] = {}
    for path in sorted((ROOT / "calibration" / "h200" / "modules").glob(
            "modules_moe_decode_s*.jsonl")):
        for r in read_jsonl(path):
            if r.get("kind") == "experts_batched":
                k = (r["tokens"], r["d_in"], r["d_out"])
                h200[k] = min(h200.get(k, float("inf")), r["time_s"])
    ratios = sorted(r["table8_ms"] / 1e3 / h200[k]
                    for path in sorted((ROOT / "calibration" / "h100" / "moe").glob(
                        "experts_table_ab_s*.jsonl")) for r in read_jsonl(path)
                    if (k := (r["pairs"], r["d_in"], r["d_out"])) in h200)
    return (f"x{statistics.median(ratios):.2f} (x{ratios[0]:.2f}-{ratios[-1]:.2f} over "
            f"the {len(ratios)} shapes timed on both: the H100's table A/Bs against the "
            "H200's module samples)")


def measured_runs(folder: Path, call: int) -> dict[tuple, dict]:
    """One device call's generate() runs of the MoE designs, by run key."""
    from heldout_accuracy import runs_of
    return runs_of(sorted(folder.glob(f"moe_s{call}_*.jsonl")))


def moe_section() -> list[str]:
    """The H100's runs of the MoE designs (hf-eager, hf-static) against piep's spec-sheet
    answers (blind and now) and the H200's runs of the same designs."""
    from heldout_accuracy import key
    from piep.core.artifacts import read_jsonl
    runs = {**measured_runs(MOE_RUNS, 92), **measured_runs(MOE_RUNS, 96)}
    if not runs:
        return []
    h200 = {**measured_runs(H200_RUNS, 90), **measured_runs(H200_RUNS, 95)}
    by_design = {design: {key(r): r for r in read_jsonl(path)}
                 for design, path in MOE_DESIGNS.items() if path.is_file()}
    ran = [d for d, rows in by_design.items() if runs.keys() & rows.keys()]
    blind = {k: r for d in ran for k, r in by_design[d].items()}
    now = {key(r): r for r in moe_prices(runs, designs=ran)}
    designs = ", ".join(f"`{d.relative_to(ROOT)}`" for d in ran)
    lines = ["", "## Mixtures of experts, transformers generate()", "",
             f"The H200's MoE designs ({designs}: Phi-3.5-MoE, MiniMax-M2 and Hunyuan-A13B "
             "shapes cut to 6-8 layers under hf-eager; OLMoE, Qwen3-30B-A3B and one of our "
             "own under hf-static; design 9, four shapes under hf-eager at batch 64-192, "
             "512-1,536 (token, expert) pairs a decode step) run on the H100 (device calls "
             "92 and 96; call 96's Mixtral cut to 4 layers at batch 96 ran out of memory at "
             "75 GiB, where piep's memory check counted 75.2 of the board's 79.7 GiB, and is "
             "not listed); piep's answers by spec sheet (`--gpu h100 --allow-uncalibrated`): "
             "blind ("
             + ", ".join(f"`{MOE_DESIGNS[d].relative_to(ROOT)}`" for d in ran)
             + ", before the runs, at the typical host) and now (at the host probe each run "
             "measured).", "",
             "| model | engine | batch | prompt | gen | measured J | blind error | now error | "
             "measured s | blind error | now error | H100 / H200 J | H100 / H200 s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    pairs = []
    for k, m in runs.items():
        b, n, h = blind[k], now[k], h200.get(k)
        pairs.append((b, n, m))
        ratio = (f"x{m['energy_j'] / h['energy_j']:.2f} | x{m['time_s'] / h['time_s']:.2f}"
                 if h else "- | -")
        lines.append(f"| {m['model']} | {k[1]} | {m['batch']} | {m['prompt_len']} | "
                     f"{m['gen_len']} | {m['energy_j']:.1f} | "
                     f"{error(b['energy_j'], m['energy_j']):+.1f} % | "
                     f"{error(n['energy_j'], m['energy_j']):+.1f} % | {m['time_s']:.3f} | "
                     f"{error(b['time_s'], m['time_s']):+.1f} % | "
                     f"{error(n['time_s'], m['time_s']):+.1f} % | {ratio} |")
    from piep.stats.conformal import mape
    blind_rows, now_rows = ([scored(m, x[i]["energy_j"], x[i]["time_s"]) for *x, m in pairs]
                            for i in (0, 1))
    engines = [k[1] for k in runs]
    lines += ["", f"Mean |error| over {len(pairs)} runs: blind energy "
              f"{mape(blind_rows, 'energy_j'):.1f} %, time {mape(blind_rows, 'time_s'):.1f} %; "
              f"now {mape(now_rows, 'energy_j'):.1f} %, {mape(now_rows, 'time_s'):.1f} %; "
              "blind, by engine: " + "; ".join(
                  f"{e} {mape(rs, 'energy_j'):.1f} %, {mape(rs, 'time_s'):.1f} % "
                  f"({len(rs)} runs)" for e in dict.fromkeys(engines)
                  if (rs := [r for r, x in zip(blind_rows, engines) if x == e])) + "."]
    big = [(n, m) for _, n, m in pairs if m["batch"] >= 8]
    nine = [(b, n, m) for b, n, m in pairs
            if key(m) in by_design.get(MOE_DESIGN_9, {})]  # (its runs: call 96)
    spans = {col: "{:+.0f}..{:+.0f} %".format(
        *(f(error(x[i]["time_s"], m["time_s"]) for *x, m in nine) for f in (min, max)))
        for col, i in (("blind", 0), ("now", 1))} if nine else {}
    if big:
        signed = {f: statistics.mean(error(n[f], m[f]) for n, m in big)
                  for f in ("energy_j", "time_s")}
        lines += ["", "The blind column of designs 7 and 8 priced with the transfer's power "
                  "rule before session 45 (every kernel's power x the TDP ratio), design 9's "
                  "(session 47) and the now column with today's (`piep.predict.transfer`: a "
                  "memory-bound kernel keeps the energy above idle it drew on the H200). "
                  f"Design 9 ran long by spec sheet (time blind {spans.get('blind')}, now "
                  f"{spans.get('now')}): its decode steps are the "
                  "experts' gathers and bmm, which the H100 ran "
                  f"{batched_h100_over_h200()} the H200's time where the spec sheets' "
                  "bandwidths say x1.43, and the table ratio measured at "
                  "batch 8 and 32 was high at many pairs (call 97; the ratio is the median "
                  "over calls 94 and 97 since, which the now column prices: `python "
                  "benchmarks/h100_quick.py` at commit f1441a3 gives the ratio of call 94 "
                  "alone). "
                  f"Now, the {len(big)} runs of batch 8 or more: energy "
                  f"{signed['energy_j']:+.1f} %, time {signed['time_s']:+.1f} % (signed "
                  "means; the decode-step experts priced x the table A/B's ratio since "
                  "session 46, reports/moe.md: `python benchmarks/h100_quick.py` at commit "
                  "dee1405 gives -18.2 % and -9.7 %, the old power rule's excess having "
                  "hidden them before)."]
    return lines


FAMILIES = ROOT / "calibration" / "h100" / "families"
FAMILY_DESIGN = FAMILIES / "design_h100_blind.jsonl"
# the blind design's predictions: the transfer's power rule of session 45, and the one
# before it (made by commit aed2e41), both committed before device call 93
FAMILY_BLIND = {"today's rule": FAMILIES / "predictions_blind_h100.jsonl",
                "TDP rule": FAMILIES / "predictions_blind_h100_tdp.jsonl"}


def families_section() -> list[str]:
    """The blind design of ten family runs (hf-eager) on the H100 against piep's
    spec-sheet answers under both power rules, each committed before the runs, and
    today's answers at the host probe each run measured."""
    from heldout_accuracy import key, predictions, runs_of
    from piep.core.artifacts import read_jsonl
    from piep.stats.conformal import mape
    runs = runs_of(sorted((FAMILIES / "raw").glob("families_s93*.jsonl")))
    if not runs:
        return []
    answers = {name: {key(r): r for r in read_jsonl(path)}
               for name, path in FAMILY_BLIND.items()}
    now = "now, at the run's host"
    answers[now] = {key(r): r for r in predictions(
        "families", runs, designs=[FAMILY_DESIGN], gpu="h100", allow_uncalibrated=True)}
    lines = ["", "## New families, blind", "",
             f"{len(runs)} transformers generate() runs (hf-eager) of the families' "
             f"shapes at workloads no run had (`{FAMILY_DESIGN.relative_to(ROOT)}`, "
             "device call 93, `calibration/h100/device/run93.sh`), priced by spec sheet "
             "before the call, at the profile's typical host, under today's power rule and "
             "the TDP rule before it ("
             + ", ".join(f"`{p.relative_to(ROOT)}`" for p in FAMILY_BLIND.values()) + "); "
             "now: today's code at the host probe each run measured (its launch time).", "",
             "| model | batch | prompt | gen | measured J | today's rule | TDP rule | now | "
             "measured s | blind | now |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows: dict[str, list[dict]] = {name: [] for name in answers}
    for k, m in sorted(runs.items()):
        cells = []
        for name, preds in answers.items():
            p = preds[k]
            rows[name].append(scored(m, p["energy_j"], p["time_s"]))
            cells.append(f"{p['energy_j']:.1f} ({error(p['energy_j'], m['energy_j']):+.1f} %)")
        times = [answers[name][k]["time_s"] for name in ("today's rule", now)]
        lines.append(f"| {m['model']} | {m['batch']} | {m['prompt_len']} | {m['gen_len']} | "
                     f"{m['energy_j']:.1f} | {' | '.join(cells)} | {m['time_s']:.3f} | "
                     + " | ".join(f"{t:.3f} ({error(t, m['time_s']):+.1f} %)" for t in times)
                     + " |")
    lines += ["", f"Mean |error| over {len(runs)} runs: " + "; ".join(
        f"{name}: energy {mape(rs, 'energy_j'):.1f} %, time {mape(rs, 'time_s'):.1f} %"
        for name, rs in rows.items()) + "."]
    return lines


VL = FAMILIES / "vl"


def stand_in_specs(path: Path) -> tuple:
    """(the VL decoder's spec, its stand-in's: the same config, the stand-in's model_type)."""
    from piep.core.config import ModelSpec
    from piep.core.families import FAMILIES
    config = json.loads(path.read_text())
    own = ModelSpec.from_hf_config(config, name=path.stem)
    stand_in = json.loads(json.dumps(config))  # (a deep copy)
    for part in (stand_in, stand_in.get("text_config") or {}):
        part["model_type"] = FAMILIES[own.model_type].runs_as
    return own, ModelSpec.from_hf_config(stand_in, name=path.stem)


def predict(spec, gpu: str, batch: int, prompt: int, gen: int) -> dict:
    """piep's hf-eager answer for one spec at one workload (spec sheet where uncalibrated)."""
    from piep import api
    return api.predict(model=spec, gpu=gpu, engine="hf-eager", batch=batch, prompt_len=prompt,
                       gen_len=gen, allow_uncalibrated=True)


def vl_pairs() -> dict[tuple, dict[str, dict]]:
    """The VL A/B's runs (benchmarks/vl_text_ab.py): per (config, batch, prompt, gen), the
    VL model's own run and its stand-in's (`own`, `runs_as`)."""
    from piep.core.artifacts import read_jsonl
    pairs: dict[tuple, dict[str, dict]] = {}
    for path in sorted(VL.glob("vl_text_ab_s*.jsonl")):
        for r in read_jsonl(path):
            pairs.setdefault((r["config"], r["batch"], r["prompt_len"], r["gen_len"]),
                             {})[r["kind"]] = r
    return pairs


def vl_section() -> list[str]:
    """Vision-language models' generate() on text prompts beside the family each is built
    as (benchmarks/vl_text_ab.py), against piep's answers for that card committed before."""
    from piep.core.artifacts import read_jsonl
    pairs = vl_pairs()
    if not pairs:
        return []
    recs = [r for pair in pairs.values() for r in pair.values()]
    card = "h100" if "H100" in recs[0]["device"] else "h200"  # (the card the call got)
    blind = {(r["config"], r["batch"], r["prompt_len"], r["gen_len"]): r
             for r in read_jsonl(VL / f"predictions_blind_{card}.jsonl")}
    lines = ["", "## Vision-language models on text prompts", "",
             "piep prices a VL model's text decoder as the layer of the family it is built as "
             "(`runs_as`: transformers has no CausalLM for it). Each VL model's own "
             "generate() (random bf16 weights, text prompts, greedy, every token generated) "
             "beside its stand-in's, alternated three times on the same card "
             "(`benchmarks/vl_text_ab.py`, `calibration/h100/device/run98.sh`, "
             f"`{VL.relative_to(ROOT)}/`), and piep's hf-eager answers for the card it ran "
             f"on (`predictions_blind_{card}.jsonl`: "
             + ("by spec sheet" if card == "h100" else "its calibration")
             + "), committed before the call. Medians of the three.", "",
             "The column `piep: own / stand-in` prices the stand-in's config as well (the "
             "same keys, its `model_type` the stand-in's): what piep's tree says the two "
             "differ by.", "",
             "| config | batch | prompt | gen | own J | own s | stand-in J | stand-in s | "
             "own / stand-in: energy, time | piep: own / stand-in | piep J (vs own) | "
             "piep s (vs own) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    errors = []
    for k, pair in sorted(pairs.items()):
        own, stand = pair.get("own"), pair.get("runs_as")
        if own is None or stand is None or own["energy_median_j"] is None:
            continue
        p = blind.get(k)
        e, t = own["energy_median_j"], own["time_median_s"]
        piep = (f"{p['energy_j']:.1f} ({error(p['energy_j'], e):+.1f} %) | "
                f"{p['time_s']:.3f} ({error(p['time_s'], t):+.1f} %)") if p else "- | -"
        if p:
            errors.append(scored({"energy_j": e, "time_s": t}, p["energy_j"], p["time_s"]))
        priced = [predict(spec, card, *k[1:]) for spec in stand_in_specs(ROOT / k[0])]
        lines.append(f"| {Path(k[0]).stem} | {k[1]} | {k[2]} | {k[3]} | {e:.1f} | {t:.3f} | "
                     f"{stand['energy_median_j']:.1f} | {stand['time_median_s']:.3f} | "
                     f"x{e / stand['energy_median_j']:.3f}, "
                     f"x{t / stand['time_median_s']:.3f} | "
                     f"x{priced[0]['energy_j'] / priced[1]['energy_j']:.3f}, "
                     f"x{priced[0]['time_s'] / priced[1]['time_s']:.3f} | {piep} |")
    if errors:
        from piep.stats.conformal import mape
        lines += ["", f"piep blind on the VL models' own runs, mean |error| over {len(errors)}: "
                  f"energy {mape(errors, 'energy_j'):.1f} %, time {mape(errors, 'time_s'):.1f} "
                  f"% (device: {recs[0]['device']})."]
    return lines + vl_census_lines()


def vl_census_lines() -> list[str]:
    """The CUDA kernels of a decode step of each VL model and its stand-in, in its layers
    and outside them (`benchmarks/vl_text_ab.py --census` on a card)."""
    from piep.core.artifacts import read_jsonl
    path = VL / "vl_census_h100.jsonl"
    if not path.exists():
        return []
    rows = {(r["config"], r["kind"]): r for r in read_jsonl(path) if "config" in r}
    lines = ["", f"CUDA kernels of a decode step on the same card (`{path.relative_to(ROOT)}`, "
             "`python benchmarks/vl_text_ab.py --census`, torch's profiler), a layer and "
             "outside the layers, own / stand-in. In the layers, GLM-4.1V's two fewer are its "
             "RoPE's (the row's 8 kernels, GLM-4's 10); outside them, Qwen2.5-VL's M-RoPE "
             "positions add kernels piep does not price, and GLM-4's generate() checks its "
             "config's end-of-sequence ids every step where GLM-4.1V's text config holds none "
             "(transformers' `Glm4Config().eos_token_id` is a list of three; "
             "`Glm4vTextConfig` has no such key): a generation setting, not the model's.", "",
             "| config | a layer | outside the layers |", "|---|---|---|"]
    for config in dict.fromkeys(c for c, _ in rows):
        own, stand = rows.get((config, "own")), rows.get((config, "runs_as"))
        if own and stand:
            cells = [f"{sum(own[k].values()):.0f} / {sum(stand[k].values()):.0f}"
                     for k in ("decode_step_per_layer_by_name", "decode_step_outside_by_name")]
            lines.append(f"| {Path(config).stem} | {cells[0]} | {cells[1]} |")
    return lines


def write_once(path: Path, make) -> None:
    """Blind predictions `make()` into `path`, unless it is there (written once)."""
    from piep.core.artifacts import write_text
    if path.exists():
        print(f"{path.relative_to(ROOT)} exists: blind predictions are written once")
        return
    write_text(path, "".join(json.dumps(p) + "\n" for p in make()))
    print(f"wrote {path.relative_to(ROOT)}")


def write_blind() -> None:
    """The spec-sheet prices on the H100, before their runs: each MoE design's, and the
    family design's under today's power rule (its TDP-rule twin was written by the same
    call at commit aed2e41, the rule before session 45)."""
    from heldout_accuracy import predictions
    for design, path in MOE_DESIGNS.items():
        write_once(path, lambda design=design: moe_prices(designs=[design]))
    write_once(FAMILY_BLIND["today's rule"], lambda: predictions(
        "families", designs=[FAMILY_DESIGN], gpu="h100", allow_uncalibrated=True))


def error(pred: float, meas: float) -> float:
    return 100.0 * (pred / meas - 1.0)


def scored(meas: dict, energy_j: float, time_s: float) -> dict:
    """A run beside an answer for it, as `mape` reads them."""
    return {"energy_j": meas["energy_j"], "time_s": meas["time_s"],
            "pred_energy_j": energy_j, "pred_time_s": time_s}


def table(folder: Path = FOLDER) -> tuple[dict, list[dict]]:
    """calibrate.json and one row per H100 run: measured, the spec-sheet answer, the
    calibration's answer (leave one model out)."""
    state, rows = calibrated_rows(folder)
    from dataclasses import replace
    from piep import api
    for r in rows:
        res = resolved(r)
        spec = api.prediction(res, hosts=False)
        m = res.cost_model
        tdp = replace(res, cost_model=TdpPower(m.base, m.ratios, m.reference, source=m.source))
        r["spec_energy_j"], r["spec_time_s"] = spec.outcome.energy_j, spec.outcome.time_s
        r["spec_phases"] = spec.phases
        r["h200_phases"] = api.prediction(resolved(r, "h200"), hosts=False).phases
        r["tdp_energy_j"] = api.prediction(tdp, hosts=False).outcome.energy_j
    return state, rows


def host_probe_us(folder: Path) -> float:
    """The launch probe the calibration measured on its host (us)."""
    from piep.core.artifacts import read_jsonl
    rows = [r for r in read_jsonl(folder / "modules" / "quick.jsonl")
            if r.get("schema") == "piep.host_overhead"]
    return 1e6 * statistics.median(r["launch_s"] for r in rows)


def module_samples(folder: Path) -> dict[tuple, dict]:
    """A quick calibration's module samples by shape."""
    from piep.core.artifacts import read_jsonl
    return {tuple((f, r.get(f)) for f in r["shape_fields"]): r
            for r in read_jsonl(folder / "modules" / "quick.jsonl")
            if r.get("schema") == "piep.module_sample" and "error" not in r}


def module_ratios(h100: Path = FOLDER, h200: Path = H200_QUICK) -> dict[str, dict]:
    """Per kind, over the shapes both boards sampled: the median H100 / H200 ratio of a
    call's time, the board's power over the window and a call's energy."""
    a, b = module_samples(h100), module_samples(h200)
    by_kind: dict[str, list[tuple[float, float, float]]] = {}
    for key in a.keys() & b.keys():
        x, y = a[key], b[key]
        by_kind.setdefault(x["kind"], []).append(
            (x["time_s"] / y["time_s"], x["power_w"] / y["power_w"],
             x["energy_j"] / y["energy_j"]))
    every = [v for vs in by_kind.values() for v in vs]
    return {kind: {"n": len(vs), **{name: statistics.median(v[i] for v in vs)
                                    for i, name in enumerate(("time", "power", "energy"))}}
            for kind, vs in sorted(by_kind.items()) + [("all", every)]}


def summary(rows: list[dict]) -> dict[str, float]:
    """Mean |error| (%) of each column."""
    from piep.stats.conformal import mape
    spec = [scored(r, r["spec_energy_j"], r["spec_time_s"]) for r in rows]
    tdp = [scored(r, r["tdp_energy_j"], r["spec_time_s"]) for r in rows]
    return {"spec_energy": mape(spec, "energy_j"), "spec_time": mape(spec, "time_s"),
            "lomo_energy": mape(rows, "energy_j"), "lomo_time": mape(rows, "time_s"),
            "tdp_energy": mape(tdp, "energy_j")}

def report(state: dict, rows: list[dict]) -> str:
    s = summary(rows)
    gpu = json.loads((FOLDER / "gpu.json").read_text())["values"]
    probe = host_probe_us(FOLDER)
    modules = len(module_samples(FOLDER))
    from piep.core.gpus import transfer_gpu
    from piep.predict.transfer import BAND
    ratios = transfer_gpu("h100")[1]
    decode = {"time": statistics.median(r["spec_phases"]["decode"]["time_s"] / r["decode_s"]
                                        for r in rows),
              "power": statistics.median(
                  r["spec_phases"]["decode"]["energy_j"] / r["spec_phases"]["decode"]["time_s"]
                  / (r["decode_j"] / r["decode_s"]) for r in rows)}
    h200 = {"time": statistics.median(r["decode_s"] / r["h200_phases"]["decode"]["time_s"]
                                      for r in rows),
            "power": statistics.median(
                r["decode_j"] / r["decode_s"] / (r["h200_phases"]["decode"]["energy_j"]
                                                 / r["h200_phases"]["decode"]["time_s"])
                for r in rows)}
    inside = sum(BAND[0] <= r["spec_energy_j"] / r["energy_j"] <= BAND[1]
                 and BAND[0] <= r["spec_time_s"] / r["time_s"] <= BAND[1] for r in rows)
    lines = [
        "# An H100 SXM: piep before and after its calibration", "",
        "Made by `python benchmarks/h100_quick.py --write` (its docstring says how each "
        "column is priced) from `calibration/h100/quick/h100-quick/`, the folder `piep "
        "calibrate gpu --name h100-quick --minutes 9` left on an NVIDIA H100 80GB HBM3 "
        f"(device call 91, `calibration/h100/device/run91.sh`, {state['spent_s'] / 60:.1f} "
        f"device minutes, stopped at its budget with {len(rows)} runs and {modules} module "
        "samples measured). The board as measured: memory "
        f"{gpu['memory_gib']['value']} GiB, idle power {gpu['idle_power_w']['value']} W "
        f"with a context open, launch probe {probe:.2f} us; its other gpu.json values are "
        "the H200's, copied and marked so (one GPU measures no collective and no wait: "
        "those are the H200's too).", "",
        "## Module samples beside the H200's", "",
        "The recipe draws its shapes with a fixed seed: the H200's 15-minute calibration "
        "(`calibration/h200/quick15/`, device calls 62-63) sampled the same shapes. Median "
        "H100 / H200 ratio per kind over the shapes both sampled:", "",
        "| kind | shapes | time | power | energy |", "|---|---|---|---|---|"]
    for kind, r in module_ratios().items():
        lines.append(f"| {kind} | {r['n']} | x{r['time']:.3f} | x{r['power']:.3f} | "
                     f"x{r['energy']:.3f} |")
    lines += ["", "## End-to-end runs", "",
        "| model | mode | batch | prompt | gen | measured J | spec-sheet J | error | "
        "calibrated J | error | measured s | spec-sheet s | error | calibrated s | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["model"], r["batch"])):
        lines.append(
            f"| {r['model']} | {r['mode']} | {r['batch']} | {r['prompt_len']} | "
            f"{r['gen_len']} | {r['energy_j']:.1f} | {r['spec_energy_j']:.1f} | "
            f"{error(r['spec_energy_j'], r['energy_j']):+.1f} % | {r['pred_energy_j']:.1f} | "
            f"{error(r['pred_energy_j'], r['energy_j']):+.1f} % | {r['time_s']:.3f} | "
            f"{r['spec_time_s']:.3f} | {error(r['spec_time_s'], r['time_s']):+.1f} % | "
            f"{r['pred_time_s']:.3f} | {error(r['pred_time_s'], r['time_s']):+.1f} % |")
    lines += ["", f"Mean |error| over {len(rows)} runs (piep's reference runner, CUDA-graph "
              "decode, one GPU): spec-sheet energy "
              f"{s['spec_energy']:.1f} %, time {s['spec_time']:.1f} %; the H100's own "
              f"calibration (leave one model out) energy {s['lomo_energy']:.1f} %, time "
              f"{s['lomo_time']:.1f} %.", "",
              "Read: the spec-sheet transfer keeps the H200's learned efficiency over a "
              f"roofline scaled by the spec sheets (HBM x{ratios['hbm']:.2f}, bf16 "
              f"x{ratios['flops']:.2f}, TDP x{ratios['power']:.2f}); a kernel's board power "
              "above idle keeps its energy per operation of the resource that bounds it "
              "(`piep.predict.transfer`): its time lands "
              f"{s['spec_time']:.1f} % long, its energy {s['spec_energy']:.1f} % off on the "
              f"mean, {inside} of {len(rows)} runs inside its fixed x0.5-x2 band (energy and "
              "time). Its decode, the memory-bound phase: time "
              f"x{decode['time']:.2f} the measured, board power x{decode['power']:.2f} "
              "(medians). Beside the H200's decode of the same runs (as piep prices it "
              f"there), the H100's measured one takes x{h200['time']:.2f} the time at "
              f"x{h200['power']:.2f} the power: the H100 reads the same bytes slower, at less "
              "power. Until session 45 the transfer scaled every kernel's power by the TDP "
              "ratio alone, keeping the H200's power over a decode the H100's slower memory "
              f"stretches: {s['tdp_energy']:.1f} % energy error on these runs (`TdpPower` "
              "in the benchmark); the rule changed after these runs were seen, so this "
              "table is not its test: the B200's rows in reports/public.md are (the profile "
              "carried from the H100, and no profile at all). "
              "The H100's own "
              "quick calibration, each model held out, is within a few per cent, as the "
              "H200's quick calibrations are (reports/calibration_cost.md). To answer with it: copy "
              "`calibration/h100/quick/h100-quick` into the user data directory's "
              "`calibration/` (`$PIEP_DATA_DIR`, else `~/.local/share/piep`), `piep train "
              "--gpu h100-quick`, then `--gpu h100-quick` (the reference runner's engines; "
              "module kinds of one dense recipe: no expert, FP8 or serving engine "
              "profile on it yet)."]
    lines += moe_section()
    lines += families_section()
    lines += vl_section()
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    from piep.core.artifacts import write_text
    if "--predict" in argv:
        write_blind()
        return 0
    state, rows = table()
    text = report(state, rows)
    print(text, end="")
    if "--write" in argv:
        write_text(REPORT, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
