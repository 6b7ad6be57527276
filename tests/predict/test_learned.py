"""The shipped learned predictor: interface, partition, flags, persistence, refit."""

import json

import numpy as np
import pytest

from piep.api import predict
from piep.core.gpus import load_gpu
from piep.predict.learned import TAU, Combiner
from piep.predict.store import load_learned, predictor_dir
from piep.predict.module_models import CONSTANT_STD
from piep.predict.pricing import prediction as evaluate
from piep.predict.store import load, save
from piep.predict.table import KIND_ID
from _paths import ROOT  # noqa: E402

pytestmark = pytest.mark.replay


@pytest.fixture(scope="module")
def shipped():
    model = load_learned("h200")
    assert model is not None, "calibration/h200/predictor is missing: run `piep train`"
    return model


def test_default_predict_uses_learned_and_partitions(shipped):
    doc = predict("llama-2-7b", tp=2, batch=16)
    assert doc["predictor"] == "learned"
    assert sum(doc["breakdown_j"].values()) == pytest.approx(doc["energy_j"])
    assert sum(m["energy_j"] for m in doc["modules"]) == pytest.approx(doc["energy_j"])
    assert doc["modules_raw_sum_j"] > 0 and doc["modules_raw_sum_j"] != doc["energy_j"]
    lo, hi = doc["interval"]["energy_j"]
    assert lo < doc["energy_j"] < hi
    assert doc["interval"]["level"].startswith("90 % jackknife interval")
    assert "conformal" not in doc["interval"]["level"]  # not a split-conformal band
    assert doc["breakdown_j"]["communication"] > 0 and doc["breakdown_j"]["wait"] > 0


def test_more_than_two_gpus_is_extrapolated_with_a_wider_interval(shipped):
    two = predict("llama-2-13b", tp=2, batch=8)
    four = predict("llama-2-13b", tp=4, batch=8)
    assert "extrapolated" in four["flags"] and "extrapolated" not in two["flags"]
    width = lambda d: d["interval"]["energy_j"][1] / d["interval"]["energy_j"][0]  # noqa: E731
    assert width(four) > width(two)


def test_far_shapes_are_out_of_range(shipped, tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 16384, "intermediate_size": 65536,
           "num_hidden_layers": 4, "num_attention_heads": 128, "num_key_value_heads": 128,
           "vocab_size": 256000, "max_position_embeddings": 8192}
    path = tmp_path / "huge" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    doc = predict(str(path), batch=1)
    assert "out_of_range" in doc["flags"] and doc["out_of_range_kinds"]
    near = predict("llama-2-7b", batch=8)
    assert "out_of_range" not in near["flags"]


def _alpha(model, kind, decode, tokens):
    return float(model.combiner.alpha(np.array([KIND_ID[kind]]), np.array([decode]),
                                      np.array([False]), np.array([tokens]))[0])


def test_alpha_is_bounded(shipped):
    for kind in ("q_proj", "attention", "allreduce", "pipeline_wait", "rmsnorm"):
        for decode in (False, True):
            for tokens in (1, 4096, 1e6):
                assert 1 - 1 / TAU <= _alpha(shipped, kind, decode, tokens) <= 1 + 1 / TAU


def test_save_and_load_roundtrip(shipped, tmp_path, make_dep):
    save(shipped, tmp_path / "p")
    again = load(tmp_path / "p", load_gpu("h200"))
    dep = make_dep("qwen2.5-14b", tp=2, batch=4, mode="eager")
    a, b = evaluate(dep, shipped), evaluate(dep, again)
    assert b["energy_j"] == pytest.approx(a["energy_j"], rel=1e-9)
    assert b["time_s"] == pytest.approx(a["time_s"], rel=1e-9)
    assert np.allclose(again.combiner.w, shipped.combiner.w)
    assert again.host == shipped.host


def test_shipped_artifacts_carry_provenance():
    doc = json.loads((predictor_dir("h200") / "predictor.json").read_text())
    assert doc["schema"] == "piep.learned_predictor" and doc["meta"]["data_hash"]
    assert "git" in doc["provenance"]


