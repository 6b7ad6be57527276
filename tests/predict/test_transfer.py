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
