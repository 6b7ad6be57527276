"""The numpy evaluator of LightGBM's text models (piep.predict.gbdt) gives LightGBM's own
predictions bit for bit: on every shipped module model, and on models whose splits send
missing values (NaN, or zero as missing) their default way."""

import json
import os
import sys

import lightgbm as lgb
import numpy as np
import pytest

from piep.predict.gbdt import Forest
from _paths import ROOT  # noqa: E402

pytestmark = pytest.mark.replay

PREDICTOR = ROOT / "calibration" / "h200" / "predictor"


def _same(text: str, x: np.ndarray) -> None:
    expected = lgb.Booster(model_str=text).predict(x)
    got = Forest(text).predict(x)
    assert got.dtype == np.float64 and np.array_equal(got, expected)


@pytest.mark.parametrize("path", sorted(PREDICTOR.glob("*.txt")), ids=lambda p: p.name)
def test_every_shipped_module_model_predicts_as_lightgbm(path):
    kind = path.name.rsplit(".", 2)[0]
    k = json.loads((PREDICTOR / "predictor.json").read_text())["kinds"][kind]
    mean, std = np.asarray(k["mean"]), np.asarray(k["std"])
    near = np.asarray(k["train_z"]) * std + mean  # the samples it was fitted on
    rng = np.random.default_rng(0)
    _same(path.read_text(), np.vstack([near, near + rng.normal(0, 1, near.shape) * std,
                                       rng.normal(0, 3, (200, len(mean)))]))


@pytest.mark.parametrize("params", [{}, {"zero_as_missing": True}], ids=["nan", "zero"])
def test_missing_values_go_the_default_way(params):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 3))
    y = 2 * x[:, 0] + np.where(x[:, 1] > 0, 1.0, -1.0) + rng.normal(0, 0.1, 400)
    x[rng.random(400) < 0.2, 0] = np.nan
    x[rng.random(400) < 0.2, 1] = 0.0
    booster = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 7,
                         "min_data_in_leaf": 5, **params}, lgb.Dataset(x, y), 20)
    test = rng.normal(size=(300, 3))
    test[::3, 0] = np.nan
    test[1::3, 1] = 0.0
    test[2::5, 2] = np.nan
    _same(booster.model_to_string(), test)


def test_a_tree_of_one_leaf_and_other_models_refused():
    x = np.ones((30, 2))
    flat = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(x, np.ones(30)), 3)
    _same(flat.model_to_string(), np.zeros((4, 2)))
    binary = lgb.train({"objective": "binary", "verbose": -1},
                       lgb.Dataset(np.arange(60.0).reshape(30, 2), np.arange(30) % 2), 2)
    with pytest.raises(ValueError, match="regression"):
        Forest(binary.model_to_string())
    with pytest.raises(ValueError, match="2 features"):
        Forest(flat.model_to_string()).predict(np.zeros((3, 5)))


def test_many_rows_go_to_lightgbm_with_the_same_numbers(monkeypatch):
    """A sweep's thousands of rows are evaluated by LightGBM where installed (several
    times faster), a prediction's few by numpy (more than a few by LightGBM once it is
    imported): the same numbers either way."""
    import piep.predict.gbdt as gbdt
    from piep.predict.store import load_learned
    km = load_learned("h200").modules.kinds["linear"]
    rng = np.random.default_rng(1)
    x = km.mean + rng.normal(size=(gbdt.MANY_ROWS + 5, len(km.mean))) * km.std
    x[::7, 0] = np.nan
    fast = km.time_booster.predict(x)
    assert km.time_booster._booster is not None  # LightGBM answered
    assert np.array_equal(fast[:50], km.time_booster.predict(x[:50]))  # imported: LightGBM
    monkeypatch.setattr(gbdt, "MANY_ROWS", 10 ** 9)
    monkeypatch.setattr(gbdt, "SOME_ROWS", 10 ** 9)  # numpy's walk
    assert np.array_equal(fast, km.time_booster.predict(x))
    assert np.array_equal(fast[:50], km.time_booster.predict(x[:50]))


