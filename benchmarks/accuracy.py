"""Accuracy of piep's predictors on the committed H200 calibration.

    python benchmarks/accuracy.py            # writes reports/accuracy.md and reports/figures/

Headline: leave-one-model-out (LOMO) end-to-end MAPE of energy and time per mode and
layout: the predictor that answers for a model saw none of its end-to-end runs, and no
module sample of a kernel shape only that model has. Also: held-out batch / prompt / gen
ranges, the unlisted shape, the module sum without the combiner, the distribution of
alpha, module error per kind on held-out isolated shapes (5-fold), baselines (roofline
as shipped, roofline refit on the same folds, IrEne-style module sum without
communication and waiting, PIE-P's published figures) and the empirical coverage of the
90 % jackknife intervals (cross-conformal coverage). Exits non-zero if the coverage is outside 80-95 %.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.core.gpus import load_gpu  # noqa: E402
from piep.core.dataset import load_calibration, module_repeat_pairs, repeat_check_pairs  # noqa: E402,F401
from piep.predict.module_models import (fit_module_models, is_fitted, model_group,  # noqa: E402
                                        priced_power_w, sample_leaf)
from piep.predict.pricing import price  # noqa: E402
from piep.predict.roofline import RooflineModel  # noqa: E402
from piep.predict.features import base_time_s, leaf_features  # noqa: E402
from piep.fit.predictor import Case, cases, conformal, fit, leave_one_model_out, rows_of  # noqa: E402

REPORT = ROOT / "reports" / "accuracy.md"
FIGS = ROOT / "reports" / "figures"


def mape(pairs) -> float:
    pairs = list(pairs)
    return 100 * statistics.mean(abs(p / m - 1) for p, m in pairs) if pairs else float("nan")


def group_table(rows, pred="pred_energy_j", meas="energy_j", tpred="pred_time_s",
                tmeas="time_s") -> list[list]:
    out = []
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["mode"], r["layout"]), []).append(r)
        groups.setdefault((r["mode"], "all"), []).append(r)
    groups[("all", "all")] = rows
    for key in sorted(groups):
        rs = groups[key]
        out.append([key[0], key[1], len(rs), mape((r[pred], r[meas]) for r in rs),
                    mape((r[tpred], r[tmeas]) for r in rs)])
    return out


def md_table(rows, headers) -> str:
    def f(v):
        return f"{v:.1f}" if isinstance(v, float) else "-" if v is None else str(v)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(f(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def roofline_baselines(all_cases: list[Case]) -> list[dict]:
    """The roofline as shipped, and refit: per-mode energy and time factors fitted on the
    training folds (median measured/predicted), applied to the held-out model."""
    priced = price([c.dep for c in all_cases], RooflineModel())
    preds = {c.run.key: {"energy_j": float(priced.energy_j[i]),
                            "time_s": float(priced.time_s[i])}
             for i, c in enumerate(all_cases)}
    rows = []
    for c in all_cases:
        train = [d for d in all_cases if d.run.model != c.run.model
                 and d.run.mode == c.run.mode]
        fe = statistics.median(d.energy_j / preds[d.run.key]["energy_j"] for d in train)
        ft = statistics.median(d.time_s / preds[d.run.key]["time_s"] for d in train)
        p = preds[c.run.key]
        rows.append({"mode": c.run.mode, "layout": _layout(c), "energy_j": c.energy_j,
                     "time_s": c.time_s, "roof_e": p["energy_j"], "roof_t": p["time_s"],
                     "refit_e": p["energy_j"] * fe, "refit_t": p["time_s"] * ft})
    return rows


def _layout(c: Case) -> str:
    p = c.dep.parallel
    return "tp" if p.tp > 1 else "pp" if p.pp > 1 else "dp" if p.dp > 1 else "single"


def held_out_ranges(cal, gpu, all_cases) -> list[list]:
    """Train on the lower part of a workload axis, predict the upper part (extrapolation)."""
    out = []
    for axis in ("batch", "prompt_len", "gen_len"):
        values = sorted(getattr(c.run, axis) for c in all_cases)
        cut = values[int(len(values) * 0.7)]
        train = [c for c in all_cases if getattr(c.run, axis) < cut]
        test = [c for c in all_cases if getattr(c.run, axis) >= cut]
        rows = rows_of(test, fit(cal, gpu, train))
        graph = [r for r in rows if r["mode"] == "graph"]
        out.append([f"{axis} >= {cut} (trained below)", len(graph),
                    mape((r["pred_energy_j"], r["energy_j"]) for r in graph),
                    mape((r["pred_time_s"], r["time_s"]) for r in graph)])
    return out


WORKLOAD_FIELDS = ("batch", "context_len", "q_len", "tokens", "phase", "mode")


def module_cv(cal, gpu, folds: int = 5, kernel_only: bool = False) -> list[list]:
    """Per kind: energy and time error per call on held-out isolated shapes (k-fold).

    Folds by shape: a shape measured again (repeat check, another op version) never sits
    in training and test at once. With `kernel_only` the shape is the kernel's alone
    (weight matrix, head layout; token count, context, phase and mode left out), so a
    weight matrix held out is held out at every token count."""
    rows = [r for r in cal.modules if is_fitted(r)]

    def key(r) -> str:
        return repr(sorted((k, v) for k, v in r.shape.items()
                           if not (kernel_only and k in WORKLOAD_FIELDS)))
    shapes = sorted({key(r) for r in rows})
    rng = np.random.default_rng(0)
    fold_of_shape = dict(zip(shapes, rng.integers(0, folds, len(shapes))))
    fold_of = [fold_of_shape[key(r)] for r in rows]
    floor_w = statistics.median(h.launch_gap_power_w for h in cal.host)
    errs: dict[str, list[tuple[float, float]]] = {}
    for k in range(folds):
        train = [r for r, f in zip(rows, fold_of) if f != k]
        test = [r for r, f in zip(rows, fold_of) if f == k]
        models = fit_module_models(train, gpu)
        for r in test:
            group = model_group(r.kind, r.phase == "decode", r.mode == "eager")
            if group not in models:
                continue
            leaf = sample_leaf(r)
            x = np.asarray([leaf_features(leaf, gpu, r.mode)])
            lr, p, _ = models[group].predict(x)
            p = priced_power_w(p, floor_w, gpu)  # the bounds the predictor applies
            t = base_time_s(leaf, gpu) * math.exp(lr[0])
            errs.setdefault(r.kind, []).append((abs(t * p[0] / r.energy_j - 1),
                                                abs(t / r.time_s - 1)))
    return [[k, len(v), 100 * statistics.mean(e for e, _ in v),
             100 * statistics.mean(t for _, t in v)] for k, v in sorted(errs.items())]


def collective_loo(cal) -> list[list]:
    """Collectives sampled in isolation, priced as the predictor prices them (time and
    power interpolated in log size from the isolated samples), each size held out: the
    model is rebuilt from the other sizes of its kind and mode, so the end sizes (4 KiB,
    1 GiB) are extrapolations. Energy per call, both GPUs."""
    from piep.predict.collectives import Collectives, collective_rows
    rows = collective_rows(cal.collective_samples)
    errs: dict[str, list[tuple[float, bool]]] = {}
    for r in rows:
        same = [q for q in rows if q.kind == r.kind and q.mode == r.mode]
        sizes = sorted({q.size_bytes for q in same})
        rest = [q for q in rows if q.size_bytes != r.size_bytes
                or (q.kind, q.mode) != (r.kind, r.mode)]
        comm = Collectives.from_calibration([], [], rest)
        n = len(r.energy_j_per_gpu)
        kind, size = np.array([r.kind], dtype=object), np.array([float(r.size_bytes)])
        eager = np.array([r.mode == "eager"])
        pred = float(comm.transfer_s(kind, size, np.array([float(n)]), eager)[0]
                     * comm.power_w(kind, size, eager, float("nan"))[0]) * n
        interior = sizes[0] < r.size_bytes < sizes[-1]
        errs.setdefault(r.kind, []).append((abs(pred / sum(r.energy_j_per_gpu) - 1),
                                            interior))
    return [[k, len(v), 100 * statistics.mean(e for e, _ in v),
             100 * statistics.mean(e for e, i in v if i)] for k, v in sorted(errs.items())]


def collective_repeat(cal) -> tuple[int, float, float]:
    """AllReduce measured twice a minute apart (device call 10): energy per call, both
    GPUs, |pass 2 / pass 1 - 1| over the points both passes kept."""
    by: dict[tuple, list] = {}
    for r in cal.collective_samples:
        if r.kind == "allreduce" and r.reduce_op == "sum" and not r.superseded:
            by.setdefault((r.mode, r.size_bytes), []).append(r)
    pairs = [sorted(v, key=lambda r: r.time_unix)[:2] for v in by.values() if len(v) >= 2]
    d = [abs(sum(b.energy_j_per_gpu) / sum(a.energy_j_per_gpu) - 1) for a, b in pairs]
    return len(d), 100 * statistics.mean(d), 100 * statistics.median(d)


def blind_rows() -> list[list]:
    """Per blind test (benchmarks/blind_unlisted.py), graph runs: n, energy and time MAPE."""
    from blind_unlisted import TESTS, predict_runs
    out = []
    for name, (_, folder) in TESTS.items():
        runs = [(r, doc) for r, doc in predict_runs(name) if r["mode"] == "graph"]
        if not runs:  # a blind test whose runs are not measured yet (4 and 8 GPUs)
            continue
        out.append([name, f"`{folder}/`", len(runs),
                    mape((d["energy_j"], r["energy_j"]) for r, d in runs),
                    mape((d["time_s"], r["time_s"]) for r, d in runs)])
    return out


def repeat_agreement(cal) -> tuple[int, float, float]:
    """Module samples measured twice back to back: relative energy difference."""
    diffs = [abs(b.energy_j / a.energy_j - 1) for a, b in repeat_check_pairs(cal.modules)]
    return len(diffs), 100 * statistics.median(diffs), 100 * max(diffs)


def insitu_gap(gpu) -> list[list]:
    """In-situ kernel time per module kind (profiler ranges in real eager runs,
    calibration/h200/insitu) vs the isolated-sample module model, per kind and phase."""
    from piep.core.artifacts import read_jsonl
    from piep.core.layout import validate
    from piep.core.config import Parallel, Workload
    from piep.core.models import load_model
    from piep.predict.store import load_learned
    from piep.predict.table import TableBuilder
    path = ROOT / "calibration" / "h200" / "insitu" / "insitu.jsonl"
    model = load_learned("h200")
    if model is None or not path.is_file():
        return []
    seen: dict[tuple, list[float]] = {}
    for r in read_jsonl(path):
        seen.setdefault((r["model"], r["batch"], r["prompt_len"], r["phase"], r["kind"]),
                        []).append(r["device_time_s_per_call"])
    ratios: dict[tuple[str, str], list[float]] = {}
    for (name, batch, prompt, phase, kind), vals in seen.items():
        dep = validate(load_model(name), Parallel(), Workload(batch=batch, prompt_len=prompt,
                                                              gen_len=17, mode="eager"), gpu,
                       check_memory=False)
        table = TableBuilder().table([dep])
        rows = (table.kind == kind) & (table.phase == ("prefill", "decode").index(phase))
        if not rows.any():
            continue
        iso = float(model.modules.predict(table, gpu).time_s[rows].mean())
        ratios.setdefault((kind, phase), []).append(min(vals) / iso)
    return [[k, ph, len(v), 100 * (statistics.median(v) - 1)]
            for (k, ph), v in sorted(ratios.items())]


def module_alphas(model, all_cases: list[Case]) -> list[float]:
    """alpha of every module of every run, with the tokens of its phase (as fitted)."""
    from piep.predict.table import KIND_ID
    priced = price([c.dep for c in all_cases], model, detail=True)
    out = []
    for i, c in enumerate(all_cases):
        mods = priced.modules(i)
        decode = np.array([m["phase"] == "decode" for m in mods])
        tokens = c.dep.replica_batch * np.where(decode, 1, c.dep.workload.prompt_len)
        out += model.combiner.alpha(np.array([KIND_ID[m["kind"]] for m in mods]), decode,
                                    np.full(len(mods), c.dep.workload.mode == "eager"),
                                    tokens).tolist()
    return out


def cross_conformal(rows) -> tuple[float, float, int]:
    """Coverage of 90 % intervals sized without the held-out model's own residuals."""
    hit_e = hit_t = 0
    for model in sorted({r["model"] for r in rows}):
        rest = [r for r in rows if r["model"] != model]
        qe, qt, _ = conformal(rest)
        for r in rows:
            if r["model"] != model:
                continue
            g = f"{r['mode']}/{r['layout']}"
            hit_e += abs(math.log(r["pred_energy_j"] / r["energy_j"])) <= qe.get(g, qe["all"])
            hit_t += abs(math.log(r["pred_time_s"] / r["time_s"])) <= qt.get(g, qt["all"])
    return 100 * hit_e / len(rows), 100 * hit_t / len(rows), len(rows)


