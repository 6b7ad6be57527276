"""Records checked against physics before a fit reads them.

One absurd record moves every later answer of a fit on it (a run at `time_s: 1e308` made
every refit prediction 2e14 J), so each measured run a fit is given must be one a board
could have made: its lengths within the model's context, its mean power per GPU between
a quarter of the board's idle power and 1.25x its limit (short phases read up to ~1.07x),
its time at least half the roofline's (no kernel beats the board's peak FLOP/s and
memory bandwidth) and at most a thousand times the roofline's plus a minute, and each
phase within the run. A record outside is refused in one line naming it. (Types, signs
and finiteness are the typed records' own checks, `piep.core.records`.)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence


from piep.core.errors import ConfigError
from piep.core.gpus import GPU
from piep.core.records import Measurement, ServingReplay

POWER_FLOOR = 0.25       # x the board's idle power: the least a run's boards average
POWER_CEILING = 1.25     # x the board's limit: the most
TIME_FLOOR = 0.5         # x the roofline's kernel time
TIME_CEILING = 1000.0    # x the roofline's time (kernels and launch gaps) ...
TIME_SLACK_S = 60.0      # ... plus this


def _power_problem(energy_j: float | None, time_s: float | None, gpus: int, gpu: GPU,
                   what: str) -> str | None:
    if not energy_j or not time_s:  # unknown, or a window under a counter tick
        return None
    w = energy_j / time_s / gpus
    lo, hi = POWER_FLOOR * gpu.idle_power_w, POWER_CEILING * gpu.max_power_w
    if not lo <= w <= hi:
        return (f"{what}: {energy_j:.6g} J over {time_s:.6g} s on {gpus} GPU(s) is {w:,.4g} W "
                f"a board; a {gpu.name} draws {lo:.0f}-{hi:.0f} W")
    return None


def check_runs(runs: Sequence[Measurement], gpu: GPU, engine: str | None = None) -> None:
    """Every run physically possible on `gpu` (`engine`: the decode mode its deployment is
    priced in), else one ConfigError naming the first that is not."""
    from piep.predict.pricing import price
    from piep.predict.roofline import RooflineModel
    deps = []
    for m in runs:
        where = m.source or m.key
        context = m.prompt_len + m.gen_len
        if context > m.spec.max_position:
            raise ConfigError(f"{where}: prompt_len + gen_len = {context:,} exceeds the "
                              f"context of {m.model} ({m.spec.max_position:,}); not a run it "
                              f"could make")
        for problem in (_power_problem(m.energy_j, m.time_s, m.gpus, gpu, where),
                        *(_power_problem(m.phase(ph).energy_j, m.phase(ph).time_s, m.gpus, gpu,
                                         f"{where} ({ph})") for ph in ("prefill", "decode"))):
            if problem:
                raise ConfigError(problem)
        for ph in ("prefill", "decode"):
            t = m.phase(ph).time_s
            if t is not None and t > m.time_s * 1.01:
                raise ConfigError(f"{where}: its {ph} lasts {t:.6g} s, longer than the run "
                                  f"({m.time_s:.6g} s)")
        deps.append(m.deployment(gpu, engine))
    if not deps:
        return
    no_gaps = replace(gpu, kernel_gap_eager_s=0.0, kernel_gap_graph_s=0.0)
    floor = price([replace(d, gpu=no_gaps) for d in deps], RooflineModel()).time_s
    roof = price(deps, RooflineModel()).time_s
    for m, lo, hi in zip(runs, TIME_FLOOR * floor, TIME_CEILING * roof + TIME_SLACK_S):
        if not lo <= m.time_s <= hi:
            raise ConfigError(f"{m.source or m.key}: time_s={m.time_s:.6g} for {m.batch} x "
                              f"({m.prompt_len} + {m.gen_len}) tokens of {m.model} on "
                              f"{m.parallel.world_size} GPU(s); a {gpu.name} takes "
                              f"{lo:.3g}-{hi:.3g} s (half its roofline to a thousand times "
                              f"it): a wrong record")


def check_replays(replays: Sequence[ServingReplay], gpu: GPU) -> None:
    """Every replayed trace physically possible on `gpu`: its window's power, each
    request's lengths within the model's context and its timings in order."""
    for rep in replays:
        where = rep.source or rep.model
        problem = _power_problem(rep.energy_j, rep.time_s, rep.tp, gpu, where)
        if problem:
            raise ConfigError(problem)
        top = rep.spec.max_position
        for r in rep.requests:
            if r.prompt_len + r.gen_len > top:
                raise ConfigError(f"{where}: request {r.id}: prompt_len + gen_len = "
                                  f"{r.prompt_len + r.gen_len:,} exceeds the context of "
                                  f"{rep.model} ({top:,})")
            if r.ttft_s is not None and r.e2e_s is not None and r.e2e_s < r.ttft_s:
                raise ConfigError(f"{where}: request {r.id}: ttft_s={r.ttft_s!r}, "
                                  f"e2e_s={r.e2e_s!r}: the last token comes no earlier than "
                                  f"the first")
        # what a fit reads of each replay: its median end-to-end latency and median TPOT
        if any(r.e2e_s is None or r.e2e_s <= 0 for r in rep.requests):
            raise ConfigError(f"{where}: every request needs e2e_s > 0 (its last token's time "
                              f"from its arrival): the fit matches the replay's latencies")
        if not any(r.gen_len > 1 and r.tpot_s for r in rep.requests):
            raise ConfigError(f"{where}: no request generates more than one token with a "
                              f"tpot_s > 0: the fit needs each replay's time per output token")
        bad = [r.id for r in rep.requests if r.gen_len > 1 and not r.tpot_s]
        if bad:
            raise ConfigError(f"{where}: request {bad[0]} generates more than "
                              f"one token but has no tpot_s > 0")