@pytest.mark.parametrize("params", [{}, {"zero_as_missing": True}], ids=["nan", "zero"])
def test_rows_between_the_same_thresholds_are_walked_once(params):
    """Rows whose every feature lies between the same two thresholds of the model share a
    cell, and one of them is evaluated; a row at a threshold, just above it, NaN, zero or
    within LightGBM's zero of it each keeps its own way (the predictions are LightGBM's,
    row by row)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 2))
    y = np.sin(3 * x[:, 0]) + x[:, 1] + rng.normal(0, 0.1, 300)
    x[::9, 1] = 0.0
    text = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 7,
                      "min_data_in_leaf": 5, **params}, lgb.Dataset(x, y), 15).model_to_string()
    forest = Forest(text)
    edges = forest._edges[0]
    assert len(edges) > 3
    gaps = (edges[:-1] + edges[1:]) / 2  # one value inside each gap between thresholds
    jitter = (edges[1:] - edges[:-1]) * rng.uniform(-0.4, 0.4, (50, len(gaps)))
    inside = np.column_stack([(gaps + jitter).ravel(), np.full(jitter.size, 0.5)])
    first, cell = forest.cells(inside)
    assert len(first) == len(gaps)  # 50 rows per gap, one cell each
    assert np.array_equal(inside[first][cell][:, 0] > edges[0], inside[:, 0] > edges[0])
    at = np.concatenate([edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf),
                         [np.nan, 0.0, 1e-36, -1e-36, 1e-30]])
    border = np.column_stack([np.tile(at, 2), np.repeat([0.0, np.nan], len(at))])
    for rows in (inside, border):
        _same(text, rows)
        expected = lgb.Booster(model_str=text).predict(rows)
        one_by_one = np.array([forest.predict(r[None])[0] for r in rows[::7]])
        assert np.array_equal(one_by_one, expected[::7])


def test_forests_evaluated_together_give_each_its_own_numbers():
    """Two forests over the same rows (a kind's time and power models) walk one row per
    cell of both their splits: each gets LightGBM's numbers, also where one takes zero for
    missing and the other does not, at NaN, zero and within LightGBM's zero of it."""
    from piep.predict.gbdt import joint_splits, predict_aside, predict_together
    rng = np.random.default_rng(8)
    x = rng.normal(size=(400, 3))
    x[::6, 0], x[1::7, 1] = 0.0, np.nan
    texts = [lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 7,
                        "min_data_in_leaf": 5, **params}, lgb.Dataset(x, y), 15)
             .model_to_string()
             for params, y in (({"zero_as_missing": True}, np.sin(3 * x[:, 0]) + x[:, 2]),
                               ({}, np.cos(2 * x[:, 2]) - np.nan_to_num(x[:, 1])))]
    forests = [Forest(t) for t in texts]
    assert forests[0]._zero_missing.any() and not forests[1]._zero_missing.any()
    test = rng.normal(size=(300, 3))
    test[::5, 0] = np.array([0.0, 1e-36, -1e-36, np.nan, 1e-30] * 12)
    test[2::9, 1] = np.nan
    got = predict_together(forests, test, splits=joint_splits(forests))
    for text, g in zip(texts, got):
        assert np.array_equal(g, lgb.Booster(model_str=text).predict(test))
    no_nan = np.nan_to_num(test, nan=0.5)  # cells without a NaN column
    for text, g in zip(texts, predict_together(forests, no_nan)):
        assert np.array_equal(g, lgb.Booster(model_str=text).predict(no_nan))
    # the same forests on the worker thread: the same numbers, also for several pending
    waits = [predict_aside(forests, rows) for rows in (test, no_nan, test[:7])]
    for rows, wait in zip((test, no_nan, test[:7]), waits):
        for text, g in zip(texts, wait()):
            assert np.array_equal(g, lgb.Booster(model_str=text).predict(rows))


def test_products_in_blocks_give_the_whole_products_numbers(monkeypatch):
    """`table.product` takes a product a block of rows at a time (blocks below the sizes
    at which OpenBLAS goes parallel): every row has the numbers of the whole product, a
    last block shorter than the others included."""
    from piep.predict import table
    rng = np.random.default_rng(4)
    f, w = rng.normal(size=(1_000, 8)), rng.normal(size=8)
    a, b = rng.normal(size=(333, 8)), rng.normal(size=(8, 41))
    monkeypatch.setattr(table, "VECTOR_ELEMENTS", 8 * 64)
    monkeypatch.setattr(table, "MATRIX_MNK", 8 * 41 * 10)
    calls = []
    real = np.matmul
    monkeypatch.setattr(np, "matmul", lambda x, y, **kw: calls.append(len(x)) or real(x, y,
                                                                                      **kw))
    assert np.array_equal(table.product(f, w), f @ w)
    assert calls[:3] == [64, 64, 64] and calls[15] == 1_000 - 15 * 64
    calls.clear()
    assert np.array_equal(table.product(a, b), a @ b)
    assert calls[0] == 10 and len(calls) == 34
    assert np.array_equal(table.product(a[:5], b), a[:5] @ b)  # one block: the product