def test_refit_on_own_measurements(tmp_path):
    from piep.core.dataset import load_calibration
    from piep.fit.predictor import refit_on_measurements
    recs = [r for r in load_calibration("h200").e2e if r.model == "llama-2-7b"][:6]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in recs))
    model, n = refit_on_measurements("h200", path)
    assert n == len({r.key for r in recs}) and model.meta["refit_records"] == n
    assert model is not load_learned("h200")  # the shipped predictor is left alone


def test_a_neutral_combiner_prices_the_plain_module_sum(shipped, make_dep):
    from dataclasses import replace
    dep = make_dep("llama-2-7b", tp=2, batch=4)
    plain = evaluate(dep, replace(shipped, combiner=Combiner()))
    weighted = evaluate(dep, shipped)
    assert _alpha(shipped, "q_proj", True, 8) != 1.0
    assert plain["energy_j"] == pytest.approx(weighted["modules_raw_sum_j"], rel=1e-12)


def test_out_of_range_is_the_nearest_sample_distance_against_the_threshold(shipped):
    """The k-d tree query flags exactly the leaves whose standardized distance to every
    training sample exceeds the threshold (checked against all pairwise distances)."""
    km = shipped.modules.kinds["linear"]
    rng = np.random.default_rng(1)
    dim = km.train_z.shape[1]
    near = km.train_z[rng.integers(0, len(km.train_z), 200)] + rng.normal(0, 0.3, (200, dim))
    far = km.train_z[:50] + rng.normal(0, 6.0, (50, dim))
    x = np.vstack([near, far]) * km.std + km.mean
    varies = km.std > CONSTANT_STD
    z = (x - km.mean)[:, varies] / km.std[varies]
    d = np.sqrt(((z[:, None, :] - km.train_z[None, :, varies]) ** 2).sum(-1)).min(1)
    flags = km.out_of_range(x)
    assert flags.any() and not flags.all()
    assert (flags == (d > km.oor_threshold)).all()


def test_a_feature_the_samples_never_vary_does_not_make_a_leaf_far(shipped):
    """Linear layers were sampled in graph decode only: the same shapes in an eager decode
    step run the same kernels (their `eager` feature, constant over the samples, cannot
    split the GBDTs) and are not out of range; a shape far away still is."""
    from piep.predict.features import FEATURES
    km = shipped.modules.kinds["linear"]
    eager = list(FEATURES).index("eager")
    assert km.std[eager] <= CONSTANT_STD
    x = km.train_z[:20] * km.std + km.mean
    x[:, eager] = 1.0
    assert not km.out_of_range(x).any()
    x[:, 0] += 40 * km.std[0]
    assert km.out_of_range(x).all()


def test_a_host_queueing_ahead_idles_the_gpu_only_beyond_its_segments_kernels():
    import numpy as np

    from piep.predict.host import HostTerms
    host = HostTerms(host_launch_s=10e-6, eager_decode_launch_s=10e-6)
    launches = np.array([10, 10, 10, 10])        # 100 us of host issue time per call
    time_s = np.array([400e-6, 10e-6, 10e-6, 10e-6])
    count = np.array([1, 1, 2, 2])
    group = np.array([0, 0, 1, 1])               # a long kernel's segment; a short one's
    eager = np.ones(4, bool)
    decode = np.ones(4, bool)
    per_call = host.gap_s(launches, time_s, decode, eager, count=count, group=group)
    assert np.allclose(per_call, [0.0, 90e-6, 90e-6, 90e-6])  # each call on its own
    host.queue_ahead = True
    queued = host.gap_s(launches, time_s, decode, eager, count=count, group=group)
    # segment 0: 200 us issued under 410 us of kernels, no gap; segment 1: 400 us issued,
    # 40 us of kernels: 360 us of gaps shared by issue time (90 us a call)
    assert np.allclose(queued[:2], 0.0)
    assert np.isclose((count * queued)[2:].sum(), 360e-6)
    # twice the host time (a slower host) never shortens a gap
    slow = host.gap_s(launches, time_s, decode, eager, 2.0, count=count, group=group)
    assert (slow >= queued).all() and slow[1] == 0.0
    # graph replay keeps its fixed gap per kernel
    graph = host.gap_s(launches, time_s, decode, np.zeros(4, bool), count=count, group=group)
    assert np.allclose(graph, launches * host.gap_graph_s)


