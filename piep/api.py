"""Python API: the library functions the CLI calls. Every prediction goes through the one
pricing path (`piep.predict.pricing`) for a resolved `Scenario` (`piep.predict.resolve`); a
serving engine's batch is priced as the stream it is (its requests arriving at once, its
scheduler running them: `piep.serving`)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from piep.predict.resolve import (PREDICTORS, Resolved, cost_model, deployment, engine_profile,  # noqa: F401
                          resolve, scenario)
from piep.predict.flags import explain
from piep.core.results import Prediction
from piep.core.scenario import Scenario


def serve(model: "str | Scenario | Resolved", *, predictor: str = "auto",
          user_policy: Any = None, hosts: bool = True, **kwargs: Any) -> dict[str, Any]:
    """The serving document of a scenario's requests (a stream, or a batch arriving at
    once) under its engine's continuous batching; built from a model name and keyword
    fields (trace=..., gpu, tp, engine, ...) when not given."""
    from piep.serving.serve import serve as serve_scenario
    if isinstance(model, str):
        from piep.core.engines import names
        kwargs.setdefault("engine", names(kind="stream")[0])
    if not isinstance(model, Resolved):
        model = scenario(model, **kwargs)
    return serve_scenario(model, predictor=predictor, user_policy=user_policy, hosts=hosts)


def steady(model: str, *, engine: str | None = None, gpu: str = "h100", tp: int = 1,
           ep: int = 1, prompt_len: str | float = 256, output_len: str | float = 400,
           max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
           gpu_memory_utilization: float = 0.9, block_size: int = 16, seed: int = 0,
           predictor: str = "auto") -> dict[str, Any]:
    """A server held full (`piep.serving.steady`): the steady state of `engine` (default:
    the first engine priced so, vLLM) on `tp` GPUs (`ep` = tp: a mixture's experts sharded
    whole over them, vLLM's --enable-expert-parallel) with these
    settings (vLLM's defaults where None) serving requests of these lengths (a number, or
    a distribution `lognormal:MEDIAN:SIGMA[:MAX]` / `uniform:LO:HI` drawn with `seed`), as
    a `piep.steady_state` document."""
    import numpy as np

    from piep.core.engines import names
    from piep.serving import steady as st
    from piep.core.trace import parse_dist
    from piep.core.gpus import board_name
    engine, gpu = engine or names(profile="steady")[0], board_name(gpu)
    rng = np.random.default_rng(seed)
    draws = 20000
    lengths = st.Lengths.drawn(parse_dist(str(prompt_len), "prompt_len")(rng, draws),
                               parse_dist(str(output_len), "output_len")(rng, draws))
    loaded = st.load_profile(engine, gpu)  # (refuses an unknown engine before resolving)
    res = resolve(scenario(model, gpu=gpu, tp=tp, ep=ep, engine=engine, batch=1,
                           prompt_len=16, gen_len=2, allow_uncalibrated=True), predictor)
    dep = res.scenario.deployment
    longest = lengths.prompt_len + max(lengths.sample or (lengths.output_mean,))
    if longest > dep.model.max_position:
        from piep.core.errors import ConfigError
        raise ConfigError(f"prompt + output reach {longest:,.0f} tokens, beyond "
                          f"max_position_embeddings={dep.model.max_position:,} of "
                          f"{dep.model.name} (vLLM's max_model_len): give shorter lengths")
    server = st.PagedServer.defaults(dep.gpu.name, dep.gpu.memory_gib,
                                     max_num_seqs=max_num_seqs,
                                     max_num_batched_tokens=max_num_batched_tokens,
                                     gpu_memory_utilization=gpu_memory_utilization,
                                     block_size=block_size)
    doc = st.answer(dep, res.cost_model, server, lengths, engine=engine, loaded=loaded,
                    flags=res.flags).document()
    return {**doc, "model": res.scenario.model.name,
            "layout": {"tp": tp, **({"ep": ep} if ep > 1 else {}), "gpus": tp}}


def predict(model: "str | Scenario | Resolved", *, predictor: str = "auto",
            hosts: bool = True, **kwargs: Any) -> dict[str, Any]:
    """The prediction document of a scenario (`prediction`'s, as `piep predict --json`
    writes it)."""
    return prediction(model, predictor=predictor, hosts=hosts, **kwargs).to_json()


def prediction(model: "str | Scenario | Resolved", *, predictor: str = "auto",
               hosts: bool = True, batch_tree: Prediction | None = None,
               **kwargs: Any) -> Prediction:
    """The prediction of a scenario (resolved, or built from a model name and keyword
    fields: gpu, tp, pp, dp, engine/mode, batch, prompt_len, gen_len,
    allow_uncalibrated), built here once; with `hosts`, how far it moves between the
    fastest and slowest hosts of the engine's calibration (an engine fitted per host, no
    probe given). `batch_tree`: a serving engine's batch tree already priced among many
    (a sweep prices them in one table), for its module attribution."""
    from dataclasses import replace

    res = model if isinstance(model, Resolved) else resolve(scenario(model, **kwargs),
                                                           predictor)
    scn = res.scenario
    if scn.is_stream:
        from piep.core.errors import ConfigError
        raise ConfigError("a stream of requests is served, not predicted as a batch: piep "
                          "serve --scenario FILE (piep.api.serve)")
    how = pricer(res)
    pred = how.prediction(res, batch_tree)
    flags = res.merged_flags(pred.flags)
    return replace(
        pred, engine=scn.engine.description,  # the tree knows the engine it is priced as
        scenario=scn.to_json(),  # the request, as `--scenario FILE.json` reads it
        host_dependence=res.host_dependence(how.totals) if hosts else None,
        engine_ref=res.engine_ref, flags=tuple(flags),
        transfer=None if res.transfer is None else dict(res.transfer),
        flag_notes=explain(flags))


class Pricer(NamedTuple):
    """How an engine kind's batch is priced: its prediction (`batch_tree`: its tree
    already priced among many, where the kind reads it), its (energy J, time s) alone (on
    another host), whether it reads its tree's module detail, and what a clock plan's
    baseline says of it (None: nothing to add)."""
    prediction: Callable[[Resolved, Prediction | None], Prediction]
    totals: Callable[[Resolved], tuple[float, float]]
    reads_tree: bool
    plan_note: str | None


def _batch_prediction(res: Resolved, batch_tree: Prediction | None = None) -> Prediction:
    from piep.predict.pricing import price
    return price([res.deployment], res.cost_model, detail=True).prediction(0)


def _batch_totals(res: Resolved) -> tuple[float, float]:
    from piep.predict.pricing import price
    p = price([res.deployment], res.cost_model)
    return float(p.energy_j[0]), float(p.time_s[0])


def _stream_prediction(res: Resolved, batch_tree: Prediction | None = None) -> Prediction:
    from piep.serving.serve import batch_as_stream
    return batch_as_stream(res, batch_tree)


def _stream_totals(res: Resolved) -> tuple[float, float]:
    from piep.serving.serve import served  # the stream alone, not the batch's tree
    o = served(res, hosts=False)[0].outcome
    return o.energy_j, o.time_s


# by the engine's kind (piep.core.engines): a static batch, or requests its scheduler runs
PRICERS = {
    "batch": Pricer(_batch_prediction, _batch_totals, reads_tree=False, plan_note=None),
    "stream": Pricer(_stream_prediction, _stream_totals, reads_tree=True,
                     plan_note="a serving engine: the clocks are chosen on the modules of its "
                               "batch run as a static batch; the predictor baseline is the "
                               "batch as a stream of requests"),
}


def pricer(res: Resolved) -> Pricer:
    """The pricer of a resolved scenario's engine kind."""
    return PRICERS[res.scenario.engine.record.kind]
