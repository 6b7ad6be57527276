"""The launch probe and the launch-gap row time the same tiny kernel one way
(`piep.sampling.runner.launch_time_s`): the host's issue time per launch, or the time until
the device has run them too. Timed on a virtual clock (tests/_virtual_clock.py): each torch
call costs a fixed time, whatever the machine's load."""

import pytest

pytestmark = pytest.mark.gloo


def test_a_launch_costs_the_time_of_its_call():
    torch = pytest.importorskip("torch")
    from _virtual_clock import WorkClock

    from piep.sampling.runner import launch_time_s
    x = torch.zeros(4)
    with WorkClock(op_s=1e-4, read_s=0.0).running():
        issued = launch_time_s(x, 200, 10, "cpu", drained=False)
        drained = launch_time_s(x, 200, 10, "cpu", drained=True)
    # the issue time is the calls'; drained, the wait for the device is counted too
    assert issued == pytest.approx(1e-4) and 1e-4 < drained <= 1.01e-4
    assert float(x[0]) == 420  # every launch ran: 2 x (10 + 200)
