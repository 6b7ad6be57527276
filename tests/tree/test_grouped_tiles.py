"""A grouped GEMM computes each expert's rows in whole blocks of two tiles (torch's
grouped_mm on Hopper): the module sampler's even split and a router's binomial counts
round up differently, and the module models price each at the rows its kernel computes."""

import numpy as np
import pytest

from piep import api
from piep.tree.builder import _chosen, even_grouped_rows, experts_hit, routed_grouped_rows

from _paths import ROOT

pytestmark = pytest.mark.pure

QWEN3_SHAPE = str(ROOT / "calibration" / "h200" / "moe" / "configs" / "qwen3-30b-a3b-shape.json")


def test_even_rows_round_up_to_blocks_of_two_tiles():
    assert even_grouped_rows(256, 1, 512) == 256    # 128-row tiles, two a block
    assert even_grouped_rows(257, 1, 512) == 512
    assert even_grouped_rows(100, 1, 512) == 128    # 64-row tiles: <= 128 rows an expert
    assert even_grouped_rows(1024, 4, 64) == 4 * 256  # ... or d_out <= 128
    assert even_grouped_rows(10, 4, 512) == 4 * 128   # (3, 3, 2 and 2 rows)
    assert even_grouped_rows(np.array([256.0, 512.0]), 2, 512).tolist() == [256.0, 512.0]


def test_routed_rows_round_up_every_expert_the_tokens_reach():
    chosen = _chosen(128, 8, 0.0)
    for tokens in (1, 4, 16):  # a decode step's few tokens: a block for each expert reached
        assert routed_grouped_rows(tokens, chosen, 1536) == pytest.approx(
            128 * experts_hit(128, 8, tokens))
    # Qwen3-30B-A3B's prefill at batch 8 x 512: 256 rows an expert on average, so the
    # binomial counts of about half the experts spill into a second block
    even = even_grouped_rows(4096 * 8, 128, 1536)
    assert routed_grouped_rows(4096, chosen, 1536) / even == pytest.approx(1.48, abs=0.02)
    # far more rows than a block: the rounding's cost fades
    assert 1.0 < routed_grouped_rows(65536, chosen, 1536) / (65536 * 8) < 1.05
    # a trained router's skew: the popular experts' counts spill, the others' blocks idle
    skewed = routed_grouped_rows(4096, _chosen(128, 8, 1.0), 1536)
    assert skewed != pytest.approx(routed_grouped_rows(4096, chosen, 1536), rel=0.01)


def test_the_experts_grouped_gemms_are_priced_at_the_rows_their_kernel_computes(monkeypatch):
    from piep.predict import module_models

    def gate_up_s():
        doc = api.predict(QWEN3_SHAPE, engine="hf-eager", batch=8, prompt_len=512, gen_len=2,
                          hosts=False)
        return sum(m["time_s"] for m in doc["modules"]
                   if m["phase"] == "prefill" and m["path"].endswith("experts_gate_up"))
    padded = gate_up_s()
    monkeypatch.setattr(module_models, "grouped_padding", lambda table: 1.0)
    assert padded / gate_up_s() > 1.3
