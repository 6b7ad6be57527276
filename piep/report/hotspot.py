"""`piep report`: where the energy of a deployment goes and what to change.

Every number comes from the predictor: the headline and tables from one prediction, each
action's gain from the difference of two predictions (the deployment as given and the
changed one). Writes report.md, a self-contained report.html (figures inlined as PNG),
the figures as files and the JSON it was made from.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from piep.core.errors import PiepError
from piep.core.results import clear_best
from piep.core.scenario import Scenario

KIND_GROUPS = {"allreduce": "communication", "allgather": "communication", "p2p": "communication",
               "pipeline_wait": "wait"}


def _predict(scn: Scenario, predictor: str, **change) -> dict[str, Any] | None:
    """The prediction of a variant of the scenario, or None where the variant is refused."""
    from piep import api
    try:
        return api.predict(scn.replace(**change) if change else scn, predictor=predictor,
                           hosts=False)
    except PiepError:
        return None


def actions(scn: Scenario, doc: dict[str, Any], predictor: str = "auto") -> list[dict[str, Any]]:
    """Candidate changes, each priced as the difference of two predictions (in the order
    tried; `split_actions` ranks them)."""
    cands: list[tuple[str, dict[str, Any]]] = []
    p = scn.parallel
    tp, pp, dp, batch = p.tp, p.pp, p.dp, scn.workload.batch
    cands.append((f"tp={tp * 2}", {"tp": tp * 2}))
    if tp > 1:
        cands.append((f"tp={tp // 2}", {"tp": tp // 2}))
    if pp > 1:
        cands.append((f"tp={tp * pp}, pp=1 instead of pp={pp}", {"tp": tp * pp, "pp": 1}))
    cands.append((f"batch={batch * 2}", {"batch": batch * 2}))
    # the same software, decoding with CUDA graphs (an engine of the user's own, or a
    # serving engine, has no known twin)
    graph = scn.engine.record.graph_twin if scn.engine.like is None else None
    if graph:
        cands.append((f"{graph} (CUDA-graph decode)", {"engine": graph}))
    if dp > 1:
        cands.append((f"dp=1 with tp={tp * dp}", {"dp": 1, "tp": tp * dp}))
    out = []
    for label, change in cands:
        alt = _predict(scn, predictor, **change)
        if alt is None:
            continue
        d_jpt = alt["j_per_output_token"] / doc["j_per_output_token"] - 1
        clear = clear_best([(label, alt["j_per_output_token"], _per_token_band(alt)),
                            ("now", doc["j_per_output_token"], _per_token_band(doc))],
                           what="energy per output token")
        d_time = alt["time_s"] / doc["time_s"] - 1
        tpot, alt_tpot = doc["tpot_s"]["p50"], alt["tpot_s"]["p50"]
        d_tpot = alt_tpot / tpot - 1 if tpot and alt_tpot is not None else 0.0
        out.append({"change": label, "delta": change,
                    "j_per_output_token": [doc["j_per_output_token"], alt["j_per_output_token"]],
                    "time_s": [doc["time_s"], alt["time_s"]],
                    "tpot_p50_s": [tpot, alt_tpot],
                    "energy_per_token_change": d_jpt, "time_change": d_time,
                    "tpot_change": d_tpot, "clear": clear["best"] == label,
                    "why": clear["why"],
                    "text": f"{label}: {100 * d_jpt:+.1f} % energy per output token, "
                            f"{100 * d_tpot:+.1f} % TPOT, {100 * d_time:+.1f} % total time "
                            f"(vs now)"})
    return out


TOP_ACTIONS = 3


def split_actions(cands: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The (at most 3) changes that save energy beyond the uncertainty of the difference
    (`clear`; a model-based change is judged by its own band), best first, and every other
    change tried; a change that costs energy, or whose saving lies within the
    uncertainty, is never listed as an action."""
    cands = sorted(cands, key=lambda a: a["energy_per_token_change"])
    saving = [a for a in cands if a["energy_per_token_change"] < 0 and a.get("clear", True)]
    top = saving[:TOP_ACTIONS]
    return top, [a for a in cands if a not in top]


def _per_token_band(doc: dict[str, Any]) -> list[float]:
    """A prediction's 90 % energy interval per output token."""
    return [e / doc["output_tokens"] for e in doc["interval"]["energy_j"]]