def test_steps_past_a_sliding_window_queue_apart_from_the_steps_before_it():
    """One decode segment: a row every step runs (100 us issued, 50 us of kernels) and a
    long copy only the steps past the window run. Summed over the segment the GPU is busy
    longer than the host issues, yet the steps before the window still idle it."""
    import numpy as np

    from piep.predict.host import HostTerms
    host = HostTerms(eager_decode_launch_s=10e-6, queue_ahead=True)
    launches, time_s = np.array([10, 1]), np.array([50e-6, 400e-6])
    count, group = np.array([10.0, 2.0]), np.array([0, 0])  # 10 steps, 2 past the window
    on = np.ones(2, bool)
    whole = host.gap_s(launches, time_s, on, on, count=count, group=group)
    assert np.allclose(whole, 0.0)  # one segment: 1020 us issued under 1300 us of kernels
    split = host.gap_s(launches, time_s, on, on, count=count, group=group,
                       sliding=np.array([0.2, 1.0]))
    # 8 steps before the window: 800 us issued, 400 us busy -> 400 us of gaps; past it
    # (220 us issued, 900 us busy) none
    assert np.isclose((count * split).sum(), 400e-6)
    # no step past a window: the segment's own gap, as without the split
    none = host.gap_s(launches, time_s, on, on, count=count, group=group,
                      sliding=np.zeros(2))
    assert np.allclose(none, whole)


def test_a_prediction_far_from_the_samples_has_a_wider_interval(tmp_path):
    far = {"model_type": "llama", "hidden_size": 1024, "intermediate_size": 2816,
           "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 1,
           "vocab_size": 8000}
    from piep.predict.learned import OUT_OF_RANGE_WIDENING
    (tmp_path / "config.json").write_text(json.dumps(far))
    doc = predict(str(tmp_path / "config.json"), batch=200, prompt_len=3000, gen_len=5)
    near = predict("llama-3-8b", batch=8, prompt_len=512, gen_len=64)
    assert "out_of_range" in doc["flags"] and "out_of_range" not in near["flags"]
    half = [np.log(doc["interval"][k][1] / doc[k]) for k in ("energy_j", "time_s")]
    near_half = [np.log(near["interval"][k][1] / near[k]) for k in ("energy_j", "time_s")]
    assert half == pytest.approx([OUT_OF_RANGE_WIDENING * h for h in near_half])
    assert "widened" in doc["interval"]["level"]


def test_host_time_per_call_lands_once_in_the_prefill(shipped, make_dep):
    """An engine's per-call host time (generate()'s setup) adds to TTFT once, whatever
    the batch and the generated length, and not to decode (the board's power limit out of
    the way: an idle GPU lowers a phase's mean power, which the limit holds)."""
    import copy
    from dataclasses import replace as dc_replace
    unlimited = copy.deepcopy(shipped.host)
    unlimited.burst_power_ratio = 10.0
    for batch, gen in ((1, 8), (16, 64)):
        dep = make_dep("llama-3-8b", batch=batch, gen_len=gen)
        host = copy.deepcopy(unlimited)
        host.call_host_s = 0.05
        plain = evaluate(dep, dc_replace(shipped, host=unlimited))
        called = evaluate(dep, dc_replace(shipped, host=host))
        assert called["prefill"]["time_s"] - plain["prefill"]["time_s"] == pytest.approx(0.05)
        assert called["decode"]["time_s"] == pytest.approx(plain["decode"]["time_s"])


def test_an_eager_decode_copy_that_graph_mode_compiles_has_its_own_models():
    """repeat_kv compiled (hf-static's decode) and eager (hf-eager's past a window) run other
    kernels: their own GBDT pair each, the eager one priced as the compiled one by a
    predictor trained before it was sampled; the copies never compiled keep one pair."""
    from piep.predict.module_models import FALLBACK_GROUP, model_group
    assert model_group("kv_expand", True, eager=True) == "kv_expand.decode.eager"
    assert model_group("kv_expand", True) == "kv_expand.decode"
    assert model_group("kv_expand", False, eager=True) == "kv_expand.prefill"
    assert model_group("kv_slide", True, eager=True) == "kv_slide.decode"
    assert FALLBACK_GROUP["kv_expand.decode.eager"] == "kv_expand.decode"
    shipped = load_learned("h200").modules
    assert shipped.group("kv_expand", True, True) == "kv_expand.decode.eager"
    assert shipped.group("kv_slide", True, True) == "kv_slide.decode"


