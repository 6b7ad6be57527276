"""`piep calibrate gpu`: a GPU of one's own calibrated in one command, on a fake board on the
CPU (a fake NVML counter, virtual host time that advances with the work): the plan, the
folder it writes, an interruption and its resume, and the answers `--gpu NAME` then reads."""

import json

import pytest

pytestmark = pytest.mark.fake_device

torch = pytest.importorskip("torch")

from piep.core.errors import ConfigError  # noqa: E402
from _virtual_clock import WorkClock  # noqa: E402

TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 176,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 128, "max_position_embeddings": 256, "hidden_act": "silu"}
BOARD = {"gpu_name": "Fake GPU", "uuid": "GPU-fake-0", "memory_gib": 80.0}


def _bench(clock):
    from piep.device.fake import FakeDevice
    from piep.sampling.gpu_calibration import Bench
    from piep.sampling.runner import Hygiene, RankMeter
    fake = FakeDevice(lambda t: 200.0, clock, tick_s=0.05, phase_s=0.01, step_s=0.001)
    return Bench("cpu", meter=RankMeter("cpu", fake=fake), dtype=torch.float32,
                 hygiene=Hygiene(repeats=2, min_window_s=0.15, idle_s=0.2),
                 min_window_s=0.15, describe=BOARD)


def _recipe_items(tmp_path):
    from piep.sampling.calibrate import module_shapes
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(TINY))
    shapes = [s for s in module_shapes(seed=0, per_kind=1, models=(str(path),), tps=(1,))
              if s["tokens"] <= 256 and s.get("context_len", 0) <= 512][:8]
    runs = [{"model": f"tiny-{i}", "config": TINY, "tp": 1, "pp": 1, "dp": 1, "batch": b,
             "prompt_len": 16, "gen_len": 8, "mode": "eager", "estimated_s": 1.0}
            for i, b in enumerate((2, 3))]
    return shapes, runs


def test_the_plan_interleaves_every_kind_and_model_at_the_recipes_shares():
    from piep.sampling.gpu_calibration import Recipe, plan
    shapes = [{"kind": k, "phase": "decode", "mode": "graph", "tokens": t}
              for t in range(10) for k in ("q_proj", "attention")]
    runs = [{"model": m, "tp": 1, "pp": 1, "dp": 1, "batch": b, "prompt_len": 8,
             "gen_len": 8, "mode": "graph", "estimated_s": 5.0}
            for b in (1, 2, 3) for m in ("a", "b")]
    tasks = plan(shapes, runs, Recipe(minutes=0.5, module_share=0.6))
    assert sum(t.est_s for t in tasks) <= 30.0
    kinds = [t.item["kind"] for t in tasks if t.kind == "module"]
    assert kinds[:2] == ["q_proj", "attention"]  # each kind in turn
    assert [t.item["model"] for t in tasks if t.kind == "run"][:2] == ["a", "b"]
    assert tasks[0].kind == "module" and any(t.kind == "run" for t in tasks[:4])
    module_s = sum(t.est_s for t in tasks if t.kind == "module")
    assert 0.4 < module_s / sum(t.est_s for t in tasks) < 0.8


