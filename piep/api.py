"""Python API: the library functions the CLI calls. Every prediction goes through the one
pricing path (`piep.predict.pricing`) for a resolved `Scenario` (`piep.resolve`); a
serving engine's batch is priced as the stream it is (its requests arriving at once, its
scheduler running them: `piep.serving`)."""

from __future__ import annotations

from typing import Any

from piep.resolve import (PREDICTORS, Resolved, cost_model, deployment, engine_profile,  # noqa: F401
                          resolve, scenario)
from piep.scenario import Scenario


def predict(model: "str | Scenario | Resolved", *, predictor: str = "auto",
            **kwargs: Any) -> dict[str, Any]:
    """The prediction document of a scenario (resolved, or built from a model name and
    keyword fields: gpu, tp, pp, dp, engine/mode, batch, prompt_len, gen_len,
    allow_uncalibrated)."""
    from piep.predict.pricing import price
    res = model if isinstance(model, Resolved) else resolve(scenario(model, **kwargs),
                                                           predictor)
    scn = res.scenario
    if scn.engine.record.serves:  # continuous batching: the batch is a stream
        from piep.serving.serve import batch_as_stream
        doc = batch_as_stream(res)
    else:
        doc = price([scn.deployment], res.cost_model, detail=True).document(0)
    doc["engine"] = scn.engine.description  # the tree knows the engine it is priced as
    doc["scenario"] = scn.to_json()  # the request, as `--scenario FILE.json` reads it
    return res.annotate(doc)
