"""Python API: the library functions the CLI calls. Every prediction goes through the one
pricing path (`piep.predict.pricing`) for a resolved `Scenario` (`piep.resolve`); a
serving engine's batch is priced as the stream it is (its requests arriving at once, its
scheduler running them: `piep.serving`)."""

from __future__ import annotations

from typing import Any

from piep.resolve import (PREDICTORS, Resolved, cost_model, deployment, engine_profile,  # noqa: F401
                          resolve, scenario)
from piep.flags import explain
from piep.scenario import Scenario


def serve(model: "str | Scenario | Resolved", *, predictor: str = "auto",
          user_policy: Any = None, hosts: bool = True, **kwargs: Any) -> dict[str, Any]:
    """The serving document of a scenario's requests (a stream, or a batch arriving at
    once) under its engine's continuous batching; built from a model name and keyword
    fields (trace=..., gpu, tp, engine, ...) when not given."""
    from piep.serving.serve import serve as serve_scenario
    if isinstance(model, str):
        from piep.engines import names
        kwargs.setdefault("engine", names(serves=True)[0])
    if not isinstance(model, Resolved):
        model = scenario(model, **kwargs)
    return serve_scenario(model, predictor=predictor, user_policy=user_policy, hosts=hosts)


def predict(model: "str | Scenario | Resolved", *, predictor: str = "auto",
            hosts: bool = True, **kwargs: Any) -> dict[str, Any]:
    """The prediction document of a scenario (resolved, or built from a model name and
    keyword fields: gpu, tp, pp, dp, engine/mode, batch, prompt_len, gen_len,
    allow_uncalibrated); with `hosts`, how far it moves between the fastest and slowest
    hosts of the engine's calibration (an engine fitted per host, no probe given)."""
    from piep.predict.pricing import price
    res = model if isinstance(model, Resolved) else resolve(scenario(model, **kwargs),
                                                           predictor)
    scn = res.scenario
    if scn.is_stream:
        from piep.errors import ConfigError
        raise ConfigError("a stream of requests is served, not predicted as a batch: piep "
                          "serve --scenario FILE (piep.api.serve)")
    if scn.engine.record.serves:  # continuous batching: the batch is a stream
        from piep.serving.serve import batch_as_stream
        doc = batch_as_stream(res)

        def answer(r):
            d = batch_as_stream(r)
            return d["energy_j"], d["time_s"]
    else:
        doc = price([scn.deployment], res.cost_model, detail=True).document(0)

        def answer(r):
            p = price([r.deployment], r.cost_model)
            return p.energy_j[0], p.time_s[0]
    doc["engine"] = scn.engine.description  # the tree knows the engine it is priced as
    doc["scenario"] = scn.to_json()  # the request, as `--scenario FILE.json` reads it
    if hosts and (dependence := res.host_dependence(answer)):
        doc["host_dependence"] = dependence
    res.annotate(doc)
    doc["flag_notes"] = explain(doc["flags"])
    return doc
