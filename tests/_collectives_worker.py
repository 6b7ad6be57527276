"""torchrun worker: the collectives sampler on CPU (gloo) with a fake energy counter, on
virtual host time that advances with the work (`_virtual_clock`)."""

import sys
from pathlib import Path

from _virtual_clock import WorkClock

from piep.device.fake import FakeDevice
from piep.sampling.calibrate import run_collectives

if __name__ == "__main__":
    import faulthandler
    faulthandler.dump_traceback_later(25, exit=True)
    clock = WorkClock(op_s=2e-3)  # a collective of 2..8 gloo processes on a small CPU
    fake = FakeDevice(lambda t: 150.0, clock, tick_s=0.02, phase_s=0.005)
    with clock.running():
        run_collectives(Path(sys.argv[1]), sizes=(8 * 1024, 64 * 1024), min_window_s=0.05,
                        fake=fake)
