"""The lab's samples, typed once at the boundary: a node kind in isolation, a host probe,
a collective in isolation, waiting times and their fits, a kernel census. Each reads its
JSON record by `from_json`, naming in one line what is missing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from piep.core.errors import require_fields


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
        require_fields(doc, where, ("kind", "mode", "time_s", "shape_fields"),
                       "a module sample")
        require_fields(doc, where, tuple(doc["shape_fields"]), "a module sample")
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
        require_fields(doc, file or "host record", ("launch_gap_power_w",),
                       "a host overhead record")
        return cls(doc["launch_gap_power_w"], doc.get("launch_s"), file, doc.get("gpu_uuid"),
                   doc)


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
        require_fields(doc, where, ("kind", "mode", "size_bytes", "time_s"), "a collective sample")
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
        require_fields(doc, where, ("kind", "size_bytes"), "a probed collective")
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
        require_fields(doc, where, WAIT_KEYS + ("waits_s", "durations_ms"), "a wait sample")
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
        require_fields(doc, where, ("phase", "mode", "size_bytes", "fit"), "a wait fit")
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
        require_fields(doc, where, ("model", "engine", "batch", "prompt_len", "gen_len",
                             "decode_step", "prefill"), "a kernel census")
        return cls(doc["model"], doc["engine"], doc["batch"], doc["prompt_len"],
                   doc["gen_len"], doc["decode_step"], doc["prefill"], doc)


# the module sampler's op per kind: bumped when an op changes the kernels it runs
# (2: attention and rope reproduce the runner's in-situ kernel sequence; 3: eager-mode
# ops are timed as captured kernels, without the sampler's own host launch gaps)
# (kv_expand 2: a graph-mode decode call is compiled, as in hf-static's decode step)
SAMPLER_OP_VERSION = {"attention": 2, "rope": 2, "kv_expand": 2,
                      # (the experts' weights in transformers' layout, passed transposed)
                      "experts_gate_up": 2, "experts_down": 2}
EAGER_TIMING_VERSION = 3


def sampler_op_version(kind: str, mode: str) -> int:
    """The op version the module sampler runs for a kind in a mode (a sample of an older
    op is of other kernels)."""
    if mode == "eager":
        return EAGER_TIMING_VERSION
    return SAMPLER_OP_VERSION.get(kind, 1)
