import json

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cet_model.censoring import censor_by_median, censor_uniform
from cet_model.dataset import load_dataset, write_dataset
from flows.lib.standin import synthetic

SMALL = dict(n=1000, split_sizes=(600, 200, 200))


def test_reference_mode_has_the_identical_labels_artefact(tmp_path):
    ds = load_dataset(synthetic.write(tmp_path / "ref", "reference", **SMALL))
    c = np.concatenate([ds.train.C, ds.val.C, ds.test.C])
    assert (c[:, 0] == c[:, 1]).all()
    # the shared noise stream: x1 - x3 and x2 - x4 carry no noise, so they determine c
    from sklearn.neighbors import KNeighborsClassifier

    diff = lambda s: np.column_stack([s.X[:, 0] - s.X[:, 2], s.X[:, 1] - s.X[:, 3]])  # noqa: E731
    knn = KNeighborsClassifier(1).fit(diff(ds.train), ds.train.C[:, 0])
    assert knn.score(diff(ds.test), ds.test.C[:, 0]) > 0.97
    raw = KNeighborsClassifier(15).fit(ds.train.X[:, :2], ds.train.C[:, 0])
    assert raw.score(ds.test.X[:, :2], ds.test.C[:, 0]) < 0.85  # the noisy features alone do not


def test_independent_mode_draws_each_event_on_its_own(tmp_path):
    ds = load_dataset(synthetic.write(tmp_path / "ind", "independent", **SMALL))
    c = np.concatenate([ds.train.C, ds.val.C, ds.test.C])
    assert 0.35 < (c[:, 0] == c[:, 1]).mean() < 0.65
    assert abs(c.mean() - 0.5) < 0.05


def test_synthetic_contract_and_profile(tmp_path):
    ds = load_dataset(synthetic.write(tmp_path / "s", "reference"))
    assert [len(ds.train), len(ds.val), len(ds.test)] == [24_000, 8_000, 8_000]
    assert ds.feature_names == ["x1", "x2", "x3", "x4", "x5"] and ds.event_names == ["T1", "T2"]
    tr = ds.train
    assert (tr.T > 0).all() and (tr.T <= 3).all()
    assert 0.22 < tr.S.mean() < 0.26  # P(s = 1) ~ 0.237 as in the original
    assert np.isnan(tr.T_true[tr.C == 0]).all() and np.isfinite(tr.T_true[tr.C == 1]).all()
    np.testing.assert_allclose(tr.T[tr.S == 1], tr.T_true[tr.S == 1])
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    for key in ("name", "feature_names", "event_names", "time_unit", "censoring", "seeds", "split_sizes",
                "source_fingerprints"):
        assert key in manifest


def test_synthetic_is_deterministic(tmp_path):
    a = synthetic.generate("independent", seed=5, **SMALL)
    b = synthetic.generate("independent", seed=5, **SMALL)
    assert a[0].equals(b[0]) and a[1].equals(b[1])


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.1, 0.9))
def test_censoring_invariants(seed, rate):
    rng = np.random.default_rng(seed)
    n = 200
    c = (rng.random((n, 3)) < rate).astype(int)
    t_true = np.where(c == 1, rng.exponential(size=(n, 3)) + 1e-3, np.nan)
    train = np.arange(n) < 120
    if not c[train].any(0).all():
        return
    t, s, params = censor_by_median(t_true, c, train, factor=2.0, seed=seed)
    assert (t > 0).all()
    assert ((s == 1) <= (c == 1)).all()  # s = 1 implies c = 1
    assert (t[c == 1] <= t_true[c == 1]).all()  # t <= t_true
    assert (t <= np.array(params["upper"])).all()
    np.testing.assert_allclose(params["median"], [np.median(t_true[train & (c[:, j] == 1), j]) for j in range(3)])
    t2, s2, _ = censor_by_median(t_true, c, train, factor=2.0, seed=seed)
    np.testing.assert_array_equal(t, t2)
    np.testing.assert_array_equal(s, s2)


def test_censoring_uses_training_rows_only():
    c = np.ones((4, 1), int)
    t_true = np.array([[1.0], [3.0], [100.0], [200.0]])
    _, _, params = censor_by_median(t_true, c, np.array([True, True, False, False]), factor=2.0)
    assert params["median"] == [2.0]


@pytest.mark.bad_input
def test_censoring_errors():
    with pytest.raises(ValueError, match="row 1, event 0 occurs"):
        censor_uniform(np.array([[1.0], [np.nan]]), np.array([[1], [1]]), 2.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="no training row has the event"):
        censor_by_median(np.array([[np.nan]]), np.array([[0]]), np.array([True]), event_names=["ANA"])


