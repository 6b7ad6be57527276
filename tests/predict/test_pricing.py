"""The one pricing path: the leaf table reproduces the tree builder, a deployment costs the
same alone or among many, and the timeline and partition keep their invariants."""

import json
import random

import numpy as np
import pytest

from piep import api
from piep.core.config import ModelSpec
from piep.core.errors import PiepError
from piep.core.models import load_model
from piep.predict.pricing import CATEGORIES, price
from piep.predict.table import QUANT, TableBuilder, concat, select
from piep.sweep import sweep
from piep.tree import build_tree
from piep.tree.builder import decode_context
from _paths import ROOT  # noqa: E402

pytestmark = pytest.mark.replay

MODELS = ("llama-2-7b", "llama-3-8b", "qwen2.5-7b", "mistral-small-24b", "vicuna-33b",
          "llama-3-70b")


@pytest.fixture(scope="module")
def learned():
    return api.cost_model("h200", "learned")


def _configs(n, seed):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        cfg = {"model": rng.choice(MODELS), "tp": rng.choice((1, 2, 4, 8)),
               "pp": rng.choice((1, 2, 4)), "dp": rng.choice((1, 2)),
               "batch": rng.choice((1, 2, 3, 8, 33, 64)), "prompt_len": rng.randint(1, 3000),
               "gen_len": rng.randint(1, 700), "mode": rng.choice(("graph", "eager"))}
        try:
            api.deployment(**cfg)
        except PiepError:
            continue
        out.append(cfg)
    return out


def _windowed_deps(n, seed):
    """hf-eager and hf-static on a Mistral shape with a small sliding window: prompts and
    generations below, across and past the window."""
    cfg = {**load_model("mistral-7b").to_hf_config(), "sliding_window": 96,
           "num_hidden_layers": 4}
    spec = ModelSpec.from_hf_config(cfg, name="swa-test")
    rng = random.Random(seed)
    return [api.deployment(spec, engine=rng.choice(("hf-eager", "hf-static")), tp=1,
                           batch=rng.choice((1, 3, 8)), prompt_len=rng.randint(1, 200),
                           gen_len=rng.randint(1, 150), check_memory=False)
            for _ in range(n)]


FAMILY_CONFIGS = ROOT / "calibration" / "h200" / \
    "families" / "configs"


def _family_deps(n, seed):
    """The new families' shapes (4-6 layers; Gemma 3's window cut to 96 keys, every third
    layer global), every engine, at random layouts and workloads below, across and past
    the window."""
    rng = random.Random(seed)
    specs = []
    for path in sorted(FAMILY_CONFIGS.glob("*.json")):
        cfg = json.loads(path.read_text())
        cfg["num_hidden_layers"] = 6 if "no_rope_layer_interval" not in cfg else 8
        if cfg.get("sliding_window"):
            cfg.update(sliding_window=96, sliding_window_pattern=3)
        specs.append(ModelSpec.from_hf_config(cfg, name=path.stem))
    out = []
    while len(out) < n:
        engine = rng.choice((None, "hf-eager", "hf-static", "hf-cb"))
        try:
            out.append(api.deployment(
                rng.choice(specs), engine=engine, tp=rng.choice((1, 2)),
                pp=1 if engine else rng.choice((1, 2)), batch=rng.choice((1, 3, 8)),
                prompt_len=rng.randint(1, 200), gen_len=rng.randint(1, 150),
                check_memory=False))
        except PiepError:
            continue
    return out


