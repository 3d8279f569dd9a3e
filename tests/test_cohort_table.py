"""The dataset report's "Table 1" (``flows.lib.modeling.cohort_table``): its follow-up against
lifelines, its standardised differences by hand, and the small counts it withholds."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cet_model.dataset import Dataset, Split
from flows.lib.modeling.cohort_table import MAX_FEATURES, event_rows, feature_rows, reverse_km_median


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 12), st.booleans()), min_size=1, max_size=40))
def test_median_follow_up_is_lifelines_reverse_kaplan_meier(rows):
    from lifelines import KaplanMeierFitter

    t = np.array([r[0] for r in rows], float)
    s = np.array([r[1] for r in rows], float)
    curve = KaplanMeierFitter().fit(t, 1.0 - s).survival_function_.iloc[:, 0]
    at_half = curve.index[curve.to_numpy() <= 0.5 + 1e-9]  # the first time at or below one half; lifelines'
    ours = reverse_km_median(t, s)                          # own median misses an exact half by its rounding
    assert (ours is None and at_half.size == 0) or ours == pytest.approx(at_half[0])


def split(x, t, s, mask=None):
    n = len(x)
    return Split(np.arange(n), x, t, s, np.full(t.shape, np.nan), t, mask=mask)


def test_small_counts_are_withheld_and_masked_cells_not_counted():
    rng = np.random.default_rng(0)
    n = 100
    t = rng.uniform(1, 10, (n, 2))
    s = np.zeros((n, 2))
    s[:40, 0] = 1  # 40 of 100 seen
    s[:3, 1] = 1  # 3 seen: withheld
    mask = np.ones((n, 2))
    mask[50:, 0] = 0  # the first event followed on half the rows: 40 of 50
    x = np.column_stack([rng.standard_normal(n), (np.arange(n) < 95).astype(float)])  # 95 of 100: 5 aside
    parts = {name: split(x, t, s, mask) for name in ("train", "val", "test")}
    ds = Dataset(path=None, manifest={}, feature_names=["age", "smoker"], event_names=["a", "b"], splits=parts)
    rows = event_rows(ds, "days")
    assert rows[0] == ["event", "seen, train (100 rows)", "seen, val (100 rows)", "seen, test (100 rows)",
                       "median follow-up (days)", "longest"]
    assert rows[1][1:4] == ["40 (80.0 %)"] * 3 and rows[2][1:4] == ["< 10"] * 3
    features, note = feature_rows(ds)
    assert note is None and features[2] == ["smoker", "> 90", "> 90", ""]  # a difference would give the 5 away
    assert features[1][1] == f"{x[:, 0].mean():.3g} ({x[:, 0].std(ddof=1):.3g})" and features[1][3] == "+0.00"


def test_many_features_show_the_ones_the_splits_differ_on_most():
    rng = np.random.default_rng(1)
    d, n = 80, 200
    shift = np.zeros(d)
    shift[[5, 17, 60]] = [2.0, -1.5, 1.0]  # the test rows moved on three features
    train, test = rng.standard_normal((n, d)), rng.standard_normal((n, d)) + shift
    t, s = np.ones((n, 1)), np.zeros((n, 1))
    names = [f"f{k}" for k in range(d)]
    ds = Dataset(path=None, manifest={}, feature_names=names, event_names=["e"],
                 splits={"train": split(train, t, s), "test": split(test, t, s)})
    rows, note = feature_rows(ds, {"f5": "Creatinine"})
    shown = [r[0] for r in rows[1:]]
    assert len(shown) == MAX_FEATURES and note.startswith(f"The {MAX_FEATURES} of {d} features")
    assert {"f5 (Creatinine)", "f17", "f60"} <= set(shown)
    assert shown == sorted(shown, key=lambda name: int(name.split()[0][1:]))  # in the dataset's order
    pooled = np.sqrt((train[:, 5].var(ddof=1) + test[:, 5].var(ddof=1)) / 2)
    assert rows[1 + shown.index("f5 (Creatinine)")][3] == f"{(train[:, 5].mean() - test[:, 5].mean()) / pooled:+.2f}"


def test_features_standardised_at_the_build_are_said_to_be_and_items_named_by_their_label():
    rng = np.random.default_rng(2)
    raw = rng.normal(80.0, 12.0, (300, 1))
    x = np.column_stack([(raw - raw[:200].mean()) / raw[:200].std(ddof=1), rng.random(300) < 0.5]).astype(float)
    t, s = np.ones((300, 1)), np.zeros((300, 1))
    ds = Dataset(path=None, manifest={}, feature_names=["chart_211_mean", "sex=F"], event_names=["e"],
                 splits={"train": split(x[:200], t[:200], s[:200]), "test": split(x[200:], t[200:], s[200:])})
    rows, note = feature_rows(ds, {"chart_211": "Heart Rate"})
    assert rows[1][:2] == ["chart_211_mean (Heart Rate)", "0 (1)"] and rows[2][0] == "sex=F"
    assert note == ("The dataset holds its features standardised (mean 0 and SD 1 on the training rows), so the "
                    "means and SDs are in those units.")
    ds.splits["train"] = split(raw[:200] * np.ones((1, 2)), t[:200], s[:200])  # in its own units: nothing to say
    assert feature_rows(ds)[1] is None
