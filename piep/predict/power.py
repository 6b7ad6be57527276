"""How a GPU holds its board power limit over a phase.

Kernels priced from isolated samples may add up to more power than the board's limit
(a long prefill's GEMMs, each sampled at its own clock). The board's controller then
lowers the clock: the phase takes longer and its mean power is held down. Measured on
the H200 (prefills of the reference runner and of transformers' engines): a phase of
under ~0.5 s averages up to ~1.07x the 700 W limit (the controller lags its limit over
short windows), a phase of 1 s or more stays at the limit, and the clock a phase settles
at stretches its time by a power of its kernels' excess over the burst power. The three
numbers are fitted on the reference runner's end-to-end runs (`piep.fit.predictor`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# a phase at least this long averages at most the board's limit (measured: prefills of
# 1 s or more stay within 713 W on a 700 W board)
SUSTAINED_S = 1.0


@dataclass(frozen=True, kw_only=True)
class BoardLimit:
    """A phase whose kernels would draw `power_w` > `burst_ratio` x the board limit runs
    (power_w / burst power) ** `stretch_exponent` times longer; its mean power is then at
    most the burst power up to `burst_s`, the limit from SUSTAINED_S on, and in between
    linear in log time. The defaults: no burst, the time stretched until the phase's
    energy fits under the limit (energy kept)."""
    burst_ratio: float = 1.0
    burst_s: float = 0.5
    stretch_exponent: float = 1.0

    def __post_init__(self):
        if not self.burst_ratio >= 1.0:
            raise ValueError(f"burst_ratio={self.burst_ratio} must be >= 1")
        if not 0.0 < self.burst_s < SUSTAINED_S:
            raise ValueError(f"burst_s={self.burst_s} must lie in (0, {SUSTAINED_S})")
        if not self.stretch_exponent >= 0.0:
            raise ValueError(f"stretch_exponent={self.stretch_exponent} must be >= 0")

    def stretch(self, power_w: np.ndarray, limit_w: float) -> np.ndarray:
        """The factor a phase's time grows by, from its kernels' mean power."""
        excess = np.maximum(power_w / (self.burst_ratio * limit_w), 1.0)
        return excess ** self.stretch_exponent

    def ceiling_w(self, time_s: np.ndarray, limit_w: float) -> np.ndarray:
        """The most a phase lasting `time_s` averages."""
        t = np.maximum(time_s, 1e-12)
        burst = np.clip(np.log(t) / np.log(self.burst_s), 0.0, 1.0)  # 1 short, 0 sustained
        return limit_w * (1.0 + (self.burst_ratio - 1.0) * burst)

    def hold(self, time_s: np.ndarray, energy_j: np.ndarray,
             limit_w: float) -> tuple[np.ndarray, np.ndarray]:
        """Phase times and energy factors under the limit: `time_s` (phases,) and
        `energy_j` (phases, GPUs of a phase); the phase's time follows its busiest GPU,
        each GPU's energy is capped at the ceiling over the stretched time."""
        peak_w = np.where(time_s > 0, energy_j.max(1) / np.maximum(time_s, 1e-12), 0.0)
        held_s = time_s * self.stretch(peak_w, limit_w)
        cap_j = (self.ceiling_w(held_s, limit_w) * held_s)[:, None]
        factor = np.where(energy_j > cap_j, cap_j / np.maximum(energy_j, 1e-300), 1.0)
        return held_s, factor
