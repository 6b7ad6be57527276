"""A scenario resolved once: what prices it (the cost model, the engine's profile, a
spec-sheet transfer) and what every answer about it names and flags. Every command prices
through `resolve`; nothing else looks an engine's profile up."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from piep.core.errors import ConfigError
from piep.core.gpus import DEFAULT_GPU
from piep.core.layout import Deployment
from piep.core.scenario import Scenario

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
    from piep.predict.store import load_learned
    learned = load_learned(gpu)
    if learned is None:
        if predictor == "learned":
            raise ConfigError(f"no trained predictor for GPU {gpu!r}; run `piep train` or use "
                              f"--predictor roofline")
        return RooflineModel()
    return learned


@dataclass(frozen=True)
class Resolved:
    """A scenario and everything that prices it, resolved once (`resolve`): the cost model
    (its GPU's learned predictor, or the roofline, running the scenario's engine through
    that engine's profile; for a GPU without a calibration, the reference GPU's moved by
    spec-sheet ratios), the engine's profile and what every answer about the scenario
    names and flags. predict, serve, compare, sweep, report, plan and optimize all price
    through one."""
    scenario: Scenario
    predictor: str
    cost_model: Any
    profile: Any                   # the engine's EngineProfile; None: the reference runner
    calibrated_gpu: str            # the GPU whose calibration prices the scenario
    engine_ref: dict[str, Any]     # the engine, its version, its host
    flags: tuple[str, ...]         # what the resolution knows to doubt
    transfer: dict[str, Any] | None = None  # the spec-sheet transfer, for an uncalibrated GPU
    # what its variants share once computed (`variant` passes it on): a serving engine's
    # iteration costs per model and layout, the same for every workload of a sweep
    shared: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # a steady-priced engine's profile (piep.predict.steady.SteadyProfile) and its flags
    steady: Any = None

    @property
    def deployment(self) -> Deployment:
        """The scenario's validated deployment."""
        return self.scenario.deployment

    def annotate(self, doc: dict[str, Any]) -> dict[str, Any]:
        """What every document of this resolution carries: its engine_ref, the transfer,
        and its flags (a transfer's first, then the document's own, then what the engine's
        profile lacks)."""
        doc["engine_ref"] = self.engine_ref
        doc["flags"] = self.merged_flags(doc["flags"])
        if self.transfer is not None:
            doc["transfer"] = dict(self.transfer)
        return doc

    def merged_flags(self, own) -> list[str]:
        """An answer's flags: a transfer's first, then the answer's own, then what the
        engine's profile lacks."""
        first = [f for f in self.flags if f == "uncalibrated_gpu"]
        return first + list(own) + [f for f in self.flags if f not in first]

    def host_dependence(self, answer) -> dict[str, Any] | None:
        """How far an answer of an engine fitted per host moves between the fastest and
        slowest hosts its profile's runs saw (their launch probes), where the user gave
        no probe: `answer(resolved)` -> (energy_j, time_s) at each; None otherwise."""
        scn, profile = self.scenario, self.profile
        if profile is None or scn.engine.host_probe_us is not None \
                or not profile.host.host_probe_ref_s:
            return None
        hosts = profile.meta.host_probe_range_us
        if not hosts:
            return None
        out = [answer(resolve(scn.replace(host_probe_us=float(p)), self.predictor))
               for p in hosts]
        return {"probe_us": list(hosts), "energy_j": [float(e) for e, _ in out],
                "time_s": [float(t) for _, t in out],
                "priced_for_probe_us": self.engine_ref.get("host_probe_us"),
                "measure": "piep env --host-probe (on that host)",
                "flag": "--host-probe-us"}

    def variant(self, scn: Scenario) -> "Resolved":
        """The resolution of `scn`: this one's cost model, profile and engine_ref where
        `scn` runs the same engine on the same GPU (a sweep's points), with its own flags;
        else resolved anew."""
        same = self.scenario
        if (scn.engine, scn.gpu, scn.transfer) != (same.engine, same.gpu, same.transfer):
            return resolve(scn, self.predictor)
        return replace(self, scenario=scn, flags=_flags(scn, self.profile, self.transfer,
                                                        self.cost_model, self.steady))


