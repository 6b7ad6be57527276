"""What the lab writes and the fits read, typed once at the boundary.

A `Measurement` is one end-to-end run (the reference runner's, or an engine's `generate()`
call), a `ServingReplay` one request trace replayed by a serving engine. Each is read from
its JSON record by `from_json`, which names every missing or malformed field in one line,
and gives back the record as written by `to_json`. The fits (piep.fit) read their fields,
never the record's keys; records of another harness (a model, a layout, lengths, energy
and time, no `schema`) load through the same types; `ForeignRun` is a `generate()` call
measured by another harness (the supplied tp=2 runs), whose engine is named as piep names
it (`"engine": "hf-static"`) or as transformers with its cache mode.

The lab's samplers append their records through `append_record`, which reads each back the
way the fits will before it is written.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from piep.core.config import FAMILY_FIELDS, ModelSpec, Parallel, Workload, size_problem
from piep.core.engines import ENGINES, names
from piep.core.engines import engine as engine_record
from piep.core.errors import ConfigError
from piep.core.gpus import GPU
from piep.core.layout import Deployment, validate

HOST_PROBE = "launch_add_s"  # the probe host time scales with (time per tiny launch)
BOARD_PROBE = "decode_gemm_power_w"  # a board's probe: a decode-like GEMM's power
REFERENCE = "piep reference runner"  # the `engine` of the reference runner's records
# what names a configuration: repeats of a run, and a design's row, share its key
KEY_FIELDS = ("model", "tp", "pp", "dp", "batch", "prompt_len", "gen_len", "mode")


def run_key(cfg: Mapping[str, Any]) -> str:
    """model|tp|pp|dp|batch|prompt|gen|mode of a configuration (a record, a design row)."""
    return "|".join(str(cfg[k]) for k in KEY_FIELDS)


def spec_of_shape(model: str, s: Mapping[str, Any]) -> ModelSpec:
    """The model shape a record states (its `shape`); one object per distinct shape (a
    file of many runs of a few models holds a few)."""
    facts = s.get("family") if isinstance(s.get("family"), Mapping) else {}
    experts = s.get("experts") if isinstance(s.get("experts"), Mapping) else {}
    moe = (("num_experts", experts["count"]), ("experts_per_token", experts["per_token"]),
           ("expert_ffn", experts["ffn"] if experts["ffn"] != s["ffn"] else None),
           ("shared_expert_ffn", experts.get("shared_ffn", 0))) if experts else ()
    return _spec_of(model, *(s[k] for k in SHAPE_FIELDS), bool(s.get("qkv_bias")),
                    s.get("sliding_window"), str(s.get("model_type") or "llama"),
                    s.get("tied") is True,
                    tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                 for k, v in facts.items())), moe,
                    s.get("quantization") if isinstance(s.get("quantization"), str) else None)


@functools.lru_cache(maxsize=1024)
def _spec_of(model, hidden, layers, heads, kv_heads, head_dim, ffn, vocab, qkv_bias,
             window, model_type="llama", tied=False, facts=(), moe=(),
             quantization=None) -> ModelSpec:
    unknown = [k for k, _ in facts if k not in FAMILY_FIELDS]
    if unknown:
        raise ConfigError(f"{model}: shape.family has unknown facts {unknown} (known: "
                          f"{', '.join(FAMILY_FIELDS)})")
    return ModelSpec(name=model, model_type=model_type, hidden_size=hidden, num_layers=layers,
                     num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                     intermediate_size=ffn, vocab_size=vocab, qkv_bias=qkv_bias,
                     sliding_window=window, max_position=1 << 20, tie_word_embeddings=tied,
                     quantization=quantization, **dict(facts), **dict(moe))


SHAPE_FIELDS = ("hidden", "layers", "heads", "kv_heads", "head_dim", "ffn", "vocab")


def _spec(doc: Mapping[str, Any], where: str) -> ModelSpec:
    """A record's model: its stated shape, else the shipped config of its name."""
    shape = doc.get("shape")
    if isinstance(shape, dict):
        missing = [k for k in SHAPE_FIELDS if not isinstance(shape.get(k), int)
                   or isinstance(shape.get(k), bool)]
        window = shape.get("sliding_window")
        if window is not None and (not isinstance(window, int) or isinstance(window, bool)):
            missing.append("sliding_window (an integer or null)")
        if missing:
            raise ConfigError(f"{where}: shape lacks {', '.join(missing)} (a shape states "
                              f"{', '.join(SHAPE_FIELDS)})")
        return spec_of_shape(str(doc["model"]), shape)
    from piep.core.models import load_model
    try:
        return load_model(str(doc["model"]))
    except ConfigError:
        raise ConfigError(f"{where}: model {doc['model']!r} is no shipped config and the "
                          f"record has no `shape` ({', '.join(SHAPE_FIELDS)})") from None


