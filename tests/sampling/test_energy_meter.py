import pytest

from piep.device.energy import TickMeter
from piep.device.fake import FakeClock, FakeDevice
from piep.core.errors import DeviceError

pytestmark = pytest.mark.fake_device

IDLE_W, BUSY_W = 120.0, 450.0


class Scenario:
    """A fake GPU idle at 120 W that draws 450 W while `busy_until` is in the future."""

    def __init__(self):
        self.clock = FakeClock(start=10.0, poll_cost_s=0.004)
        self.busy = (0.0, 0.0)
        self.dev = FakeDevice(self.power, self.clock, tick_s=0.1, phase_s=0.0371, step_s=0.0005)
        self.meter = TickMeter(self.dev, clock=self.clock, sleep=self.clock.sleep)

    def power(self, t):
        a, b = self.busy
        return BUSY_W if a <= t < b else IDLE_W

    def work(self, seconds):
        def run():
            self.busy = (self.clock(), self.clock() + seconds)
            self.clock.sleep(seconds)
        return run


def test_idle_power_from_ticks():
    s = Scenario()
    assert s.meter.idle_power_w(1.0) == pytest.approx(IDLE_W, rel=0.01)


@pytest.mark.parametrize("seconds", [0.35, 0.8, 2.5])
def test_window_recovers_work_energy(seconds):
    s = Scenario()
    idle = s.meter.idle_power_w(1.0)
    w = s.meter.measure(s.work(seconds), idle_power_w=idle)
    truth = BUSY_W * seconds
    assert w.duration_s == pytest.approx(seconds)
    assert abs(w.energy_j - truth) <= w.bound_j + 0.5
    # the raw delta alone is wrong by the alignment waits
    assert w.raw_delta_j > truth + 0.9 * idle * (w.pre_wait_s + w.post_wait_s)
    assert not w.short


def test_short_work_is_flagged():
    s = Scenario()
    w = s.meter.measure(s.work(0.03), idle_power_w=IDLE_W)
    assert w.short


def test_barrier_wait_is_inside_the_correction():
    s = Scenario()
    w = s.meter.measure(s.work(0.5), idle_power_w=IDLE_W, before=lambda: s.clock.sleep(0.07))
    assert w.pre_wait_s >= 0.07
    assert abs(w.energy_j - BUSY_W * 0.5) <= w.bound_j + 0.5


def test_stuck_counter_is_a_device_error():
    clock = FakeClock()

    class Stuck:
        def energy_mj(self):
            clock.sleep(0.004)
            return 5

    with pytest.raises(DeviceError, match="did not change"):
        TickMeter(Stuck(), clock=clock, sleep=clock.sleep).wait_tick()
