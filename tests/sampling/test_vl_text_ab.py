"""The vision-language A/B (benchmarks/vl_text_ab.py) runs on a CPU: a VL model's own
generate() beside the family piep runs in its place, each record naming what was built."""

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.gloo

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
VL = ROOT / "tests" / "data" / "vl"  # tiny VL configs (each its family's small decoder)


def test_each_vl_model_runs_beside_its_stand_in_and_is_priced_alike(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import vl_text_ab
    paths = [VL / "qwen2.5-vl.json", VL / "glm-4.1v.json"]  # (flat; nested)
    out = tmp_path / "ab.jsonl"
    assert vl_text_ab.main(["--configs", *map(str, paths), "--workloads", "2x8x3",
                            "--reps", "2", "--out", str(out)]) == 0
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["model_type"], r["kind"]) for r in recs] == [
        ("qwen2_5_vl_text", "own"), ("qwen2_5_vl_text", "runs_as"),
        ("glm4v_text", "own"), ("glm4v_text", "runs_as")]
    assert [r["built"] for r in recs] == [
        "Qwen2_5_VLForConditionalGeneration", "Qwen2ForCausalLM",
        "Glm4vForConditionalGeneration", "Glm4ForCausalLM"]
    assert all(len(r["time_s"]) == 2 and r["energy_j"] is None for r in recs)
    blind = tmp_path / "blind.jsonl"
    assert vl_text_ab.main(["--configs", *map(str, paths), "--workloads", "1x64x8",
                            "--predict", "h100", "--out", str(blind)]) == 0
    rows = [json.loads(line) for line in blind.read_text().splitlines()]
    assert len(rows) == 2 and all("text_decoder_only" in r["flags"] for r in rows)