def _need(doc: Any, where: str, ints: tuple[str, ...], nums: tuple[str, ...],
          strs: tuple[str, ...] = ("model",)) -> None:
    """One line naming every field of `doc` missing or of the wrong type."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where}: a record is a JSON object")
    missing = [k for k in strs + ints + nums if doc.get(k) is None]
    if missing:
        raise ConfigError(f"{where}: lacks {', '.join(missing)} (a record states "
                          f"{', '.join(strs + ints + nums)})")
    for k in ints:
        if problem := size_problem(k, doc[k]):
            raise ConfigError(f"{where}: {problem}")
    wrong = [k for k in nums if isinstance(doc[k], bool) or not isinstance(doc[k], (int, float))
             or not math.isfinite(doc[k]) or doc[k] <= 0]
    if wrong:
        raise ConfigError(f"{where}: {', '.join(f'{k}={doc[k]!r}' for k in wrong)}: energy "
                          f"and time are finite numbers > 0")


def _positive(v: Any) -> bool:
    """A finite number > 0 (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        and v > 0


def _time_or_none(v: Any) -> bool:
    """A finite number >= 0, or None."""
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)
                         and math.isfinite(v) and v >= 0)


def _engine(doc: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The engine a record names, and its version: an engine's records carry {"name",
    "version"}, the reference runner's its name alone; (None, None) for none."""
    engine = doc.get("engine")
    if isinstance(engine, dict):
        return engine.get("name"), engine.get("version")
    return (str(engine), None) if engine else (None, None)


def _host_probe(doc: Mapping[str, Any]) -> float | None:
    return (doc.get("host_probe") or {}).get(HOST_PROBE)


def _board_probe(doc: Mapping[str, Any]) -> float | None:
    """The mean board probe over the record's GPUs, if every GPU of it carries one."""
    probes = [(g.get("gpu_probe") or {}).get(BOARD_PROBE) for g in doc.get("per_gpu") or []]
    return sum(probes) / len(probes) if probes and None not in probes else None


@dataclass(frozen=True)
class Phase:
    """What was measured of one phase (prefill, decode); None where a run has no split."""
    energy_j: float | None = None
    time_s: float | None = None

    @classmethod
    def from_json(cls, doc: Any) -> "Phase":
        doc = doc if isinstance(doc, Mapping) else {}
        return cls(doc.get("energy_j"), doc.get("time_s"))


