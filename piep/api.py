"""Python API: the library functions the CLI calls. Every prediction goes through the one
pricing path (`piep.predict.pricing`) for a validated `Scenario`."""

from __future__ import annotations

from typing import Any

from piep.errors import ConfigError
from piep.gpus import DEFAULT_GPU
from piep.layout import Deployment
from piep.scenario import Scenario
from piep.tree.builder import past_window

PREDICTORS = ("auto", "learned", "roofline")


def scenario(model: "str | Scenario", **kwargs: Any) -> Scenario:
    """A scenario from a model name (or config path) and keyword fields, or as given."""
    if isinstance(model, Scenario):
        return model.replace(**kwargs) if kwargs else model
    return Scenario.build(model, **kwargs)


def deployment(model: str, **kwargs: Any) -> Deployment:
    """The validated deployment of a scenario built from these fields."""
    return Scenario.build(model, **kwargs).deployment


def cost_model(gpu: str = DEFAULT_GPU, predictor: str = "auto"):
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


def cost_model_for(scn: Scenario, predictor: str = "auto"):
    """The cost model that answers for a scenario: its GPU's learned predictor (or the
    roofline), running the scenario's engine through that engine's profile; for a GPU
    without a calibration, the reference GPU's moved by spec-sheet ratios."""
    from piep.predict.learned import LearnedModel
    calibrated = scn.gpu.name if scn.transfer is None else _reference_gpu()
    base = cost_model(calibrated, predictor)
    if isinstance(base, LearnedModel) and not scn.engine.is_reference:
        base = engine_profile(calibrated, scn.engine.name).apply(base)
    if scn.transfer is None:
        return base
    from piep.predict.transfer import TransferredModel
    if not isinstance(base, LearnedModel):
        why = "drop --predictor roofline" if predictor == "roofline" else \
            "pip install lightgbm, or train it with `piep train`"
        raise ConfigError(f"spec-sheet transfer moves the learned predictor of {calibrated!r} "
                          f"to another GPU; {why}")
    return TransferredModel.build(base, scn.gpu, dict(scn.transfer), calibrated)


def _reference_gpu() -> str:
    from piep.gpus import spec_sheets
    return spec_sheets()["reference"]


def engine_profile(gpu: str, engine: str):
    """The profile of a non-reference engine on a calibrated GPU, or one clear error."""
    from piep.predict.engines import load_profile
    profile = load_profile(gpu, engine)
    if profile is None:
        raise ConfigError(f"no profile of engine {engine} for GPU {gpu}: measure it "
                          f"(piep measure --engine {engine} ...) and fit one (piep train "
                          f"--engine {engine} --from-measurements FILE)")
    return profile


def engine_fields(scn: Scenario) -> dict[str, Any]:
    """`engine_ref` ({name, version}) of a document and the flags its engine adds."""
    from piep import __version__
    if scn.engine.is_reference:
        return {"engine_ref": {"name": scn.engine.name, "version": __version__}, "flags": []}
    gpu = scn.gpu.name if scn.transfer is None else _reference_gpu()
    profile = engine_profile(gpu, scn.engine.name)
    flags = []
    if scn.parallel.tp not in profile.measured_tp:
        flags.append("unmeasured_engine_layout")
    if not profile.meta.get("window_measured") and past_window(scn.deployment):
        flags.append("unmeasured_sliding_window")
    ref = {"name": scn.engine.name, "version": profile.version,
           **({"like": scn.engine.like} if scn.engine.like else {})}
    host = profile.host
    if host.host_probe_ref_s:  # the host the profile's host time is for
        ref["host_probe_ref_us"] = 1e6 * host.host_probe_ref_s
    if scn.engine.host_probe_us is not None:  # predicted for another host than the profile's
        if not host.host_probe_ref_s:
            raise ConfigError(f"--host-probe-us: the {scn.engine.name} profile on {gpu} has "
                              f"no host reference (its runs carry no host probe); refit it on "
                              f"runs of `piep measure --engine {scn.engine.name}`, which "
                              f"records one")
        ref.update(host_probe_us=scn.engine.host_probe_us, host_probe_source="given")
    elif host.host_probe_ref_s and host.host_probe_default_s:  # the GPU's typical host
        ref.update(host_probe_us=1e6 * host.host_probe_default_s, host_probe_source="default")
    if "host_probe_us" in ref:  # that host's time relative to the profile's
        import numpy as np
        ref["host_factor"] = float(host.host_factor(np.array([1e-6 * ref["host_probe_us"]]))[0])
    return {"engine_ref": ref, "flags": flags}


def predict(model: "str | Scenario", *, predictor: str = "auto", **kwargs: Any) -> dict[str, Any]:
    """The prediction document of a scenario (or of one built from a model name and
    keyword fields: gpu, tp, pp, dp, engine/mode, batch, prompt_len, gen_len,
    allow_uncalibrated)."""
    from piep.predict.pricing import price
    scn = scenario(model, **kwargs)
    cm = cost_model_for(scn, predictor)
    priced = price([scn.deployment], cm, detail=True)
    doc = priced.document(0)
    extra = engine_fields(scn)
    doc["engine_ref"] = extra["engine_ref"]
    doc["engine"] = scn.engine.description  # the tree knows the engine it is priced as
    doc["flags"] += extra["flags"]
    if scn.transfer is not None:
        doc["flags"].insert(0, "uncalibrated_gpu")
        doc["transfer"] = {"reference": cm.reference, "ratios": dict(scn.transfer),
                           "spec_sheet": dict(scn.gpu.sources).get("spec_sheet")}
    return doc
