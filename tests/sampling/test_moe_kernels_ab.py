"""The MoE kernels' A/B script (benchmarks/moe_kernels_ab.py) runs on a CPU and writes what
its docstring says: here its decode-step experts' table A/B."""

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gloo

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
TINY = {"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128,
        "moe_intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128,
        "max_position_embeddings": 256, "hidden_act": "silu", "num_experts": 16,
        "num_experts_per_tok": 4}


def test_the_decode_table_ab_times_both_tables_at_each_batch(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import moe_kernels_ab
    config = tmp_path / "tiny-moe.json"
    config.write_text(json.dumps(TINY))
    out = tmp_path / "ab.jsonl"
    assert moe_kernels_ab.main(["--decode", "--models", str(config), "--reps", "2",
                                "--out", str(out)]) == 0
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["kind"], r["batch"]) for r in recs] == [
        (f"experts_batched_{kind}", b) for b in moe_kernels_ab.DECODE_BATCHES
        for kind in ("gate_up", "down")]
    more = tmp_path / "more.jsonl"  # other batch sizes, as asked
    assert moe_kernels_ab.main(["--decode", "--models", str(config), "--reps", "2",
                                "--batches", "2,64", "--out", str(more)]) == 0
    assert [json.loads(line)["batch"] for line in more.read_text().splitlines()] == \
        [2, 2, 64, 64]
    for r in recs:
        assert r["pairs"] == r["batch"] * TINY["num_experts_per_tok"]
        assert r["experts"] == TINY["num_experts"]
        assert (r["d_in"], r["d_out"]) in ((64, 64), (32, 64))
        assert r["table8_ms"] > 0 and r["table_all_ms"] > 0
        assert r["all_over_8"] == pytest.approx(r["table_all_ms"] / r["table8_ms"])
    sys.modules.pop("moe_kernels_ab", None)