@dataclass(frozen=True)
class Measurement:
    """One measured end-to-end run: a batch of `batch` prompts of `prompt_len` tokens, each
    generating `gen_len`, on a layout, with its energy and time (whole run and phases),
    the engine that ran it and the probes of its host and board."""
    key: str                     # the configuration (repeats of it share the key)
    model: str
    spec: ModelSpec
    parallel: Parallel
    batch: int
    prompt_len: int
    gen_len: int
    mode: str                    # the decode mode it ran (graph, eager, ...)
    energy_j: float | None
    time_s: float
    prefill: Phase = Phase()
    decode: Phase = Phase()
    engine: str | None = None    # None: unnamed (taken as the engine being fitted)
    engine_version: str | None = None
    host_probe_s: float | None = None   # its host's time per tiny launch
    board_probe_w: float | None = None  # its boards' decode-GEMM power
    static_cache_len: int | None = None  # a static cache kept from an earlier call
    gpus: int = 1
    wall_s: float | None = None  # device seconds it took
    n_measurements: int = 1      # repeats merged into it (`merge_repeats`)
    doc: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    source: str = field(default="", compare=False)  # where it was read (file:line)

    INTS = ("tp", "batch", "prompt_len", "gen_len")
    NUMS = ("time_s",)

    @classmethod
    def from_json(cls, doc: Any, where: str = "record", *,
                  mode: str | None = None) -> "Measurement":
        """A record, checked (one line names what is missing or wrong); `mode`: the decode
        mode of a record that states none (its engine's)."""
        _need(doc, where, cls.INTS, cls.NUMS)
        if doc.get("mode") is None and mode is None:
            raise ConfigError(f"{where}: lacks mode (eager, graph, ...)")
        energy = doc.get("energy_j")
        if energy is not None and not _positive(energy):
            raise ConfigError(f"{where}: energy_j={energy!r} must be a finite number > 0 (or "
                              f"null)")
        for ph in ("prefill", "decode"):
            part = doc.get(ph)
            if part is not None and not isinstance(part, Mapping):
                raise ConfigError(f"{where}: {ph} must be an object of energy_j, time_s")
            for k in ("energy_j", "time_s"):  # (a window shorter than a counter tick: 0 J)
                v = (part or {}).get(k)
                if not _time_or_none(v):
                    raise ConfigError(f"{where}: {ph}.{k}={v!r} must be a finite number >= 0 "
                                      f"(or null)")
        if doc.get("gpus") is not None and size_problem("tp", doc["gpus"]):
            raise ConfigError(f"{where}: gpus={doc['gpus']!r} must be an integer >= 1")
        try:
            parallel = Parallel(tp=doc["tp"], pp=doc.get("pp", 1), dp=doc.get("dp", 1))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        mode = doc.get("mode") or mode
        key = doc.get("key") or run_key({**doc, "tp": parallel.tp, "pp": parallel.pp,
                                         "dp": parallel.dp, "mode": mode})
        name, version = _engine(doc)
        return cls(key=key, model=str(doc["model"]), spec=_spec(doc, where), parallel=parallel,
                   batch=doc["batch"], prompt_len=doc["prompt_len"], gen_len=doc["gen_len"],
                   mode=mode, energy_j=energy, time_s=doc["time_s"],
                   prefill=Phase.from_json(doc.get("prefill")),
                   decode=Phase.from_json(doc.get("decode")), engine=name,
                   engine_version=version, host_probe_s=_host_probe(doc),
                   board_probe_w=_board_probe(doc), static_cache_len=doc.get("static_cache_len"),
                   gpus=doc.get("gpus") or parallel.world_size, wall_s=doc.get("wall_s"),
                   n_measurements=doc.get("n_measurements", 1), doc=doc, source=where)

    def to_json(self) -> dict[str, Any]:
        """The record as written (with merged repeats: their medians)."""
        out = dict(self.doc)
        out.update(energy_j=self.energy_j, time_s=self.time_s, key=self.key,
                   prefill={**(out.get("prefill") or {}), "energy_j": self.prefill.energy_j,
                            "time_s": self.prefill.time_s},
                   decode={**(out.get("decode") or {}), "energy_j": self.decode.energy_j,
                           "time_s": self.decode.time_s})
        if self.n_measurements > 1:
            out["n_measurements"] = self.n_measurements
        return out

    def phase(self, name: str) -> Phase:
        return self.prefill if name == "prefill" else self.decode

    @property
    def cache_len(self) -> int | None:
        """A static cache larger than the run's prompt + gen (kept from an earlier call)."""
        n = self.static_cache_len
        # transformers sizes the cache at prompt + gen - 1 slots (the last token is never
        # written back); piep's cache holds prompt + gen
        return n + 1 if n and n + 1 > self.prompt_len + self.gen_len else None

    def deployment(self, gpu: GPU, engine: str | None = None,
                   on_its_host: bool = False) -> Deployment:
        """The deployment it ran (the reference runner's, or `engine`'s: its decode mode,
        whatever the record says); `on_its_host`: with its host probe."""
        return validate(self.spec, self.parallel,
                        Workload(batch=self.batch, prompt_len=self.prompt_len,
                                 gen_len=self.gen_len,
                                 mode=engine_record(engine).decode if engine else self.mode,
                                 cache_len=self.cache_len), gpu,
                        check_memory=False, engine=engine,
                        host_probe_s=self.host_probe_s if on_its_host else None)


