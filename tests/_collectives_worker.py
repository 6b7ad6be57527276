"""torchrun worker: the collectives sampler on CPU (gloo) with a fake energy counter."""

import sys
import time
from pathlib import Path

from piep.device.fake import FakeDevice
from piep.sampling.calibrate import run_collectives


class RealClock:  # the fake counter follows wall time, so windows have real durations
    poll_cost_s = 0.0

    def __init__(self):
        self.t0 = time.perf_counter()

    def __call__(self):
        return time.perf_counter() - self.t0

    def sleep(self, s):
        time.sleep(max(s, 0))


if __name__ == "__main__":
    import faulthandler
    faulthandler.dump_traceback_later(25, exit=True)
    fake = FakeDevice(lambda t: 150.0, RealClock(), tick_s=0.02, phase_s=0.005)
    run_collectives(Path(sys.argv[1]), sizes=(8 * 1024, 64 * 1024), min_window_s=0.05,
                    fake=fake)
