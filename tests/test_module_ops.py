"""Every node kind of a real tree has a sampler op that runs (CPU, small shapes)."""

import pytest

torch = pytest.importorskip("torch")

from piep.sampling.modules import COMPUTE_KINDS, build_op, shape_key  # noqa: E402
from piep.tree import build_tree  # noqa: E402


def test_every_compute_leaf_has_a_runnable_op(make_dep):
    dep = make_dep("qwen2.5-7b", tp=2, batch=2, prompt_len=16, gen_len=4)
    kinds = set()
    for _, _, leaf in build_tree(dep).leaves():
        if leaf.kind not in COMPUTE_KINDS:
            continue
        s = shape_key(leaf)
        for mode in ("graph", "eager"):
            op = build_op(s, mode, "cpu", dtype=torch.float32)
            out = op.fn(0)
            assert out is not None and torch.isfinite(out.float()).all()
        kinds.add(leaf.kind)
    assert kinds == set(COMPUTE_KINDS)


def test_rotation_covers_four_l2(make_dep):
    from piep.sampling.modules import ROTATE_BYTES, _copies
    assert _copies(10 * 2 ** 20) * 10 * 2 ** 20 >= ROTATE_BYTES
    assert _copies(1e9) == 1
