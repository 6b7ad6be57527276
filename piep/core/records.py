"""Run records, typed once at the boundary: what a fit reads of a measured run.

A `Measurement` is one end-to-end run (the reference runner's, or an engine's `generate()`
call), a `ServingReplay` one request trace replayed by a serving engine. Each is read from
its JSON record by `from_json`, which names every missing or malformed field in one line,
and gives back the record as written by `to_json`. The fits (piep.fit) read their fields,
never the record's keys. The lab's samples are `piep.core.samples`, runs of another
harness `piep.core.foreign`, the writer's check `piep.core.writer`.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from piep.core.config import (FAMILY_FIELDS, ModelSpec, Parallel, Workload, code_facts,
                              size_problem)
from piep.core.engines import engine as engine_record
from piep.core.errors import ConfigError, require_fields
from piep.core.gpus import GPU
from piep.core.layout import Deployment, validate

HOST_PROBE = "launch_add_s"  # the probe host time scales with (time per tiny launch)
BOARD_PROBE = "decode_gemm_power_w"  # a board's probe: a decode-like GEMM's power
REFERENCE = "piep reference runner"  # the `engine` of the reference runner's records
# what names a configuration: repeats of a run, and a design's row, share its key
KEY_FIELDS = ("model", "tp", "pp", "dp", "batch", "prompt_len", "gen_len", "mode")


def run_key(cfg: Mapping[str, Any]) -> str:
    """model|tp|pp|dp|batch|prompt|gen|mode of a configuration (a record, a design row),
    and |epN where its experts are sharded over N ranks."""
    ep = cfg.get("ep", 1)
    return "|".join(str(cfg[k]) for k in KEY_FIELDS) + (f"|ep{ep}" if ep != 1 else "")


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
                     quantization=quantization, **code_facts(model_type, dict(facts)),
                     **dict(moe))


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
    require_fields(doc, where, strs + ints + nums, states=True)
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
            parallel = Parallel(tp=doc["tp"], pp=doc.get("pp", 1), dp=doc.get("dp", 1),
                                ep=doc.get("ep", 1))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        mode = doc.get("mode") or mode
        key = doc.get("key") or run_key({**doc, "tp": parallel.tp, "pp": parallel.pp,
                                         "dp": parallel.dp, "ep": parallel.ep, "mode": mode})
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
