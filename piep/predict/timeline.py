"""The timeline: priced leaf rows reduced to segment times and bubbles.

Within a segment (a phase of a batch, or a scheduler iteration) the pipeline stages run
one after another (no micro-batching): the segment lasts the busy time (kernels,
collectives, waits) of every stage plus the launch gaps of every stage, or of one stage
where the engine hides the others' gaps behind the stage before (eager decode over
pipeline stages). Every stage's GPUs busy-poll while another stage works: the bubble of
a stage is the segment's time minus its own busy and gap time.

One function, used by predictions, sweeps, training, the frequency model and the
planner; all of it over arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Timeline:
    """Segment times and each stage's busy, gap and bubble time (one GPU per stage)."""
    time_s: np.ndarray        # (segments,)
    stage_busy_s: np.ndarray  # (segments, stages): per GPU of the stage
    stage_gap_s: np.ndarray
    bubble_s: np.ndarray      # (segments, stages); 0 beyond a segment's pipeline depth

    @property
    def bubble_sum_s(self) -> np.ndarray:
        """Bubbles of all stages of a segment (seconds x one GPU per stage)."""
        return self.bubble_s.sum(1)


def stage_keys(segment: np.ndarray, stage: np.ndarray, pp: np.ndarray) -> tuple[np.ndarray, int]:
    """Per row the index of its (segment, stage) among segments x `ns` stages, and `ns`
    (the deepest pipeline of `pp`)."""
    ns = int(pp.max()) if len(pp) else 1
    return segment * ns + stage, ns


def lay_out(n_segments: int, segment: np.ndarray, stage: np.ndarray, busy_s: np.ndarray,
            gap_s: np.ndarray, *, hide_gaps: np.ndarray, pp: np.ndarray) -> Timeline:
    """Rows (segment, stage, busy seconds, gap seconds) -> segment times and bubbles.
    `hide_gaps` and `pp` are per segment."""
    key, ns = stage_keys(segment, stage, pp)
    size = n_segments * ns
    busy = np.bincount(key, weights=busy_s, minlength=size).reshape(n_segments, ns)
    gaps = np.bincount(key, weights=gap_s, minlength=size).reshape(n_segments, ns)
    time_s = busy.sum(1) + np.where(hide_gaps, gaps.max(1), gaps.sum(1))
    # one stage has no bubble (not even the rounding of time - busy - gaps)
    live = (np.arange(ns)[None, :] < pp[:, None]) & (pp[:, None] > 1)
    bubble = np.where(live, np.maximum(time_s[:, None] - busy - gaps, 0.0), 0.0)
    return Timeline(time_s, busy, gaps, bubble)
