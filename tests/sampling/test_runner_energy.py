"""The runner's energy plumbing on one CPU process with a fake NVML counter, on virtual host
time that advances with the work (`_virtual_clock`)."""

import pytest

pytestmark = pytest.mark.fake_device

torch = pytest.importorskip("torch")

from piep.core.config import ModelSpec, Parallel, Workload  # noqa: E402
from piep.device.fake import FakeDevice  # noqa: E402
from piep.sampling.runner import Dist, Hygiene, RankMeter, measure_config  # noqa: E402
from _virtual_clock import WorkClock  # noqa: E402

TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 176,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 128, "max_position_embeddings": 256, "hidden_act": "silu"}


def test_constant_power_gives_power_times_time():
    clock = WorkClock()
    fake = FakeDevice(lambda t: 200.0, clock, tick_s=0.05, phase_s=0.01, step_s=0.001)
    meter = RankMeter("cpu", fake=fake)
    with clock.running():
        rec = measure_config(ModelSpec.from_hf_config(TINY, name="tiny"), Parallel(),
                             Workload(batch=2, prompt_len=16, gen_len=8), d=Dist(),
                             device="cpu", dtype=torch.float32, meter=meter,
                             hygiene=Hygiene(repeats=2, min_window_s=0.15, idle_s=0.2))
    assert rec["per_gpu"][0]["idle_power_w"] == pytest.approx(200.0, rel=0.01)
    for phase in ("prefill", "decode"):
        assert rec[phase]["energy_j"] == pytest.approx(200.0 * rec[phase]["time_s"], rel=0.01)
    assert rec["energy_j"] == pytest.approx(rec["prefill"]["energy_j"] + rec["decode"]["energy_j"])
    assert len(rec["repeat_energy_j"]) == 2 and rec["spread"] is not None
    assert rec["continuous"]["energy_j"] > 0
    assert rec["schema"] == "piep.measurement" and rec["boundary"] == "gpu_board"


def test_the_gpu_probe_meters_two_fixed_kernels_once_per_gpu():
    """The GPU probe: each kernel's mean power over its own metered window (the fake
    board draws 250 W), its time per call, the copy's bandwidth; measured once per GPU and
    process; None without a meter."""
    from piep.sampling import hf
    clock = WorkClock()
    fake = FakeDevice(lambda t: 250.0, clock, tick_s=0.05, phase_s=0.01, step_s=0.001)
    meter = RankMeter("cpu", fake=fake)
    hf._gpu_probes.clear()
    with clock.running():
        probe = hf.gpu_probe("cpu", meter, window_s=0.15, copy_bytes=1 << 20,
                             gemm=(2, 64, 128))
    assert probe["copy_power_w"] == pytest.approx(250.0, rel=0.01)
    assert probe["decode_gemm_power_w"] == pytest.approx(250.0, rel=0.01)
    assert probe["copy_s"] > 0 and probe["decode_gemm_s"] > 0
    assert probe["copy_gbps"] == pytest.approx(2 * (1 << 20) / probe["copy_s"] / 1e9)
    assert hf.gpu_probe("cpu", meter) is probe  # once per GPU: the second call is free
    hf._gpu_probes.clear()
    assert hf.gpu_probe("cpu", RankMeter("cpu")) is None


def test_the_gpu_probe_buffers_stay_out_of_the_runs_peak_memory(monkeypatch):
    """The probe's 2.5 GiB of buffers made the first record of every process report a peak
    that high: its blocks go back, the peak restarts, and the run's
    peak is the larger of the peak before the probe and the one after it; a failing probe
    gives None and the run goes on."""
    import torch
    from piep.sampling import hf
    gib = 2 ** 30
    alloc = {"reserved": 30 * gib, "peak": 30 * gib}

    def allocate(n):
        alloc["reserved"] += n
        alloc["peak"] = max(alloc["peak"], alloc["reserved"])

    def empty_cache():
        alloc["reserved"] = 28 * gib  # the model; the warm-up's free blocks go back too

    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda *a: alloc["peak"])
    monkeypatch.setattr(torch.cuda, "empty_cache", empty_cache)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats",
                        lambda *a: alloc.update(peak=alloc["reserved"]))

    def probe(device, meter):
        allocate(int(2.5 * gib))
        return {"copy_power_w": 400.0}
    board, before = hf.probe_outside_peak("cuda", None, probe)
    assert board == {"copy_power_w": 400.0} and before == 30 * gib
    allocate(1 * gib)  # the windows allocate their cache again, a little less than before
    assert max(before, torch.cuda.max_memory_reserved()) == 30 * gib

    def failing(device, meter):
        raise RuntimeError("out of memory")
    assert hf.probe_outside_peak("cuda", None, failing)[0] is None
