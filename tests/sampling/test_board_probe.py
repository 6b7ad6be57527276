"""Boards of one kind draw different power on the same work: every engine run records its
board's probe (`piep env --board-probe` measures the same on a user's GPU)."""

import pytest

from piep.cli import main
from piep.core.records import Measurement

pytestmark = pytest.mark.fake_device


def test_a_records_board_probe_is_the_mean_of_its_gpus():
    run = {"model": "llama-2-7b", "tp": 2, "batch": 1, "prompt_len": 8, "gen_len": 8,
           "mode": "graph", "time_s": 1.0, "energy_j": 100.0}
    probe = {"gpu_probe": {"decode_gemm_power_w": 550.0}}

    def board(per_gpu):
        return Measurement.from_json({**run, **per_gpu}).board_probe_w
    assert board({"per_gpu": [probe, {"gpu_probe": {"decode_gemm_power_w": 570.0}}]}) \
        == pytest.approx(560.0)
    assert board({"per_gpu": [probe, {"gpu_probe": None}]}) is None
    assert board({}) is None


def test_env_measures_the_board_probe_on_a_fake_board():
    pytest.importorskip("torch")
    from _virtual_clock import WorkClock

    from piep.commands.common import board_probe_here
    from piep.device.fake import FakeDevice
    from piep.sampling import hf
    clock = WorkClock()
    hf._gpu_probes.clear()
    with clock.running():
        probe = board_probe_here(fake=FakeDevice(lambda t: 540.0, clock, tick_s=0.05,
                                                 phase_s=0.01, step_s=0.001),
                                 window_s=0.15, copy_bytes=1 << 20, gemm=(2, 64, 128))
    hf._gpu_probes.clear()
    assert probe["decode_gemm_power_w"] == pytest.approx(540.0, rel=0.01)
    assert probe["copy_power_w"] == pytest.approx(540.0, rel=0.01)


def test_env_board_probe_without_a_gpu_is_one_line(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the probe runs")
    assert main(["env", "--board-probe"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CUDA GPU" in err