def figures(rows, alphas) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    FIGS.mkdir(parents=True, exist_ok=True)
    names = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    for ax, (p, m, label) in zip(axes, (("pred_energy_j", "energy_j", "energy (J)"),
                                        ("pred_time_s", "time_s", "time (s)"))):
        for mode, marker in (("graph", "o"), ("eager", "x")):
            rs = [r for r in rows if r["mode"] == mode]
            ax.scatter([r[m] for r in rs], [r[p] for r in rs], marker=marker, label=mode, s=18)
        lo = min(min(r[m], r[p]) for r in rows)
        hi = max(max(r[m], r[p]) for r in rows)
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"measured {label}")
        ax.set_ylabel(f"predicted {label} (LOMO)")
        ax.legend()
    fig.suptitle("Leave-one-model-out predictions vs H200 measurements")
    fig.tight_layout()
    fig.savefig(FIGS / "lomo_scatter.png", dpi=110)
    names.append("figures/lomo_scatter.png")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(alphas, bins=40)
    ax.set_xlabel("combiner weight alpha (per module, all runs)")
    ax.set_ylabel("modules")
    fig.tight_layout()
    fig.savefig(FIGS / "alpha_hist.png", dpi=110)
    names.append("figures/alpha_hist.png")
    plt.close(fig)
    return names


