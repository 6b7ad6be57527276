"""`piep train --add-kinds`: the shipped predictor gains a model for each kind group it
has none of (from the committed module samples), and nothing it had moves."""

import pytest

pytestmark = pytest.mark.replay


def test_a_missing_group_is_added_and_nothing_else_moves(monkeypatch):
    import piep.predict.store as store
    from piep.fit.predictor import add_kinds
    from piep.core.gpus import load_gpu
    shipped = store.load(store.predictor_dir("h200"), load_gpu("h200"))
    assert {"fp8_linear", "experts_batched", "experts"} <= set(shipped.modules.kinds)
    kept = dict(shipped.modules.kinds)
    lacking = store.load(store.predictor_dir("h200"), load_gpu("h200"))
    for group in ("fp8_linear", "experts_batched"):
        del lacking.modules.kinds[group]
    monkeypatch.setattr(store, "load", lambda folder, gpu: lacking)
    model, counts = add_kinds("h200")
    assert set(counts) == {"fp8_linear", "experts_batched"} and min(counts.values()) > 10
    assert model.meta["added_kinds"]["fp8_linear"] == counts["fp8_linear"]
    for group, km in kept.items():  # every other model as it was, to the byte
        got = model.modules.kinds[group]
        assert got.time_booster.model_to_string() == km.time_booster.model_to_string()
    # the added ones are what a full fit makes of the same samples
    assert model.modules.kinds["fp8_linear"].time_booster.model_to_string() == \
        kept["fp8_linear"].time_booster.model_to_string()
    assert model.combiner is lacking.combiner and model.host is lacking.host


def test_add_kinds_runs_alone(capsys):
    from piep.cli import main
    assert main(["train", "--add-kinds", "--engine", "hf-eager"]) == 2
    assert "--add-kinds adds module models" in capsys.readouterr().err


def test_an_fp8_answer_says_how_its_projections_were_priced(monkeypatch):
    """A block-scaled FP8 checkpoint is priced from the row-wise samples and says so; with
    a predictor lacking FP8 samples the answer says its projections were priced as bf16."""
    import piep.predict.store as store
    from piep import api
    from piep.core.models import load_model
    cfg = {**load_model("llama-3-8b").to_hf_config(), "quantization_config": {
        "quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128],
        "activation_scheme": "dynamic"}}
    from piep.core.config import ModelSpec
    spec = ModelSpec.from_hf_config(cfg, name="llama-3-8b-fp8")
    doc = api.predict(spec, engine="hf-eager", batch=4, prompt_len=256, gen_len=32)
    assert "fp8_block_scales" in doc["flags"] and "fp8_unsampled" not in doc["flags"]
    bf16 = api.predict("llama-3-8b", engine="hf-eager", batch=4, prompt_len=256, gen_len=32)
    assert doc["energy_j"] != bf16["energy_j"]
    model = store.load_learned("h200")
    monkeypatch.setattr(model.modules, "kinds", {k: v for k, v in model.modules.kinds.items()
                                                 if k != "fp8_linear"})
    doc = api.predict(spec, engine="hf-eager", batch=4, prompt_len=256, gen_len=32)
    assert "fp8_unsampled" in doc["flags"]