def test_the_range_test_finds_the_nearest_sample():
    """The out-of-range flag (the nearest training sample, found by one matrix product per
    chunk) is the brute-force search's, also for leaves close to the threshold."""
    from piep.predict.store import load_learned
    rng = np.random.default_rng(2)
    flagged = 0
    for km in load_learned("h200").modules.kinds.values():
        train = km.train_z
        if len(train) == 0:
            continue
        near_threshold = km.oor_threshold / np.sqrt(train.shape[1])
        z = train[rng.integers(0, len(train), 400)] \
            + rng.normal(size=(400, train.shape[1])) * near_threshold * rng.uniform(0, 3, (400, 1))
        x = z * km.std + km.mean
        zs = (x - km.mean) / np.where(km.std > 1e-6, km.std, np.inf)
        brute = np.sqrt(((zs[:, None, :] - train[None]) ** 2).sum(-1).min(1))
        got = km.out_of_range(x)
        assert np.array_equal(got, ~(brute <= km.oor_threshold))
        flagged += int(got.sum())
    assert 0 < flagged  # some leaves out of range, some in


def test_the_range_test_at_its_threshold_searches_in_double_precision(monkeypatch):
    """Leaves a billionth of the threshold inside or outside it are beyond what the
    single-precision search can tell: they are searched again in double precision and
    answered as the brute-force search answers them."""
    import piep.predict.module_models as mm
    from piep.predict.store import load_learned
    km = load_learned("h200").modules.kinds["linear"]
    train, limit = km.train_z, km.oor_threshold
    rng = np.random.default_rng(4)
    unit = rng.normal(size=(300, train.shape[1]))
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    z = train[rng.integers(0, len(train), 300)] \
        + unit * limit * np.where(np.arange(300) % 2, 1 + 1e-9, 1 - 1e-9)[:, None]
    brute = np.sqrt(((z[:, None, :] - train[None]) ** 2).sum(-1).min(1))
    searched = []
    real = mm.nearest_distance
    monkeypatch.setattr(mm, "nearest_distance",
                        lambda q, *a, **k: searched.append(len(q)) or real(q, *a, **k))
    far = mm.farther_than(z, train, (train * train).sum(1), limit)
    assert np.array_equal(far, ~(brute <= limit))
    assert far.any() and not far.all() and searched and searched[0] < len(z)


def test_the_range_test_screens_a_subset_of_the_samples_first(monkeypatch):
    """Of many samples, a strided subset is searched first: rows within the threshold of
    one of them are within it, the others are searched over every sample. The answer is
    the brute-force search's, for rows near samples, far from all, and at the threshold."""
    import piep.predict.module_models as mm
    rng = np.random.default_rng(6)
    centers = rng.normal(0, 3, (40, 6))  # samples come in clusters, as a grid of shapes
    train = centers[rng.integers(0, 40, 2000)] + rng.normal(0, 0.1, (2000, 6))
    limit = 0.6
    unit = rng.normal(size=(200, 6))
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    z = np.vstack([train[rng.integers(0, 2000, 600)] + rng.normal(0, 0.05, (600, 6)),
                   rng.normal(0, 4, (200, 6)),
                   train[rng.integers(0, 2000, 200)] + unit * limit
                   * np.where(np.arange(200) % 2, 1 + 1e-9, 1 - 1e-9)[:, None]])
    brute = np.sqrt(((z[:, None, :] - train[None]) ** 2).sum(-1).min(1))
    screened = []
    real = mm._screen
    monkeypatch.setattr(mm, "_screen", lambda q, t, *a: screened.append((len(q), len(t)))
                        or real(q, t, *a))
    far = mm.farther_than(z, train, (train * train).sum(1), limit)
    assert np.array_equal(far, ~(brute <= limit))
    assert far.any() and not far.all()
    (rows, some), (rest, every) = screened
    assert (rows, some, every) == (len(z), mm.SCREEN_SAMPLES, len(train))
    assert rest < rows / 2  # most rows answered by the subset