def main() -> int:
    gpu = load_gpu("h200")
    cal = load_calibration("h200")
    all_cases = cases(cal, gpu)
    print(f"{len(all_cases)} end-to-end configurations, {len(cal.modules)} module samples",
          file=sys.stderr)
    rows = leave_one_model_out(cal, gpu, all_cases,
                               progress=lambda i, n, m: print(f"LOMO {i}/{n} {m}", file=sys.stderr))
    base = roofline_baselines(all_cases)
    shipped = fit(cal, gpu, all_cases)
    alphas = module_alphas(shipped, all_cases)
    cov_e, cov_t, n_cov = cross_conformal(rows)
    ranges = held_out_ranges(cal, gpu, all_cases)
    per_kind = module_cv(cal, gpu)
    by_kernel = {k: row for k, *row in module_cv(cal, gpu, kernel_only=True)}
    n_vocab = len({r.shape["vocab"] for r in cal.modules if r.kind == "sampling"})
    per_kind = [[*row, *by_kernel.get(row[0], [None, None, None])[1:]] for row in per_kind]
    n_rep, rep_med, rep_max = repeat_agreement(cal)
    coll = collective_loo(cal)
    n_crep, crep_mean, crep_med = collective_repeat(cal)
    gaps = insitu_gap(gpu)
    figs = figures(rows, alphas)

    graph = [r for r in rows if r["mode"] == "graph"]
    head_e = mape((r["pred_energy_j"], r["energy_j"]) for r in graph)
    head_t = mape((r["pred_time_s"], r["time_s"]) for r in graph)
    raw = mape((r["pred_raw_j"], r["energy_j"]) for r in graph)
    irene = mape((r["pred_compute_only_j"], r["energy_j"]) for r in graph)
    gb = [b for b in base if b["mode"] == "graph"]
    roof_e = mape((b["roof_e"], b["energy_j"]) for b in gb)
    roof_t = mape((b["roof_t"], b["time_s"]) for b in gb)
    refit_e = mape((b["refit_e"], b["energy_j"]) for b in gb)
    refit_t = mape((b["refit_t"], b["time_s"]) for b in gb)
    unl = [r for r in graph if r["model"].startswith("piep-unlisted")]
    blind = blind_rows()
    by_model = sorted({r["model"] for r in rows})
    per_model = [[m, len([r for r in graph if r["model"] == m]),
                  mape((r["pred_energy_j"], r["energy_j"]) for r in graph if r["model"] == m),
                  mape((r["pred_time_s"], r["time_s"]) for r in graph if r["model"] == m)]
                 for m in by_model if any(r["model"] == m for r in graph)]
    a = np.asarray(alphas)
    text = f"""# piep accuracy on H200 (generated)

Made by `python benchmarks/accuracy.py` from the committed calibration
(`calibration/h200/`: {len(all_cases)} end-to-end configurations, {len(cal.modules)} module
samples). Energy is GPU-board energy summed over all GPUs (NVML counter, tick-aligned).
MAPE = mean |predicted / measured - 1|, in %.

## Headline: leave-one-model-out, graph mode

| | energy MAPE % | time MAPE % |
|---|---|---|
| **piep learned (LOMO)** | **{head_e:.1f}** | **{head_t:.1f}** |
| roofline as shipped (no fit) | {roof_e:.1f} | {roof_t:.1f} |
| roofline refit on the same folds (per-mode factors) | {refit_e:.1f} | {refit_t:.1f} |
| piep module sum without the combiner (raw) | {raw:.1f} | |
| IrEne-style: compute modules only (no communication, waiting, launch gaps) | {irene:.1f} | |
| PIE-P published (TP average; held-out families) | 17.6; 24-28 | |

In the LOMO folds the predictor never saw an end-to-end run of the held-out model, and
module samples whose kernel shape belongs to that model alone are dropped (shapes that
another model shares stay: Vicuna-7B and Llama-2-7B, for example, are the same shape).

## By mode and layout (LOMO)

{md_table(group_table(rows), ["mode", "layout", "n", "energy MAPE %", "time MAPE %"])}

Eager mode is host-bound and noisy on these machines (repeat spread up to >100 %, see
`calibration/h200/e2e/README.md`); its error is reported as measured.

## By held-out model (LOMO, graph)

{md_table(per_model, ["held-out model", "n", "energy MAPE %", "time MAPE %"])}

The shapes in no public list (`piep-unlisted-3b`: hidden 2560, 20 heads, 4 KV heads, 36
layers; `-6b`: 3840, 30, 6, 30 layers; `-9b`: 4352, 34, 2, 30 layers, FFN 11900; `-hd64`:
2048, 32, 4, 20 layers, head dim 64; `-hd96`: 3072, 32, 4, 24 layers, head dim 96):
{len(unl)} graph runs, energy MAPE {mape((r['pred_energy_j'], r['energy_j']) for r in unl):.1f} %,
time MAPE {mape((r['pred_time_s'], r['time_s']) for r in unl):.1f} % (LOMO).

**Blind tests.** Runs measured after the predictor that predicts them was trained (a
committed copy of it, so the test stays reproducible; `python benchmarks/blind_unlisted.py`
lists every run): device call 12, `piep-unlisted-6b` and `-9b` (no module sample was ever
drawn from these shapes), with the predictor of commit f9b6957; device call 13, two
unlisted shapes of head dim 64 and 96 (until then every training run and module sample
had head dim 128; the head-dim-64 runs are flagged `out_of_range`), with the predictor of
commit 6e0a191. Both are evaluated with today's engine code (the priced-power bound has
changed since: with the code of their own commits they gave 3.8 / 3.9 % and 2.5 / 6.3 %,
`git checkout f633baf && python benchmarks/blind_unlisted.py`). Device call 57: MHA models
(llama-2-7b, llama-2-13b, vicuna-33b) at batches 1-14, piep's default workload first, with
the predictor of commit 511eb80, whose attention had no sample of 32 query and 32 KV heads
near batch 1 (the default workload was flagged `out_of_range`); time was right, energy
high by 8-16 % at batches 1-4. Part of that is the board: call 57's board read 6 % less
than another on the default workload, and the board spread on identical runs is in
`boards.md` (`python benchmarks/boards.py`). Graph runs:

{md_table(blind, ["blind test", "predictor", "n", "energy MAPE %", "time MAPE %"])}

## Held-out workload ranges (graph; trained on the lower 70 %, tested above)

{md_table(ranges, ["held out", "n", "energy MAPE %", "time MAPE %"])}

## Module error per kind (isolated shapes, 5-fold, energy per call)

{md_table(per_kind, ["kind", "n", "energy MAPE %", "time MAPE %",
                      "energy MAPE %, by kernel", "time MAPE %, by kernel"])}

PIE-P's published module errors: attention 8.8-11.4 %, MLP 6.6-9.5 %, AllReduce
17.3-19.4 %. The first two columns fold by the full shape (a shape measured again never
sits in training and test, but the same weight matrix is in training at other token
counts); the last two fold by the kernel's shape alone (weight matrix or head layout; token
count, context, phase and mode left out), so a held-out matrix is held out at every token
count. The second is the fairer comparison with PIE-P. Where a kind's kernel shape is a
single number (sampling: the vocabulary, {n_vocab} sizes) the kernel fold holds out whole
vocabularies and the model extrapolates across them: that column is then an error for a
vocabulary never measured, the case of a new model family.

Collectives as the predictor prices them: time and power per call interpolated in log
size from the collectives sampled in isolation with their energy
(`calibration/h200/collectives/`: 4 KiB-1 GiB, 2x apart, both GPUs; AllReduce with the
runner's SUM), each size held out in turn (rebuilt from the other sizes of its kind and
mode; the end sizes 4 KiB and 1 GiB are then extrapolations). Energy per call, both GPUs:

{md_table(coll, ["collective", "points", "energy MAPE %, all sizes", "interior sizes %"])}

The AllReduce figure is the one comparable to PIE-P's AllReduce module error
(17.3-19.4 %). Its floor is the measurement's own repeat noise: AllReduce measured twice
a minute apart ({n_crep} points): mean difference {crep_mean:.1f} %, median
{crep_med:.1f} % (small buffers, 10-50 us per call, vary most).

Module repeat agreement (final protocol: two passes minutes apart, 1 s windows, calls
under 20 us as the median of 3 fresh builds; `calibration/h200/modules/README.md`):
{n_rep} shapes, median difference {rep_med:.2f} %, max {rep_max:.2f} %.

## In-situ check of the isolated module samples

Kernel time per module call inside real eager prefill and decode (torch.profiler ranges
around each module; `piep calibrate insitu`, `calibration/h200/insitu/`, 4 models) vs the
module model trained on isolated samples, at the same shapes. Gap = in-situ / isolated - 1
(median over the cases). The end-to-end fit absorbs the mean gap per phase
(`time_scale`); what remains is part of the error above.

{md_table(gaps, ["kind", "phase", "cases", "gap %"])}

## Combiner and intervals

alpha over all modules of all runs: min {a.min():.3f}, median {np.median(a):.3f},
max {a.max():.3f} (bounds 1 ± 1/2.5).

90 % jackknife intervals: the full fit's prediction +- the 90 % quantile of the LOMO
residuals, per (mode, layout) where a group has 8 runs or more (else pooled). Empirical
coverage when each model's interval is sized without its own residuals: energy
{cov_e:.1f} %, time {cov_t:.1f} % ({n_cov} runs).

![LOMO scatter]({figs[0]})

![alpha]({figs[1]})

## Real engines and serving

This report is piep's reference runner. Its accuracy on transformers `generate()`
(`hf-eager`, `hf-static`: leave-one-model-out, blind runs, intervals, calibration runs
needed) is in [engines.md](engines.md) (`python benchmarks/engines_accuracy.py`); on request
streams under transformers' continuous batching (`hf-cb`: leave one shape out, held-out
load levels, saturated and burst traces alone, blind replays, repeat spread) in
[serving.md](serving.md) (`python benchmarks/serving_accuracy.py`).
"""
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(text)
    import interval_coverage  # the coverage of every interval piep prints, appended
    interval_coverage.write()
    print(f"graph LOMO energy MAPE {head_e:.2f} %  time MAPE {head_t:.2f} %")
    print(f"roofline refit energy {refit_e:.2f} %  time {refit_t:.2f} %")
    print(f"coverage energy {cov_e:.1f} %  time {cov_t:.1f} %")
    print(f"wrote {REPORT}")
    ok = 80 <= cov_e <= 95 and 80 <= cov_t <= 95
    if not ok:
        print("coverage outside 80-95 %", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
