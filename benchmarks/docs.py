"""The generated parts of README.md and docs/: the sample output (piep run now), the
accuracy table (each figure read from the report file that states it, which names the
script that made it), the flag reference (the registry) and the document schemas (the
registry). `tests/test_readme.py` fails when a committed part differs from what this
makes.

    python benchmarks/docs.py [--write]
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SAMPLE = ["predict", "--model", "llama-2-7b", "--gpu", "h200", "--tp", "2", "--batch", "16",
          "--prompt-len", "512", "--gen-len", "128", "--modules", "3"]
COMPARE = ["compare", "llama-2-7b@tp2", "llama-2-13b@tp1", "--engine", "hf-static"]


def _run(argv: list[str]) -> str:
    from piep.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    if code:
        raise SystemExit(f"piep {' '.join(argv)} exited {code}")
    return out.getvalue().rstrip("\n")


def _cells(report: str, row_start: str) -> list[str]:
    """The cells of the first table row of `report` that starts with `row_start`."""
    for line in (ROOT / report).read_text().splitlines():
        if line.startswith(row_start):
            return [c.strip() for c in line.strip("|").split("|")]
    raise SystemExit(f"{report}: no row starting {row_start!r}")


def _pct(cell: str) -> str:
    """'8.0 % (-32..+28 %)' -> '8.0 %'; '**3.3**' -> '3.3 %'."""
    m = re.search(r"(\d+(?:\.\d+)?)", cell)
    if not m:
        raise SystemExit(f"no figure in {cell!r}")
    return f"{m.group(1)} %"


def report_match(report: str, pattern: str) -> re.Match:
    """The first match of `pattern` in a report file (its figure), or exit naming both."""
    text = (ROOT / report).read_text()
    m = re.search(pattern, text)
    if not m:
        raise SystemExit(f"{report}: no {pattern!r}")
    return m


def accuracy_table() -> str:
    """One row per answer piep gives, each figure from its report."""
    rows = []
    lomo = _cells("reports/accuracy.md", "| **piep learned (LOMO)**")
    graph = _cells("reports/accuracy.md", "| graph | all |")
    rows.append(("piep's reference runner, CUDA-graph decode, 1-8 GPUs",
                 f"leave one model out ({graph[2]} runs)", _pct(lomo[1]), _pct(lomo[2]),
                 "reports/accuracy.md"))
    eager = _cells("reports/accuracy.md", "| eager | all |")
    rows.append(("piep's reference runner, eager decode", f"leave one model out ({eager[2]} runs)",
                 _pct(eager[3]), _pct(eager[4]), "reports/accuracy.md"))
    for engine in ("hf-eager", "hf-static"):
        cells = _cells("reports/engines.md", f"| {engine} | ")
        rows.append((f"transformers generate(), {engine}, tp=1",
                     f"leave one model out, profile refit ({cells[1]} runs, {cells[2]} models)",
                     _pct(cells[5]), _pct(cells[6]), "reports/engines.md"))
    for engine in ("hf-eager", "hf-static"):
        m = report_match("reports/engines_tp2.md",
                  rf"\* {engine}: energy ([\d.]+) %, time ([\d.]+) % \((\d+) runs\)")
        rows.append((f"transformers generate(), {engine}, tp=2",
                     f"leave one run out, another harness ({m.group(3)} runs, llama-2-7b)",
                     f"{m.group(1)} %", f"{m.group(2)} %", "reports/engines_tp2.md"))
    cells = _cells("reports/moe.md", "| all | all |")
    models = report_match("reports/moe.md", r"\| model \| engine \| runs \| energy \(now\)"
                          r"[^\n]*\n\|[-|]+\|\n((?:\| [^\n]+\n)+)")
    names = {line.split(" | ")[0][2:] for line in models.group(1).splitlines()} - {"all"}
    rows.append(("transformers generate(), mixtures of experts, hf-eager",
                 f"no run trains a fit ({cells[2]} runs, {len(names)} models)",
                 _pct(cells[3]), _pct(cells[4]), "reports/moe.md"))
    cells = _cells("reports/serving.md", "| one shape (every trace of it)")
    rows.append(("transformers continuous batching (piep serve)",
                 f"leave one shape out ({cells[1]} replays)", _pct(cells[2]), _pct(cells[4]),
                 "reports/serving.md"))
    for gpu in ("H100", "B200"):
        m = report_match("reports/public.md", rf"\| {gpu} all rows \(mean absolute\) \| (\d+) "
                         r"rows, (\d+) models \| energy ([\d.]+) % \| time per token ([\d.]+) %")
        rows.append((f"vLLM 0.11 on {gpu} held full (piep steady), public rows",
                     f"leave one model out ({m.group(1)} rows, {m.group(2)} models, supplied "
                     f"data)", f"{m.group(3)} %", f"{m.group(4)} %", "reports/public.md"))
    for start, answer in (("Expert parallel", "mixtures of experts at expert parallel "
                                                "(piep steady --ep)"),
                          ("MXFP4 experts", "gpt-oss, MXFP4 experts as stored")):
        m = report_match("reports/public.md", rf"{start} .*?: (\d+) rows, (\d+) models, "
                         r"energy error ([\d.]+) % mean absolute .*?time per token ([\d.]+) "
                         r"%; today ([\d.]+) % energy, ([\d.]+) % time per token")
        rows.append((f"vLLM 0.11, {answer}, public rows", f"blind: the profiles fitted before "
                     f"the rows came ({m.group(1)} rows, {m.group(2)} models, supplied data)",
                     f"{m.group(3)} % (today's code {m.group(5)} %)",
                     f"{m.group(4)} % (today's code {m.group(6)} %)",
                     "reports/public.md"))
    lines = ["| answer | held out | energy error | time error | report |", "|---|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} | [{e}]({e}) |" for a, b, c, d, e in rows]
    return "\n".join(lines)


def method_accuracy() -> str:
    """docs/method.md's figures: the reference runner's held-out errors, its blind tests,
    the module and collective errors and the fitted power-limit terms, each read from the
    report (or the predictor file) that states it."""
    acc = "reports/accuracy.md"
    rows = [("graph, every layout", _cells(acc, "| graph | all |"))]
    rows += [(f"graph, {lay}", _cells(acc, f"| graph | {lay} |"))
             for lay in ("single", "tp", "pp", "dp")]
    rows.append(("eager, every layout", _cells(acc, "| eager | all |")))
    refit = _cells(acc, "| roofline refit on the same folds")
    lines = ["| held out: one model (leave one model out) | runs | energy | time |",
             "|---|---|---|---|"]
    lines += [f"| {name} | {c[2]} | {_pct(c[3])} | {_pct(c[4])} |" for name, c in rows]
    lines += [f"| the roofline refit on the same folds (graph) | | {_pct(refit[1])} | "
              f"{_pct(refit[2])} |", "",
              "| blind test (measured after its predictor was committed) | graph runs | "
              "energy | time |", "|---|---|---|---|"]
    for line in (ROOT / acc).read_text().splitlines():
        if line.startswith("| call "):
            c = [x.strip() for x in line.strip("|").split("|")]
            lines.append(f"| {c[0]} | {c[2]} | {c[3]} % | {c[4]} % |")
    kinds = ("attention", "gate_proj", "up_proj", "down_proj", "activation", "kv_expand",
             "kv_gather", "sdpa_masked", "sampling")
    lines += ["", "Module energy error on held-out isolated shapes (5-fold by the kernel's "
              "shape, a held-out weight matrix held out at every token count; PIE-P "
              "published attention 8.8-11.4 %, MLP 6.6-9.5 %, AllReduce 17.3-19.4 %): "
              + ", ".join(f"{k} {_cells(acc, f'| {k} |')[4]} %" for k in kinds)
              + " (sampling: for a vocabulary size never measured)"
              + f"; AllReduce energy per call on held-out sizes "
              f"{_cells(acc, '| allreduce |')[2]} %."]
    from piep.core.artifacts import read_json
    terms = read_json(ROOT / "calibration/h200/predictor/predictor.json",
                      "piep.learned_predictor")["terms"]
    lines += ["", f"Fitted power-limit terms (`calibration/h200/predictor/predictor.json`): "
              f"burst {terms['burst_power_ratio']:.2f} x the limit up to "
              f"{terms['burst_s']:.2f} s, stretch exponent "
              f"{terms['power_stretch_exponent']:.2f}."]
    return "\n".join(lines)


def engines_accuracy() -> str:
    """docs/engines.md's leave-one-model-out figures, read from reports/engines.md."""
    lines = ["| engine | runs | models | piep before profiles: energy | time | profile, "
             "leave one model out: energy | time | with each run's host probe: energy | "
             "time |", "|---|---|---|---|---|---|---|---|---|"]
    for engine in ("hf-eager", "hf-static"):
        c = _cells("reports/engines.md", f"| {engine} | ")
        lines.append(f"| {engine} | {c[1]} | {c[2]} | " + " | ".join(
            _pct(c[i]) for i in (3, 4, 5, 6, 9, 10)) + " |")
    return "\n".join(lines)