def _median_known(values) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def merge_repeats(runs: list[Measurement]) -> list[Measurement]:
    """One measurement per configuration, in order of first appearance: repeats (other
    processes, other calls) merged by the median of their energy and time (the rest, the
    probes included, is the first's)."""
    by_key: dict[str, list[Measurement]] = {}
    for m in runs:
        by_key.setdefault(m.key, []).append(m)
    out = []
    for ms in by_key.values():
        first = ms[0]
        if len(ms) > 1:
            phases = {ph: Phase(_median_known(m.phase(ph).energy_j for m in ms),
                                _median_known(m.phase(ph).time_s for m in ms))
                      for ph in ("prefill", "decode")}
            first = replace(first, energy_j=statistics.median(m.energy_j for m in ms),
                            time_s=statistics.median(m.time_s for m in ms), **phases)
        out.append(replace(first, n_measurements=len(ms)))
    return out


@dataclass(frozen=True)
class Request:
    """One request of a replayed trace: when it arrived, its lengths, what was timed."""
    id: str
    arrival_s: float
    prompt_len: int
    gen_len: int
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None


@dataclass(frozen=True)
class IterationLog:
    """The engine's own log of its scheduler iterations (columns, one entry each)."""
    q_tokens: tuple[float, ...]
    kv_tokens: tuple[float, ...]
    requests: tuple[float, ...]
    t_start_s: tuple[float, ...]
    t_end_s: tuple[float, ...]


@dataclass(frozen=True)
class ServingReplay:
    """A request trace replayed by a serving engine: the window's energy and time, each
    request's timings, the engine's iteration log and cache size where it gave them."""
    model: str
    spec: ModelSpec
    config_hash: str | None
    tp: int
    engine: str | None
    engine_version: str | None
    energy_j: float | None
    time_s: float
    requests: tuple[Request, ...]
    trace: str | None            # the trace file it replayed (None: not stated)
    idle_power_w: float | None = None   # the boards' idle power before the window
    iterations: IterationLog | None = None
    cache_blocks: int | None = None     # the KV-cache blocks the engine allocated
    host_probe_s: float | None = None
    board_probe_w: float | None = None
    doc: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    source: str = field(default="", compare=False)  # where it was read (file:line)

    REQUEST_FIELDS = ("id", "arrival_s", "prompt_len", "gen_len")

    @classmethod
    def from_json(cls, doc: Any, where: str = "record") -> "ServingReplay":
        _need(doc, where, ("tp",), ("time_s",))
        rows = doc.get("per_request")
        if not isinstance(rows, list) or not rows:
            raise ConfigError(f"{where}: lacks per_request (a row per request: "
                              f"{', '.join(cls.REQUEST_FIELDS)}, ttft_s, tpot_s, e2e_s)")
        requests = []
        for i, r in enumerate(rows):
            missing = [k for k in cls.REQUEST_FIELDS
                       if not isinstance(r, Mapping) or r.get(k) is None]
            if missing:
                raise ConfigError(f"{where}: per_request[{i}] lacks {', '.join(missing)}")
            for k in ("prompt_len", "gen_len"):
                if problem := size_problem(k, r[k]):
                    raise ConfigError(f"{where}: per_request[{i}]: {problem}")
            bad = [k for k in ("arrival_s", "ttft_s", "tpot_s", "e2e_s")
                   if not _time_or_none(r.get(k))]
            if bad:
                raise ConfigError(f"{where}: per_request[{i}]: "
                                  f"{', '.join(f'{k}={r[k]!r}' for k in bad)}: times are "
                                  f"finite numbers >= 0")
            requests.append(Request(str(r["id"]), r["arrival_s"], r["prompt_len"], r["gen_len"],
                                    r.get("ttft_s"), r.get("tpot_s"), r.get("e2e_s")))
        energy = doc.get("energy_j")
        if energy is not None and not _positive(energy):
            raise ConfigError(f"{where}: energy_j={energy!r} must be a finite number > 0 (or "
                              f"null)")
        it = doc.get("iterations") or {}
        log = _iteration_log(it, where) if isinstance(it, Mapping) and it.get("q_tokens") \
            else None
        name, version = _engine(doc)
        return cls(model=str(doc["model"]), spec=_spec(doc, where),
                   config_hash=doc.get("config_hash"), tp=doc["tp"], engine=name,
                   engine_version=version, energy_j=doc.get("energy_j"), time_s=doc["time_s"],
                   requests=tuple(requests), trace=doc.get("trace"),
                   idle_power_w=doc.get("idle_power_w"), iterations=log,
                   cache_blocks=(doc.get("cb_config") or {}).get("cache_num_blocks"),
                   host_probe_s=_host_probe(doc), board_probe_w=_board_probe(doc), doc=doc,
                   source=where)

    def to_json(self) -> dict[str, Any]:
        """The record as written."""
        return dict(self.doc)


