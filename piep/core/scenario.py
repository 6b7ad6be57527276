"""What a user asks piep about, validated once at the edge: model, GPU, parallel layout,
engine and workload.

A `Scenario` is frozen; report actions, comparisons and the optimizer derive variants
with `.replace(tp=4)` or `.replace(batch=64)`, which validates again. Library functions
take scenarios, never command-line namespaces.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from piep.core.artifacts import read_json, user_data_dir
from piep.core.config import ModelSpec, Parallel, Workload
from piep.core.engines import DEFAULT_ENGINE, ENGINES, Engine, names, reference_engine
from piep.core.errors import ConfigError, PiepError
from piep.core.gpus import DEFAULT_GPU, GPU
from piep.core.layout import Deployment, validate

if TYPE_CHECKING:  # numpy and the trace module load when a stream is asked for
    from piep.core.trace import Trace

log = logging.getLogger("piep.scenario")
ENGINE_PROFILE_SCHEMA = "piep.engine_profile"  # where a user's engine names what it is like


def describe_engine(name: str, like: str | None = None) -> str:
    """An engine in words: a built-in's description, or what a user's engine is priced as."""
    if like is None:
        return ENGINES[name].description if name in ENGINES else name
    return f"your engine profile, priced as {like} ({ENGINES[like].description})"


@dataclass(frozen=True, kw_only=True)
class EngineRef:
    """The software that runs the model. Its version: piep's for the reference runner;
    for other engines the version their profile was measured with (set by the predictor).
    What it reads of the registry is read once (cached properties: every scenario of a
    sweep asks them)."""
    name: str = DEFAULT_ENGINE
    # the host that runs the engine: its launch probe (us per `x.add_(1)`, what
    # `piep env` measures and every measurement record carries); None: the host the
    # engine's profile was calibrated on
    host_probe_us: float | None = None
    # an engine of the user's own: the built-in engine it is priced as (None: a built-in)
    like: str | None = None

    def __post_init__(self) -> None:
        if self.like is None and self.name not in ENGINES:
            raise ConfigError(f"engine {self.name!r} is not known; engines: "
                              f"{', '.join(ENGINES)}")
        bases = names(like_base=True)
        if self.like is not None and (self.like not in bases or self.name in ENGINES):
            raise ConfigError(f"engine {self.name!r} priced as {self.like!r}: an engine of "
                              f"your own takes a name no built-in engine has and is priced as "
                              f"one of {', '.join(bases)}")
        if self.host_probe_us is not None and not self.record.host_fitted:
            raise ConfigError(f"--host-probe-us applies to engines fitted per host "
                              f"({', '.join(names(host_fitted=True))}), not {self.name}")

    @property
    def structure(self) -> str:
        """The built-in engine whose model tree and host path price this one."""
        return self.like or self.name

    @cached_property
    def record(self) -> Engine:
        """The registry's record of the built-in engine that prices this one."""
        return ENGINES[self.structure]

    @property
    def description(self) -> str:
        """What the engine is, in words."""
        return describe_engine(self.name, self.like)

    @property
    def host_probe_s(self) -> float | None:
        """The host's launch probe in seconds (None: the profile's calibration host)."""
        return None if self.host_probe_us is None else self.host_probe_us * 1e-6

    @cached_property
    def mode(self) -> str:
        """How the engine decodes: "graph" (CUDA-graph replay) or "eager"."""
        return self.record.decode

    @cached_property
    def is_reference(self) -> bool:
        """piep's own reference runner."""
        return self.like is None and self.record.reference

    @cached_property
    def tree_engine(self) -> str | None:
        """What the model tree needs to know: None for the reference runner."""
        return None if self.is_reference else self.structure


def engine_names() -> tuple[str, ...]:
    """Every engine a prediction may name: the built-in ones, then the user's own (the
    profiles `piep train --engine NAME --like BASE` wrote to the user data directory)."""
    return (*ENGINES, *user_engines())


def user_engines() -> dict[str, str]:
    """The engines a user calibrated under names of their own (on any GPU): name -> the
    built-in engine each is priced as (its profile's `like`)."""
    return _user_engines(str(user_data_dir()))


