"""`piep optimize`: batch size x power limit x SM clock, offline prediction + online search."""

from __future__ import annotations

import math

from pathlib import Path

from piep.commands.common import (add_deployment_args, add_facility_args, emit_facility, scenario_from_args)
from piep.core.errors import ConfigError

AXES = ("batch", "clock", "power")


def _floats(text: str | None, what: str):
    """Comma-separated numbers (None where the flag is not given)."""
    if text is None:
        return None
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{what}={text!r}: give comma-separated numbers") from None
    if not values:
        raise ConfigError(f"{what} is empty: give comma-separated numbers (or leave the flag "
                          f"out for its default)")
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(f"{what}={text!r}: give finite numbers")
    return values


def configure(parser) -> None:
    add_facility_args(parser)
    add_deployment_args(parser)
    parser.add_argument("--objective", choices=("eds", "zeus", "latency"), default="eds",
                        help="eds: w*E/E_ref + (1-w)*T/T_ref (default); zeus: "
                             "eta*E + (1-eta)*P_max*T; latency: min E under --latency-bound")
    parser.add_argument("--weight", type=float, default=0.5,
                        help="w of eds, eta of zeus (default 0.5)")
    parser.add_argument("--latency-bound", type=float, metavar="S",
                        help="latency objective: TTFT + (G-1)*TPOT must not exceed S seconds")
    parser.add_argument("--batches", help="batch sizes to try, e.g. 1,2,4,8 (default: the "
                                          "given batch x 1/8 .. 64)")
    parser.add_argument("--power-limits", help="power limits in W (default 700,600,500,400,300)")
    parser.add_argument("--clock-stride", type=int, default=6,
                        help="try every N-th lockable SM clock (default 6 = 90 MHz steps)")
    parser.add_argument("--predictor", choices=("auto", "learned", "roofline"), default="auto")
    parser.add_argument("--front", type=int, default=12, help="Pareto points printed (default 12)")
    parser.add_argument("--plot", metavar="FILE.png", help="save the Pareto front figure")
    parser.add_argument("--online", action="store_true",
                        help="then search around the optimum with real measurements (GPU)")
    parser.add_argument("--online-axes", default="batch",
                        help="axes the online search may move: batch[,clock][,power] "
                             "(default batch; clock and power need root)")
    parser.add_argument("--replay", metavar="LOG.jsonl",
                        help="online search answered from a recorded log instead of a GPU")
    parser.add_argument("--max-steps", type=int, default=8,
                        help="measurements the online search may make (default 8)")
    parser.add_argument("--log", metavar="FILE.jsonl", help="append every online step here")
    parser.add_argument("--repeats", type=int, default=3, help="online: repeats per point")


def _axes(text: str) -> list[str]:
    axes = [a.strip() for a in text.split(",") if a.strip()]
    bad = [a for a in axes if a not in AXES]
    if bad or not axes:
        raise ConfigError(f"--online-axes: {', '.join(bad) or 'none'}; choose from "
                          f"{', '.join(AXES)}")
    return axes


def run(args) -> int:
    from piep.optimize import Objective, offline
    from piep.core.artifacts import figure_path, writable
    _axes(args.online_axes)
    if args.plot:
        figure_path(args.plot)
    if args.log:
        writable(args.log, "--log", claim=False)  # (appended to)
    if args.front < 0:
        raise ConfigError(f"--front={args.front} must be >= 0")
    if args.clock_stride < 1:
        raise ConfigError(f"--clock-stride={args.clock_stride} must be >= 1")
    objective = Objective(args.objective, args.weight, args.latency_bound)
    batches = _floats(args.batches, "--batches")
    if batches and any(b < 1 or b != int(b) for b in batches):
        raise ConfigError(f"--batches={args.batches}: batch sizes are whole numbers >= 1")
    limits = _floats(args.power_limits, "--power-limits")
    scn = scenario_from_args(args)
    if limits:
        scn.gpu.check_power_limits(limits, "--power-limits")
    res = offline(scn, objective, batches=[int(b) for b in batches] if batches else None,
                  power_limits=limits,
                  clock_stride=args.clock_stride, predictor=args.predictor)
    doc = {"schema": "piep.optimize", "schema_version": 2, "boundary": "gpu_board",
           "model": scn.model.name,
           "objective": {"kind": objective.kind, "weight": objective.weight,
                         "latency_bound_s": objective.latency_bound_s},
           "label": "offline: predicted (clock and power-limit effects model-based)",
           "reference": res.reference, "chosen": res.chosen, "predicted_gain": res.gain(),
           "front": res.front, "notes": res.notes, "points": len(res.points)}
    if args.plot:
        _plot(res, Path(args.plot))
        doc["plot"] = args.plot
    if args.online or args.replay:
        from piep.optimize import OnlineOptions, online
        if args.max_steps < 2:
            raise ConfigError("--max-steps must be >= 2 (the default configuration and the "
                              "start)")
        opts = OnlineOptions(axes=tuple(_axes(args.online_axes)), max_steps=args.max_steps,
                             replay=args.replay, log=args.log, repeats=args.repeats)
        doc["online"] = online(scn, res, objective, opts, clocks=_clock_access)
    emit_facility(args, doc, lambda d: _human(d, args.front))
    return 0