def test_moe_masks_are_priced_as_the_copies_until_masked_fill_is_sampled():
    """transformers' masks of the routed rows (masked_fill, a slower kernel path than the
    copies', call 79's census) have a kind of their own, sampled since call 77; a predictor
    without its samples prices them as the row copies of the same bytes, following the
    fallbacks in turn."""
    from dataclasses import replace

    from piep.api import deployment
    from piep.tree.builder import build_tree
    dep = deployment("calibration/h200/moe/configs/qwen3-30b-a3b-shape.json",
                     engine="hf-eager", batch=8, prompt_len=512, gen_len=4)
    leaves = {leaf.name: leaf.kind for _, _, leaf in build_tree(dep).leaves()}
    assert {leaves[n] for n in ("moe_mask_in", "moe_mask_gate_up", "moe_mask_down")} \
        == {"moe_mask"}
    assert leaves["moe_permute"] == "moe_copy"
    shipped = load_learned("h200").modules
    assert shipped.group("moe_mask", False) == "moe_mask"
    unsampled = replace(shipped, kinds={k: v for k, v in shipped.kinds.items()
                                        if k != "moe_mask"})
    assert unsampled.group("moe_mask", False) == "moe_copy"
    bare = replace(unsampled, kinds={k: v for k, v in unsampled.kinds.items()
                                     if k != "moe_copy"})
    assert bare.group("moe_mask", False) == "residual"  # (moe_copy's own fallback)


def test_unsampled_masks_run_the_measured_ratio_longer_than_the_copies(monkeypatch):
    """Until masked_fill is sampled on the GPU, a mask row is priced as the row copies of
    its bytes times the median masked_fill / gather ratio of the committed A/B (the only
    rows that move); the constant is that file's median. Sampled (the shipped predictor,
    since call 77), its own models price it and the ratio moves nothing."""
    import statistics
    from dataclasses import replace

    from piep.api import deployment
    from piep.core.artifacts import read_jsonl
    from piep.predict import module_models
    from piep.predict.table import TableBuilder
    ab = read_jsonl(ROOT / "calibration" / "h100" / "moe" / "moe_kernels_ab_s80.jsonl")
    ratio = round(statistics.median(r["mask_over_gather"] for r in ab
                                    if r["kind"] == "moe_mask"), 2)
    assert module_models.FALLBACK_TIME["moe_mask"] == ratio
    dep = deployment("calibration/h200/moe/configs/qwen3-30b-a3b-shape.json",
                     engine="hf-eager", batch=8, prompt_len=512, gen_len=4)
    table = TableBuilder().table([dep])
    shipped = load_learned("h200").modules
    modules = replace(shipped, kinds={k: v for k, v in shipped.kinds.items() if k != "moe_mask"})
    priced, sampled = modules.predict(table, dep.gpu), shipped.predict(table, dep.gpu)
    monkeypatch.setattr(module_models, "FALLBACK_TIME", {})
    plain = modules.predict(table, dep.gpu)
    mask = table.kind_id == KIND_ID["moe_mask"]
    assert mask.any() and np.allclose(priced.time_s[mask], ratio * plain.time_s[mask])
    assert np.array_equal(priced.time_s[~mask], plain.time_s[~mask])
    assert np.array_equal(priced.power_w, plain.power_w)
    assert np.array_equal(shipped.predict(table, dep.gpu).time_s, sampled.time_s)


