"""piep's meter for foreign engines: windows on fake GPUs, the `piep meter` command, and
the whole workflow of calibrating an engine piep does not run (an HF mode as if foreign)."""

from __future__ import annotations

import contextlib
import json
import sys

import pytest

from piep.sampling import meter
from piep.cli import main
from piep.device.fake import FakeClock, FakeDevice
from piep.core.errors import ConfigError
from piep.core.writer import append_record

pytestmark = pytest.mark.fake_device


def _fake_gpus(clock, busy_w: float, idle_w: float = 100.0, n: int = 2):
    """GPUs at `busy_w` between the times in `span` (set by the caller), else idle."""
    span: list[float] = []

    def power(t: float) -> float:
        on = len(span) == 2 and span[0] <= t < span[1] or len(span) == 1 and t >= span[0]
        return busy_w if on else idle_w
    return [FakeDevice(power, clock, uuid=f"GPU-fake-{i}", phase_s=0.03 + 0.02 * i)
            for i in range(n)], span


def test_a_window_is_the_work_alone_on_every_gpu():
    clock = FakeClock()
    devs, span = _fake_gpus(clock, busy_w=500.0)
    with meter.window(devices=devs, clock=clock, sleep=clock.sleep) as w:
        span.append(clock())
        clock.sleep(2.0)
        span.append(clock())
    assert w.time_s == pytest.approx(2.0)
    for g in w.per_gpu:  # alignment waits priced at the idle power measured first
        assert g["idle_power_w"] == pytest.approx(100.0, rel=1e-3)
        assert g["energy_j"] == pytest.approx(1000.0, rel=0.01)
        assert g["pre_wait_s"] >= 0 and g["post_wait_s"] >= 0
    assert w.energy_j == pytest.approx(2000.0, rel=0.01) and not w.short
    with meter.window(devices=devs[:1], clock=clock, sleep=clock.sleep) as short:
        clock.sleep(0.05)
    assert short.short


def _record(w, prefill=None, **kw):
    fields = dict(engine="vllm", engine_version="0.9", batch=4, prompt_len=128, gen_len=32)
    return meter.record("llama-3-8b", whole=w, prefill=prefill, **{**fields, **kw})


def test_a_record_is_a_measurement_with_the_prefill_split(tmp_path):
    clock = FakeClock()
    devs, span = _fake_gpus(clock, busy_w=400.0, n=1)
    windows = []
    for seconds in (0.4, 2.0):
        with meter.window(devices=devs, clock=clock, sleep=clock.sleep) as w:
            span[:] = [clock()]
            clock.sleep(seconds)
            span.append(clock())
        windows.append(w)
    rec = _record(windows[1], prefill=windows[0])
    assert rec["schema"] == "piep.measurement" and rec["engine"]["name"] == "vllm"
    assert rec["shape"]["kv_heads"] == 8 and rec["mode"] == "eager"
    assert rec["decode"]["energy_j"] == pytest.approx(rec["energy_j"] - rec["prefill"]["energy_j"])
    append_record(tmp_path / "runs.jsonl", rec)
    assert json.loads((tmp_path / "runs.jsonl").read_text())["energy_j"] == rec["energy_j"]
    bad = dict(rec, batch="four")
    with pytest.raises(Exception, match="batch"):
        append_record(tmp_path / "bad.jsonl", bad)
    # what the schema allows but the fits could not read (a shape they cannot rebuild)
    with pytest.raises(ConfigError, match="shape lacks layers"):
        append_record(tmp_path / "bad.jsonl", dict(rec, shape={"hidden": 8}))
    assert not (tmp_path / "bad.jsonl").exists()


@contextlib.contextmanager
def _fake_window(gpus):
    clock = FakeClock()
    devs, span = _fake_gpus(clock, busy_w=300.0, n=1)
    with meter.window(devices=devs, clock=clock, sleep=clock.sleep) as w:
        span.append(clock())
        yield w
        clock.sleep(1.0)
        span.append(clock())


def test_the_meter_command_writes_a_record_or_nothing(tmp_path, monkeypatch, capsys):
    import piep.commands.meter as cmd
    monkeypatch.setattr(cmd, "_window", _fake_window)
    monkeypatch.setattr(cmd, "host_probe_here", lambda gpu, repeats: {"launch_add_s": 8e-6,
                                                                      "python_loop_200k_s": 0.007})
    out = tmp_path / "runs.jsonl"
    args = ["meter", "--model", "llama-3-8b", "--engine", "vllm", "--engine-version", "0.9",
            "--batch", "2", "--prompt-len", "64", "--gen-len", "8", "--out", str(out)]
    ok = [sys.executable, "-c", "pass"]
    assert main(args + ["--prefill-cmd", f"{sys.executable} -c pass", "--"] + ok) == 0
    rec = json.loads(out.read_text())
    assert rec["energy_j"] == pytest.approx(300.0, rel=0.02) and rec["batch"] == 2
    assert rec["prefill"]["energy_j"] == pytest.approx(300.0, rel=0.02)
    assert rec["host_probe"]["launch_add_s"] == 8e-6  # what a per-host fit scales with
    capsys.readouterr()
    assert main(args + ["--", sys.executable, "-c", "raise SystemExit(3)"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exited with 3; nothing written" in err
    assert len(out.read_text().splitlines()) == 1
    assert main(args) == 2 and "after --" in capsys.readouterr().err


@pytest.mark.parametrize("engine, like", [("hf-eager", None), ("my-engine", "hf-eager")])
def test_an_hf_mode_calibrated_as_if_it_were_foreign(tmp_path, monkeypatch, capsys, engine,
                                                     like):
    """The workflow for an engine piep cannot run: meter its runs (here: fake GPUs replay
    the committed hf-eager runs' energy and time), fit a profile from the records, and the
    user's profile answers `predict --engine`: under the engine's own name, or under a name
    of the user's own priced as hf-eager (`--like`)."""
    from piep.fit.engines import engine_records
    # one model's runs (no leave-one-model-out pass: `piep train`'s plumbing is the test)
    runs = [r for r in engine_records("h200", "hf-eager") if r.model == "qwen2.5-7b"]
    out = tmp_path / "metered.jsonl"
    for r in runs:
        clock = FakeClock()
        devs, span = _fake_gpus(clock, busy_w=r.energy_j / r.time_s + 100.0, n=1)
        with meter.window(devices=devs, clock=clock, sleep=clock.sleep) as w:
            span.append(clock())
            clock.sleep(r.time_s)
            span.append(clock())
        append_record(out, meter.record(r.spec, engine=engine,
                                       engine_version="5.17.0", batch=r.batch,
                                       prompt_len=r.prompt_len, gen_len=r.gen_len,
                                       whole=w))
        assert w.energy_j == pytest.approx(r.energy_j + 100.0 * r.time_s, rel=0.02)
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    assert main(["train", "--engine", engine, *(["--like", like] if like else []),
                 "--from-measurements", str(out), "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    configs = {(r.model, r.batch, r.prompt_len, r.gen_len) for r in runs}
    assert len(runs) > len(configs)  # repeated configurations, merged (no phase split here)
    assert fitted["profile"].startswith(str(tmp_path / "data"))
    assert fitted["runs"] == len(configs)
    assert main(["predict", "--model", "llama-3-8b", "--engine", engine, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["engine_ref"] == {"name": engine, "version": "5.17.0",
                                 **({"like": like} if like else {})}
    assert doc["energy_j"] > 0 and doc["workload"]["mode"] == "eager"