def _clock_access():
    from piep.commands.apply import clock_access
    return clock_access()


def _plot(res, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    xs = [1e3 * p["s_per_output_token"] for p in res.points]
    ys = [p["j_per_output_token"] for p in res.points]
    ax.scatter(xs, ys, s=6, c="lightgrey", label="all points")
    f = res.front
    ax.plot([1e3 * p["s_per_output_token"] for p in f], [p["j_per_output_token"] for p in f], "o-", ms=3,
            label="Pareto front")
    for name, p, m in (("default", res.reference, "s"), ("chosen", res.chosen, "*")):
        ax.plot(1e3 * p["s_per_output_token"], p["j_per_output_token"], m, ms=11, label=name)
    ax.set_xlabel("time per generated token (ms, per request)")
    ax.set_ylabel("energy per generated token (J)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("piep optimize (predicted)")
    fig.tight_layout()
    from piep.core.artifacts import save_figure
    save_figure(fig, path, dpi=110)


def _fmt(p) -> str:
    clock = "default" if p["sm_mhz"] is None else f"{p['sm_mhz']:.0f} MHz"
    return (f"batch {p['batch']:>4}, limit {p['power_limit_w']:.0f} W, SM {clock:>9}: "
            f"{p['j_per_output_token']:.4f} J per output token, "
            f"{1e3 * p['s_per_output_token']:.3f} ms per output token, "
            f"request {p['e2e_p50_s']:.3f} s")


def _human(doc, n_front: int) -> str:
    g = doc["predicted_gain"]
    lines = [f"objective {doc['objective']['kind']} (weight {doc['objective']['weight']}) over "
             f"{doc['points']} predicted points [{doc['label']}; energy boundary: GPU boards "
             f"only]",
             f"  default: {_fmt(doc['reference'])}",
             f"  chosen:  {_fmt(doc['chosen'])}",
             f"  chosen vs default: {100 * g['energy_per_token']:+.1f} % energy per output "
             f"token, {100 * g['time_per_token']:+.1f} % time per output token (predicted)",
             f"Pareto front ({len(doc['front'])} points; {min(n_front, len(doc['front']))} shown):"]
    front = doc["front"]
    step = max(1, len(front) // max(n_front, 1))
    lines += [f"  {_fmt(p)}" for p in front[::step][:n_front]]
    lines += [f"note: {n}" for n in doc["notes"][:6]]
    if len(doc["notes"]) > 6:
        lines.append(f"note: ... {len(doc['notes']) - 6} more (see --json)")
    if "online" in doc:
        o = doc["online"]
        mg = o["measured_gain"]
        lines += [f"online ({o['source']}, axes {','.join(o['axes'])}, {o['measurements']} "
                  f"measurements): best batch {o['best']['batch']}, limit "
                  f"{o['best']['power_limit_w']:.0f} W, SM {o['best']['sm_mhz'] or 'default'}",
                  f"  best vs default: {100 * mg['energy_per_token']:+.1f} % energy per output "
                  f"token, {100 * mg['time_per_token']:+.1f} % time per output token (measured)"]
    return "\n".join(lines)