@lru_cache(maxsize=8)  # a sweep builds a scenario per point
def _user_engines(root: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted(Path(root).glob("*/engines/*/profile.json")):
        name = path.parent.name
        if name in ENGINES or name in out:
            continue
        try:
            like = read_json(path, ENGINE_PROFILE_SCHEMA)["engine"].get("like")
        except PiepError as exc:  # one broken file must not hide the others
            log.warning("%s", exc)
            continue
        if like in names(like_base=True):
            out[name] = like
    return out


def forget_user_engines() -> None:
    """Look in the user data directory again (a profile was written there)."""
    _user_engines.cache_clear()


def engine_for(engine: str | None = None, mode: str | None = None,
               host_probe_us: float | None = None) -> EngineRef:
    """The engine named, or the reference runner's engine of `mode` (`--mode` is an alias
    of `--engine piep-graph|piep-eager`); both given must agree. `host_probe_us`: the
    launch probe of the host that runs it. A name no built-in engine has is the user's
    own engine, priced as its profile says."""
    if engine is None or engine in ENGINES:
        return _engine_for(engine, mode, host_probe_us)
    like = user_engines().get(engine)
    if like is None:
        raise ConfigError(f"engine {engine!r} is not known; engines: "
                          f"{', '.join(engine_names())}; {own_engine_hint(engine)}")
    return _engine_for(engine, mode, host_probe_us, like)


def own_engine_hint(engine: str) -> str:
    """How an engine piep cannot run becomes one it prices."""
    return (f"an engine of your own: meter its runs (piep meter) and fit it (piep train "
            f"--engine {engine} --like {'|'.join(names(like_base=True))} "
            f"--from-measurements FILE)")


@lru_cache(maxsize=64)
def _engine_for(engine: str | None, mode: str | None, host_probe_us: float | None,
                like: str | None = None) -> EngineRef:
    if mode is not None and mode not in ("graph", "eager"):
        raise ConfigError(f"mode={mode!r} is not one of graph, eager")
    if engine is None:
        return EngineRef(name=reference_engine(mode or "graph"), host_probe_us=host_probe_us)
    ref = EngineRef(name=engine, host_probe_us=host_probe_us, like=like)
    if mode is not None and not ref.is_reference:
        raise ConfigError(f"--mode {mode} belongs to piep's reference runner; drop it with "
                          f"--engine {engine}")
    if mode is not None and ref.mode != mode:
        raise ConfigError(f"--engine {engine} runs {ref.mode} decode; drop --mode {mode} or "
                          f"use --engine {reference_engine(mode)}")
    return ref


@dataclass(frozen=True, kw_only=True)
class Batch:
    """A fixed global batch of prompts of exactly `prompt_len` tokens, `gen_len` new tokens
    each (the first comes from the prefill)."""
    batch: int = 1
    prompt_len: int = 512
    gen_len: int = 128
    # static KV-cache slots when an engine keeps a longer earlier call's cache
    cache_len: int | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class Stream:
    """Requests arriving over time (a `Trace`), for an engine that serves them as they come
    (continuous batching). A batch is the stream of its requests all arriving at 0
    (`Scenario.requests`)."""
    trace: "Trace"

    @property
    def longest(self) -> int:
        """The index of the request with the most tokens (prompt + generated)."""
        import numpy as np
        return int(np.argmax(self.trace.prompt_len + self.trace.gen_len))


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """Model, GPU, layout, engine and a workload (a batch, or a stream of requests),
    validated at construction."""
    model: ModelSpec
    gpu: GPU
    parallel: Parallel = field(default_factory=Parallel)
    engine: EngineRef = field(default_factory=EngineRef)
    workload: Batch | Stream = field(default_factory=Batch)
    # spec-sheet ratios when the GPU has no calibration of its own (flagged)
    transfer: tuple[tuple[str, float], ...] | None = None
    deployment: Deployment = field(init=False, repr=False, compare=False)
    check_memory: bool = True

    def __post_init__(self) -> None:
        w = self.workload
        if isinstance(w, Stream):
            w = self._stream_batch(w)
        if w.cache_len is not None and self.engine.mode != "graph":
            raise ConfigError(f"cache_len applies to static-cache engines; {self.engine.name} "
                              f"keeps a live cache of prompt + generated tokens")
        if self.parallel.pp > 1 and not self.engine.is_reference:
            priced = f" (priced as {self.engine.like})" if self.engine.like else ""
            raise ConfigError(f"{self.engine.name}{priced}: engine profiles price transformers "
                              f"generate(), which has no pipeline parallelism; use tp (and dp "
                              f"for replicas)")
        dep = validate(self.model, self.parallel,
                       Workload(batch=w.batch, prompt_len=w.prompt_len, gen_len=w.gen_len,
                                mode=self.engine.mode, cache_len=w.cache_len), self.gpu,
                       check_memory=self.check_memory, engine=self.engine.tree_engine,
                       host_probe_s=self.engine.host_probe_s)
        object.__setattr__(self, "deployment", dep)

    def _stream_batch(self, stream: Stream) -> Batch:
        """What a stream's deployment is validated with: its longest request alone."""
        serving = names(kind="stream")
        if self.engine.record.kind != "stream":
            raise ConfigError(f"a stream of requests is priced for an engine that serves "
                              f"them as they come ({', '.join(serving)}), not "
                              f"{self.engine.name}; price a batch of it with --batch")
        if self.parallel.dp > 1:
            raise ConfigError("a stream is priced on one replica (dp=1): give each "
                              "replica its share of the requests")
        t, i = stream.trace, stream.longest
        total = int(t.prompt_len[i] + t.gen_len[i])
        if total > self.model.max_position:
            raise ConfigError(f"request {t.ids[i]}: prompt_len + gen_len = {total} exceeds "
                              f"max_position_embeddings={self.model.max_position} of "
                              f"{self.model.name}")
        return Batch(batch=1, prompt_len=int(t.prompt_len[i]), gen_len=int(t.gen_len[i]))

    @property
    def is_stream(self) -> bool:
        """The workload is a stream of requests (else a batch)."""
        return isinstance(self.workload, Stream)

    def requests(self) -> "Trace":
        """The requests one replica serves: the stream, or its share of the batch
        arriving at once."""
        if isinstance(self.workload, Stream):
            return self.workload.trace
        import numpy as np

        from piep.core.trace import make_trace
        n = self.workload.batch // self.parallel.dp
        w = self.workload
        return make_trace(np.zeros(n), np.full(n, w.prompt_len), np.full(n, w.gen_len),
                          where="the batch")

    @classmethod
    def build(cls, model: str | ModelSpec, *, gpu: str | GPU = DEFAULT_GPU, tp: int = 1,
              pp: int = 1, dp: int = 1, ep: int = 1, engine: str | None = None,
              mode: str | None = None,
              batch: int = 1, prompt_len: int = 512, gen_len: int = 128,
              cache_len: int | None = None, allow_uncalibrated: bool = False,
              check_memory: bool = True, host_probe_us: float | None = None,
              trace: "Trace | str | Path | None" = None) -> "Scenario":
        """From names and numbers: a shipped model name or config path, a GPU name; with
        `trace` (a Trace, or a trace file's path), a stream of those requests instead of a
        batch."""
        if isinstance(trace, (str, Path)):
            from piep.core.trace import read_trace
            trace = read_trace(trace)
        if isinstance(model, ModelSpec):
            spec = model
        else:
            from piep.core.models import load_model
            spec = load_model(model)
        ref = engine_for(engine, mode, host_probe_us)
        # (a steady-priced engine's GPU is priced from the reference GPU's, its profile
        # fitted on that GPU's runs or flagged as another's: resolve says which)
        profile, ratios = (gpu, None) if isinstance(gpu, GPU) else \
            gpu_profile(gpu, allow_uncalibrated or ref.record.profile == "steady")
        return cls(model=spec, gpu=profile, parallel=Parallel(tp=tp, pp=pp, dp=dp, ep=ep),
                   engine=ref,
                   workload=Stream(trace=trace) if trace is not None else
                   Batch(batch=batch, prompt_len=prompt_len, gen_len=gen_len,
                         cache_len=cache_len),
                   transfer=tuple(sorted(ratios.items())) if ratios else None,
                   check_memory=check_memory)

    def replace(self, **changes: Any) -> "Scenario":
        """A variant: any of model, gpu, tp, pp, dp, ep, engine, mode, batch, prompt_len,
        gen_len, cache_len, host_probe_us, trace (a stream instead of a batch); validated
        again."""
        from piep.core.models import load_model
        model = changes.pop("model", self.model)
        gpu, transfer = self.gpu, self.transfer
        if "gpu" in changes:
            new = changes.pop("gpu")
            steady = engine_for(changes["engine"], None).record.profile == "steady" \
                if changes.get("engine") else self.engine.record.profile == "steady"
            gpu, ratios = (new, None) if isinstance(new, GPU) else \
                gpu_profile(new, changes.pop("allow_uncalibrated", False) or steady)
            transfer = tuple(sorted(ratios.items())) if ratios else None
        p, w = self.parallel, self.workload
        tp = changes.pop("tp", p.tp)  # (experts sharded over the group keep following it)
        parallel = Parallel(tp=tp, pp=changes.pop("pp", p.pp), dp=changes.pop("dp", p.dp),
                            ep=changes.pop("ep", tp if p.ep > 1 else 1))
        engine = self.engine
        probe = changes.pop("host_probe_us", engine.host_probe_us)
        if "engine" in changes or "mode" in changes:
            engine = engine_for(changes.pop("engine", None), changes.pop("mode", None))
            # the same host runs the other engine: its probe goes along where it applies
            if probe is not None and engine.record.host_fitted:
                engine = engine_for(engine.name, None, probe)
        elif probe != engine.host_probe_us:
            engine = engine_for(engine.name, None, probe)
        workload: Batch | Stream
        batch_keys = {"batch", "prompt_len", "gen_len", "cache_len"} & set(changes)
        if "trace" in changes:
            workload = Stream(trace=changes.pop("trace"))
        elif isinstance(w, Stream) and not batch_keys:
            workload = w
        else:
            b = w if isinstance(w, Batch) else Batch()
            workload = Batch(batch=changes.pop("batch", b.batch),
                             prompt_len=changes.pop("prompt_len", b.prompt_len),
                             gen_len=changes.pop("gen_len", b.gen_len),
                             cache_len=changes.pop("cache_len", b.cache_len))
        if changes:
            raise TypeError(f"Scenario.replace() got unknown fields {sorted(changes)}")
        return Scenario(model=load_model(model) if isinstance(model, str) else model, gpu=gpu,
                        parallel=parallel, engine=engine, workload=workload,
                        transfer=transfer, check_memory=self.check_memory)

    @property
    def mode(self) -> str:
        """How the engine decodes: "graph" (CUDA-graph replay) or "eager"."""
        return self.engine.mode

    def label(self) -> str:
        """`MODEL@tpXppYdpZ[:ENGINE]`, the grammar of `piep compare`."""
        p = self.parallel
        engine = "" if self.engine.name == DEFAULT_ENGINE else f":{self.engine.name}"
        return f"{self.model.name}@{p.label()}{engine}"

    def to_json(self) -> dict[str, Any]:
        """The scenario as a document (`--scenario FILE.json` reads it back): a shipped
        model by name, any other by its config."""
        from piep.core.models import shipped_models
        shipped = {m.name for m in shipped_models()}
        m = self.model
        model: Any = m.name if m.name in shipped and _shipped_spec(m.name) == m else \
            {"name": m.name, "config": m.to_hf_config()}
        p, w, e = self.parallel, self.workload, self.engine
        return {"schema": SCENARIO_SCHEMA, "schema_version": 1, "model": model,
                "gpu": self.gpu.name, "allow_uncalibrated": self.transfer is not None,
                "layout": {"tp": p.tp, "pp": p.pp, "dp": p.dp,
                           **({"ep": p.ep} if p.ep > 1 else {})},
                "engine": {"name": e.name, "host_probe_us": e.host_probe_us},
                "workload": {"requests": w.trace.rows()} if isinstance(w, Stream) else
                {"batch": w.batch, "prompt_len": w.prompt_len, "gen_len": w.gen_len,
                 "cache_len": w.cache_len}}

    @classmethod
    def from_json(cls, doc: Any, where: str = "scenario") -> "Scenario":
        """A scenario document (`to_json`), checked: one line names what is wrong."""
        if not isinstance(doc, dict):
            raise ConfigError(f"{where}: a scenario is a JSON object (as `piep predict "
                              f"--json` gives under 'scenario')")
        parts = {"model": None, "gpu": str, "allow_uncalibrated": bool, "layout": dict,
                 "engine": dict, "workload": dict, "schema": str, "schema_version": int}
        unknown = sorted(set(doc) - set(parts))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; a scenario has "
                              f"{', '.join(k for k in parts if not k.startswith('schema'))}")
        if doc.get("schema", SCENARIO_SCHEMA) != SCENARIO_SCHEMA:
            raise ConfigError(f"{where}: schema {doc['schema']!r} is not {SCENARIO_SCHEMA!r}")
        for key, kind in parts.items():
            if key in doc and kind is not None and not isinstance(doc[key], kind):
                raise ConfigError(f"{where}: {key} must be {kind.__name__}")
        fields = {"layout": ("tp", "pp", "dp", "ep"), "engine": ("name", "host_probe_us"),
                  "workload": ("batch", "prompt_len", "gen_len", "cache_len", "requests")}
        values: dict[str, Any] = {}
        for part, keys in fields.items():
            bad = sorted(set(doc.get(part, {})) - set(keys))
            if bad:
                raise ConfigError(f"{where}: {part} has unknown key(s) {', '.join(bad)}; "
                                  f"it takes {', '.join(keys)}")
            for key, value in doc.get(part, {}).items():
                values["engine" if (part, key) == ("engine", "name") else key] = value
        if "requests" in values:
            values["trace"] = _requests(values.pop("requests"), f"{where}: workload.requests")
            if {"batch", "prompt_len", "gen_len", "cache_len"} & set(values):
                raise ConfigError(f"{where}: a workload is a batch (batch, prompt_len, "
                                  f"gen_len) or a stream (requests), not both")
        model = doc.get("model")
        if isinstance(model, dict):
            if set(model) != {"name", "config"}:
                raise ConfigError(f"{where}: model is a shipped name or {{name, config}}")
            model = ModelSpec.from_hf_config(model["config"], name=str(model["name"]))
        elif not isinstance(model, str):
            raise ConfigError(f"{where}: model is missing (a shipped name or {{name, config}})")
        return cls.build(model, gpu=doc.get("gpu", DEFAULT_GPU),
                         allow_uncalibrated=doc.get("allow_uncalibrated", False), **values)