def resolve(scn: Scenario, predictor: str = "auto") -> Resolved:
    """The one resolution of a scenario: its cost model, engine profile, engine_ref,
    transfer and flags."""
    from piep.predict.learned import LearnedModel
    calibrated = scn.gpu.name if scn.transfer is None else _reference_gpu()
    model = cost_model(calibrated, predictor)
    steady = None
    if scn.engine.record.profile == "steady":  # the reference tree, scaled by the engine's own runs
        from piep.predict.steady import load_profile
        steady, profile = load_profile(scn.engine.structure, scn.gpu.name), None
    else:
        profile = None if scn.engine.is_reference else engine_profile(calibrated,
                                                                      scn.engine.name)
    if isinstance(model, LearnedModel) and profile is not None:
        model = profile.apply(model)
    transfer = None
    if scn.transfer is not None:
        from piep.predict.transfer import TransferredModel
        if not isinstance(model, LearnedModel):
            why = "drop --predictor roofline" if predictor == "roofline" else \
                "train it with `piep train`"
            raise ConfigError(f"spec-sheet transfer moves the learned predictor of "
                              f"{calibrated!r} to another GPU; {why}")
        model = TransferredModel.build(model, scn.gpu, dict(scn.transfer), calibrated)
        transfer = {"reference": calibrated, "ratios": dict(scn.transfer),
                    "spec_sheet": dict(scn.gpu.sources).get("spec_sheet")}
    ref = _engine_ref(scn, profile, calibrated) if steady is None else \
        {"name": scn.engine.name, "profile": steady[0].source or steady[0].name,
         "profile_gpu": steady[0].gpu}
    return Resolved(scenario=scn, predictor=predictor, cost_model=model, profile=profile,
                    calibrated_gpu=calibrated, engine_ref=ref,
                    flags=_flags(scn, profile, transfer, model, steady), transfer=transfer,
                    steady=steady)


def _reference_gpu() -> str:
    from piep.core.gpus import spec_sheets
    return spec_sheets()["reference"]


def engine_profile(gpu: str, engine: str):
    """The profile of a non-reference engine on a calibrated GPU, or one clear error."""
    from piep.core.engines import ENGINES
    from piep.predict.engines import load_profile
    profile = load_profile(gpu, engine)
    if profile is None:
        how = ENGINES[engine].measure if engine in ENGINES else \
            f"piep meter ... --engine {engine}"
        raise ConfigError(f"no profile of engine {engine} for GPU {gpu}: measure it ({how}) "
                          f"and fit one (piep train --engine {engine} --from-measurements "
                          f"FILE)")
    return profile


def _flags(scn: Scenario, profile, transfer, model=None, steady=None) -> tuple[str, ...]:
    """What the resolution knows to doubt: a spec-sheet transfer (not where a steady
    profile was fitted on this GPU's runs), a refit of the predictor that moved the
    shipped answers beyond its band, and what the engine's profile did not measure about
    this scenario."""
    other_gpu = steady is not None and "steady_profile_other_gpu" in steady[1]
    flags = ["uncalibrated_gpu"] if transfer and (steady is None or other_gpu) else []
    if (getattr(model, "meta", None) or {}).get("moves_shipped"):
        flags.append("refit_moves_shipped")
    measured = steady[0].families if steady is not None else \
        profile.meta.families_measured if profile else None
    if (scn.model.facts() or scn.model.is_moe) and scn.model.model_type not in (
            measured or ()):
        flags.append("unmeasured_family")
    if scn.model.encoders:
        flags.append("text_decoder_only")
    if scn.parallel.ep > 1:
        flags.append("unmeasured_expert_parallel")
    if scn.deployment.dequantized:
        flags.append("mxfp4_dequantized")
    elif scn.model.mxfp4_experts:
        flags.append("mxfp4_unsampled")
    if scn.model.fp8_weights:
        kinds = getattr(getattr(model, "modules", None), "kinds", {})
        if "fp8_linear" not in kinds:
            flags.append("fp8_unsampled")
        if "blocks" in (scn.model.quantization or ""):
            flags.append("fp8_block_scales")
        if scn.model.is_moe:
            flags.append("fp8_experts_unsampled")
    if steady is not None:
        return tuple(dict.fromkeys((*flags, *steady[1])))
    if profile is None:
        return tuple(flags)
    if scn.parallel.tp not in profile.measured_tp:
        flags.append("unmeasured_engine_layout")
    if not profile.meta.window_measured and scn.deployment.past_window:
        flags.append("unmeasured_sliding_window")
    if profile.meta.interval_from:
        flags.append("few_runs_interval")
    return tuple(flags)


def _engine_ref(scn: Scenario, profile, gpu: str) -> dict[str, Any]:
    """The engine a document names: its version (piep's for the reference runner, else the
    one its profile was measured with) and the host its host time is for."""
    from piep import __version__
    if profile is None:
        return {"name": scn.engine.name, "version": __version__}
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
    return ref
