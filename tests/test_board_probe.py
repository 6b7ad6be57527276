"""Boards of one kind draw different power on the same work: `--board-probe-w` prices an
engine's energy for a board by its decode-GEMM probe power over the profile's board."""

import json

import numpy as np
import pytest

from piep import api
from piep.cli import main
from piep.errors import ConfigError
from piep.predict.engines import board_reference_w, load_profile
from piep.predict.host import HostTerms
from piep.predict.train import board_probe_of


def test_the_board_factor_is_the_probe_over_the_reference():
    assert np.array_equal(HostTerms().board_factor(np.array([500.0, np.nan])), [1.0, 1.0])
    terms = HostTerms(board_probe_ref_w=600.0)
    assert terms.board_factor(np.array([540.0, np.nan, 600.0])) == pytest.approx([0.9, 1.0, 1.0])


def test_a_records_board_probe_is_the_mean_of_its_gpus():
    probe = {"gpu_probe": {"decode_gemm_power_w": 550.0}}
    assert board_probe_of({"per_gpu": [probe, {"gpu_probe": {"decode_gemm_power_w": 570.0}}]}) \
        == pytest.approx(560.0)
    assert board_probe_of({"per_gpu": [probe, {"gpu_probe": None}]}) is None
    assert board_probe_of({}) is None


def test_a_board_probe_scales_energy_not_time():
    """Energy scales by the probe over the profile's board (the whole window: kernels,
    launch gaps); time stays; no probe = the profile's board; the document says which."""
    ref = load_profile("h200", "hf-eager").host.board_probe_ref_w
    assert ref and 450 < ref < 700
    kw = dict(engine="hf-eager", batch=4, prompt_len=256, gen_len=64)
    plain = api.predict("llama-3-8b", **kw)
    same = api.predict("llama-3-8b", board_probe_w=ref, **kw)
    low = api.predict("llama-3-8b", board_probe_w=0.9 * ref, **kw)
    assert same["energy_j"] == pytest.approx(plain["energy_j"], rel=1e-9)
    assert low["energy_j"] == pytest.approx(0.9 * plain["energy_j"], rel=1e-6)
    assert low["time_s"] == pytest.approx(plain["time_s"], rel=1e-9)
    assert low["engine_ref"]["board_factor"] == pytest.approx(0.9)
    assert "board_probe_w" not in plain["engine_ref"]
    for phase in ("prefill", "decode"):
        assert low[phase]["energy_j"] == pytest.approx(0.9 * plain[phase]["energy_j"], rel=1e-6)


def test_board_probe_input_is_checked_at_the_edge(capsys):
    for engine in (None, "piep-eager", "hf-cb"):
        with pytest.raises(ConfigError, match="engines priced per board"):
            api.scenario("llama-3-8b", engine=engine, board_probe_w=550.0)
    with pytest.raises(ConfigError, match="board probe 5000 W is outside"):
        api.scenario("llama-3-8b", engine="hf-static", board_probe_w=5000.0)
    assert main(["predict", "--model", "llama-3-8b", "--board-probe-w", "550"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["predict", "--model", "llama-3-8b", "--engine", "hf-static", "--json",
                 "--board-probe-w", "550"]) == 0
    assert json.loads(capsys.readouterr().out)["engine_ref"]["board_probe_w"] == 550.0
    assert main(["sweep", "--model", "llama-3-8b", "--batch", "1", "--board-probe-w",
                 "550"]) == 2
    assert "priced per board" in capsys.readouterr().err
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():  # the probe needs a GPU: one line, no traceback
        assert main(["env", "--board-probe"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "CUDA GPU" in err


def test_the_reference_board_makes_the_probed_runs_unbiased():
    """The profile's board: the median over the runs with a board probe of probe x
    predicted / measured energy, so half the probed runs come out above, half below."""
    from piep.predict.engines import _cases, engine_records
    from piep.predict.learned import load_learned
    from piep.predict.train import rows_of
    base = load_learned("h200")
    prof = load_profile("h200", "hf-static")
    model = prof.apply(base)
    cases = _cases(engine_records("h200", "hf-static"), base.gpu, "hf-static",
                   on_their_hosts=True)
    model.host.board_probe_ref_w = None
    ref = board_reference_w(model, cases)
    assert ref == pytest.approx(prof.host.board_probe_ref_w, rel=1e-6)
    probed = [c for c in cases if board_probe_of(c.rec)]
    model.host.board_probe_ref_w = ref
    rows = rows_of(probed, model)
    above = sum(r["pred_energy_j"] > r["energy_j"] for r in rows)
    assert abs(2 * above - len(rows)) <= 1


def test_env_measures_the_board_probe_on_a_fake_board():
    pytest.importorskip("torch")
    import time
    from piep.commands.common import board_probe_here
    from piep.device.fake import FakeDevice
    from piep.sampling import hf

    class Clock:
        t0 = time.perf_counter()
        poll_cost_s = 0.0

        def __call__(self):
            return time.perf_counter() - self.t0

        def sleep(self, s):
            time.sleep(max(s, 0))
    clock = Clock()
    hf._gpu_probes.clear()
    probe = board_probe_here(fake=FakeDevice(lambda t: 540.0, clock, tick_s=0.05, phase_s=0.01,
                                             step_s=0.001),
                             window_s=0.15, copy_bytes=1 << 20, gemm=(2, 64, 128))
    hf._gpu_probes.clear()
    assert probe["decode_gemm_power_w"] == pytest.approx(540.0, rel=0.1)
