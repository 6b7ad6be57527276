"""Host and in-situ terms of the reference runner, fitted on its end-to-end runs.

* Launch gaps: per kernel in graph replay; in eager code (prefill always, decode in eager
  mode) the host issues kernels at `host_launch_s` (prefill) or `eager_decode_launch_s`
  (an eager decode step) each, and the GPU idles while it waits for them: after each
  call where the host issues its kernels slower than they run (the reference runner's
  fit), or, with `queue_ahead`, only by the host's issue time of a whole segment beyond
  its kernels' time (the host fills the launch queue ahead of a GPU busy with long
  kernels; an engine's profile; measured on transformers' eager decode: per step the
  GPU's time or the host's, whichever is longer, not their per-kernel sum).
* In-situ kernel time: the isolated samples' time times a ratio per phase, and in decode
  a power law in the tokens of the step. A compiled step's fused pointwise kernels (one
  per pointwise leaf, no isolated sample) take a fixed in-situ time each plus their bytes
  at HBM bandwidth (`fused_kernel_s`, from an engine's kernel census).
* An engine's generation loop: host time per generated token outside the model.
* transformers' tensor-parallel path (`tp_plan="auto"`, tp > 1): host time per call of a
  sharded module (`tp_call_host_s`: the layout conversions and collectives its hooks add,
  DTensor dispatch; in eager code) and per compiled decode step (`tp_step_host_s`). Which
  modules it shards and the collectives it issues are structure (the model tree's
  all-reduce after each rowwise projection, the gathered logits; counted by
  `piep.sampling.tp_census`).
* The board power of the GPU in launch gaps, while busy-polling, and during collectives
  that were not sampled with their energy.
* How the board holds its power limit over a phase (`piep.predict.power`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from piep.predict.power import BoardLimit

TERMS = ("gap_graph_s", "host_launch_s", "eager_decode_launch_s", "launch_gap_w",
         "busy_wait_w", "comm_w", "time_scale", "decode_batch_exponent", "step_host_s",
         "request_host_s", "key_host_s", "call_host_s", "host_probe_ref_s", "host_probe_default_s",
         "queue_ahead",
         "fused_kernel_s", "burst_power_ratio", "burst_s", "power_stretch_exponent",
         "tp_call_host_s", "tp_step_host_s", "tp_gap_w")
KIND_SCALE = "kind:"  # time_scale keys per row kind


@dataclass
class HostTerms:
    gap_graph_s: float = 2e-6
    host_launch_s: float = 7e-6          # host time per kernel in eager prefill
    eager_decode_launch_s: float = 2e-5  # host time per kernel in an eager decode step
    launch_gap_w: float = 120.0   # board power in launch gaps (measured)
    busy_wait_w: float = 121.5    # board power busy-polling in a collective (measured)
    comm_w: float = 200.0         # board power during a collective transfer (assumed)
    # in-situ / isolated kernel time ratio per phase; an engine's profile may add one per
    # row kind on top ("kind:attention": its attention kernels run slower than sampled)
    time_scale: dict[str, float] = field(default_factory=lambda: {"prefill": 1.0,
                                                                  "decode": 1.0})
    decode_batch_exponent: float = 0.0
    # host time per generated token outside the model (an engine's generation loop:
    # logits processors, stop check, input update), GPU idle
    step_host_s: float = 0.0
    # a scheduler's host time per request of an iteration (continuous batching)
    request_host_s: float = 0.0
    # host time per cached key an iteration reads (continuous batching over SDPA: the
    # cache's read indices built as a Python list, one entry a key, then made a tensor)
    key_host_s: float = 0.0
    # host time once per engine call (a generate() call's setup: inputs, cache, mask,
    # stopping criteria), GPU idle, before its prefill
    call_host_s: float = 0.0
    # the launch probe of the host these terms were fitted for (an engine fitted per
    # host); a deployment on a host of another probe scales its host time by the ratio
    host_probe_ref_s: float | None = None
    # the launch probe of the host a deployment of unknown probe is predicted for (a
    # shipped profile: the typical host of the GPU's calibration machines; None: the
    # terms' own host)
    host_probe_default_s: float | None = None
    # the host issues a segment's kernels ahead of the GPU (see the module doc)
    queue_ahead: bool = False
    # a compiled step's fused pointwise kernel: in-situ time beyond its bytes at HBM
    # bandwidth (0: fused leaves are priced as the eager modules they replace)
    fused_kernel_s: float = 0.0
    # how the board holds its power limit over a phase (piep.predict.power.BoardLimit;
    # the defaults: no burst above the limit, energy kept)
    burst_power_ratio: float = 1.0
    burst_s: float = 0.5
    power_stretch_exponent: float = 1.0
    # transformers' tensor-parallel path at tp > 1 (see the module doc): host time per
    # sharded module call in eager code, and per decode step of a compiled step
    tp_call_host_s: float = 0.0
    tp_step_host_s: float = 0.0
    # board power in the launch gaps these add (the GPU waits on its host between short
    # kernels and collectives; None: launch_gap_w)
    tp_gap_w: float | None = None

    def term(self, name: str) -> float:
        """A term by its fitted name: a field, or `time_scale.KEY`'s entry."""
        field_, _, key = name.partition(".")
        value = getattr(self, field_)
        return float(value[key] if key else value)

    def set_term(self, name: str, value: float) -> None:
        """Set a term by its fitted name (`term`'s names)."""
        field_, _, key = name.partition(".")
        if key:
            getattr(self, field_)[key] = value
        else:
            setattr(self, field_, value)

    def board_limit(self) -> BoardLimit:
        """How these terms' board holds its power limit over a phase."""
        return BoardLimit(burst_ratio=self.burst_power_ratio, burst_s=self.burst_s,
                          stretch_exponent=self.power_stretch_exponent)

    def host_factor(self, probe_s: np.ndarray) -> np.ndarray:
        """Host time relative to these terms' host, per deployment (`probe_s`: each
        deployment's launch probe, NaN where unknown: the default host, else the terms'
        own); all ones for terms without a host of reference."""
        if not self.host_probe_ref_s:
            return np.ones(len(probe_s))
        probe_s = np.where(np.isnan(probe_s), self.host_probe_default_s or self.host_probe_ref_s,
                           probe_s)
        return probe_s / self.host_probe_ref_s

    def kernel_time_s(self, isolated_s: np.ndarray, decode: np.ndarray,
                      tokens: np.ndarray, kind_id: np.ndarray | None = None) -> np.ndarray:
        """In-situ time of one call of compute kernels from their isolated time (`kind_id`:
        the rows' kinds, for the scales per kind)."""
        t = isolated_s * np.where(decode, self.time_scale.get("decode", 1.0),
                                  self.time_scale.get("prefill", 1.0))
        per_kind = {k[len(KIND_SCALE):]: v for k, v in self.time_scale.items()
                    if k.startswith(KIND_SCALE)}
        if per_kind and kind_id is not None:
            from piep.predict.table import KIND_ID
            scale = np.ones(len(KIND_ID))
            for kind, v in per_kind.items():
                scale[KIND_ID[kind]] = v
            t = t * scale[kind_id]
        if self.decode_batch_exponent:
            # in-situ vs isolated kernel time drifts with the tokens of a decode step
            t = np.where(decode, t * (np.maximum(tokens, 1) / 16.0)
                         ** self.decode_batch_exponent, t)
        return t

    def fused_time_s(self, bytes_moved: np.ndarray, hbm_bytes_per_s: float) -> np.ndarray:
        """In-situ time of one fused pointwise kernel of a compiled step moving
        `bytes_moved`."""
        return self.fused_kernel_s + bytes_moved / hbm_bytes_per_s

    def gap_s(self, launches: np.ndarray, time_s: np.ndarray, decode: np.ndarray,
              eager: np.ndarray, host_factor: np.ndarray | float = 1.0, *,
              count: np.ndarray | None = None, group: np.ndarray | None = None,
              sliding: np.ndarray | None = None,
              sharded: np.ndarray | None = None) -> np.ndarray:
        """Launch gap after one call: in eager code the GPU idles while the host issues
        the call's kernels beyond its run time (`host_factor`: that host's time relative
        to the calibration host's); in graph replay a fixed gap per kernel. With
        `queue_ahead`, the eager gap of each `group` of rows (a segment's stage; `count`
        calls per row) is the host's issue time beyond the group's busy time, shared
        among its rows by their issue time; `sliding`, the share of a row's calls made in
        steps past a sliding window: those steps are a group of their own (the GPU
        busier there than the host, the host busier before); `sharded`, per row the calls
        of modules the tensor-parallel path hooks (each adds `tp_call_host_s` to its issue
        time)."""
        issue = launches * np.where(decode, self.eager_decode_launch_s,
                                    self.host_launch_s) * host_factor
        if sharded is not None and self.tp_call_host_s:
            issue = issue + sharded * self.tp_call_host_s * host_factor
        graph = launches * self.gap_graph_s
        if not (self.queue_ahead and group is not None):
            return np.where(eager, np.maximum(0.0, issue - time_s), graph)
        issue = np.where(eager, issue, 0.0)
        n = 2 * (int(group.max()) + 1) if len(group) else 0
        past = np.zeros(len(group)) if sliding is None else sliding
        # each row's calls split between its group's steps before and past the window
        sub = np.concatenate([2 * group, 2 * group + 1])
        weight = np.concatenate([1.0 - past, past]) * np.tile(count, 2)
        host = np.bincount(sub, weights=weight * np.tile(issue, 2), minlength=n)
        busy = np.bincount(sub, weights=weight * np.tile(time_s, 2), minlength=n)
        share = np.divide(np.maximum(0.0, host - busy), host, out=np.zeros(n),
                          where=host > 0)
        return np.where(eager, issue * ((1.0 - past) * share[2 * group]
                                        + past * share[2 * group + 1]), graph)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in TERMS}
