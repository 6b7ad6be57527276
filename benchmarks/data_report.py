"""Figures and figures-in-text of the committed H200 measurements.

    python benchmarks/data_report.py

Writes calibration/h200/e2e/README.md (+ figures/) and calibration/h200/waits/README.md
(+ figures) from the committed JSONL data, so every number they quote is recomputed.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from piep.core.artifacts import load_json, read_jsonl  # noqa: E402
from piep.core.models import SYNTHETIC  # noqa: E402
from piep.core.dataset import load_calibration, module_repeat_pairs, repeat_check_pairs  # noqa: E402
from piep.core.records import merge_repeats  # noqa: E402

CAL = ROOT / "calibration" / "h200"


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def e2e_report() -> None:
    cal = load_calibration("h200")
    raw = [m.doc for m in cal.e2e]  # the records as the runner wrote them
    rows = [m.to_json() for m in merge_repeats(cal.e2e)]  # the report reads the records' own fields
    figs = CAL / "e2e" / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    plt = _plt()
    graph = [r for r in raw if r["mode"] == "graph"]
    eager = [r for r in raw if r["mode"] == "eager"]
    sp_g = [r["spread"] for r in graph]
    sp_e = [r["spread"] for r in eager]
    cont = [r["continuous"]["energy_j"] / r["energy_j"] - 1 for r in graph if "continuous" in r]
    dups: dict[str, list] = {}
    for r in raw:
        dups.setdefault(r["key"], []).append(r)
    cross = [abs(v[1]["energy_j"] / v[0]["energy_j"] - 1) for v in dups.values()
             if len(v) > 1 and v[0]["mode"] == "graph"]
    # energy per token vs batch, tp1 graph, per model
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for model in sorted({r["model"] for r in rows}):
        rs = sorted((r for r in rows if r["model"] == model and r["mode"] == "graph"
                     and r["gpus"] == 1), key=lambda r: r["batch"])
        if len(rs) >= 3:
            ax.plot([r["batch"] for r in rs],
                    [r["decode"]["energy_j"] / (r["batch"] * max(r["decode"]["steps"], 1))
                     for r in rs], "o-", label=model, ms=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("batch")
    ax.set_ylabel("decode J per generated token")
    ax.set_title("H200, 1 GPU, graph mode")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(figs / "j_per_token_vs_batch.png", dpi=110)
    plt.close(fig)
    # spreads
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist([100 * s for s in sp_g], bins=30, label="graph")
    ax.set_xlabel("repeat spread (max-min)/median of energy, %")
    ax.set_ylabel("configurations")
    ax.set_title("graph mode, 3 interleaved repeats")
    fig.tight_layout()
    fig.savefig(figs / "spread_graph.png", dpi=110)
    plt.close(fig)
    # layouts: decode power per GPU and J/token by layout
    lay = {}
    for r in rows:
        if r["mode"] != "graph":
            continue
        name = "tp2" if r["tp"] > 1 else "pp2" if r["pp"] > 1 else "dp2" if r["dp"] > 1 else "tp1"
        lay.setdefault(name, []).append(r)
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for name, rs in sorted(lay.items()):
        ax.scatter([r["decode"]["tpot_s"] * 1e3 for r in rs],
                   [r["decode"]["energy_j"] / (r["batch"] * max(r["decode"]["steps"], 1))
                    for r in rs], label=name, s=14)
    ax.set_xlabel("TPOT (ms)")
    ax.set_ylabel("decode J per token")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("decode: latency vs energy by layout (graph)")
    fig.tight_layout()
    fig.savefig(figs / "decode_layouts.png", dpi=110)
    plt.close(fig)

    # pipeline bubbles: measured pp2 energy vs the same model/workload's... per-GPU power
    def gpu_power(r):
        return [(g["prefill_energy_j"] + g["decode_energy_j"]) / r["time_s"] for g in r["per_gpu"]]
    pw = {name: statistics.median(p for r in rs for p in gpu_power(r)) for name, rs in lay.items()}
    eager_vs = []
    for r in rows:
        if r["mode"] == "eager":
            eager_vs.append(r["decode"]["tpot_s"] * 1e3)
    tpot_g = statistics.median(r["decode"]["tpot_s"] * 1e3 for r in rows
                               if r["mode"] == "graph" and r["gpus"] == 1)
    models = sorted({r["model"] for r in rows})
    long_w, n_long, short_w = _prefill_power(raw)
    text = f"""# H200 end-to-end measurements (generated)

Made by `python benchmarks/data_report.py` from `raw/*.jsonl`. Each record is one
configuration measured by `piep measure` (SPEC §3): GPU-board energy from NVML's total
energy counter, summed over every GPU of the deployment, tick-aligned windows with the
idle correction, prefill and decode measured separately by repetition (K back-to-back
prefills / decode blocks in one window of >= 0.5 s), 3 interleaved repeats, plus one
continuous prefill+decode window as a check. Random-normal bf16 weights created on the GPU.

How they were made (device logs in `logs/`, scripts in `../device/`):

* `bash calibration/h200/device/run1.sh` on `nvidia-h200-x2`: probe, GPU test, the 1-GPU
  part of `design.jsonl` in two shards (one per GPU, side by side) -> `raw/e2e_1gpu_s0.jsonl`,
  `raw/e2e_1gpu_s1.jsonl`.
