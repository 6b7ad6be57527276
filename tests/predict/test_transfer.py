"""`--allow-uncalibrated`: spec-sheet transfer for a GPU without calibration."""

import pytest

from piep import api
from piep.cli import main
from piep.core.errors import ConfigError
from piep.core.gpus import load_gpu, transfer_gpu

pytestmark = pytest.mark.replay


def test_transfer_scales_the_reference_profile_by_spec_ratios():
    h200 = load_gpu("h200")
    h100, r = transfer_gpu("h100")
    assert h100.bf16_flops == pytest.approx(h200.bf16_flops)  # same Hopper compute
    assert h100.hbm_bytes_per_s == pytest.approx(h200.hbm_bytes_per_s * 3.35 / 4.8)
    a100, r = transfer_gpu("a100")
    assert a100.max_power_w == 400 and r["power"] == pytest.approx(400 / 700)
    assert a100.idle_power_w == pytest.approx(h200.idle_power_w * 400 / 700)


def test_uncalibrated_gpu_is_refused_unless_allowed(capsys):
    with pytest.raises(ConfigError, match="allow-uncalibrated"):
        api.predict("llama-2-7b", gpu="h100")
    assert main(["predict", "--model", "llama-2-7b", "--gpu", "h100"]) != 0
    assert "--allow-uncalibrated" in capsys.readouterr().err


def test_transfer_prediction_is_flagged_wide_and_physically_ordered():
    ref = api.predict("llama-2-7b", batch=8)
    h100 = api.predict("llama-2-7b", gpu="h100", batch=8, allow_uncalibrated=True)
    a100 = api.predict("llama-2-7b", gpu="a100", batch=8, allow_uncalibrated=True)
    assert h100["flags"][0] == "uncalibrated_gpu" and "spec-sheet" in h100["predictor"]
    lo, hi = h100["interval"]["energy_j"]
    assert lo == pytest.approx(0.5 * h100["energy_j"]) and hi == pytest.approx(2 * h100["energy_j"])
    # decode is memory bound: less HBM bandwidth, slower decode
    assert ref["tpot_s"]["p50"] < h100["tpot_s"]["p50"] < a100["tpot_s"]["p50"]
    assert h100["transfer"]["reference"] == "h200"
    with pytest.raises(ConfigError, match="spec sheet"):
        api.predict("llama-2-7b", gpu="tpu-v5", allow_uncalibrated=True)


def test_power_above_idle_follows_the_resource_that_bounds_each_kernel():
    """A memory-bound kernel keeps the energy above idle it drew on the reference (its
    power x the reference's time over the target's); a compute-bound one scales with TDP;
    collectives and idle with TDP."""
    from dataclasses import dataclass

    import numpy as np

    from piep.predict.pricing import Prices
    from piep.predict.transfer import TransferredModel

    h100, ratios = transfer_gpu("h100")
    ratios = {**ratios, "power": 0.8}  # a TDP unlike the reference's, to tell them apart
    n = 3

    def prices(time_s):
        return Prices(time_s=np.asarray(time_s), power_w=np.full(n, 400.0),
                      gap_s=np.zeros(n), wait_s=np.zeros(n), out_of_range=np.zeros(n, bool),
                      alpha=np.ones(n), segment_alpha=np.ones(1), idle_w=100.0, wait_w=120.0)

    @dataclass
    class Model:
        gpu: object
        fixed: Prices

        def price(self, table):
            return self.fixed

    @dataclass
    class Table:
        q: dict
        is_comm: np.ndarray

        def __len__(self):
            return n

    # a GEMV reading 1 GB (memory-bound), a GEMM of 1e15 flops (compute-bound), a collective
    table = Table({"bytes_read": np.array([1e9, 1e6, 0.0]), "bytes_written": np.zeros(n),
                   "flops": np.array([1e3, 1e15, 0.0])}, np.array([False, False, True]))
    target, reference = Model(h100, prices([2.0, 1.0, 1.0])), Model(None, prices([1.0] * n))
    p = TransferredModel(target, ratios, "h200", source=reference).price(table)
    assert p.idle_w == pytest.approx(80.0)
    # the GEMV takes twice as long: half the power above idle, the same energy
    assert p.power_w[0] == pytest.approx(80.0 + 300.0 / 2, rel=1e-3)
    assert p.power_w[1] == pytest.approx(400.0 * 0.8, rel=1e-3)
    assert p.power_w[2] == pytest.approx(400.0 * 0.8)