def _iteration_log(it: Mapping[str, Any], where: str) -> IterationLog:
    """An engine's iteration log: five columns of finite numbers >= 0, of one length, each
    iteration ending no earlier than it starts."""
    keys = ("q_tokens", "kv_tokens", "requests", "t_start_s", "t_end_s")
    cols = [it.get(k) for k in keys]
    if not all(isinstance(c, list) for c in cols) or len({len(c) for c in cols}) != 1 \
            or not all(_time_or_none(v) and v is not None for c in cols for v in c):
        raise ConfigError(f"{where}: iterations must hold {', '.join(keys)}: lists of one "
                          f"length of finite numbers >= 0")
    if any(b < a for a, b in zip(cols[3], cols[4])):
        raise ConfigError(f"{where}: iterations: an iteration ends before it starts")
    return IterationLog(*(tuple(c) for c in cols))


def read_runs(path, schema: str, *, given: bool = False) -> list:
    """The records of `schema` in a JSONL file (other lines are skipped), each checked and
    typed: piep.measurement as `Measurement`s, piep.serving_measurement as
    `ServingReplay`s; `given`: a file the user named, which must exist."""
    from piep.core.artifacts import read_records
    kind = ServingReplay if schema == "piep.serving_measurement" else Measurement
    return read_records(path, schema, given=given, parse=kind.from_json)


@dataclass(frozen=True)
class ModuleSample:
    """One node kind run in isolation at one shape (piep calibrate modules): its time per
    call (CUDA events) and energy per call (a tick-aligned window), in a decode mode."""
    kind: str
    mode: str                    # graph (a CUDA graph replay) or eager
    phase: str | None            # prefill or decode: which trees the shape came from
    shape: Mapping[str, Any]     # the shape as sampled (kind, phase, tokens, widths, ...)
    time_s: float
    energy_j: float | None
    power_w: float | None = None         # the window's mean board power
    sm_clock_mhz: float | None = None    # the SM clock read after the window
    repeat: int = 0              # 1: the second measurement of a repeated shape
    op_version: int = 1          # the sampler's op (a newer one replaces an older)
    check: str = ""              # "repeat": a pass of the repeat check
    captures: tuple | None = None  # a tiny call's fresh captures (it is their median)
    time_unix: float | None = None
    doc: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, doc: Any, where: str = "sample") -> "ModuleSample":
        if not isinstance(doc, Mapping):
            raise ConfigError(f"{where}: a module sample is a JSON object")
        missing = [k for k in ("kind", "mode", "time_s", "shape_fields") if doc.get(k) is None]
        missing += [k for k in doc.get("shape_fields") or () if k not in doc]
        if missing:
            raise ConfigError(f"{where}: module sample without {', '.join(missing)}")
        return cls(kind=doc["kind"], mode=doc["mode"], phase=doc.get("phase"),
                   shape={k: doc[k] for k in doc["shape_fields"]}, time_s=doc["time_s"],
                   energy_j=doc.get("energy_j"), power_w=doc.get("power_w"),
                   sm_clock_mhz=doc.get("sm_clock_mhz"), repeat=doc.get("repeat", 0),
                   op_version=doc.get("op_version", 1), check=doc.get("check", ""),
                   captures=None if doc.get("captures") is None else tuple(doc["captures"]),
                   time_unix=doc.get("time_unix"),
                   doc=doc)

    def to_json(self) -> dict[str, Any]:
        """The sample as written."""
        return dict(self.doc)