SCENARIO_SCHEMA = "piep.scenario"


def _requests(rows: Any, where: str) -> "Trace":
    """A stream's requests from scenario rows: arrival_s, prompt_len, gen_len[, id]."""
    from piep.core.trace import make_trace
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ConfigError(f"{where} is a list of {{arrival_s, prompt_len, gen_len[, id]}}")
    for k, r in enumerate(rows):
        missing = [f for f in ("arrival_s", "prompt_len", "gen_len") if f not in r]
        if missing:
            raise ConfigError(f"{where}[{k}] lacks {', '.join(missing)}")
    ids = [str(r.get("id", k)) for k, r in enumerate(rows)]
    try:
        return make_trace([r["arrival_s"] for r in rows], [r["prompt_len"] for r in rows],
                          [r["gen_len"] for r in rows], ids, where=where)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _shipped_spec(name: str) -> ModelSpec:
    from piep.core.models import load_model
    return load_model(name)


def gpu_profile(name: str, allow_uncalibrated: bool = False) -> tuple[GPU, dict | None]:
    """(GPU profile, spec-sheet ratios or None): the calibration, or with
    `allow_uncalibrated` the spec-sheet transfer for a GPU that has none."""
    from piep.core.gpus import board_name, known_gpus, load_gpu, spec_sheets, transfer_gpu
    name = board_name(name)  # a name at all (not a path), as the folders name it
    try:
        return load_gpu(name), None
    except ConfigError:
        if not allow_uncalibrated and name not in spec_sheets()["gpus"]:
            raise ConfigError(f"unknown GPU {name!r}: no calibration and no spec sheet "
                              f"(calibrated: {', '.join(known_gpus())}; spec sheets, with "
                              f"--allow-uncalibrated: "
                              f"{', '.join(sorted(spec_sheets()['gpus']))})") from None
        if not allow_uncalibrated:
            raise ConfigError(f"GPU {name!r} has no calibration (calibrated: "
                              f"{', '.join(known_gpus())}); `piep predict` and `piep serve` "
                              f"price it from its spec sheet with --allow-uncalibrated "
                              f"(flagged, with a wide interval)") from None
    return transfer_gpu(name)
