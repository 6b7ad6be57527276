"""The launch probe and the launch-gap row time the same tiny kernel one way
(`piep.sampling.runner.launch_time_s`): the host's issue time per launch, or the time until
the device has run them too."""

import math

import pytest

pytestmark = pytest.mark.gloo


def test_a_launch_takes_a_positive_finite_time_on_the_cpu():
    torch = pytest.importorskip("torch")
    from piep.sampling.runner import launch_time_s
    x = torch.zeros(4)
    issued = launch_time_s(x, 200, 10, "cpu", drained=False)
    drained = launch_time_s(x, 200, 10, "cpu", drained=True)
    assert 0 < issued < 1e-2 and 0 < drained < 1e-2 and math.isfinite(issued)
    assert float(x[0]) == 420  # every launch ran: 2 x (10 + 200)