@dataclass(frozen=True)
class HostOverhead:
    """A module campaign's host probe: the host's time per tiny eager launch, and the
    board power while the GPU sees only those launches (the power in launch gaps)."""
    launch_gap_power_w: float
    launch_s: float | None = None
    file: str | None = None       # the campaign file it came from
    gpu_uuid: str | None = None
    doc: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, doc: Any, file: str | None = None) -> "HostOverhead":
        if not isinstance(doc, Mapping) or doc.get("launch_gap_power_w") is None:
            raise ConfigError(f"{file or 'host record'}: a host overhead record states "
                              f"launch_gap_power_w")
        return cls(doc["launch_gap_power_w"], doc.get("launch_s"), file, doc.get("gpu_uuid"),
                   doc)


def _fields(doc: Any, where: str, names: tuple[str, ...], what: str) -> None:
    """One line naming every field of `names` that `doc` (a JSON object) lacks."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where}: {what} is a JSON object")
    missing = [k for k in names if doc.get(k) is None]
    if missing:
        raise ConfigError(f"{where}: {what} without {', '.join(missing)}")


@dataclass(frozen=True)
class CollectiveSample:
    """One collective in isolation (piep calibrate collectives): its time per call (CUDA
    events) and each GPU's energy per call (a tick-aligned window of back-to-back calls)."""
    kind: str                    # allreduce, allgather, p2p
    mode: str                    # graph or eager
    size_bytes: int
    time_s: float
    energy_j_per_gpu: tuple      # None for a GPU without a reading
    group_size: int = 2
    reduce_op: str | None = None  # sum or avg (AllReduce; None: stated nowhere)
    superseded: bool = False     # a later campaign re-measured this point
    time_unix: float | None = None
    doc: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, doc: Any, where: str = "collective sample") -> "CollectiveSample":
        _fields(doc, where, ("kind", "mode", "size_bytes", "time_s"), "a collective sample")
        return cls(doc["kind"], doc["mode"], doc["size_bytes"], doc["time_s"],
                   tuple(doc.get("energy_j_per_gpu") or (None,)), doc.get("group_size", 2),
                   doc.get("reduce_op"), bool(doc.get("superseded_by")), doc.get("time_unix"),
                   doc)

    @property
    def energy_known(self) -> bool:
        return None not in self.energy_j_per_gpu

    def to_json(self) -> dict[str, Any]:
        return dict(self.doc)


@dataclass(frozen=True)
class ProbeCollective:
    """A collective the device probe timed, eagerly and in a CUDA graph (no energy)."""
    kind: str                    # allreduce, allgather, p2p
    size_bytes: int
    eager_s: float | None
    graph_s: float | None

    @classmethod
    def from_json(cls, doc: Any, where: str = "probe") -> "ProbeCollective":
        _fields(doc, where, ("kind", "size_bytes"), "a probed collective")
        ms = {m: doc.get(f"{m}_ms") for m in ("eager", "graph")}
        return cls("p2p" if doc["kind"] == "sendrecv" else doc["kind"], doc["size_bytes"],
                   *(v / 1000 if v else None for v in ms.values()))


# what names a wait distribution: one Gamma fit per distinct value of these
WAIT_KEYS = ("model", "collective", "group_size", "phase", "mode", "size_bytes", "batch",
             "prompt_len")


