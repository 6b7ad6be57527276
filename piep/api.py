"""Python API: the library functions the CLI calls."""

from __future__ import annotations

from typing import Any

from piep.config import Parallel, Workload
from piep.errors import ConfigError
from piep.gpus import load_gpu
from piep.layout import Deployment, validate
from piep.models import load_model
from piep.predict.engine import add_serving, evaluate

PREDICTORS = ("auto", "learned", "roofline")


def deployment(model: str, *, gpu: str = "h200", tp: int = 1, pp: int = 1, dp: int = 1,
               batch: int = 1, prompt_len: int = 512, gen_len: int = 128,
               mode: str = "graph", check_memory: bool = True) -> Deployment:
    spec = load_model(model)
    return validate(spec, Parallel(tp=tp, pp=pp, dp=dp),
                    Workload(batch=batch, prompt_len=prompt_len, gen_len=gen_len, mode=mode),
                    load_gpu(gpu), check_memory=check_memory)


def cost_model(gpu: str, predictor: str = "auto"):
    """The learned predictor where a calibration exists for the GPU, else the roofline."""
    if predictor not in PREDICTORS:
        raise ConfigError(f"predictor={predictor!r} is not one of {', '.join(PREDICTORS)}")
    from piep.predict.roofline import RooflineModel
    if predictor == "roofline":
        return RooflineModel()
    from piep.predict.learned import load_learned
    learned = load_learned(gpu)
    if learned is None:
        if predictor == "learned":
            raise ConfigError(f"no trained predictor for GPU {gpu!r}; run `piep train` or use "
                              f"--predictor roofline")
        return RooflineModel()
    return learned


def predict(model: str, *, request_rate: float | None = None, predictor: str = "auto",
            **kwargs: Any) -> dict[str, Any]:
    dep = deployment(model, **kwargs)
    cm = cost_model(dep.gpu.name, predictor)
    doc = evaluate(dep, cm)
    if request_rate is not None:
        if request_rate <= 0:
            raise ConfigError(f"request_rate={request_rate} must be > 0 requests per second")
        add_serving(doc, dep, request_rate, cm.idle_power_w(dep))
    return doc