def test_distinct_rows_groups_equal_rows_only():
    """Rows are grouped by one weighted sum each, checked: equal rows share a group, and
    unequal rows whose sums coincide are grouped by their bytes instead."""
    from piep.predict.gbdt import _WEIGHTS, distinct_rows
    rng = np.random.default_rng(5)
    base = rng.normal(size=(40, 6))
    a = base[rng.integers(0, 40, 500)]
    a[::50] = np.nan
    first, group = distinct_rows(a)
    assert np.array_equal(a[first][group], a, equal_nan=True)
    assert len(first) == len(np.unique(a[~np.isnan(a[:, 0])], axis=0)) + 1
    clash = np.array([[_WEIGHTS[1], 0.0], [0.0, _WEIGHTS[0]], [_WEIGHTS[1], 0.0]])
    assert clash[0] @ _WEIGHTS[:2] == clash[1] @ _WEIGHTS[:2]  # the same sum
    first, group = distinct_rows(clash)
    assert len(first) == 2 and group[0] == group[2] != group[1]
    codes = rng.integers(0, 9, size=(300, 16)).astype(np.uint16)
    first, group = distinct_rows(codes)
    assert np.array_equal(codes[first][group], codes)
    assert len(first) == len(np.unique(codes, axis=0))


def test_distinct_columns_groups_as_the_stacked_rows():
    """Columns read one by one give `distinct_rows`' grouping of the rows they make: equal
    rows share a group, unequal rows whose sums coincide are told apart, NaN rows too."""
    from piep.predict.gbdt import _WEIGHTS, distinct_columns, distinct_rows
    rng = np.random.default_rng(7)
    base = rng.normal(size=(30, 5))
    a = base[rng.integers(0, 30, 400)]
    for rows in (a, np.vstack([a, [[np.nan] * 5]]),
                 np.array([[_WEIGHTS[1], 0.0], [0.0, _WEIGHTS[0]], [_WEIGHTS[1], 0.0]])):
        first, group = distinct_columns(list(rows.T.copy()))
        assert np.array_equal(rows[first][group], rows, equal_nan=True)
        assert len(first) == len(distinct_rows(rows)[0])
    first, group = distinct_columns([np.array([1.0, 2.0, 1.0]), np.array([0, 1, 0])])
    assert len(first) == 2 and group[0] == group[2] != group[1]


def test_a_kinds_gbdts_beside_the_caller_give_its_numbers():
    """`boosted_aside` (the shipped module models' forests on the worker thread, from
    `MANY_ROWS` rows; at once below) answers what `boosted` answers, to the bit."""
    from piep.predict import module_models as mm
    from piep.predict.store import load_learned
    rng = np.random.default_rng(6)
    kinds = load_learned("h200").modules.kinds
    for name in ("linear", "attention", "norm"):
        km = kinds[name]
        x = km.train_z[rng.integers(0, len(km.train_z), 900)] * km.std + km.mean
        x += rng.normal(scale=0.05, size=x.shape) * km.std
        for rows in (x, x[:mm.MANY_ROWS]):
            wait = km.boosted_aside(rows)
            for got, want in zip(wait(), km.boosted(rows)):
                assert np.array_equal(got, want)


def _aside_in_child(texts, rows, want) -> None:
    from piep.fit.workers import _without_lightgbm
    from piep.predict.gbdt import predict_aside
    _without_lightgbm()  # as the fits' workers: no LightGBM threads after a fork
    got = predict_aside([Forest(t) for t in texts], rows)()
    os._exit(0 if all(np.array_equal(g, w) for g, w in zip(got, want)) else 3)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks (Linux)")
def test_a_forked_child_evaluates_aside_on_a_thread_of_its_own():
    """After a fork (the fits' worker processes) the child has none of the parent's
    threads: its forests go to a worker of its own instead of waiting for ever."""
    import multiprocessing

    from piep.predict.gbdt import predict_aside
    rng = np.random.default_rng(9)
    x = rng.normal(size=(300, 2))
    texts = [lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 5},
                       lgb.Dataset(x, y), 5).model_to_string()
             for y in (x[:, 0], np.sin(x[:, 1]))]
    predict_aside([Forest(t) for t in texts], x)()  # the parent's worker, started
    want = [lgb.Booster(model_str=t).predict(x[:50]) for t in texts]
    child = multiprocessing.get_context("fork").Process(target=_aside_in_child,
                                                        args=(texts, x[:50], want))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