@dataclass(frozen=True)
class WaitSample:
    """AllReduce waiting times in real tp=N decoding (piep calibrate waits): each rank's
    wait before each call, and each rank's duration of each call."""
    key: Mapping[str, Any]       # the WAIT_KEYS values
    waits_s: tuple[tuple[float, ...], ...]      # per rank, per call
    durations_ms: tuple[tuple[float, ...], ...]  # per rank, per call

    @classmethod
    def from_json(cls, doc: Any, where: str = "wait sample") -> "WaitSample":
        _fields(doc, where, WAIT_KEYS + ("waits_s", "durations_ms"), "a wait sample")
        return cls({k: doc[k] for k in WAIT_KEYS}, tuple(map(tuple, doc["waits_s"])),
                   tuple(map(tuple, doc["durations_ms"])))

    @property
    def waits(self) -> list[float]:
        """Every rank's waits, rank after rank."""
        return [w for rank in self.waits_s for w in rank]

    @property
    def fastest_ms(self) -> list[float]:
        """Per call, the shortest duration over the ranks: the last rank to arrive waits
        for nobody, its duration is the transfer's."""
        return [min(x) for x in zip(*self.durations_ms)]


@dataclass(frozen=True)
class WaitFit:
    """A Gamma fit of one wait distribution (piep.wait_fits): its parameters, the waits it
    saw (`n` positive of `n_total`) and where it was measured."""
    phase: str
    mode: str
    size_bytes: int
    fit: Mapping[str, Any]       # piep.stats.gamma's fit (shape, scale, n, n_total, ...)
    doc: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, doc: Any, where: str = "wait fit") -> "WaitFit":
        _fields(doc, where, ("phase", "mode", "size_bytes", "fit"), "a wait fit")
        return cls(doc["phase"], doc["mode"], doc["size_bytes"], doc["fit"], doc)

    @property
    def share(self) -> float:
        """The share of calls that waited at all (only the earlier rank of a pair waits)."""
        return self.fit["n"] / max(self.fit["n_total"], 1)


@dataclass(frozen=True)
class KernelCensus:
    """One `generate()` call of an engine profiled kernel by kernel (python -m
    piep.sampling.census): its decode step's kernels per layer and outside the layers,
    by name (counts, and durations where timed), and its prefill's."""
    model: str
    engine: str
    batch: int
    prompt_len: int
    gen_len: int
    decode_step: Mapping[str, Any]
    prefill: Mapping[str, Any]
    doc: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, doc: Any, where: str = "census") -> "KernelCensus":
        _fields(doc, where, ("model", "engine", "batch", "prompt_len", "gen_len",
                             "decode_step", "prefill"), "a kernel census")
        return cls(doc["model"], doc["engine"], doc["batch"], doc["prompt_len"],
                   doc["gen_len"], doc["decode_step"], doc["prefill"], doc)


# the typed reading of each schema the lab writes (others are checked by schema alone)
TYPED = {"piep.measurement": Measurement.from_json,
         "piep.serving_measurement": ServingReplay.from_json,
         "piep.module_sample": ModuleSample.from_json,
         "piep.host_overhead": HostOverhead.from_json,
         "piep.collective_sample": CollectiveSample.from_json,
         "piep.wait_samples": WaitSample.from_json,
         "piep.kernel_census": KernelCensus.from_json}


def append_record(path, doc: Mapping[str, Any]) -> None:
    """Append one record of the lab to a JSONL file, after reading it back the way the
    fits will (its schema, then its type): a record they could not read is refused in one
    line before it is written, not found at fitting time."""
    from piep.core.artifacts import append_jsonl, check_document
    where = f"record for {path}"
    check_document(dict(doc), where)
    if doc["schema"] in TYPED:
        TYPED[doc["schema"]](doc, where)
    append_jsonl(path, dict(doc))


# what a run of another harness (tp=2 generate() calls, ...) states
FOREIGN_NEEDED = ("model", "engine", "tp", "batch", "prompt_len", "gen_len", "energy_j", "time_s")