def _frames():
    f, e, m = synthetic.generate("reference", **SMALL)
    return f, e, m


@pytest.mark.parametrize("break_it,match", [
    (lambda f, e, m: (f.drop("x3"), e, m), r"features.parquet: missing columns \['x3'\]"),
    (lambda f, e, m: (f, e.drop("c_T2"), m), r"events.parquet: missing columns \['c_T2'\]"),
    (lambda f, e, m: (f, e.with_columns(pl.when(pl.col("id") == 7).then(0.0).otherwise(pl.col("t_T1"))
                                        .alias("t_T1")), m),
     r"events.parquet: column 't_T1' row 7 is 0; values must be finite and > 0"),
    (lambda f, e, m: (f.with_columns(pl.when(pl.col("id") == 3).then(float("nan")).otherwise(pl.col("x1"))
                                     .alias("x1")), e, m),
     r"features.parquet: column 'x1' row 3 is NaN"),
    (lambda f, e, m: (f.with_columns(pl.when(pl.col("id") == 2).then(pl.lit("dev")).otherwise(pl.col("split"))
                                     .alias("split")), e, m),
     r"column 'split' row 2 is not one of"),
    (lambda f, e, m: (f, e.with_columns(pl.lit(0).alias("c_T1")), m), r"has s_T1 = 1 but c_T1 = 0"),
    (lambda f, e, m: (f, e.with_columns(pl.lit(2).alias("s_T1")), m), r"column 's_T1' row 0 is a number \(and \d+ "
                                                                      r"other rows\); expected 0 or 1"),
    (lambda f, e, m: (f, e.with_columns(pl.lit(None).alias("s_T1")), m), r"column 's_T1' row 0 is missing \(and \d+ "
                                                                         r"other rows\); expected 0 or 1$"),
    (lambda f, e, m: (f, e.with_columns(pl.lit(2).alias("c_T2")), m),
     r"column 'c_T2' row 0 is a number \(and \d+ other rows\); expected 0 or 1, or null where "
     r"the true occurrence is not known"),
    (lambda f, e, m: (f, e.with_columns(pl.lit("yes").alias("c_T2")), m), r"column 'c_T2' row 0 is text \(and \d+ "
                                                                          r"other rows\); expected 0 or 1"),
    (lambda f, e, m: (f, e.reverse(), m), r"'id' is not in the same order"),
    (lambda f, e, m: (f, e, {k: v for k, v in m.items() if k != "time_unit"}), r"manifest.json: missing fields "
                                                                               r"\['time_unit'\]"),
    (lambda f, e, m: (f.with_columns(pl.when(pl.col("id") == 4).then(None).otherwise(pl.col("split")).alias("split")),
                      e, m), r"features.parquet: "
                             r"column 'split' row 4 is not one of"),  # a null split would drop the row
    (lambda f, e, m: (f, e.with_columns(pl.when(pl.col("id") == 5).then(pl.lit("test")).otherwise(pl.col("split"))
                                        .alias("split")), m), r"events.parquet: column 'split' row 5 differs from "
                                                              r"features.parquet's split of that row"),
    (lambda f, e, m: (f, e, dict(m, split_sizes=dict(m["split_sizes"], train=m["split_sizes"]["train"] + 1))),
     r"manifest.json: split_sizes \{.*\} do not match the rows of features.parquet's 'split' column"),
    (lambda f, e, m: (f, e, dict(m, feature_names=[*m["feature_names"], m["feature_names"][0]])),
     r"manifest.json: feature_names lists \['x1'\] more than once"),
    (lambda f, e, m: (f, e.with_columns(pl.when(pl.col("id") == 9).then(-2.0).otherwise(pl.col("t_true_T1"))
                                        .alias("t_true_T1")), m),
     r"events.parquet: column 't_true_T1' row 9 is negative; a true time must be finite and > 0, or null"),
    # the optional split groups (a patient's rows): text on every row, one split per group, not a feature name
    (lambda f, e, m: (f.with_columns(pl.lit("p0").alias("split_group")), e, m),
     r"features.parquet: column 'split_group' row 0 holds a group whose rows are in more "
     r"than one split \(1 such groups\)"),
    (lambda f, e, m: (f.with_columns(pl.when(pl.col("id") == 6).then(None).otherwise(pl.col("id").cast(pl.String))
                                     .alias("split_group")), e, m),
     r"features.parquet: column 'split_group' row 6 is missing; every row needs the group its split was drawn by"),
    (lambda f, e, m: (f.with_columns(pl.col("id").alias("split_group")), e, m),
     r"column 'split_group' has type Int\d+, expected text"),
    (lambda f, e, m: (f.rename({"x1": "split_group"}), e,
                      dict(m, feature_names=["split_group", *m["feature_names"][1:]])),
     r"manifest.json: 'split_group' is the column of the split's groups, not a feature name"),
])
@pytest.mark.bad_input
def test_bad_dataset_is_refused_and_nothing_is_written(tmp_path, break_it, match):
    f, e, m = break_it(*_frames())
    with pytest.raises(ValueError, match=match):
        write_dataset(tmp_path / "out", f, e, m)
    assert list(tmp_path.iterdir()) == []  # no folder, no temporary left behind