def layouts(scn: Scenario, predictor: str = "auto") -> list[dict[str, Any]]:
    """The same workload on other layouts of up to 8 GPUs (for the Pareto and comm plots)."""
    rows = []
    for tp, pp in ((1, 1), (2, 1), (1, 2), (4, 1), (2, 2), (8, 1), (4, 2)):
        d = _predict(scn, predictor, tp=tp, pp=pp, dp=1)
        if d is None:
            continue
        b = d["breakdown_j"]
        rows.append({"layout": f"tp{tp}pp{pp}", "gpus": tp * pp, "energy_j": d["energy_j"],
                     "time_s": d["time_s"], "j_per_output_token": d["j_per_output_token"],
                     "comm_share": (b["communication"] + b["wait"]) / d["energy_j"]})
    return rows


def pareto(rows: list[dict[str, Any]]) -> list[str]:
    front = []
    for r in rows:
        if not any(o["energy_j"] <= r["energy_j"] and o["time_s"] <= r["time_s"]
                   and (o["energy_j"], o["time_s"]) != (r["energy_j"], r["time_s"]) for o in rows):
            front.append(r["layout"])
    return front


def by_kind(doc: dict[str, Any]) -> list[dict[str, Any]]:
    agg: dict[tuple[str, str], dict[str, float]] = {}
    for m in doc["modules"]:
        slot = agg.setdefault((m["kind"], m["phase"]), {"energy_j": 0.0, "time_s": 0.0})
        slot["energy_j"] += m["energy_j"]
        slot["time_s"] += m["time_s"]
    rows = [{"kind": k, "phase": ph, "group": KIND_GROUPS.get(k, "compute"), **v,
             "share": v["energy_j"] / doc["energy_j"]} for (k, ph), v in agg.items()]
    rows.sort(key=lambda r: -r["energy_j"])
    return rows