* `torchrun --standalone --nproc-per-node 2 -m piep measure --grid calibration/h200/e2e/design.jsonl --out e2e_2gpu.jsonl --budget-s 470`
  -> `raw/e2e_2gpu.jsonl`; a second budgeted pass (`--budget-s 200 --shard 1/2`, started
  with an empty output so it re-measured some points) -> `raw/e2e_2gpu_b.jsonl`; the
  1-GPU re-run `raw/e2e_1gpu_s2_repeat.jsonl` likewise re-measured 7 points in another
  process; `bash calibration/h200/device/run2.sh` added `raw/e2e_2gpu_c.jsonl`.
* Session 2: `bash calibration/h200/device/run6.sh` (the last 3 pending 1-GPU points ->
  `raw/e2e_1gpu_s3.jsonl`, 19 2-GPU points -> `raw/e2e_2gpu_d.jsonl`) and `run7.sh` (21
  more 2-GPU points -> `raw/e2e_2gpu_e.jsonl`); both resume the design with the
  already-measured records as skip markers and commit only the new lines.
* Session 3: `run9.sh` measured the last 17 2-GPU points of `design.jsonl` and the 9 of
  `design_eager_pp.jsonl` (eager pipeline-parallel runs; the main design had drawn 3)
  -> `raw/e2e_s3_2gpu.jsonl`. Every point of both designs is now measured. `run12.sh`
  measured `design_unlisted.jsonl` (two more shapes in no public list, `piep-unlisted-6b`
  and `-9b`, tp1 / tp2 / pp2) -> `raw/e2e_s3_unl_*.jsonl`: a blind test of
  `reports/accuracy.md` (predicted before they were measured). `run13.sh` measured
  `design_headdim.jsonl` (head dims 64 and 96, the second blind test) ->
  `raw/e2e_s3_hd.jsonl`.
* Session 17: `run57.sh` measured `design_mha.jsonl` (MHA models at small batches, piep's
  default workload first) -> `raw/e2e_s57_mha.jsonl`: a blind test (predictions committed
  before, `predictions_mha.jsonl`, by the frozen `../predictor_blind_mha/`).
* Ready, not yet run (issue 17, needs a 4- or 8-GPU machine): `design_x4.jsonl` (tp4, pp4,
  tp2xpp2, tp2xdp2, dp4) and `design_x8.jsonl` (tp8, tp4xpp2, tp4xdp2, tp2xpp2xdp2) over
  llama-3-70b, qwen2.5-32b, llama-2-13b and `piep-unlisted-20b` (a shape in no public
  list), run by `calibration/h200/device/multi_gpu.sh 4` / `8`; their blind predictions, made by
  the frozen `calibration/h200/predictor_blind_x4x8/` before any run, are in
  `predictions_x4x8.jsonl` (`python benchmarks/blind_predictions.py x4x8`).
* `design.jsonl` was drawn by `python -m piep.sampling.design` in session 1 (Latin-hypercube over log batch 1-64,
  prompt 128-2048, gen 32-512 per model x layout x mode, kept where the memory fit
  leaves 15 % and the roofline says the run lasts < 3 s, so that the budget covers many
  points; the roofline has changed since, so drawing it again today filters a few points
  differently: the committed file is the one measured). `design_eager_pp.jsonl` and
  `design_unlisted.jsonl` are `python -m piep.sampling.design NAME`.

## What is here

* {len(raw)} records, **{len(rows)} distinct configurations**, {len(models)} model shapes
  ({', '.join(models)}), including five shapes in no public list: `piep-unlisted-3b`
  (hidden 2560, 20 heads, 4 KV heads, 36 layers, FFN 6912, vocab 50304), `-6b` (3840, 30,
  6, 30 layers, FFN 10240), `-9b` (4352, 34, 2, 30 layers, FFN 11900), `-hd64` (2048,
  32, 4, 20 layers: head dim 64) and `-hd96` (3072, 32, 4, 24 layers: head dim 96); configs
  inline in the records and in `piep/sampling/design.py`.
* Layouts: {', '.join(f'{k}: {len(v)}' for k, v in sorted(lay.items()))} (graph); eager:
  {len([r for r in rows if r['mode'] == 'eager'])} configurations.
* Graph mode repeat spread (max-min over 3 repeats / median): median
  **{100 * statistics.median(sp_g):.2f} %**, 90th percentile {100 * float(np.quantile(sp_g, 0.9)):.2f} %,
  max **{100 * max(sp_g):.2f} %** ({len(sp_g)} records).
* Eager mode spread: median {100 * statistics.median(sp_e):.0f} %, max {100 * max(sp_e):.0f} %
  ({len(sp_e)} records): host-bound and noisy on these machines, as SPEC §4 warned.
* Continuous prefill+decode window vs the sum of the separately measured phases (graph):
  median {100 * statistics.median(cont):+.2f} %, range {100 * min(cont):+.2f} % .. {100 * max(cont):+.2f} %.
* The same configuration measured again in another process or device call (graph,
  {len(cross)} pairs): median |difference| {100 * statistics.median(cross):.2f} %, max {100 * max(cross):.2f} %.
* Median per-GPU mean board power by layout (graph): {', '.join(f'{k} {v:.0f} W' for k, v in sorted(pw.items()))}.
* Eager vs graph: median TPOT {statistics.median(eager_vs):.1f} ms eager vs {tpot_g:.1f} ms graph
  (all models, 1 GPU graph).