def test_leaf_table_reproduces_the_tree_builder():
    """Every quantity of every leaf, for random workloads, equals the builder's own node
    (the skeleton polynomials are exact, also for prompts in the thousands; a windowed
    engine's attention forms weighted by their shares; the global layers of a model whose
    other layers slide, in the full context)."""
    deps = [api.deployment(**c) for c in _configs(25, seed=5)] + _windowed_deps(20, seed=6) \
        + _family_deps(30, seed=7)
    table = TableBuilder().table(deps, detail=True)
    for i, dep in enumerate(deps):
        tree = build_tree(dep)
        steps = max(dep.workload.gen_len - 1, 0)
        want = {}
        for phase in tree.children[0].children:
            for path, mult, node in phase.walk():
                if node.is_leaf and node.kind not in ("phase", "step"):
                    want[path] = (node, mult)
        rows = np.flatnonzero((table.cfg == i) & (table.count > 0))
        assert len(rows) == len(want), dep.describe()
        for r in rows:
            path = table.path[r]
            node, mult = want[path]
            assert table.count[r] == pytest.approx(mult, rel=1e-12)
            for name, value in (("flops", node.flops), ("bytes_read", node.bytes_read),
                                ("bytes_written", node.bytes_written),
                                ("comm_bytes", node.comm_bytes), ("tokens", node.tokens),
                                ("context_len", node.context_len)):
                assert table.q[name][r] == value, (dep.describe(), path, name)
        if steps:
            dec = rows[table.phase[rows] == 1]
            paths = table.path[dec].astype(str)
            att = np.isin(table.kind[dec], ("attention", "sdpa_masked")) \
                & ~np.char.endswith(paths, "sliding_window/attention")
            full = np.char.find(paths, "layer_global") >= 0
            assert (table.q["context_len"][dec[att & ~full]] == decode_context(dep)).all()
            assert (table.q["context_len"][dec[att & full]]
                    == decode_context(dep, full=True)).all()


def test_a_deployment_costs_the_same_alone_or_among_many(learned):
    configs = _configs(40, seed=11)
    deps = [api.deployment(**c) for c in configs]
    many = price(deps, learned)
    for i, dep in enumerate(deps[:12]):
        one = price([dep], learned)
        assert many.energy_j[i] == pytest.approx(one.energy_j[0], rel=1e-12)
        assert many.time_s[i] == pytest.approx(one.time_s[0], rel=1e-12)


def test_partition_sums_to_the_total_and_phases_to_the_time(learned):
    deps = [api.deployment(**c) for c in _configs(30, seed=2)]
    priced = price(deps, learned, detail=True)
    assert np.allclose(priced.breakdown_j.sum(1), priced.energy_j, rtol=1e-12)
    assert np.allclose(priced.phase_energy_j.sum(1), priced.energy_j, rtol=1e-9)
    assert (priced.breakdown_j >= 0).all()
    for i in range(len(deps)):
        doc = priced.document(i)
        assert sum(m["energy_j"] for m in doc["modules"]) == pytest.approx(doc["energy_j"],
                                                                           rel=1e-9)
        assert set(doc["breakdown_j"]) == set(CATEGORIES)
        if deps[i].parallel.pp == 1:  # one stage: no bubble, not even rounding noise
            assert not any(m["kind"] == "pipeline_wait" for m in doc["modules"])


def test_pipeline_bubbles_are_waits_on_the_other_stages(learned):
    one = price([api.deployment("llama-2-13b", batch=4)], learned, detail=True)
    two = price([api.deployment("llama-2-13b", pp=2, batch=4)], learned, detail=True)
    assert one.breakdown_j[0, CATEGORIES.index("wait")] == 0.0
    waits = [m for m in two.document(0)["modules"] if m["kind"] == "pipeline_wait"]
    assert {m["path"].split("/")[1] for m in waits} == {"stage0", "stage1"}
    # each stage waits while the other works: the bubbles of one phase sum to its time
    seg_time = two.timeline.time_s[0]
    busy = two.timeline.stage_busy_s[0] + two.timeline.stage_gap_s[0]
    assert two.timeline.bubble_s[0].sum() == pytest.approx(2 * seg_time - busy.sum())


def test_select_keeps_the_rows_of_the_chosen_deployments(learned):
    deps = [api.deployment(**c) for c in _configs(6, seed=4)]
    table = TableBuilder().table(deps)
    sub = select(table, np.array([1, 4]))
    got = price([deps[1], deps[4]], learned, table=sub)
    want = price([deps[1], deps[4]], learned)
    assert np.array_equal(got.energy_j, want.energy_j)
    for name in QUANT:
        assert len(sub.q[name]) == len(sub)