def serving_accuracy() -> str:
    """docs/serving.md's held-out and blind figures, read from reports/serving.md."""
    lines = ["| held out | replays | energy | energy above idle | window time | p50 TPOT | "
             "p50 end-to-end |", "|---|---|---|---|---|---|---|"]
    for line in (ROOT / "reports/serving.md").read_text().splitlines():
        if line.startswith(("| one shape", "| one load level", "| blind: ")):
            c = [x.strip() for x in line.strip("|").split("|")]
            cells = [_pct(x) if x != "-" else "-" for x in (c[2], c[3], c[4], c[6], c[7])]
            lines.append(f"| {c[0]} | {c[1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def serving_foreign() -> str:
    """docs/serving.md's figures of hf-cb fitted as a foreign engine (reports/serving.md)."""
    f = _cells("reports/serving.md", "| as a foreign engine")
    b = _cells("reports/serving.md", "| built in (the first row above)")
    return (f"Leave one shape out, fitted from benchmark files alone: energy {_pct(f[2])} "
            f"(hf-cb's own fit, with its iteration logs: {_pct(b[2])}), window time "
            f"{_pct(f[3])} ({_pct(b[3])}), p50 TPOT {_pct(f[5])} ({_pct(b[5])}), p50 TTFT "
            f"{_pct(f[4])} ({_pct(b[4])}); {f[1]} replays.")


def vllm_stream() -> str:
    """docs/serving.md's figures of vLLM priced as a stream against held full, read from
    reports/vllm_stream.md."""
    m = report_match("reports/vllm_stream.md",
                     r"\* (\d+) (\w+) rows: energy error \(mean absolute, in-sample\) steady "
                     r"([\d.]+ %), stream ([\d.]+ %)")
    r = report_match("reports/vllm_stream.md", r"J per output token: median ([\d.]+)")
    return (f"On the {m[1]} public {m[2].upper()} rows, each benchmark simulated as sent "
            f"and measured over its steady window, the stream is {m[4]} off against the "
            f"closed form's {m[3]} (both in-sample), stream / closed form {r[1]} at the "
            f"median.")


def layout_map() -> str:
    """docs/development.md's map: piep's rooms by floor (piep.FLOORS, highest first), each
    with the first sentence of its docstring (a folder's: its door's)."""
    import ast
    import textwrap

    from piep import FLOORS
    lines = ["```"]
    for floor in sorted(FLOORS, reverse=True):
        for unit in FLOORS[floor]:
            path = ROOT / "piep" / unit / "__init__.py"
            name = f"{unit}/" if path.is_file() else unit
            path = path if path.is_file() else ROOT / "piep" / f"{unit}.py"
            doc = " ".join((ast.get_docstring(ast.parse(path.read_text())) or "").split())
            first = re.split(r"(?<=\.)\s", doc, maxsplit=1)[0].rstrip(".")
            lines += textwrap.wrap(f"{floor}  {name:<10} {first}", width=92,
                                   subsequent_indent=" " * 14, break_on_hyphens=False)
    return "\n".join(lines + ["```"])


def calibrate_gpu() -> str:
    """docs/measuring.md's figures of the quick calibration `piep calibrate gpu` measured
    on H200 (the last row of reports/calibration_cost.md)."""
    c = _cells("reports/calibration_cost.md", "| 15.8, measured from scratch (`piep calibrate")
    h100 = re.search(r"over (\d+) runs .*spec-sheet energy ([\d.]+) %, time ([\d.]+) %; the "
                     r"H100's own calibration \(leave one model out\) energy ([\d.]+) %, time "
                     r"([\d.]+) %", (ROOT / "reports" / "h100.md").read_text())
    n, spec_e, spec_t, own_e, own_t = h100.groups()
    return (f"{c[0].split(',')[0]} device minutes, {c[2]} module samples and {c[3]} runs; "
            f"scored leave one model out on every committed run, its single-GPU graph "
            f"energy error is {_pct(c[6])} ({c[7]}x the full calibration's), over every "
            f"layout {_pct(c[4])} ({c[5]}x).\n\nOn an H100 SXM (`calibration/h100/quick/`, "
            f"device call 91; reports/h100.md): scored leave one model out on its {n} runs, "
            f"energy {own_e} %, time {own_t} %, where piep's spec-sheet answers for the same "
            f"runs (`--gpu h100 --allow-uncalibrated`, nothing of the H100 fitted; its "
            f"power rule chosen after these runs) miss by {spec_e} % and {spec_t} %.")


def _doc(argv: list[str]) -> dict:
    import json
    return json.loads(_run([*argv, "--json"]))


def _band(b) -> str:
    return f"{100 * b[0]:.1f}-{100 * b[1]:.1f} %"


def clock_plans() -> str:
    """docs/clock-plans.md's figures: plans and optimizer answers as the program gives them
    now, and what the committed measurements of the runtime and the online search say."""
    import json
    lines = []
    for args, what in ((["--batch", "1"], ""), (["--batch", "64"], ""),
                       (["--batch", "64", "--power-limit", "500"],
                        " (against the run capped at 500 W)")):
        p = _doc(["plan", "--model", "llama-2-7b", *args])
        a, i = p["applied"], p["ideal_bound"]
        mhz = a["phase_mhz"]
        clocks = f"one clock, {mhz['decode']} MHz" if mhz["prefill"] == mhz["decode"] else \
            f"prefill {mhz['prefill']} MHz, decode {mhz['decode']} MHz"
        lines.append(f"* `piep plan --model llama-2-7b {' '.join(args)}`: {clocks}: saving "
                     f"{100 * a['saving']:.1f} % (band {_band(a['saving_band'])}), slowdown "
                     f"{100 * a['slowdown']:.2f} %{what}; ideal per-kernel bound "
                     f"{100 * i['saving']:.1f} %.")
    o = _doc(["optimize", "--model", "llama-2-7b", "--tp", "1", "--objective", "eds"])
    c, g = o["chosen"], o["predicted_gain"]
    lines.append(f"* `piep optimize --model llama-2-7b --tp 1 --objective eds` (energy-delay "
                 f"sum per output token, weight {o['objective']['weight']}, against batch "
                 f"{o['reference']['batch']} at default clocks): batch {c['batch']} at "
                 f"{c['sm_mhz']:.0f} MHz, {100 * g['energy_per_token']:+.1f} % energy "
                 f"and {100 * g['time_per_token']:+.1f} % time per output token (predicted).")
    for batch in (1,):
        o = _doc(["optimize", "--model", "llama-2-7b", "--tp", "1", "--objective", "eds",
                  "--batches", str(batch)])
        c, g = o["chosen"], o["predicted_gain"]
        kept = next((n for n in o["notes"] if "default configuration is kept" in n), None)
        lines.append(f"  With the batch fixed at {batch}, the clock and power limit alone: "
                     + (f"the default is kept ({kept})." if kept else
                        f"{c['sm_mhz']:.0f} MHz, {100 * g['energy_per_token']:+.1f} % energy, "
                        f"{100 * g['time_per_token']:+.1f} % time per output token."))
    runs = [json.loads(line) for line in
            (ROOT / "calibration/h200/dvfs/clockplan_dryrun.jsonl").read_text().splitlines()]
    for r in runs:
        cp = r["clock_plan"]
        gap = f", the shortest gap between switches {cp['min_dwell_seen_s']:.2f} s" \
            if cp["min_dwell_seen_s"] else ""
        lines.append(f"* Measured, the runtime in dry run on a real batch-{r['batch']} run "
                     f"(`calibration/h200/dvfs/clockplan_dryrun.jsonl`): {cp['switches']} "
                     f"switches, {cp['skipped_noop']} skipped as no-ops, "
                     f"{cp['skipped_dwell']} for the dwell{gap}.")
    online = [json.loads(line) for line in (ROOT / "calibration/h200/optimize/"
                                            "online_llama-2-7b_eds.jsonl").read_text()
              .splitlines()]
    ref = online[0]["measured"]
    kept = [r for r in online if r["accepted"]][-1]["measured"]
    d_energy = kept["energy_j"] / kept["batch"] / (ref["energy_j"] / ref["batch"]) - 1
    d_time = kept["time_s"] / ref["time_s"] - 1  # (every run generates gen_len tokens)
    lines.append(f"* Measured on H200, the online search over the batch "
                 f"(`calibration/h200/optimize/online_llama-2-7b_eds.jsonl`): batches "
                 f"{', '.join(str(r['point']['batch']) for r in online)} measured, batch "
                 f"{kept['batch']} kept: {100 * d_energy:+.0f} % energy and {100 * d_time:+.0f} "
                 f"% time per output token against batch {ref['batch']}.")
    return "\n".join(lines)


# a profile's terms as docs show them: (key, words, unit scale, unit)
TERM_WORDS = (("host_launch_s", "host time per kernel launch", 1e6, "us"),
              ("eager_decode_launch_s", "per eager decode launch", 1e6, "us"),
              ("gap_graph_s", "per graph-replayed kernel", 1e6, "us"),
              ("step_host_s", "per decode step (iteration)", 1e3, "ms"),
              ("request_host_s", "per request of an iteration", 1e3, "ms"),
              ("call_host_s", "per generate() call", 1e3, "ms"),
              ("fused_kernel_s", "per fused pointwise kernel beyond its bytes", 1e6, "us"),
              ("launch_gap_w", "board power while the GPU waits on the host", 1.0, "W"),
              ("tp_call_host_s", "tp>1: host time per sharded module call", 1e6, "us"),
              ("tp_step_host_s", "tp>1: per compiled decode step", 1e3, "ms"),
              ("tp_gap_w", "tp>1: board power in the gaps they add", 1.0, "W"),
              ("host_probe_ref_s", "the reference host's launch probe", 1e6, "us"))


def engine_terms(engines=("hf-eager", "hf-static", "hf-cb")) -> str:
    """The fitted terms of the shipped engine profiles (each read from its profile.json),
    the runs they were fitted on and the kernel-time scales they set."""
    from piep.core.artifacts import read_json
    lines = ["| term | " + " | ".join(engines) + " |", "|---|" + "---|" * len(engines)]
    docs = {e: read_json(ROOT / f"calibration/h200/engines/{e}/profile.json",
                         "piep.engine_profile") for e in engines}
    for key, words, scale, unit in TERM_WORDS:
        cells = []
        for e in engines:
            fitted = key in docs[e]["meta"].get("fitted_terms", []) or key.startswith(
                ("tp_", "host_probe")) or key == "fused_kernel_s"
            value = docs[e]["terms"].get(key)
            cells.append(f"{value * scale:.3g} {unit}" if value and fitted else "-")
        if any(c != "-" for c in cells):
            lines.append(f"| {words} (`{key}`) | " + " | ".join(cells) + " |")
    scales = []
    for e in engines:
        ts = docs[e]["terms"].get("time_scale", {})
        own = {k.removeprefix("kind:"): v for k, v in ts.items()
               if f"time_scale.{k}" in docs[e]["meta"].get("fitted_terms", [])}
        if own:
            scales.append(f"{e}: " + ", ".join(f"{k} x{v:.2f}" for k, v in own.items()))
    runs = ", ".join(f"{e} {docs[e]['meta'].get('runs')} runs of "
                     f"{len(docs[e]['meta'].get('models', []))} models" for e in engines)
    return "\n".join(lines) + f"\n\nFitted on: {runs}." + (
        f" Kernel-time scales fitted on the engine's runs: {'; '.join(scales)}."
        if scales else "")


def serving_terms() -> str:
    """docs/serving.md: hf-cb's fitted terms and the scheduler settings of its profile."""
    from piep.core.artifacts import read_json
    meta = read_json(ROOT / "calibration/h200/engines/hf-cb/profile.json",
                     "piep.engine_profile")["meta"]
    s = meta["scheduler"]
    return (engine_terms(("hf-cb",)) + f"\n\nScheduler (transformers' defaults, and the "
            f"reserve read off the replays' blocks): KV blocks of {s['block_size']} tokens, "
            f"{100 * s['memory_percent']:.0f} % of the memory left after the weights and a "
            f"{s['reserved_gib']:.2f} GiB reserve, a {100 * s['safety_margin']:.0f} % safety "
            f"margin, at most {s['max_requests_per_batch']:,} requests an iteration; an idle "
            f"engine forms its batch {1e3 * s.get('pickup_s', 0.0):.2f} ms after an arrival "
            "(the median start of the replays' first iteration after their first arrival: "
            "a burst that lands meanwhile is one batch).")


def blocks() -> dict[str, str]:
    """The generated blocks of README.md and docs/ (`BLOCK_FILES`), by name."""
    return {
        "sample": "```\n$ piep " + " ".join(SAMPLE) + "\n" + _run(SAMPLE) + "\n```",
        "compare": "```\n$ piep " + " ".join(COMPARE) + "\n" + _run(COMPARE) + "\n```",
        "accuracy": accuracy_table(),
        "method_accuracy": method_accuracy(),
        "engines_accuracy": engines_accuracy(),
        "serving_accuracy": serving_accuracy(),
        "serving_foreign": serving_foreign(),
        "vllm_stream": vllm_stream(),
        "layout_map": layout_map(),
        "calibrate_gpu": calibrate_gpu(),
        "clock_plans": clock_plans(),
        "engine_terms": engine_terms(),
        "serving_terms": serving_terms(),
    }


# the files with generated blocks
BLOCK_FILES = ("README.md", "docs/commands.md", "docs/measuring.md", "docs/method.md",
               "docs/engines.md", "docs/serving.md", "docs/clock-plans.md",
               "docs/development.md")


def flags_doc() -> str:
    """docs/flags.md: every flag's registered meaning."""
    from piep.predict.flags import FLAGS
    lines = ["# Flags", "", "Every flag an answer can carry, as `flag_notes` gives it in JSON "
             "and the tables print it (`piep/predict/flags.py`; generated by `python "
             "benchmarks/docs.py --write`).", ""]
    for f in FLAGS.values():
        lines += [f"## `{f.name}`", "", f"{f.meaning[0].upper()}{f.meaning[1:]}.", "",
                  f"* Interval: {f.widening}.", f"* To remove it: {f.remedy}.", ""]
    lines += ["A flag `note: ...` is a note of the deployment in its own words.", ""]
    return "\n".join(lines)


def _family_words(fam, name: str = "") -> str:
    """What a family's row says its layer runs beyond Llama's, in words."""
    from piep.core.families import MOE_PRICED
    words = ["routed experts (a top-k router, the experts' grouped GEMMs over the experts "
             "a step's tokens reach, routed uniformly, each expert's rows computed in whole "
             "tiles (binomial counts: more rows than an even split), the rows past the "
             "routed ones masked before and after each (masked_fill); generate()'s decode "
             "steps gather each (token, expert) pair's weights, batched_mm, slower the more "
             "experts a rank holds, the copies held in the memory check)"] \
        if name in MOE_PRICED else []
    if fam.dense_experts:
        words = ["experts: every expert through every token (one bmm per projection over "
                 "all experts, `experts_bmm`, scaled by the router's sigmoid scores, zero "
                 "off the top k), an ungated shared expert beside them"]
    if fam.latent_attention:
        words[0] = words[0].replace("a top-k router", "a top-k router (float32 GEMM)")
        words += ["multi-head latent attention (queries through their low rank where "
                  "`q_lora_rank`; keys and values compressed to `kv_lora_rank` plus a rotary "
                  "key of `qk_rope_head_dim`, which is all the KV cache holds; every step "
                  "expands every cached position again through `kv_b_proj` and assembles the "
                  "keys; SDPA over every head)",
                  "shared experts (`n_shared_experts`) added without a gate"]
    if fam.qk_norm:
        words.append("RMSNorm of q and k " + ("per head" if fam.qk_norm == "head"
                                               else "over all heads"))
    if fam.post_norms:
        words.append("post-norms" + (" beside the pre-norms" if fam.pre_norms
                                     else " in place of the pre-norms"))
    words += [w for flag, w in ((fam.fused_qkv, "one qkv GEMM"),
                                (fam.fused_gate_up, "one gate_up GEMM"),
                                (not fam.gated_mlp, "a plain MLP (c_fc, activation, c_proj)"),
                                (fam.parallel_block, "attention and MLP in parallel from one "
                                                     "norm"),
                                (fam.layer_norm, "LayerNorms (priced as RMSNorm's pass"
                                 + ("; torch's, one kernel each)" if fam.norm_kernels == 1
                                    else ")")),
                                (fam.softcaps, "capped logits (the scores' cap is dropped: "
                                               "transformers 5.17 runs SDPA by default, "
                                               "priced so)"),
                                (fam.sinks, "eager attention with a sink logit per head "
                                            "(one leaf, `sinks_attention`, sampled as "
                                            "transformers runs it: its passes over rows of "
                                            "keys + 1; the prefill's scores held in the "
                                            "memory check)"),
                                (fam.expert_bias, "experts and router with biases, a "
                                                  "clamped SwiGLU gate"),
                                (fam.router_fp32 and not fam.latent_attention,
                                 "the router's GEMM in float32"),
                                (fam.norm_kernels > 7, f"norms of {fam.norm_kernels} "
                                                       "kernels each (Llama's: 7)"),
                                (fam.rope_kernels != 10, f"RoPE of {fam.rope_kernels} "
                                                         "kernels (Llama's: 10)"),
                                (fam.sparse_mixer, "sparsemixer routing (top-1 twice, each "
                                                   "masked: about sixteen more routing "
                                                   "kernels than a top-k softmax)"),
                                (fam.shared_mlp, "one shared MLP beside the experts, added "
                                                 "without a gate"),
                                (fam.scaled_embeddings, "scaled embeddings"),
                                (fam.residual_scale, "scaled residual branches"),
                                (fam.logit_scale, "scaled logits"),
                                (fam.tied, "tied embeddings unless the config says"),
                                (fam.remote_code, "the model repo's own modeling code "
                                                  "(`trust_remote_code`: transformers ships "
                                                  "none; priced, not sampled by piep)"),
                                (fam.runs_as, "a vision-language model's text decoder "
                                              "(its encoders not priced: "
                                              "`text_decoder_only`), run as "
                                              f"`{fam.runs_as}`'s layer, the same "
                                              "weights module for module (transformers has "
                                              "no CausalLM of its own)"),
                                (not fam.hf_tp_plan, "no tensor-parallel plan in transformers: "
                                                     "its engines answer at tp=1 only"),
                                (not fam.hf_tp_experts, "transformers' tensor-parallel plan "
                                                        "leaves the routed experts whole on "
                                                        "every rank (its engines at tp > 1)"))
              if flag]
    if fam.qkv_bias is not None:
        words.append("q/k/v bias always" if fam.qkv_bias else "no q/k/v bias")
    if fam.per_model:
        words.append(f"per model: {fam.per_model}")
    return "; ".join(words) or "Llama's layer"


def models_doc() -> str:
    """docs/models.md: the families piep reads, what it prices of each, and how well
    (reports/families.md)."""
    from piep.core.config import TEXT_TYPES
    from piep.core.families import FAMILIES, MOE_PRICED, MOE_TYPES, PRICED
    report = "reports/families.md"
    lines = ["# Models", "",
             "A model is its Hugging Face `config.json` (a path, a shipped name, or a model "
             "ID: `piep models add ORG/NAME` fetches that one file; the local Hugging Face "
             "cache is read first, then the public configs piep carries, "
             "`model_trees/public/`, each with its source in SOURCES.json, so that the IDs "
             "`piep models` lists answer offline). Its `model_type` names a family: a row of "
             "`piep/core/families.py`, read from transformers' own modeling code, that says what "
             "the family's layer runs beyond Llama's. What a config states per model is read "
             "for every family: `layer_types` or `sliding_window_pattern` (which layers "
             "attend a sliding window: each kind of layer is priced apart, and a sliding "
             "layer's KV cache stops at its window under an engine that applies it), "
             "`no_rope_layers` (layers without RoPE), `partial_rotary_factor`, the MLP's "
             "activation (SwiGLU or GeGLU), tied embeddings, and a decoder nested under "
             "`text_config` (a multimodal model's: its text decoder is priced on the prompt "
             "tokens given, its vision or audio encoder is not, and the answer says so: "
             "`text_decoder_only`). Generated by `python benchmarks/docs.py --write`; the held-out "
             f"figures are [{report}](../{report})'s (hf-eager `generate()`, mean |error|, "
             "no run of the family in any fit). The kernels a family's layer launches (an "
             "eager engine's decode steps wait on them) are held to the operators "
             "transformers' generate() dispatches for it in "
             "[reports/launches.md](../reports/launches.md).", "",
             "| model_type | what its layer runs beyond Llama's | held out: runs, energy, "
             "time |", "|---|---|---|"]
    text = (ROOT / report).read_text()
    moe, vl = _moe_held_out(), _vl_measured()
    for name in PRICED:
        layer = FAMILIES[name].runs_as or name  # (a text decoder: its layer's family's)
        held = "measured in the shipped fits" if layer in ("llama", "mistral", "qwen2") \
            else moe.get(layer, "not measured yet")
        if f"| {layer} | hf-eager |" in text:
            _, _, runs, energy, time_, _ = _cells(report, f"| {layer} | hf-eager |")
            held = f"{runs} runs, {energy}, {time_}"
        if layer != name:
            held = f"its layer's (`{layer}`): {held}" + vl.get(name, "")
        lines.append(f"| `{name}` | {_family_words(FAMILIES[name], name)} | {held} |")
    lines += ["", "Not priced yet, refused in one line that says why:", ""]
    lines += [f"* `{name}`: the tree lacks its {fam.missing}." for name, fam in FAMILIES.items()
              if fam.missing]
    refused = [t for t in MOE_TYPES  # (those with a row say what the tree lacks above)
               if t not in MOE_PRICED and TEXT_TYPES.get(t) not in MOE_PRICED
               and t not in FAMILIES]
    lines += ["* mixtures of experts other than "
              f"{', '.join(f'`{t}`' for t in MOE_PRICED)} "
              f"({', '.join(f'`{t}`' for t in refused)}): "
              "their layers run more than the experts priced here (linear-attention or "
              "state-space layers, experts of their own kinds), not modelled yet.",
              "* quantized weights other than FP8 (AWQ, GPTQ, bitsandbytes, MXFP4 but "
              "gpt-oss's, ...): their kernels were not measured; the refusal names them and "
              "the weights' memory at the checkpoint's bits. gpt-oss's MXFP4 experts are "
              "priced as transformers dequantizes them to bf16 (`mxfp4_dequantized`), and "
              "under vLLM as stored, 4.25 bits a weight (`mxfp4_unsampled`).", ""]
    _, _, runs, energy, time_ = _cells("reports/fp8.md", "| all | all |")
    lines += ["FP8 checkpoints (`fbgemm_fp8`, compressed-tensors FP8, fine-grained FP8 with "
              "128x128 block scales) are priced with the layers' projections as row-wise FP8 "
              "GEMMs (`fp8_linear`: a byte per weight, each token's row quantized at run time; "
              "module samples of `piep.sampling.fp8`, device call 72), the LM head and "
              "embeddings in bf16; block-scaled checkpoints carry `fp8_block_scales` (their "
              "kernel, DeepGEMM or a Hub Triton kernel, is not sampled). Held out "
              f"([reports/fp8.md](../reports/fp8.md), hf-eager): {runs} runs, energy {energy}, "
              f"time {time_}. FP8 experts (DeepSeek-V3's checkpoint) are priced as the bf16 "
              "grouped GEMMs piep samples, reading a byte per weight, and carry "
              "`fp8_experts_unsampled`. Every answer names its dtypes (`dtypes`: weights, KV "
              "cache, the quantization).", "",
              "A mixture of experts' dense layers (DeepSeek's `first_k_dense_replace`, Qwen "
              "MoE's `mlp_only_layers` and `decoder_sparse_step`, Llama 4's `moe_layers` and "
              "`interleave_moe_layer_step`) are a layer kind of their own (`layer_dense`), "
              "their MLP at `intermediate_size` (Llama 4: `intermediate_size_mlp`). A latent "
              "attention's heads are split over tensor-parallel ranks as vLLM, SGLang and "
              "transformers' DeepSeek-V2 plan split them, its compressed projection and "
              "cache on every rank; transformers' DeepSeek-V3 plan shards only the MLP and "
              "the experts, so under its engines every rank runs every head. Where a "
              "family's transformers plan leaves a part whole (Qwen2-MoE's routed experts, "
              "DeepSeek-V3's attention, all of gpt-oss and Granite MoE), its engines at tp > "
              "1 are priced so or refused (gpt-oss: answered at ep = tp, by its "
              "expert-parallel plan).", "",
              "Expert parallelism (`--ep N`, `MODEL@tp2ep2` in `compare`) shards a mixture "
              "of experts' experts whole over the tensor-parallel ranks (ep = tp: vLLM's "
              "`--enable-expert-parallel` at one data-parallel replica, transformers' "
              "`enable_expert_parallel`), each rank 1/ep of them at full width; the partial "
              "outputs are all-reduced as tensor parallelism's are. Under vLLM the attention, "
              "dense and shared MLPs and the LM head stay split over the tensor-parallel "
              "ranks; under transformers' engines the expert-parallel plan (the config "
              "class's `base_model_ep_plan`, which then stands in for its tensor-parallel "
              "plan in transformers 5.17) shards the routed experts only: every rank runs the "
              "whole attention (and holds its whole KV cache), the router, the dense and "
              "shared MLPs and the LM head, and one all-reduce a sparse layer sums the "
              "experts' outputs (`Deployment.hf_ep_plan`). A family with an expert-parallel "
              "plan and no tensor-parallel one (gpt-oss, Phi-3.5-MoE, Hunyuan-A13B) is "
              "answered at ep = tp under transformers; Granite MoE has neither. "
              "A rank's grouped GEMMs run "
              "the busiest rank's (token, expert) pairs (`piep.tree.builder.rank_pairs`: the "
              "largest rank mean, with `piep_routing_skew` the popular experts' rank, plus the "
              "expected maximum of the ranks' spread), which the others wait for; "
              "generate()'s batched decode runs every pair on every rank (transformers clamps "
              "the other ranks' experts to a local one). No run measured it: answers carry "
              "`unmeasured_expert_parallel` and an interval widened x1.5; "
              "`calibration/h200/moe/planned_ep.sh` measures `design_eager_ep.jsonl` (tp = ep "
              "= 2, 4, 8 beside ep = 1) when a multi-GPU machine is lent. Across "
              "data-parallel replicas (all-to-all dispatch and combine) is refused.", "",
              "Mixtures of experts are measured with random weights, which route "
              "near-uniformly, as piep prices them by default; a trained router skews, and "
              "the experts a step reaches then fall (fewer weights read in a grouped GEMM): "
              "uniform routing prices the most experts a step can reach. A config states a "
              f"skew as `piep_routing_skew` (the Zipf exponent of the experts' popularity). "
              f"{_skew_effect()} Held out: [reports/moe.md](../reports/moe.md). "
              "A mixture of experts' compiled decode (hf-static: transformers' batched "
              "experts under torch.compile and CUDA graphs) compiles in transformers 5.17; "
              "its first runs, and design 7's, were measured on an H100 while no H200 came, "
              "scored against piep's spec-sheet answers in "
              "[reports/h100.md](../reports/h100.md).", ""]
    return "\n".join(lines)


def _skew_effect() -> str:
    """What `piep_routing_skew` does to one answer per engine (the Qwen3-30B-A3B shape,
    batch 8, 512 + 256 tokens): computed here, by the code."""
    import json
    from dataclasses import replace

    from piep import api
    from piep.core.config import ModelSpec
    path = ROOT / "calibration" / "h200" / "moe" / "configs" / "qwen3-30b-a3b-shape.json"
    spec = ModelSpec.from_hf_config(json.loads(path.read_text()), name=path.stem)
    parts = []
    for engine in ("vllm", "hf-cb", "hf-eager"):
        j = [api.predict(replace(spec, routing_skew=skew), engine=engine, batch=8,
                         prompt_len=512, gen_len=256, hosts=False)["energy_j"]
             for skew in (0.0, 1.2)]
        parts.append(f"{engine} {j[0]:,.0f} -> {j[1]:,.0f} J ({100 * (j[1] / j[0] - 1):+.1f} %)")
    return (f"Its effect on the Qwen3-30B-A3B shape (batch 8, 512 + 256 tokens), skew 0 -> "
            f"1.2: {'; '.join(parts)}. generate()'s decode (hf-eager) copies each pair's "
            f"weights whatever the skew, and a prefill's many tokens reach every expert "
            f"either way.")


def _vl_measured() -> dict[str, str]:
    """A vision-language decoder's family: its own generate() against its stand-in's on a
    card (`h100_quick.vl_pairs`: benchmarks/vl_text_ab.py's runs), the time ratios."""
    from h100_quick import vl_pairs
    ratios: dict[str, list[float]] = {}
    for pair in vl_pairs().values():
        if "own" in pair and "runs_as" in pair:
            ratios.setdefault(pair["own"]["model_type"], []).append(
                pair["own"]["time_median_s"] / pair["runs_as"]["time_median_s"])

    def span(v: list[float]) -> str:
        lo, hi = f"{min(v):.2f}", f"{max(v):.2f}"
        return f"x{lo}" if lo == hi else f"x{lo}-{hi}"
    return {k: f"; its own generate() on an H100 took {span(v)} the stand-in's time ({len(v)} "
               "runs, [reports/h100.md](../reports/h100.md))" for k, v in ratios.items()}


def _moe_held_out() -> dict[str, str]:
    """A priced mixture of experts' family: its held-out runs, energy and time
    (reports/moe.md's rows of the measured shapes of that family)."""
    import json
    rows = [[c.strip() for c in line.strip("|").split("|")]
            for line in (ROOT / "reports" / "moe.md").read_text().splitlines()
            if line.startswith("| ")]
    # (model, engine, runs, energy, time): generate()'s eager runs
    summary = {r[0]: r[2:] for r in rows if len(r) == 5 and r[1] == "hf-eager"}
    out: dict[str, list] = {}
    for path in sorted((ROOT / "calibration" / "h200" / "moe" / "configs").glob("*.json")):
        if path.stem in summary:
            kind = json.loads(path.read_text())["model_type"]
            out.setdefault(kind, []).append(summary[path.stem])
    return {k: "; ".join(f"{r} runs, {e}, {t}" for r, e, t in v) for k, v in out.items()}


def write_schema_files() -> list[str]:
    """piep/schemas/*.schema.json: every registered document kind as a JSON Schema."""
    from piep.core.artifacts import schema_files, write_text
    folder = ROOT / "piep" / "schemas"
    files = schema_files()
    for stale in folder.glob("*.schema.json"):
        if stale.name not in files:
            stale.unlink()
    for name, text in files.items():
        write_text(folder / name, text)
    return sorted(files)


def schemas_doc() -> str:
    """docs/schemas.md: every registered document kind and its required keys."""
    from piep.core.artifacts import SCHEMAS
    lines = ["# Document schemas", "",
             "Every JSON document piep writes or reads names its kind and version "
             "(`schema`, `schema_version`); these are the keys each kind always has "
             "(`piep/core/artifacts.py`; generated by `python benchmarks/docs.py --write`). A "
             "document newer than this piep reads is refused in one line. Each kind ships "
             "as a JSON Schema (2020-12) in the package, `piep/schemas/<kind>.schema.json` "
             "(the same keys and types; other keys allowed), for other tools to validate "
             "piep's documents; the tests validate every committed and written document "
             "against them.", "",
             "| schema | version | required keys |", "|---|---|---|"]
    for s in sorted(SCHEMAS.values(), key=lambda s: s.name):
        keys = ", ".join(f"`{k}`" for k, _ in s.required)
        lines.append(f"| `{s.name}` | {s.version} | {keys} |")
    return "\n".join(lines) + "\n"


GENERATED_DOCS = {"docs/flags.md": flags_doc, "docs/schemas.md": schemas_doc,
                  "docs/models.md": models_doc}
MARK = re.compile(r"<!-- generated: (\w+) -->\n(.*?)<!-- end -->", re.S)


def readme(text: str, made: dict[str, str]) -> str:
    """README.md with each generated block replaced by what is made now."""
    return MARK.sub(lambda m: f"<!-- generated: {m.group(1)} -->\n{made[m.group(1)]}\n"
                              f"<!-- end -->", text)


def stale(text: str, made: dict[str, str]) -> list[str]:
    """The generated blocks of `text` that differ from what is made now."""
    return [m.group(1) for m in MARK.finditer(text) if m.group(2) != made[m.group(1)] + "\n"]


def main() -> int:
    made = blocks()
    new = {name: readme((ROOT / name).read_text(), made) for name in BLOCK_FILES}
    docs = {name: fn() for name, fn in GENERATED_DOCS.items()}
    if "--write" in sys.argv:
        for name, text in {**new, **docs}.items():
            (ROOT / name).write_text(text)
        schemas = write_schema_files()
        print(f"wrote {', '.join(f'{n} ({len(MARK.findall(t))} blocks)' for n, t in new.items())}"
              f", {', '.join(docs)}, piep/schemas/ ({len(schemas)} JSON Schemas)")
    else:
        print(new["README.md"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
