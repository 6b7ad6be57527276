"""Python API: the library functions the CLI calls."""

from __future__ import annotations

from typing import Any

from piep.config import Parallel, Workload
from piep.errors import ConfigError
from piep.gpus import GPU, load_gpu
from piep.layout import Deployment, validate
from piep.models import load_model
from piep.predict.engine import add_serving, evaluate

PREDICTORS = ("auto", "learned", "roofline")


def deployment(model: str, *, gpu: "str | GPU" = "h200", tp: int = 1, pp: int = 1,
               dp: int = 1, batch: int = 1, prompt_len: int = 512, gen_len: int = 128,
               mode: str = "graph", check_memory: bool = True) -> Deployment:
    spec = load_model(model)
    return validate(spec, Parallel(tp=tp, pp=pp, dp=dp),
                    Workload(batch=batch, prompt_len=prompt_len, gen_len=gen_len, mode=mode),
                    gpu if isinstance(gpu, GPU) else load_gpu(gpu), check_memory=check_memory)


def _gpu_or_transfer(name: str, allow_uncalibrated: bool):
    """(GPU profile, ratios or None): the calibration, or with `allow_uncalibrated` the
    spec-sheet transfer for a GPU that has none."""
    from piep.gpus import known_gpus, transfer_gpu
    try:
        return load_gpu(name), None
    except ConfigError:
        if not allow_uncalibrated:
            raise ConfigError(f"GPU {name!r} has no calibration (calibrated: "
                              f"{', '.join(known_gpus())}); pass --allow-uncalibrated to "
                              f"predict it from its spec sheet, flagged and with a wide "
                              f"interval") from None
    return transfer_gpu(name)


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
            allow_uncalibrated: bool = False, **kwargs: Any) -> dict[str, Any]:
    gpu, ratios = _gpu_or_transfer(kwargs.pop("gpu", "h200"), allow_uncalibrated)
    dep = deployment(model, gpu=gpu, **kwargs)
    if ratios is None:
        cm = cost_model(dep.gpu.name, predictor)
    else:
        from piep.gpus import spec_sheets
        from piep.predict.transfer import TransferredModel
        ref = spec_sheets()["reference"]
        base = cost_model(ref, predictor)
        if not hasattr(base, "gpu"):
            raise ConfigError("spec-sheet transfer needs the learned predictor of "
                              f"{ref!r} (pip install lightgbm)")
        cm = TransferredModel.build(base, gpu, ratios, ref)
    doc = evaluate(dep, cm)
    if ratios is not None:
        doc["flags"].insert(0, "uncalibrated_gpu")
        doc["transfer"] = {"reference": cm.reference, "ratios": ratios,
                           "spec_sheet": dict(gpu.sources).get("spec_sheet")}
    if request_rate is not None:
        if request_rate <= 0:
            raise ConfigError(f"request_rate={request_rate} must be > 0 requests per second")
        add_serving(doc, dep, request_rate, cm.idle_power_w(dep))
    return doc