def test_tables_stacked_price_as_each_alone(learned):
    """A stack of tables (deployments, segments and stages renumbered) prices each
    deployment to the bit as its own table does; a selection of a stack is a table too."""
    deps = [api.deployment(**c) for c in _configs(7, seed=5)]
    builder = TableBuilder()
    parts = [builder.table(deps[:3]), builder.table(deps[3:4]), builder.table(deps[4:])]
    stacked = concat(parts)
    got = price(deps, learned, table=stacked)
    want = price(deps, learned)
    assert np.array_equal(got.energy_j, want.energy_j)
    assert np.array_equal(got.time_s, want.time_s)
    picked = price([deps[2], deps[5]], learned, table=select(stacked, np.array([2, 5])))
    assert np.array_equal(picked.energy_j, want.energy_j[[2, 5]])


def test_sweep_rows_keep_refusals_and_match_predict(learned):
    cfgs = _configs(5, seed=3) + [{"model": "llama-3-70b", "tp": 3, "pp": 1, "dp": 1,
                                   "batch": 1, "prompt_len": 8, "gen_len": 8,
                                   "mode": "graph"}]
    rows = sweep(cfgs)
    assert "error" in rows[-1] and "tp" in rows[-1]["error"]
    for cfg, row in zip(cfgs[:-1], rows):
        ref = api.predict(**cfg)
        assert row["energy_j"] == pytest.approx(ref["energy_j"], rel=1e-12)
        assert row["flags"] == ref["flags"]
        assert row["predictor"] == "learned"


def test_no_gpu_above_its_board_limit_unflagged(learned):
    """Over a grid of heavy prefills: a phase of >= 1 s never averages above the board
    limit on any GPU; a shorter one may, and then says so."""
    configs = [dict(model=m, tp=tp, batch=b, prompt_len=p, gen_len=16)
               for m in ("llama-2-7b", "llama-2-13b", "qwen2.5-14b") for tp in (1, 2)
               for b in (1, 16, 64, 128) for p in (128, 512, 2048)]
    deps = []
    for c in configs:
        try:
            deps.append(api.deployment(**c))
        except PiepError:
            continue
    priced = price(deps, learned)
    limit = deps[0].gpu.max_power_w
    n_capped = 0
    for i, dep in enumerate(deps):
        doc_flags = priced.flags(i)
        for ph in (0, 1):
            t = priced.phase_time_s[i, ph]
            per_gpu = priced.phase_energy_j[i, ph] / (dep.parallel.world_size * t)
            if t >= 1.0:
                assert per_gpu <= limit * (1 + 1e-6), (dep.describe(), ph, per_gpu)
            elif per_gpu > limit * (1 + 1e-6):
                assert "short_window_power" in doc_flags, dep.describe()
        n_capped += "power_capped" in doc_flags
    assert n_capped > 0  # the grid does reach the limit: the cap is exercised


def test_a_skeleton_basis_the_canonical_points_leave_open_is_refused():
    """Two columns equal on every canonical point (say, a quantity of the batch alone
    with more columns than distinct batches) would be split by least squares at will,
    right at the points and wrong between them: refused, not priced."""
    import numpy as np

    from piep.predict.table import _solve
    b = np.array([1.0, 2.0, 3.0, 1.0, 2.0])
    y = (3 * b)[:, None]
    sel = np.array([True])
    assert _solve(np.stack([np.ones(5), b], -1), y, sel)[:, 0].tolist() == [0.0, 3.0]
    with pytest.raises(ValueError, match="do not determine"):
        _solve(np.stack([np.ones(5), b, b ** 2, b ** 3], -1), y, sel)
    # a column zero on every point (experts not sharded) is left out of the check
    assert _solve(np.stack([np.ones(5), b, np.zeros(5)], -1), y, sel)[1, 0] == 3.0