@dataclass(frozen=True)
class ForeignRun:
    """One measured `generate()` call of another harness, loaded as it is (a model, a
    built-in engine, a layout, a workload, energy and time of the whole call; no prefill
    split, no host probe): the repeat of median energy, and its repeats."""
    model: str
    engine: str                 # a built-in engine of piep
    tp: int
    batch: int
    prompt_len: int
    gen_len: int
    energy_j: float
    time_s: float
    repeats: tuple[tuple[float, float], ...]  # (energy_j, time_s) of each repeat, in order
    source: str                 # file:line

    @property
    def label(self) -> str:
        """`engine tpN bB`, how reports name the run."""
        return f"{self.engine} tp{self.tp} b{self.batch}"

    def spread(self, key: str = "energy_j") -> float:
        """(max - min) / median of the repeats (0 without repeats)."""
        values = sorted(e if key == "energy_j" else t for e, t in self.repeats)
        return (values[-1] - values[0]) / values[len(values) // 2] if values else 0.0


def engine_of(rec: dict[str, Any]) -> str | None:
    """The built-in engine a record names: piep's name, or transformers and its mode."""
    name = rec.get("engine")
    if name in ENGINES:
        return name
    if name == "transformers":  # generate() by its cache: static (compiled) or dynamic
        mode = str(rec.get("mode", "")).lower()
        generate = names(runs_generate=True)
        for key, words in (("compiled_decode", ("static",)),
                           ("dynamic_cache", ("eager", "dynamic"))):
            if any(w in mode for w in words):
                return next(e for e in generate if getattr(ENGINES[e], key))
    return None


def foreign_run(rec: Any, where: str) -> ForeignRun:
    """One record, checked: one line names what is missing or wrong."""
    if not isinstance(rec, dict):
        raise ConfigError(f"{where}: a run is a JSON object")
    missing = [k for k in FOREIGN_NEEDED if rec.get(k) is None]
    if missing:
        raise ConfigError(f"{where}: lacks {', '.join(missing)} (a run needs "
                          f"{', '.join(FOREIGN_NEEDED)})")
    engine = engine_of(rec)
    if engine is None or ENGINES[engine].kind == "stream":  # (a server's runs are its own records)
        raise ConfigError(f"{where}: engine {rec['engine']!r} (mode {rec.get('mode')!r}) is "
                          f"none of piep's batch engines ({', '.join(names(kind='batch'))}; "
                          f"or transformers with an eager or static-cache mode)")
    try:
        ints = {k: int(rec[k]) for k in ("tp", "batch", "prompt_len", "gen_len")}
        energy, time_s = float(rec["energy_j"]), float(rec["time_s"])
        repeats = tuple((float(r["energy_j"]), float(r["time_s"]))
                        for r in rec.get("repeats_in_order") or ())
    except (TypeError, ValueError, KeyError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if min(ints.values()) < 1 or not (energy > 0 and time_s > 0):
        raise ConfigError(f"{where}: tp, batch, prompt_len, gen_len must be >= 1 and "
                          f"energy_j, time_s > 0")
    return ForeignRun(model=str(rec["model"]), engine=engine, energy_j=energy, time_s=time_s,
                      repeats=repeats, source=where, **ints)


def is_foreign(path: str | Path) -> bool:
    """The file's first record is not one of piep's (it has no `schema`)."""
    from piep.core.artifacts import iter_jsonl
    from piep.core.errors import ArtifactError
    try:
        for _, first in iter_jsonl(path):
            return isinstance(first, Mapping) and "schema" not in first
    except ArtifactError:  # not JSON lines: read as piep's, which says what is wrong
        return False
    return False


def load_foreign(path: str | Path) -> list[ForeignRun]:
    """Every run of a JSONL file of another harness (one line per run)."""
    from piep.core.artifacts import iter_jsonl
    runs = [foreign_run(rec, f"{path}:{i}") for i, rec in iter_jsonl(path)]
    if not runs:
        raise ConfigError(f"{path}: no runs")
    return runs