def test_a_gpu_is_calibrated_interrupted_and_resumed(tmp_path, monkeypatch):
    from piep.core.artifacts import read_jsonl
    from piep.core.dataset import load_calibration
    from piep.core.gpus import load_gpu
    from piep.sampling.gpu_calibration import MODULES, RUNS, Recipe, calibrate_gpu
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    shapes, runs = _recipe_items(tmp_path)
    recipe = Recipe(minutes=1.0)
    clock = WorkClock()
    seen = []
    with clock.running():
        first = calibrate_gpu("fake-gpu", _bench(clock), recipe=recipe, shapes=shapes,
                              runs=runs, budget_s=1.0, clock=clock, progress=seen.append)
        assert 0 < first["measured"] < first["tasks"] and not first["done"]
        second = calibrate_gpu("fake-gpu", _bench(clock), recipe=recipe, shapes=shapes,
                               runs=runs, clock=clock, progress=seen.append)
    assert second["done"] and second["left"] == 0
    assert first["measured"] + second["measured"] == second["tasks"] == len(shapes) + 2
    assert [p["index"] for p in seen] == list(range(1, second["tasks"] + 1))
    assert seen[-1]["done_s"] < seen[-1]["total_s"] and seen[0]["left_s"] > 0
    folder = tmp_path / "data" / "calibration" / "fake-gpu"
    mods = [r for r in read_jsonl(folder / MODULES) if r["schema"] == "piep.module_sample"]
    assert len(mods) == len(shapes)  # each shape once across the two calls
    assert sum(r["schema"] == "piep.host_overhead" for r in read_jsonl(folder / MODULES)) == 1
    for r in mods:
        assert r["energy_j"] == pytest.approx(200.0 * r["window_s"] / r["calls"], rel=0.05)
    assert len(read_jsonl(folder / RUNS)) == 2
    # what --gpu NAME reads: its GPU profile (measured memory, the rest said to be copied)
    # and a calibration whose collectives and waits are the reference's
    load_gpu.cache_clear()
    gpu = load_gpu("fake-gpu")
    assert gpu.memory_gib == 80.0
    assert "copied from h200" in dict(gpu.sources)["bf16_flops"]
    cal = load_calibration("fake-gpu")
    assert len(cal.modules) == len(shapes) and len(cal.e2e) == 2 and cal.collectives
    state = json.loads((folder / "calibrate.json").read_text())
    assert state["reused"]["from"] == "h200" and state["done"]
    # a resume with another recipe is refused in one line
    with pytest.raises(ConfigError, match="another recipe"):
        calibrate_gpu("fake-gpu", _bench(clock), recipe=Recipe(minutes=2.0), shapes=shapes,
                      runs=runs, clock=clock)


def test_a_name_is_checked_before_anything_runs(tmp_path, monkeypatch, capsys):
    from piep.cli import main
    from piep.sampling.options import check_gpu_name as check_name
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(ConfigError, match="ships a calibration"):
        check_name("h200")
    with pytest.raises(ConfigError, match="lower-case"):
        check_name("My GPU")
    assert main(["calibrate", "gpu", "--name", "My GPU"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lower-case" in err
    assert not (tmp_path / "data").exists()


def test_packed_attention_samples_train_their_own_models(tmp_path, monkeypatch):
    """A calibration with continuous batching's packed attention (`sdpa_paged`) writes
    its samples, reads them back, and they train a model of their own, which then prices
    the packed rows in place of the closed form (`PackedKernel`)."""
    from piep.core.dataset import load_calibration
    from piep.core.gpus import load_gpu
    from piep.predict.module_models import fit_module_models, is_fitted
    from piep.sampling.gpu_calibration import Recipe, calibrate_gpu
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    shapes, _ = _recipe_items(tmp_path)
    paged = {"kind": "sdpa_paged", "phase": "prefill", "heads": 2, "kv_heads": 2,
             "head_dim": 8, "batch": 1, "context_len": 40, "q_len": 6, "requests": 2,
             "tokens": 6, "mode": "graph"}
    clock = WorkClock()
    with clock.running():
        done = calibrate_gpu("fake-paged", _bench(clock), recipe=Recipe(minutes=1.0),
                             shapes=shapes[:3] + [paged], runs=[], clock=clock)
    assert done["done"] and done["measured"] == 4
    load_gpu.cache_clear()
    cal = load_calibration("fake-paged")
    kept = [s for s in cal.modules if s.kind == "sdpa_paged"]
    assert len(kept) == 1 and kept[0].shape["requests"] == 2 and is_fitted(kept[0])
    gpu = load_gpu("fake-paged")
    assert set(fit_module_models(cal.modules, gpu)) - \
        set(fit_module_models([s for s in cal.modules if s.kind != "sdpa_paged"], gpu)) \
        == {"sdpa_paged"}