def test_rewrite_replaces_whole_folder_and_load_checks_files(tmp_path):
    f, e, m = _frames()
    write_dataset(tmp_path / "d", f, e, m)
    write_dataset(tmp_path / "d", f.head(600).with_columns(pl.lit("train").alias("split")),
                  e.head(600).with_columns(pl.lit("train").alias("split")), dict(m, split_sizes={"train": 600}))
    assert len(load_dataset(tmp_path / "d").train) == 600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    (tmp_path / "d" / "events.parquet").unlink()
    with pytest.raises(FileNotFoundError, match="events.parquet: missing"):
        load_dataset(tmp_path / "d")


def test_censoring_median_fallback_is_explicit_and_recorded():
    t_true = np.array([[1.0, np.nan, np.nan], [3.0, 5.0, np.nan], [2.0, np.nan, np.nan]])
    c = np.isfinite(t_true).astype(int)
    train = np.array([True, False, True])
    _, _, params = censor_by_median(t_true, c, train, fallback=True, event_names=["a", "b", "z"])
    assert params["median"] == [1.5, 5.0, 3.25]
    assert params["median_from"] == {"a": "train", "b": "all rows", "z": "median of the other events"}


def test_split_take_keeps_rows_and_reads_embeddings_from_the_same_file(tmp_path):
    """``Split.take`` selects the same rows of every array; comment embeddings stay a view of
    the file's rows (no copy), also when the split itself is already a view."""
    from cet_model.comments import NpyRows, RowView
    from cet_model.dataset import Split, save_rows

    n, m = 6, 2
    seq = np.arange(n * 3 * 4, dtype=np.float32).reshape(n, 3, 4)
    save_rows(tmp_path / "sequences.npy", seq)
    on_disk = NpyRows(tmp_path / "sequences.npy")
    rng = np.random.default_rng(0)
    split = Split(ids=np.arange(10, 10 + n), X=rng.standard_normal((n, 2)), T=rng.random((n, m)) + 1,
                  S=rng.integers(0, 2, (n, m)).astype(float), C=np.ones((n, m)), T_true=rng.random((n, m)) + 1,
                  sequences=RowView(on_disk, np.array([5, 4, 3, 2, 1, 0])), mask=rng.integers(0, 2, (n, m)))
    rows = np.array([4, 0, 2])
    part = split.take(rows)
    assert part.ids.tolist() == [14, 10, 12]
    for name in ("X", "T", "S", "C", "T_true", "mask"):
        np.testing.assert_array_equal(getattr(part, name), getattr(split, name)[rows])
    assert isinstance(part.sequences, RowView) and part.sequences.base is on_disk
    np.testing.assert_array_equal(np.asarray(part.sequences), seq[[1, 5, 3]])


def test_load_dataset_reads_each_split_as_the_table_orders_it_and_only_the_splits_named(tmp_path):
    path = synthetic.write(tmp_path / "ref", "reference", **SMALL)
    ds = load_dataset(path)
    features = pl.read_parquet(path / "features.parquet")
    for name in ("train", "val", "test"):
        rows = features.filter(pl.col("split") == name)
        got = ds.splits[name]
        assert (got.ids == rows["id"].to_numpy()).all()
        assert np.array_equal(got.X, rows.select(ds.feature_names).to_numpy()) and got.X.flags.c_contiguous
    fit_only = load_dataset(path, splits=("train", "val"))
    assert set(fit_only.splits) == {"train", "val"}
    for name in ("train", "val"):
        a, b = ds.splits[name], fit_only.splits[name]
        for field in ("ids", "X", "T", "S", "C", "T_true"):
            assert np.array_equal(getattr(a, field), getattr(b, field), equal_nan=True), field
    with pytest.raises(ValueError, match=r"splits: \['tests'\] are not among"):
        load_dataset(path, splits=("train", "tests"))
