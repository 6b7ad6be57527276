"""`piep plan`: a GPU clock plan (phase-level, applied) and the per-kernel ideal bound."""

from __future__ import annotations

from piep.commands.common import add_deployment_args, emit, scenario_from_args
from piep.core.errors import ConfigError


def parse_fraction(text: str, what: str) -> float:
    """'1%' or '0.01' -> 0.01."""
    s = str(text).strip()
    try:
        value = float(s[:-1]) / 100 if s.endswith("%") else float(s)
    except ValueError:
        raise ConfigError(f"{what}={text!r}: give a fraction (0.01) or a percentage (1%)") \
            from None
    if 1 <= value < 100 and not s.endswith("%"):
        raise ConfigError(f"{what}={text!r} reads as a fraction ({100 * value:g} %); give "
                          f"{value / 100:g} or {value:g}% for {value:g} percent")
    if not 0 <= value < 1:
        raise ConfigError(f"{what}={text!r} must be a fraction in [0, 1) or a percentage in "
                          f"[0%, 100%)")
    return value


def configure(parser) -> None:
    add_deployment_args(parser)
    parser.add_argument("--max-slowdown", default="1%",
                        help="slowdown budget against default clocks (default 1%%)")
    parser.add_argument("--dwell-ms", type=float, default=100.0,
                        help="shortest time between clock changes (default 100)")
    parser.add_argument("--power-limit", type=float, default=None, metavar="W",
                        help="plan under this board power limit (default: the GPU's)")
    parser.add_argument("--out", metavar="PLAN.json", help="write the plan file here")
    parser.add_argument("--predictor", choices=("auto", "learned", "roofline"), default="auto")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="energy and time of each phase locked at every SM clock, with "
                             "the plan's clocks marked")
    parser.add_argument("--power-curves", type=float, nargs="?", const=25.0, default=None,
                        metavar="STEP_W",
                        help="instead of a plan: throughput, board power and J per output "
                             "token at every power limit the boards can be set to (every "
                             "STEP_W watts, default 25), default clocks, for a capacity "
                             "planner (piep.power_curves; --out writes the JSON)")
    parser.add_argument("--validate", action="store_true",
                        help="sweep SM clocks on this machine's GPUs (needs root), measure "
                             "reference kernels and refit the frequency model")
    parser.add_argument("--validate-out", metavar="MODEL.json",
                        help="with --validate: where the refit frequency model goes (default: the "
                             "user data directory, where it then answers in place of the "
                             "shipped model)")


def run(args) -> int:
    if args.validate:
        from piep.commands.apply import clock_access
        from piep.fit.freq_check import validate_clocks
        doc = validate_clocks(args.gpu, clock_access(), args.validate_out)
        emit(args, doc, lambda d: f"refit on {len(d['sweep'])} points: "
                                  f"v_ratio {d['v_ratio']:.3f}, f_mem_sat {d['f_mem_sat_mhz']:.0f}"
                                  f" MHz -> {d['out']}")
        return 0
    from piep import api
    import json

    from piep.core.artifacts import write_text
    from piep.plan.freq import load_freq_model
    from piep.plan.planner import plan_for
    from piep.core.artifacts import figure_path, writable
    if args.out:
        writable(args.out, "--out")
    if args.plot:
        figure_path(args.plot)
    max_slowdown = parse_fraction(args.max_slowdown, "--max-slowdown")
    if not args.dwell_ms >= 0 or args.dwell_ms == float("inf"):
        raise ConfigError(f"--dwell-ms={args.dwell_ms} must be a number >= 0")
    scn = scenario_from_args(args)
    dep = scn.deployment
    if args.power_curves is not None:
        return _power_curves(args, scn)
    if args.power_limit is not None:
        dep.gpu.check_power_limits([args.power_limit], "--power-limit")
    plan = plan_for(api.resolve(scn, args.predictor), load_freq_model(dep.gpu.name),
                    max_slowdown=max_slowdown, dwell_s=args.dwell_ms / 1e3,
                    power_limit_w=args.power_limit)
    from piep.core.artifacts import output_set
    with output_set() as tx:  # the plan and its figure: both, or neither (the old stay)
        if args.out:
            write_text(tx.file(args.out), json.dumps(plan, indent=2) + "\n")
        if args.plot:
            plot_plan(scn, plan, tx.file(args.plot), predictor=args.predictor,
                      power_limit_w=args.power_limit)
            plan = {**plan, "plot": args.plot}
    emit(args, plan, lambda p: summary(p, args.out))
    return 0