def test_decode_step_experts_run_the_measured_table_ratio_longer_than_their_samples():
    """The decode-step experts' samples gathered from a table of 8 experts; a deployment's
    gather reads its rank's own table, priced x the committed A/B's median ratio at that
    table size (the constants are that file's medians), and only those rows move."""
    import statistics

    from piep.api import deployment
    from piep.core.artifacts import read_jsonl
    from piep.predict import module_models
    from piep.predict.table import TableBuilder
    ab = [r for path in sorted((ROOT / "calibration" / "h100" / "moe").glob(
        "experts_table_ab_s*.jsonl")) for r in read_jsonl(path)]
    sizes = sorted({r["experts"] for r in ab})
    assert module_models.BATCHED_TABLE_TIME == tuple(
        (e, round(statistics.median(r["all_over_8"] for r in ab if r["experts"] == e), 3))
        for e in sizes)
    shipped = load_learned("h200").modules
    config = "calibration/h200/moe/configs/qwen3-30b-a3b-shape.json"  # 128 experts
    for ep, ratio in ((1, 1.221), (2, 1.132)):  # ep=2: 64 experts on a rank
        dep = deployment(config, engine="hf-eager", batch=8, prompt_len=64, gen_len=4,
                         tp=ep, ep=ep)
        table = TableBuilder().table([dep])
        priced = shipped.predict(table, dep.gpu)
        batched = table.kind_id == KIND_ID["experts_batched"]
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(module_models, "BATCHED_TABLE_TIME", ((8, 1.0), (256, 1.0)))
            flat = shipped.predict(table, dep.gpu)  # the ratio set aside
        assert batched.any()
        assert np.allclose(priced.time_s[batched], ratio * flat.time_s[batched])
        assert np.array_equal(priced.time_s[~batched], flat.time_s[~batched])
        assert np.array_equal(priced.power_w, flat.power_w)


def test_the_packed_kernel_follows_the_committed_ab():
    """The closed form that prices continuous batching's packed attention before it is
    sampled reproduces call 81's A/B (the masked kernel's times) as its docstring says;
    a decoding iteration's time follows its keys, not its heads."""
    import sys

    from piep.core.artifacts import read_jsonl
    from piep.predict.module_models import PACKED
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from paged_attention_ab import quantities
    ab = read_jsonl(ROOT / "calibration" / "h100" / "serving" / "paged_attention_ab_s81.jsonl")
    q, measured = quantities(ab)
    assert len(ab) >= 80 and np.mean(np.abs(PACKED.time_s(q) / measured - 1)) < 0.06
    one = {"tokens": np.array([32.0, 32.0]), "context_len": np.array([65536.0] * 2),
           "heads": np.array([16.0, 48.0])}
    one["flops"] = 4.0 * 32 * 65536 * one["heads"] * 128
    t = PACKED.time_s(one)
    assert t[0] == t[1]


def test_hf_cb_prices_its_packed_attention_by_the_closed_form_until_sampled():
    """hf-cb's attention rows are `sdpa_paged`; without samples of their own their time is
    `PACKED`'s and their power the attention models' above idle by the SMs they keep
    busy; every other row is priced as before."""
    from dataclasses import replace

    from piep.api import deployment
    from piep.predict import module_models
    from piep.predict.table import TableBuilder
    from piep.tree.builder import build_tree
    dep = deployment("llama-3-8b", engine="hf-cb", batch=4, prompt_len=256, gen_len=4)
    assert "sdpa_paged" in {leaf.kind for _, _, leaf in build_tree(dep).leaves()}
    table = TableBuilder().table([dep])
    modules = load_learned("h200").modules
    assert "sdpa_paged" not in modules.kinds and modules.group("sdpa_paged", False) == \
        "attention"
    paged = table.kind_id == KIND_ID["sdpa_paged"]
    priced = modules.predict(table, dep.gpu)
    rows = {f: v[paged] for f, v in table.q.items()}
    assert paged.any()
    assert np.allclose(priced.time_s[paged], module_models.PACKED.time_s(rows))
    assert np.all(priced.power_w[paged] >= dep.gpu.idle_power_w)
    # given samples of its own (here: the attention's models under its name), the
    # packed rows are priced by them like any kind
    sampled = replace(modules, kinds={**modules.kinds,
                                      "sdpa_paged": modules.kinds["attention"]})
    again = sampled.predict(table, dep.gpu)
    assert not np.allclose(again.time_s[paged], priced.time_s[paged])
    assert np.array_equal(again.time_s[~paged], priced.time_s[~paged])