def _figures(out: Path, doc, kinds, lay, measured, wait_samples) -> dict[str, Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from piep.core.artifacts import save_figure
    figs = out / "figures"
    paths: dict[str, Path] = {}
    # stacked energy by kind and phase
    # (ties by name: a set's order would follow the hash seed, and the figure with it)
    names = sorted({k["kind"] for k in kinds}, key=lambda n: (-sum(
        k["energy_j"] for k in kinds if k["kind"] == n), n))
    fig, ax = plt.subplots(figsize=(7, 3.8))
    bottom = [0.0, 0.0]
    for n in names:
        vals = [sum(k["energy_j"] for k in kinds if k["kind"] == n and k["phase"] == ph)
                for ph in ("prefill", "decode")]
        ax.bar(["prefill", "decode"], vals, bottom=bottom, label=n)
        bottom = [a + b for a, b in zip(bottom, vals)]
    ax.set_ylabel("energy (J, all GPUs)")
    ax.legend(fontsize=6, ncol=2, bbox_to_anchor=(1.02, 1), loc="upper left")
    ax.set_title("energy by module kind and phase (attributed)")
    fig.tight_layout()
    paths["energy_by_module"] = figs / "energy_by_module.png"
    save_figure(fig, paths["energy_by_module"])
    plt.close(fig)
    # communication share vs layout, energy vs latency
    if lay:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        axes[0].bar([r["layout"] for r in lay], [100 * r["comm_share"] for r in lay])
        axes[0].set_ylabel("communication + wait share of energy (%)")
        axes[0].set_title("communication share vs layout")
        front = set(pareto(lay))
        for r in lay:
            axes[1].scatter(r["time_s"], r["energy_j"], c="C3" if r["layout"] in front else "C0")
            axes[1].annotate(r["layout"], (r["time_s"], r["energy_j"]), fontsize=7)
        axes[1].set_xlabel("time (s)")
        axes[1].set_ylabel("energy (J)")
        axes[1].set_title("energy vs latency (red: Pareto front)")
        fig.tight_layout()
        paths["layouts"] = figs / "layouts.png"
        save_figure(fig, paths["layouts"])
        plt.close(fig)
    if wait_samples:
        import numpy as np
        from scipy import stats
        w = np.asarray(wait_samples["waits_us"])
        top = float(np.quantile(w, 0.99))  # the bins span what is drawn, not the far tail
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.hist(w[w <= top], bins=np.linspace(0, top, 61), density=True, alpha=0.7,
                label=f"measured ({np.mean(w <= top):.0%} of {len(w)} waits, ≤ p99)")
        fit = wait_samples["fit"]
        if "shape" in fit:
            x = np.linspace(0, top, 200)
            ax.plot(x, stats.gamma.pdf(x, fit["shape"], 0, fit["scale_s"] * 1e6), "r-",
                    label=f"Gamma fit ({fit['method']} used)")
        ax.set_xlim(0, top)
        ax.set_xlabel("AllReduce waiting time (us)")
        ax.set_title(wait_samples["title"], fontsize=9)
        ax.legend()
        fig.tight_layout()
        paths["waits"] = figs / "waits.png"
        save_figure(fig, paths["waits"])
        plt.close(fig)
    if measured:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        # the phases a record splits (a metered run may have none)
        bars = [(label, doc[key]["energy_j"] if key else doc["energy_j"],
                 (measured.get(key) or {}).get("energy_j") if key else measured["energy_j"])
                for label, key in (("energy_j", None), ("prefill J", "prefill"),
                                   ("decode J", "decode"))]
        labels, pred, meas = zip(*[b for b in bars if isinstance(b[2], (int, float))])
        x = range(len(labels))
        ax.bar([i - 0.2 for i in x], pred, 0.4, label="predicted")
        ax.bar([i + 0.2 for i in x], meas, 0.4, label="measured")
        ax.set_xticks(list(x), labels)
        ax.legend()
        fig.tight_layout()
        paths["measured"] = figs / "measured_vs_predicted.png"
        save_figure(fig, paths["measured"])
        plt.close(fig)
    return paths


def _wait_samples(doc) -> dict[str, Any] | None:
    """Measured waits of the calibration closest to this deployment's phase/mode."""
    from piep.core.artifacts import calibration_dir, load_json, read_jsonl
    root = calibration_dir(doc["gpu"]) / "waits"
    if doc["layout"]["tp"] < 2 or not (root / "waits.jsonl").is_file():
        return None
    mode = doc["workload"]["mode"]
    for s in read_jsonl(root / "waits.jsonl"):
        if s.get("phase") == "decode" and s.get("mode") == mode:
            fits = load_json(root / "fits.json")["fits"]
            fit = next(f["fit"] for f in fits if f["model"] == s["model"]
                       and f["phase"] == "decode" and f["mode"] == mode
                       and f["batch"] == s["batch"])
            return {"waits_us": [v * 1e6 for r in s["waits_s"] for v in r if v > 0],
                    "fit": fit, "title": f"measured: {s['model']} tp=2 decode {mode}, "
                                         f"batch {s['batch']} (calibration, not this run)"}
    return None


def build_report(scn: Scenario, out: Path, *, predictor: str = "auto",
                 measured: dict[str, Any] | None = None,
                 compare: list[str] | None = None) -> dict[str, Any]:
    from piep import api
    from piep.core.artifacts import output_set, write_json, write_text
    from piep.compare import compare as compare_fn
    doc = api.predict(scn, predictor=predictor)
    comparison = None
    if compare:
        comparison = compare_fn([scn.label(), *compare], scn, predictor=predictor)
    kinds = by_kind(doc)
    acts = actions(scn, doc, predictor)
    plan = clock_plan(scn, predictor)
    if plan is not None:
        a = plan["applied"]
        acts.append({"change": "SM clock plan", "delta": {"sm_mhz": a["phase_mhz"]},
                     "energy_per_token_change": -a["saving"], "time_change": a["slowdown"],
                     "model_based": True,
                     # its band: a saving whose smaller end still saves
                     "clear": a["saving_band"][0] > 0,
                     "text": f"SM clock plan (prefill {a['phase_mhz']['prefill']} MHz, decode "
                             f"{a['phase_mhz']['decode']} MHz): {-100 * a['saving']:+.1f} % "
                             f"energy (band {-100 * a['saving_band'][1]:+.1f} to "
                             f"{-100 * a['saving_band'][0]:+.1f} %), {100 * a['slowdown']:+.2f} "
                             f"% time vs the default clocks — model-based, not measured"})
    lay = layouts(scn, predictor)
    with output_set() as tx:  # the folder whole (staged, then switched in), or untouched
        stage = tx.folder(out, REPORT_SIGNATURE)
        figs = _figures(stage, doc, kinds, lay, measured, _wait_samples(doc))
        top, others = split_actions(acts)
        data = {"prediction": doc, "by_kind": kinds, "actions": top, "other_changes": others,
                "layouts": lay,
                "clock_plan": plan,
                "pareto": pareto(lay), "measured": measured, "comparison": comparison,
                "figures": {k: str(p.relative_to(stage)) for k, p in figs.items()}}
        write_json(stage / REPORT_SIGNATURE, "piep.report", 2, data)
        write_text(stage / "report.md", render_markdown(data))
        write_text(stage / "report.html", render_html(data, stage))
    return data


REPORT_SIGNATURE = "report.json"  # the file that marks a report's folder


def clock_plan(scn: Scenario, predictor: str = "auto") -> dict[str, Any] | None:
    """The 1 %-slowdown clock plan of the deployment (None where no frequency model)."""
    from piep import api
    from piep.plan.freq import load_freq_model
    from piep.plan.planner import plan_for
    try:
        return plan_for(api.resolve(scn, predictor), load_freq_model(scn.gpu.name),
                        max_slowdown=0.01)
    except PiepError:
        return None


def _plan_lines(plan: dict[str, Any] | None) -> list[str]:
    if plan is None:
        return []
    a, i = plan["applied"], plan["ideal_bound"]

    def band(b):
        return f"{100 * b[0]:.1f}-{100 * b[1]:.1f} %"
    return ["## SM clock plan (model-based, not measured)", "",
            f"Applied (phase level, dwell {1e3 * plan['constraints']['min_dwell_s']:.0f} ms, "
            f"budget {100 * plan['constraints']['max_slowdown']:.0f} % slowdown): prefill "
            f"{a['phase_mhz']['prefill']} MHz, decode {a['phase_mhz']['decode']} MHz; saving "
            f"{100 * a['saving']:.1f} % (band {band(a['saving_band'])}), slowdown "
            f"{100 * a['slowdown']:.2f} % (band {band(a['slowdown_band'])}).", "",
            f"Ideal per-kernel bound (cannot be applied): saving {100 * i['saving']:.1f} % "
            f"(band {band(i['saving_band'])}), slowdown {100 * i['slowdown']:.2f} %.", "",
            *[f"Note: {n}." for n in plan["notes"]],
            "Both against the default boost behaviour, from the frequency model "
            "(calibration/h200/dvfs/README.md) over the predictor's modules. "
            "`piep plan ... --out plan.json` writes the plan file.", ""]


def _headline(doc) -> list[tuple[str, str]]:
    iv = doc["interval"]
    return [("energy (J, all GPUs)", f"{doc['energy_j']:.1f}  [{iv['energy_j'][0]:.1f}, "
                                      f"{iv['energy_j'][1]:.1f}]"),
            ("time (s)", f"{doc['time_s']:.3f}  [{iv['time_s'][0]:.3f}, {iv['time_s'][1]:.3f}]"),
            ("J per output token", f"{doc['j_per_output_token']:.4f}"),
            ("J per request", f"{doc['j_per_request']:.1f}"),
            ("TTFT (s) / TPOT (ms), p50", f"{doc['ttft_s']['p50']:.3f} / "
                                          f"{1000 * (doc['tpot_s']['p50'] or 0):.2f}"),
            ("prefill / decode energy (J)", f"{doc['prefill']['energy_j']:.1f} / "
                                            f"{doc['decode']['energy_j']:.1f}"),
            ("breakdown (J)", ", ".join(f"{k} {v:.1f}" for k, v in doc["breakdown_j"].items())),
            ("predictor; flags", f"{doc['predictor']}; {', '.join(doc['flags']) or 'none'}")]


def render_markdown(data: dict[str, Any]) -> str:
    doc = data["prediction"]
    w, lay = doc["workload"], doc["layout"]
    lines = [f"# Energy report: {doc['model']} on {lay['gpus']}x {doc['gpu']} "
             f"(tp={lay['tp']} pp={lay['pp']} dp={lay['dp']})", "",
             f"Workload: batch {w['batch']}, prompt {w['prompt_len']}, gen {w['gen_len']}, "
             f"{w['mode']} mode. Energy boundary: GPU boards only. Interval: "
             f"{doc['interval']['level']}.", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in _headline(doc)]
    lines += ["", "## Top actions (each gain = difference of two predictions)", ""]
    lines += [f"{i}. {a['text']}" for i, a in enumerate(data["actions"], 1)] or [
        "No change tried saves energy."]
    if data.get("other_changes"):
        lines += ["", "Also tried (no saving, or not in the top 3):", ""]
        lines += [f"* {a['text']}" + ("  **(costs energy)**" if a["energy_per_token_change"] > 0
                                      else "  (within the uncertainty: " + a["why"] + ")"
                                      if not a.get("clear", True) else "")
                  for a in data["other_changes"]]
    lines += ["", *_plan_lines(data.get("clock_plan"))]
    lines += ["## Module hotspots (attributed energy, all GPUs)", "",
              "| kind | phase | group | energy_j | share % | time_s |", "|---|---|---|---|---|---|"]
    lines += [f"| {k['kind']} | {k['phase']} | {k['group']} | {k['energy_j']:.2f} | "
              f"{100 * k['share']:.1f} | {k['time_s']:.4f} |" for k in data["by_kind"]]
    lines += ["", f"Raw module sum (before the combiner): {doc['modules_raw_sum_j']:.1f} J.", ""]
    if data["layouts"]:
        lines += ["## Other layouts (same workload)", "",
                  "| layout | GPUs | energy_j | time_s | J per output token | comm+wait share % |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['layout']} | {r['gpus']} | {r['energy_j']:.1f} | {r['time_s']:.3f} | "
                  f"{r['j_per_output_token']:.4f} | {100 * r['comm_share']:.1f} |"
                  for r in data["layouts"]]
        lines += ["", f"Pareto front (energy vs time): {', '.join(data['pareto'])}", ""]
    if data.get("comparison"):
        c = data["comparison"]
        lines += ["## Comparison (same workload)", "",
                  "| candidate | GPUs | energy_j | time_s | J per output token | TPOT ms p50 "
                  "| headroom GiB |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['candidate']} | {r['gpus']} | {r['energy_j']:.1f} | {r['time_s']:.3f} | "
                  f"{r['j_per_output_token']:.4f} | {1000 * (r['tpot_p50_s'] or 0):.2f} | "
                  f"{r['memory_headroom_gib']:.1f} |" for r in c["candidates"]]
        lines += ["", "Best for " + "; ".join(f"{g}: {k}" for g, k in c["recommendation"].items())
                  + ".", ""]
    if data["measured"]:
        m = data["measured"]
        lines += ["## Measured vs predicted", "", "| | predicted | measured | error % |",
                  "|---|---|---|---|"]
        for label, p, q in (("energy_j", doc["energy_j"], m["energy_j"]),
                            ("time_s", doc["time_s"], m["time_s"])):
            lines.append(f"| {label} | {p:.3f} | {q:.3f} | {100 * (p / q - 1):+.1f} |")
        lines.append("")
    lines += [f"![{k}]({v})" for k, v in data["figures"].items()]
    return "\n".join(lines) + "\n"


def render_html(data: dict[str, Any], out: Path) -> str:
    import re
    md = render_markdown(data)
    body = []
    table: list[str] = []

    def flush():
        if table:
            rows = [r.strip("|").split("|") for r in table if not re.match(r"^\|[-|]+\|$", r)]
            head, rest = rows[0], rows[1:]
            body.append("<table><tr>" + "".join(f"<th>{html.escape(c.strip())}</th>"
                                                for c in head) + "</tr>"
                        + "".join("<tr>" + "".join(f"<td>{html.escape(c.strip())}</td>"
                                                   for c in r) + "</tr>" for r in rest)
                        + "</table>")
            table.clear()
    for line in md.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush()
        if line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("## "):
            body.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("!["):
            name, src = re.match(r"!\[(.*)\]\((.*)\)", line).groups()
            b64 = base64.b64encode((out / src).read_bytes()).decode()
            body.append(f'<figure><img alt="{html.escape(name)}" '
                        f'src="data:image/png;base64,{b64}"></figure>')
        elif re.match(r"^\d+\. ", line):
            body.append(f"<p class='action'>{html.escape(line)}</p>")
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    flush()
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
             "padding:2px 8px;text-align:right}th{background:#eee}img{max-width:100%}"
             ".action{font-weight:bold}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>piep report</title>"
            f"<style>{style}</style></head><body>{''.join(body)}"
            f"<script type='application/json' id='data'>"
            f"{html.escape(json.dumps({'energy_j': data['prediction']['energy_j']}))}"
            f"</script></body></html>")