def _power_curves(args, scn) -> int:
    """`--power-curves`: the curves document, written to --out and shown."""
    import json

    from piep import api
    from piep.core.artifacts import write_text
    from piep.plan.freq import load_freq_model
    from piep.plan.power_curves import power_curves
    if args.power_limit is not None or args.plot:
        raise ConfigError("--power-curves spans every power limit: drop --power-limit and "
                          "--plot")
    doc = power_curves(api.resolve(scn, args.predictor), load_freq_model(scn.gpu.name),
                       step_w=args.power_curves)
    if args.out:
        write_text(args.out, json.dumps(doc, indent=2) + "\n")
    emit(args, doc, lambda d: curves_table(d, args.out))
    return 0


def curves_table(doc, out=None) -> str:
    from piep.report.table import fmt
    head = (f"power curves of {doc['model']} on {doc['layout']['gpus']}x {doc['gpu']}, batch "
            f"{doc['workload']['batch']}, prompt {doc['workload']['prompt_len']}, gen "
            f"{doc['workload']['gen_len']}, default clocks  [energy boundary: GPU boards only]")
    rows = [(f"{p['power_limit_w']:.0f}", fmt(p["output_tokens_per_s"]),
             fmt(p["power_w_per_gpu"]), fmt(p["j_per_output_token"]),
             "yes" if p["limit_binds"] else "no") for p in doc["points"]]
    widths = [max(len(r[i]) for r in rows + [("limit W", "tokens/s", "W per GPU",
                                               "J per token", "binds")]) for i in range(5)]
    names = ("limit W", "tokens/s", "W per GPU", "J per token", "binds")
    lines = [head, "  ".join(n.rjust(w) for n, w in zip(names, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    if doc.get("interval_level"):
        lines.append(f"interval (in --json): {doc['interval_level']}")
    if out:
        lines.append(f"wrote {out}")
    return "\n".join(lines)


def _band(b) -> str:
    return f"{100 * b[0]:.1f}-{100 * b[1]:.1f} %"


def summary(plan, out=None) -> str:
    a, i = plan["applied"], plan["ideal_bound"]
    lines = [
        f"clock plan for {plan['model']} on {plan['layout']['gpus']}x {plan['gpu']}, batch "
        f"{plan['workload']['batch']}, {plan['workload']['mode']}  [{plan['label']}; energy "
        f"boundary: GPU boards only]",
        f"  applied (phase level): prefill {a['phase_mhz']['prefill']} MHz, decode "
        f"{a['phase_mhz']['decode']} MHz -> saving {100 * a['saving']:.1f} % "
        f"(band {_band(a['saving_band'])}), slowdown {100 * a['slowdown']:.2f} % "
        f"(band {_band(a['slowdown_band'])})",
        f"  ideal per-kernel bound: saving {100 * i['saving']:.1f} % (band "
        f"{_band(i['saving_band'])}), slowdown {100 * i['slowdown']:.2f} %, time-weighted "
        f"clock {i['time_weighted_mhz']:.0f} MHz",
        f"  against default boost: {plan['default']['energy_j']:.4g} J, "
        f"{plan['default']['time_s']:.4g} s; budget {100 * plan['constraints']['max_slowdown']:.1f} %"
        f" slowdown, dwell {1e3 * plan['constraints']['min_dwell_s']:.0f} ms",
    ]
    lines += [f"  note: {n}" for n in plan["notes"]]
    if out:
        lines.append(f"wrote {out}")
    return "\n".join(lines)


def plot_plan(scn, plan, path: str, *, predictor: str, power_limit_w: float | None) -> None:
    """Per phase: energy and time with the whole phase locked at each clock, relative to
    the default boost behaviour; the applied plan's clock marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from piep import api
    from piep.plan.freq import load_freq_model
    from piep.plan.planner import PHASES, leaves, phase_curves
    lv = leaves(scn.deployment, api.resolve(scn, predictor).cost_model)
    cv = phase_curves(load_freq_model(scn.gpu.name), lv, power_limit_w)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, ph, name in zip(axes, (0, 1), PHASES):
        ax.plot(cv.clocks, cv.energy_j[ph] / cv.energy_j[ph, -1], label="energy")
        ax.plot(cv.clocks, cv.time_s[ph] / cv.time_s[ph, -1], "--", label="time")
        ax.axvline(plan["applied"]["phase_mhz"][name], color="k", lw=0.8,
                   label=f"plan: {plan['applied']['phase_mhz'][name]} MHz")
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.set_ylim(0.4, 2.0)
        ax.set_xlabel("SM clock (MHz)")
        ax.set_ylabel("relative to default boost")
        ax.set_title(f"{plan['model']} {name} (model-based)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    from piep.core.artifacts import save_figure
    save_figure(fig, path, dpi=110)