def test_the_reference_host_is_the_pinned_campaigns_not_the_first_file_by_name():
    from piep.core.dataset import REFERENCE_HOST_FILE, load_calibration, reference_host
    from piep.core.samples import HostOverhead
    host = load_calibration("h200").host
    assert host[0].file != REFERENCE_HOST_FILE  # a later campaign sorts first
    assert reference_host(host).file == REFERENCE_HOST_FILE
    one = HostOverhead(launch_gap_power_w=150.0, launch_s=1.0)
    assert reference_host([one]) is one and reference_host([]) is None


def _tiny_calibration(home, every: int = 6, models=("llama-2-13b", "llama-2-7b", "llama-3-8b")):
    """A data folder of the shipped configs and a sixth of the committed H200 calibration:
    every `every`-th module sample (and every host probe), the collectives, wait fits and
    probe, and `models`' single-GPU end-to-end runs."""
    import shutil
    src = ROOT
    cal, shipped = home / "calibration" / "h200", src / "calibration" / "h200"
    (home / "model_trees").symlink_to(src / "model_trees")
    for part in ("gpu.json", "probe/probe_main.json", "waits/fits.json",
                 "collectives/collectives.jsonl"):
        (cal / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shipped / part, cal / part)
    (cal / "modules").mkdir()
    for f in sorted((shipped / "modules").glob("*.jsonl")):
        rows = [line for line in f.read_text().splitlines() if line.strip()]
        (cal / "modules" / f.name).write_text("".join(
            line + "\n" for i, line in enumerate(rows)
            if i % every == 0 or '"piep.host_overhead"' in line))
    runs = [json.loads(line) for line in
            (shipped / "e2e/raw/e2e_1gpu_s0.jsonl").read_text().splitlines() if line.strip()]
    (cal / "e2e" / "raw").mkdir(parents=True)
    (cal / "e2e/raw/e2e.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs
                                                   if r["model"] in models))


def test_piep_train_fits_the_whole_predictor_and_predict_reads_it(tmp_path, monkeypatch,
                                                                  capsys):
    """`piep train` end to end on a tiny calibration (module models, host terms, board
    limit, combiner, leave-one-model-out intervals), written where `predict` reads it."""
    from piep.cli import main
    _tiny_calibration(tmp_path)
    shipped_j = predict("llama-2-7b", batch=4)["energy_j"]
    monkeypatch.setenv("PIEP_HOME", str(tmp_path))
    load_learned.cache_clear()
    try:
        assert main(["train", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["predictor"] == str(tmp_path / "calibration/h200/predictor")
        assert doc["e2e_runs"] == 11 and 0 < doc["module_samples"] < 1000
        assert set(doc["intervals_energy_log"]) >= {"all"}
        answer = predict("llama-2-7b", batch=4)  # from the tiny calibration's predictor
        assert answer["predictor"] == "learned" and answer["energy_j"] > 0
        assert answer["energy_j"] != pytest.approx(shipped_j, rel=1e-6)
    finally:
        load_learned.cache_clear()


def test_a_users_refit_answers_in_place_of_the_shipped_predictor(tmp_path, monkeypatch,
                                                                  capsys):
    """`piep train --from-measurements` writes to the user data directory, and what it
    wrote answers from then on (it was written and never read: 345.707 J before and after
    a refit on 12 committed records); the shipped predictor is left as it was."""
    from piep.core.artifacts import read_jsonl
    from piep.cli import main
    runs = read_jsonl(ROOT / "calibration/h200/e2e/raw/e2e_1gpu_s0.jsonl")
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs[:12]))
    shipped = predict("llama-2-7b")
    monkeypatch.setenv("PIEP_DATA_DIR", str(tmp_path / "data"))
    try:
        assert main(["train", "--from-measurements", str(path), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["predictor"] == str(tmp_path / "data" / "h200" / "predictor")
        mine = predict("llama-2-7b")
        assert mine["predictor"] == "learned (your refit)"
        assert mine["energy_j"] != pytest.approx(shipped["energy_j"], rel=1e-6)
        monkeypatch.delenv("PIEP_DATA_DIR")
        again = predict("llama-2-7b")
        assert again["predictor"] == "learned" and again["energy_j"] == shipped["energy_j"]
    finally:
        load_learned.cache_clear()