* Prefill board power per GPU against the 700 W limit: prefills of at least 1 s peak at
  {long_w:.1f} W ({n_long} runs); shorter ones read up to {short_w:.1f} W (the board's
  controller lags its limit over short windows). The predictor follows this
  (`piep.predict.power`): a phase whose kernels add up to more than its burst power
  (fitted: the predictor's `burst_power_ratio` x the limit) runs at a lower clock, its
  time stretched; it averages at most the burst power up to `burst_s`, the limit from
  1 s on (`power_capped`); a shorter phase above the limit is flagged
  `short_window_power`.

![J per token](figures/j_per_token_vs_batch.png)

![decode layouts](figures/decode_layouts.png)

![spread](figures/spread_graph.png)

Decode energy per token falls steeply with batch (decode is weight-bandwidth bound: the weights
are read once per step for the whole batch). Pipeline stages run one after another with
no micro-batching, so each pp2 GPU waits through the other stage's work: lower mean power
per GPU, but two GPUs' boards drawing power for the whole run.
"""
    (CAL / "e2e" / "README.md").write_text(text)


def _prefill_power(rows) -> tuple[float, int, float]:
    """(peak W per GPU of prefills >= 1 s, their count, peak W of shorter prefills)."""
    power = [(r["prefill"]["energy_j"] / (r["gpus"] * r["prefill"]["time_s"]),
              r["prefill"]["time_s"]) for r in rows if r["prefill"].get("energy_j")]
    long_ = [p for p, t in power if t >= 1.0]
    return max(long_, default=float("nan")), len(long_), max(p for p, t in power if t < 1.0)


def waits_report() -> None:
    from scipy import stats
    plt = _plt()
    fits = load_json(CAL / "waits" / "fits.json")["fits"]
    samples = [r for r in read_jsonl(CAL / "waits" / "waits.jsonl")
               if r.get("schema") == "piep.wait_samples"]
    figs = CAL / "waits" / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(2, 4, figsize=(14, 6))
    chosen = [s for s in samples if s["model"] == "llama-2-7b"]
    for ax, s in zip(axes.flat, chosen):
        w = np.asarray([v for rank in s["waits_s"] for v in rank if v > 0]) * 1e6
        ax.hist(w, bins=60, density=True, alpha=0.7)
        f = next(f for f in fits if f["model"] == s["model"] and f["phase"] == s["phase"]
                 and f["mode"] == s["mode"] and f["batch"] == s["batch"])["fit"]
        if "shape" in f:
            x = np.linspace(0, np.quantile(w, 0.99), 200)
            ax.plot(x, stats.gamma.pdf(x, f["shape"], 0, f["scale_s"] * 1e6), "r-",
                    label=f"Gamma k={f['shape']:.2f}\nKS={f['ks_statistic']:.3f}")
            ax.legend(fontsize=7)
        ax.set_title(f"{s['phase']} {s['mode']} b{s['batch']}", fontsize=9)
        ax.set_xlabel("wait (us)", fontsize=8)
        ax.set_xlim(0, np.quantile(w, 0.99))
    fig.suptitle("AllReduce waiting times, Llama-2-7B tp=2 on H200 (w = d_r - min d)")
    fig.tight_layout()
    fig.savefig(figs / "wait_fits_llama2_7b.png", dpi=100)
    plt.close(fig)
    lines = ["| model | phase | mode | batch | bytes | n>0 / n | mean wait us | Gamma shape | "
             "KS | AD | method |", "|" + "---|" * 11]
    for f in fits:
        ft = f["fit"]
        lines.append(f"| {f['model']} | {f['phase']} | {f['mode']} | {f['batch']} | "
                     f"{f['size_bytes']} | {ft['n']} / {ft['n_total']} | {ft['mean_s'] * 1e6:.1f} | "
                     f"{ft.get('shape', float('nan')):.2f} | {ft.get('ks_statistic', float('nan')):.3f} | "
                     f"{ft.get('ad_statistic', float('nan')):.1f} | {ft['method']} |")
    text = f"""# AllReduce waiting times on H200, tp=2 (generated)

Made by `python benchmarks/data_report.py` from `waits.jsonl` and `fits.json`.
Samples: `torchrun --standalone --nproc-per-node 2 -m piep calibrate waits --out waits.jsonl
--models llama-2-7b llama-3-8b` (in `../device/run2.sh`): real tp=2 generation, each rank
times every AllReduce with CUDA events (`external=True` inside the captured decode graph);
the waiting time of rank r is its in-collective duration minus the shortest of the pair,
per call. 16 prefills and 64 decode steps per (model, workload, mode); decode in eager
mode repeats the first decode position. Fits: `piep calibrate fit --samples
calibration/h200/waits/waits.jsonl --out calibration/h200/waits/fits.json` (Gamma, loc 0,
on the positive waits; KS and Anderson-Darling statistics; the KS p-value by a parametric
bootstrap, `scipy.stats.goodness_of_fit`, where the one with fitted parameters does not
already reject; rejected below p = 0.01).

**The Gamma model is rejected for every group (KS p = 0 with fitted parameters, which
only errs high)**: with 1,000-4,000 waits a
group, the distributions are multi-modal (graph decode waits of a few microseconds with a
long tail; eager waits of hundreds of microseconds from host skew). piep uses the
empirical mean (and quantiles) instead, per rank: only the earlier rank of a pair waits.

{chr(10).join(lines)}

![fits](figures/wait_fits_llama2_7b.png)

Busy-polling power measured by the probe (`../probe/`): 121.5 W, i.e. about the idle
power with a CUDA context open (117-119 W) - on these H200s a rank waiting in NCCL draws
almost no more than an idle one.
"""
    (CAL / "waits" / "README.md").write_text(text)



def _pair_stats(pairs) -> str:
    e = [abs(b["energy_j"] / a["energy_j"] - 1) for a, b in pairs]
    t = [abs(b["time_s"] / a["time_s"] - 1) for a, b in pairs]
    if not e:
        return "no pairs"
    return (f"{len(e)} pairs: energy per call differs by median {100 * statistics.median(e):.2f} %,"
            f" max {100 * max(e):.2f} %, {sum(x <= 0.03 for x in e)}/{len(e)} within 3 %; time "
            f"median {100 * statistics.median(t):.2f} %, max {100 * max(t):.2f} %")


def repeat_protocol(samples) -> tuple[list, str]:
    pairs = [(a.doc, b.doc) for a, b in repeat_check_pairs(samples)]
    return pairs, _pair_stats(pairs)


def modules_report() -> None:
    cal = load_calibration("h200")
    m = [s.doc for s in cal.modules]  # the samples as the sampler wrote them
    counts: dict[tuple[str, str, str], int] = {}
    for r in m:
        counts[(r["kind"], r["phase"], r["mode"])] = counts.get((r["kind"], r["phase"], r["mode"]), 0) + 1
    lin = [r for r in m if "d_in" in r]
    att = [r for r in m if r["kind"] == "attention"]
    pairs = [(a.doc, b.doc) for a, b in module_repeat_pairs(cal.modules)]
    first = [(a, b) for a, b in pairs if not a.get("check")]
    plain = [(a, b) for a, b in pairs if a.get("check") == "repeat" and not a.get("captures")]
    tiny = [(a, b) for a, b in pairs if a.get("captures")]
    final, final_text = repeat_protocol(cal.modules)
    worst = sorted(final, key=lambda p: -abs(p[1]["energy_j"] / p[0]["energy_j"] - 1))[:3]
    worst_text = "; ".join(f"{a['kind']} {a['phase']} tokens {a['tokens']} "
                           f"({a['time_s'] * 1e6:.1f} us/call): "
                           f"{100 * abs(b['energy_j'] / a['energy_j'] - 1):.1f} %"
                           for a, b in worst)
    rows = "\n".join(f"| {k} | {ph} | {mo} | {n} |" for (k, ph, mo), n in sorted(counts.items()))
    host = "; ".join(f"{h.launch_s * 1e6:.1f} us per launch, {h.launch_gap_power_w:.1f} W "
                     f"(GPU {h.gpu_uuid[:12]}...)" for h in cal.host)
    text = f"""# H200 module samples (generated)

Made by `python benchmarks/data_report.py` from the JSONL files here:
`modules_s{{0,1}}.jsonl` (session 1, `device/run2.sh`), `modules_v2_s{{0,1}}.jsonl`
(attention and rope with the runner's in-situ kernel sequence, `device/run4.sh`),
`modules_eager_v3.jsonl` (eager attention timed as captured kernels, `device/run6.sh`),
`repeat_check_s{{0,1}}.jsonl` and `repeat_tiny_s{{0,1}}.jsonl` (repeat check,
`device/run4.sh`, `device/run5.sh`), `modules_lin_s{{0,1}}.jsonl` (session 3: 685 more
projection GEMM shapes, draw seed 1, incl. five synthetic shapes whose FFN sizes have few
trailing zero bits, `device/run8.sh`), `modules_hd_s{{0,1}}.jsonl` (attention and rope of
head dims 64, 80, 96, `device/run13.sh`), `modules_small_s{{0,1}}.jsonl` (embedding,
residual, sampling, rmsnorm, draw seed 3, `device/run14.sh`); transformers' own kernels:
`modules_engines_s0.jsonl` (masked SDPA, the KV-cache copies, `device/run23.sh`),
`modules_kv_expand_v2.jsonl` (repeat_kv compiled, `device/run24.sh`),
`modules_engines_s7.jsonl` (`device/run28.sh`), `modules_mha_s61.jsonl` (attention with as many
K/V heads as query heads, 16-40 per GPU, from llama-2-7b's and -13b's trees at tp 1-2,
draw seed 61, `device/run57.sh`), `modules_eager_copies_s35.jsonl` (repeat_kv
eager and the sliding cache's strided concatenation, `kv_slide`, `device/run35.sh`). The
reference runner's fitted host time per kernel starts from the launch probe of
`modules_eager_v3.jsonl` (`piep.core.dataset.REFERENCE_HOST_FILE`). Logs:
`../device/run*.log`.

Each sample is one compute node kind of the model tree at one shape, run in isolation:
weights and inputs rotate over >= 240 MB (4x the 60 MB L2), the calls are captured in a
CUDA graph (eager-mode ops too: their kernels are the eager ones; the host's launch gaps
are a separate predictor term), time per call from CUDA events, energy per call from a
tick-aligned window of back-to-back replays (>= 0.3 s; 1 s in the repeat check). Shapes
are drawn (stratified per kind and phase) from the trees of every shipped dense model and
{len(SYNTHETIC)} synthetic shapes (hidden {min(x["hidden_size"] for x in SYNTHETIC)}-{max(x["hidden_size"] for x in SYNTHETIC)}, FFN {min(x["intermediate_size"] for x in SYNTHETIC)}-{max(x["intermediate_size"] for x in SYNTHETIC)}; `piep.core.models.SYNTHETIC`) at
tp 1/2/4/8, batch 1-64, prompt 128-2048, generation 64-2048. Per (kind, mode) only the
newest sampler op version is used (`piep.core.dataset.latest_ops`): {len(m)} samples.

* Sampler ops = in-situ kernels: attention runs the runner's own `attention_block`
  (heads split from projection outputs, KV-cache write, attention, output reshape) and
  rope its `apply_rope` (q and k separately, in (b, heads, t, d) views); the in-situ gap
  per kind is in `reports/accuracy.md` (session 1 with the old ops: attention prefill
  +168 %, rope decode +78 %).
* Coverage: tokens {min(r['tokens'] for r in m)}-{max(r['tokens'] for r in m)}; linear
  d_in {min(r['d_in'] for r in lin)}-{max(r['d_in'] for r in lin)}, d_out
  {min(r['d_out'] for r in lin)}-{max(r['d_out'] for r in lin)}; attention heads per rank
  {min(r['heads'] for r in att)}-{max(r['heads'] for r in att)}, KV heads
  {min(r['kv_heads'] for r in att)}-{max(r['kv_heads'] for r in att)}, context up to
  {max(r['context_len'] for r in att)}.
* Repeat agreement, as first measured (0.3 s windows, back to back): {_pair_stats(first)}.
* Repeat check, two passes minutes apart with 1 s windows: {_pair_stats(plain)}. The
  outliers are calls of a few microseconds whose *duration* changed between the two
  graph captures (power identical).
* Calls under 20 us again as the median of 3 fresh builds per pass: {_pair_stats(tiny)}.
* **Final protocol** (1 s windows; median of 3 builds under 20 us): {final_text}.
  Worst: {worst_text}.
* Host launch overhead and launch-gap power (eager `x.add_(1)` loop): {host}.
* Collectives in isolation with their own energy: `../collectives/`.

| kind | phase | mode | samples |
|---|---|---|---|
{{rows}}
"""
    (CAL / "modules" / "README.md").write_text(text.replace("{rows}", rows))


CAMPAIGNS = [  # file, device script, what it measured
    ("collectives.jsonl", "run5.sh", "session 2: 8 KiB-256 MiB 8x apart, AllReduce with AVG, "
     "0.5 s windows (the torchrun process hung in NCCL's teardown after writing every row)"),
    ("collectives_s3.jsonl", "run8.sh", "session 3: 4 KiB-1 GiB 2x apart, AllReduce with AVG, "
     "0.3 s windows (teardown hung again after every row was written)"),
    ("collectives_sum_p1.jsonl", "run10.sh", "AllReduce with the runner's SUM, pass 1; "
     "graph rows >= 64 MiB superseded (a scale kernel every 1-4 calls). In graph mode the "
     "rescaling also undid the few calls made before the capture on every replay, so up to "
     "half of the rotating buffers decayed towards zero over a window (fixed after call 11; "
     "effect on energy: see below)"),
    ("collectives_sum_p2.jsonl", "run10.sh", "the same a minute later, pass 2"),
    ("collectives_sum_big.jsonl", "run11.sh", "AllReduce SUM, graph, 64 MiB-1 GiB again with "
     ">= 32 calls per buffer per captured graph"),
]


def priced_call(comm, kind: str, mode: str, sizes):
    """(time s, power W) of one call of a collective on two GPUs, as the predictor prices it."""
    import numpy as np
    k = np.array([kind] * len(sizes), dtype=object)
    eager = np.full(len(sizes), mode == "eager")
    return (comm.transfer_s(k, sizes, np.full(len(sizes), 2.0), eager),
            comm.power_w(k, sizes, eager, float("nan")))


def collectives_report() -> None:
    plt = _plt()
    import numpy as np

    from piep.predict.collectives import Collectives, collective_rows
    cal = load_calibration("h200")
    used = collective_rows(cal.collective_samples)
    comm = Collectives.from_calibration([], [], used)
    by: dict[tuple, list] = {}
    for r in used:
        by.setdefault((r.kind, r.mode, r.size_bytes), []).append(r)
    lines = []
    for (kind, mode, size), rs in sorted(by.items()):
        t, w = priced_call(comm, kind, mode, np.array([float(size)]))
        t, w = float(t[0]), float(w[0])
        lines.append(f"| {kind} | {mode} | {size / 2 ** 10:,.0f} | {len(rs)} | {t * 1e6:.1f} | "
                     f"{w:.0f} | {2 * t * w * 1e3:.3f} |")
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    for ax, kind in zip(axes, ("allreduce", "allgather", "p2p")):
        for mode, mark, color in (("graph", "o", "C0"), ("eager", "x", "C3")):
            pts = sorted((r.size_bytes, sum(r.energy_j_per_gpu) * 1e3) for r in used
                         if r.kind == kind and r.mode == mode)
            if pts:
                ax.loglog(*zip(*pts), mark, ms=4, color=color, label=f"{mode} (measured)")
                xs = np.array(sorted({p[0] for p in pts}), dtype=float)
                t, w = priced_call(comm, kind, mode, xs)
                ax.loglog(xs, 2 * t * w * 1e3, "-", lw=1, color=color,
                          label=f"{mode} (as priced)")
        ax.set_title(kind)
        ax.set_xlabel("bytes per call")
    axes[0].set_ylabel("mJ per call, both GPUs")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    (CAL / "collectives" / "figures").mkdir(exist_ok=True)
    fig.savefig(CAL / "collectives" / "figures" / "energy_per_call.png", dpi=110)
    plt.close(fig)
    n_all = len(cal.collective_samples)
    # the decayed graph buffers of call 10 against the eager loop, whose rescaling was
    # right: SUM (calls 10-11) over AVG (call 8, same sizes) per mode
    avg = {(r["mode"], r["size_bytes"]): sum(r["energy_j_per_gpu"])
           for r in read_jsonl(CAL / "collectives" / "collectives_s3.jsonl")
           if r["kind"] == "allreduce"}
    ratio = {m: statistics.median(sum(r.energy_j_per_gpu) / avg[(m, r.size_bytes)]
                                  for r in cal.collective_samples
                                  if r.reduce_op == "sum" and r.mode == m and not r.superseded
                                  and (m, r.size_bytes) in avg)
             for m in ("graph", "eager")}
    camp = "\n".join(f"* `{f}` (`../device/{sh}`): {what}." for f, sh, what in CAMPAIGNS)
    text = f"""# H200 collectives in isolation, with energy (generated)

Made by `python benchmarks/data_report.py` from the JSONL files here ({n_all} rows),
measured by `torchrun --nproc-per-node 2 -m piep calibrate collectives` in these device
calls (scripts and logs in `../device/`):

{camp}

AllReduce SUM / AVG energy per call at the same size and mode (median): graph
{ratio["graph"]:.2f}, eager {ratio["eager"]:.2f}. Decayed (near-zero) buffers would lower the
energy of the graph rows; they are not lower than the eager ones, whose rescaling was right.

Each point: one collective on both GPUs of `nvidia-h200-x2` (NVLink), bf16 buffers
rotating over >= 240 MB, a CUDA graph of many calls (graph) or an eager loop, every rank
using the same call count; time per call from CUDA events (the slower rank), energy per
call and GPU from a tick-aligned window on each GPU. AllGather as the runner gathers
logits; send/recv from rank 0 to rank 1 as pipeline stages pass activations.

**How the predictor prices a collective** (`piep/predict/collectives.py`, `Collectives`): the
rows that price ({len(used)}: not superseded; AllReduce only with the runner's SUM) are
merged per size by their median; time per call and power per GPU (energy per call /
time per call) are interpolated in log size; above 1 GiB the time grows linearly with
the size. Held-out accuracy of this pricing (each size predicted from the others) is in
`reports/accuracy.md`. The table lists the priced values at the measured sizes.

![energy per call](figures/energy_per_call.png)

| kind | mode | KiB | rows | us per call | W per GPU | mJ per call (both GPUs) |
|---|---|---|---|---|---|---|
""" + "\n".join(lines) + "\n"
    (CAL / "collectives" / "README.md").write_text(text)


def probe_report() -> None:
    nc = load_json(CAL / "probe" / "probe_nocontext.json")
    main = load_json(CAL / "probe" / "probe_main.json")["ranks"]
    host = [h.doc for h in load_calibration("h200").host]  # as the sampler wrote them
    r0 = main[0]
    idle_nc = [g["counter_power_w"] for g in nc["idle_no_context"]]
    idle_nc186 = [g["field186_mean_w"] for g in nc["idle_no_context"]]
    idle_c = [r["idle_with_context"]["counter_power_w"] for r in main]
    idle_c186 = [r["idle_with_context"]["field186_mean_w"] for r in main]
    ticks = [r["ticks"] for r in main]
    gemm = [r["gemm_8192_bf16"] for r in main]
    copy = [r["copy_1gib"] for r in main]
    wait = [r["wait_in_allreduce"] for r in main if r.get("wait_in_allreduce")]
    coll = {(c["kind"], c["size_bytes"]): c for c in r0["collectives"]}
    graph_ok = all(c["graph_ok"] for c in r0["collectives"])
    mem = r0["memory"]

    def row(kind, size):
        c = coll[(kind, size)]
        return f"| {kind} | {size // 1024} KiB | {c['eager_ms'] * 1000:.1f} | {c['graph_ms'] * 1000:.1f} |"
    sizes = [1024, 65536, 1048576, 16777216, 268435456]
    table = "\n".join(row(k, s) for k in ("allreduce", "allgather", "sendrecv") for s in sizes)
    ar = coll[("allreduce", 268435456)]["graph_ms"] / 1000
    text = f"""# H200 probe (generated)

Made by `python benchmarks/data_report.py` from `probe_nocontext.json` and
`probe_main.json`, produced on `nvidia-h200-x2` by `bash calibration/h200/device/run1.sh`
(`python -m piep.sampling.probe nocontext --seconds 30` then
`torchrun --standalone --nproc-per-node 2 -m piep.sampling.probe main --seconds 30`;
log in `run.log`). Read-only NVML; nothing was set.

## Facts, and where they differ from SPEC §4

| fact | measured here | SPEC §4 said |
|---|---|---|
| idle power, no CUDA context, 30 s (counter; field 186) | {', '.join(f'{v:.1f}' for v in idle_nc)} W; {', '.join(f'{v:.1f}' for v in idle_nc186)} W | ~79-84 W |
| idle power, CUDA context open, 30 s (counter; field 186) | {', '.join(f'{v:.1f}' for v in idle_c)} W; {', '.join(f'{v:.1f}' for v in idle_c186)} W | ~122 W |
| counter tick period (median, min-max) | {ticks[0]['period_s_median'] * 1000:.1f} ms ({ticks[0]['period_s_min'] * 1000:.1f}-{ticks[0]['period_s_max'] * 1000:.1f}) | ~100 ms |
| `nvmlDeviceGetTotalEnergyConsumption` call | {ticks[0]['nvml_energy_call_s_median'] * 1000:.1f} ms median | ~4 ms |
| bf16 8192^3 GEMM | {', '.join(f"{g['tflops']:.0f}" for g in gemm)} TFLOP/s at {', '.join(f"{g['power_w']:.0f}" for g in gemm)} W, SM clock after {', '.join(f"{g['sm_clock_after_mhz']:.0f}" for g in gemm)} MHz | 790 TFLOP/s |
| 1 GiB device copy | {', '.join(f"{c['tb_per_s']:.2f}" for c in copy)} TB/s at {', '.join(f"{c['power_w']:.0f}" for c in copy)} W | |
| busy-polling inside an AllReduce (2.2 s) | {', '.join(f"{w['power_w']:.1f}" for w in wait)} W | "waiting ranks are NOT idle" |
| NCCL AllReduce/AllGather/send-recv captured in a CUDA graph | {'all sizes ran' if graph_ok else 'some failed'}; captured AllReduce value {r0['graph_allreduce_value']} (expected {r0['graph_allreduce_expected']}) | |
| CUDA events with `external=True` inside a graph | timed every captured collective below | |
| 256 MiB AllReduce in a graph | {ar * 1000:.2f} ms -> bus bandwidth {268435456 / ar / 1e9:.0f} GB/s | ~0.9 ms |
| host launch overhead, eager `x.add_(1)` | {', '.join(f"{h['launch_s'] * 1e6:.1f}" for h in host)} us per launch; GPU board power meanwhile {', '.join(f"{h['launch_gap_power_w']:.1f}" for h in host)} W | |

Corrections to SPEC-level facts: idle power is ~78 W without a context and ~118 W with
one (the SPEC's 122 W is the with-context figure; the 84 W probe was likely a process
without a context). The GEMM runs at the 700 W power limit with the SM clock pulled down
to ~1.6-1.7 GHz. **A rank busy-polling in NCCL draws ~121 W, about the idle-with-context
power**, so on these GPUs waiting costs little more than idling (piep still uses the
measured busy-poll power for waits). Memory: NVML-used memory grew by
{mem['after_nccl_used_gib'] - mem['after_cublas_used_gib']:.2f} GiB at the first NCCL
AllReduce and by {mem['after_cublas_used_gib'] - mem['context_used_gib']:.2f} GiB at the
first cuBLAS GEMM; the context itself could not be isolated (the NCCL process group opens
it before the probe counts), and the graph-pool figure is invalid (reserved memory shrank
when earlier buffers were freed) - the memory-fit constants for both stay assumptions.

## Collectives, 2 GPUs (rank 0), microseconds per call

| collective | size | eager | CUDA graph |
|---|---|---|---|
{table}
"""
    (CAL / "probe" / "README.md").write_text(text)


def overview_report() -> None:
    """calibration/h200/README.md: what each folder holds, counted from the files."""
    from piep.core.artifacts import read_jsonl
    from piep.fit.engines import engine_records
    cal = load_calibration("h200")
    e2e = merge_repeats(cal.e2e)
    scripts = sorted(CAL.glob("device/run*.sh"), key=lambda p: int(p.stem[3:]))
    insitu = sum(len(read_jsonl(p)) for p in CAL.glob("insitu/*.jsonl"))
    waits = sum(len(read_jsonl(p)) for p in CAL.glob("waits/*.jsonl"))
    engines = {e: engine_records("h200", e) for e in ("hf-eager", "hf-static", "hf-cb")}
    served = sum(len(r.requests) for r in engines["hf-cb"])
    fam = ROOT / "calibration" / "h200" / "families" / "raw"
    families = sum(1 for f in fam.glob("*.jsonl") if "_cb_" not in f.name
                   for _ in read_jsonl(f))
    family_replays = sum(1 for f in fam.glob("*_cb_*.jsonl") for _ in read_jsonl(f))
    schemas = {name: Counter(r.get("schema") for f in
                             (ROOT / "calibration" / "h200" / name / "raw").glob("*.jsonl")
                             for r in read_jsonl(f))
               for name in ("moe", "fp8")}  # each set's records read once
    held = {name: n["piep.measurement"] for name, n in schemas.items()}
    moe_replays = schemas["moe"]["piep.serving_measurement"]
    rows = [
        ("`gpu.json`", "GPU constants for the roofline and memory fit, each with its source "
         "(measured, or assumed)", "by hand from `probe/`"),
        ("`probe/`", "idle power with and without a CUDA context, counter tick period, NCCL in "
         "CUDA graphs, busy-poll / GEMM / copy power", "`device/run1.sh`"),
        ("`e2e/`", f"end-to-end runs of piep's reference runner: {len(cal.e2e)} records, "
         f"{len(e2e)} configurations, {len({r.model for r in e2e})} model shapes",
         "`device/run1.sh` .. `run13.sh`, `run57.sh`"),
        ("`modules/`", f"isolated module samples ({len(cal.modules)} in use) and host launch "
         "overhead; the repeat check", "`piep calibrate modules`, `repeat`"),
        ("`collectives/`", f"AllReduce / AllGather / send-recv in isolation with their energy "
         f"({len(cal.collective_samples)} samples)", "`piep calibrate collectives`"),
        ("`waits/`", f"AllReduce waiting times in real tp=2 decoding ({waits} sample rows) and "
         "their fits", "`piep calibrate waits`, `fit`"),
        ("`insitu/`", f"kernel time per module kind inside real eager runs ({insitu} rows)",
         "`piep calibrate insitu`"),
        ("`engines/`", f"transformers engines: hf-eager {len(engines['hf-eager'])} runs, "
         f"hf-static {len(engines['hf-static'])} runs, hf-cb {len(engines['hf-cb'])} replayed "
         f"traces ({served} requests); designs, traces, blind predictions, and each engine's "
         "profile", "`piep measure --engine`; `piep train --engine`"),
        ("`predictor/`", "the trained learned predictor (LightGBM text + JSON)", "`piep train`"),
        ("`predictor_blind*/`", "the predictors shipped before four blind tests (device calls "
         "12, 13, 57; the 4- and 8-GPU design), kept to reproduce them", "copies; "
         "`python benchmarks/blind_predictions.py SET`"),
        ("`boards/`", "the same runs and kernels measured again on another board (device call "
         "58)", "`device/run58.sh`; `python benchmarks/boards.py`"),
        ("`quick/`, `quick15/`", "quick calibrations from scratch: device calls 59-60 (module "
         "samples, then single-GPU runs), and the folder `piep calibrate gpu --name "
         "h200-quick15 --minutes 15` left (calls 62-63, the second resuming the first)",
         "`device/run59.sh`, `run60.sh`, `run61.sh`; `python benchmarks/calibration_cost.py`"),
        ("`protocol/`", "the samplers before and after their captures and timings became "
         "one protocol, on one board (device calls 64-65)",
         "`device/run64.sh`, `run65.sh`; `python benchmarks/protocol_ab.py`"),
        ("`dvfs/`", "the frequency model, the literature it is fitted to, clock plans run in "
         "dry-run", "`python benchmarks/dvfs_fit.py`; `piep measure --clock-plan`"),
        ("`optimize/`", "the online batch-axis search on H200, step by step",
         "`piep optimize --online`"),
        ("`families/`", f"transformers runs of families beyond Llama's ({families} generate() "
         f"runs, {family_replays} hf-cb replays; device calls 66, 68, 69, 70): their shapes' "
         "configs, designs, blind predictions; held out in "
         "`reports/families.md`", "`piep measure --engine`; "
         "`python benchmarks/families_accuracy.py`"),
        ("`moe/`", f"transformers runs of mixtures of experts ({held['moe']} generate() runs, "
         f"{moe_replays} hf-cb replays; device calls 71-73, 77, 83-86), the H200's kernel "
         "census and A/Bs: configs, designs, blind predictions; held out in `reports/moe.md`; "
         "calls planned and not yet run (`device/run90.sh`: design 7 and the compiled "
         "design 8, blind predictions committed, no H200 came in sessions 42-47: both ran "
         "on an H100, `calibration/h100/device/run92.sh`; `device/run95.sh`: design 9, "
         "batch 64-192, and the experts' table A/B, run on an H100 in session 47, "
         "`calibration/h100/device/run96.sh`, `run97.sh`; "
         "`planned_ep.sh`: expert parallelism, when a multi-GPU machine is lent)",
         "`device/run71.sh` .. `run86.sh`; `python benchmarks/heldout_accuracy.py moe`"),
        ("`fp8/`", f"generate() runs of FP8 checkpoints' shapes, the projections in row-wise "
         f"FP8 ({held['fp8']} runs; device call 72): configs, design; held out in "
         "`reports/fp8.md`", "`device/run72.sh`; `python benchmarks/heldout_accuracy.py fp8`"),
        ("`serving_new/`", "three serving shapes in no public list, predicted before they were "
         "measured (`predictions_blind.jsonl`, session 33's profile; `predictions_blind2.jsonl`, "
         "the packed attention in closed form, at a grid of host probes); their replays "
         "(device call 78) are in `engines/hf-cb/raw/`",
         "`device/run78.sh`; `python benchmarks/serving_blind.py`"),
        ("`device/`", f"the {len(scripts)} device scripts (`run1.sh` .. `{scripts[-1].name}`) and "
         "their logs", "each call's exact command"),
    ]
    text = ("# H200 calibration (generated)\n\n"
            "Everything piep knows about the H200 comes from this folder; every measurement was "
            "made on the lent `nvidia-h200` / `nvidia-h200-x2` machines by a committed command "
            "(scripts in `device/`, logs beside the data); read-only NVML throughout, except "
            "`engines/tp2/`: tensor-parallel runs supplied by another harness (its SUPPLIED.md "
            "says who measured them and how), on which the tp>1 terms of hf-eager and "
            "hf-static are fitted. This file "
            "and the READMEs of the subfolders are generated by "
            "`python benchmarks/data_report.py`.\n\n"
            "| folder / file | what | made by |\n|---|---|---|\n"
            + "".join(f"| {a} | {b} | {c} |\n" for a, b, c in rows)
            + "\nA record carries the commit of the code that made it where its script set "
              "`PIEP_GIT_COMMIT`; the commits of the first calls are in the data READMEs and the "
              "commit messages.\n")
    (CAL / "README.md").write_text(text)


if __name__ == "__main__":
    overview_report()
    e2e_report()
    waits_report()
    probe_report()
    modules_report()
    collectives_report()
    print("wrote the READMEs of calibration/h200/e2e, waits, probe, modules, collectives")
