"""Paired bootstrap intervals of the test metrics (``cet_model.bootstrap.bootstrap_intervals``)."""

import numpy as np
import pytest

from cet_model.bootstrap import bootstrap_intervals
from cet_model.dataset import Split
from cet_model.metrics import concordance_index, horizon_auc, occurrence_auc


def _split(rng, n=120):
    c = (rng.random((n, 2)) < 0.5).astype(float)
    t = np.round(rng.exponential(size=(n, 2)), 1) + 0.1  # tied times
    s = c * (rng.random((n, 2)) < 0.7)  # some occurrences censored
    c[rng.random(n) < 0.2, 0] = np.nan  # truth unknown on some rows of event 0
    mask = np.ones((n, 2))
    mask[rng.random(n) < 0.15, 1] = 0  # event 1 not defined for some rows
    return Split(ids=np.arange(n), X=np.zeros((n, 1)), T=t, S=s, C=c, T_true=t, mask=mask)


def _one_at_a_time(split, values, metric, rows, train=None, horizons=None):
    """The average over events of the metric on the rows ``rows`` (a resample), one call per event."""
    per_event = []
    for j in range(values.shape[1]):
        keep = split.mask[rows, j] == 1
        if metric == "auc_h":
            r, followed = rows[keep], train.mask[:, j] == 1
            per_event.append(horizon_auc(train.T[followed, j], train.S[followed, j], split.T[r, j], split.S[r, j],
                                         values[r, j], horizons[j]))
        elif metric == "auc":
            keep &= ~np.isnan(split.C[rows, j])
            r = rows[keep]
            per_event.append(occurrence_auc(split.C[r, j], values[r, j]))
        else:
            r = rows[keep]
            try:
                per_event.append(concordance_index(split.T[r, j], values[r, j], split.S[r, j]))
            except ZeroDivisionError:
                per_event.append(np.nan)
    return np.nanmean(per_event) if not np.isnan(per_event).all() else np.nan


def test_intervals_equal_one_metric_call_per_resample_and_are_paired():
    rng = np.random.default_rng(0)
    split = _split(rng)
    inputs = {"CET": {"auc": np.round(rng.random((120, 2)), 2), "ci": np.round(rng.exponential(size=(120, 2)), 1),
                      "auc_h": np.round(rng.random((120, 2)), 2)},
              "ET": {"auc": -rng.exponential(size=(120, 2)), "ci": rng.exponential(size=(120, 2)),
                     "auc_h": rng.random((120, 2))},
              "BC": {"auc": rng.random((120, 2))}}
    train, horizons = _split(rng, n=300), np.array([0.8, 1.2])  # the censoring weights; each event's horizon
    out = bootstrap_intervals(split, inputs, resamples=50, seed=4, train=train, horizons=horizons)
    draws = np.random.default_rng(4).integers(0, 120, size=(50, 120))  # the function's resamples
    for metric, models in (("auc", ("CET", "ET", "BC")), ("ci", ("CET", "ET")), ("auc_h", ("CET", "ET"))):
        assert set(out["metrics"][metric]) == set(models)
        per = {m: np.array([_one_at_a_time(split, inputs[m][metric], metric, d, train, horizons) for d in draws])
               for m in models}
        for m in models:
            got = out["metrics"][metric][m]
            assert got["estimate"] == pytest.approx(
                _one_at_a_time(split, inputs[m][metric], metric, np.arange(120), train, horizons))
            assert [got["low"], got["high"]] == pytest.approx(np.quantile(per[m], [0.025, 0.975]))
            if m != "CET":  # the difference is taken resample by resample, not from the two intervals
                diff = out["differences"][metric][m]
                assert [diff["low"], diff["high"]] == pytest.approx(np.quantile(per["CET"] - per[m], [0.025, 0.975]))
                assert diff["estimate"] == pytest.approx(out["metrics"][metric]["CET"]["estimate"] - got["estimate"])
    assert "BC" not in out["differences"]["ci"] and "CET" not in out["differences"]["auc"]
    assert (out["resamples"], out["level"], out["rows"]) == (50, 0.95, 120)


def test_a_paired_difference_is_narrower_than_the_models_spread_and_excludes_zero_when_one_is_better():
    # the two scores share most of their signal: the difference's interval is far narrower than
    # either model's own, and a better model's lead is distinguished from zero
    rng = np.random.default_rng(1)
    n = 400
    c = (rng.random((n, 1)) < 0.4).astype(float)
    t = rng.exponential(size=(n, 1)) + 0.1
    split = Split(ids=np.arange(n), X=np.zeros((n, 1)), T=t, S=c, C=c, T_true=t)
    shared = c + rng.normal(0, 1.0, c.shape)
    out = bootstrap_intervals(split, {"CET": {"auc": shared + 0.6 * c}, "BC": {"auc": shared}}, seed=0)
    width = {m: v["high"] - v["low"] for m, v in out["metrics"]["auc"].items()}
    diff = out["differences"]["auc"]["BC"]
    assert diff["high"] - diff["low"] < 0.5 * min(width.values())
    assert 0 < diff["low"] < diff["estimate"] < diff["high"]


def test_no_truth_leaves_auc_out_and_bad_arguments_are_refused():
    rng = np.random.default_rng(2)
    split = _split(rng)
    split.C[:] = np.nan
    out = bootstrap_intervals(split, {"CET": {"auc": rng.random((120, 2)), "ci": rng.random((120, 2))}}, resamples=20)
    assert list(out["metrics"]) == ["ci"] and out["differences"] == {"ci": {}}
    empty = split.take(np.arange(0))
    assert bootstrap_intervals(empty, {"CET": {"ci": np.zeros((0, 2))}})["metrics"] == {}
    with pytest.raises(ValueError, match="level"):
        bootstrap_intervals(split, {}, level=95)
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_intervals(split, {}, resamples=0)


def test_each_event_gets_its_own_interval_on_the_same_resamples():
    """``by_event``: per model and event, the interval of that event's metric over the same
    resamples as the average (what the per-event table prints); None where undefined."""
    rng = np.random.default_rng(1)
    split = _split(rng)
    inputs = {"CET": {"auc": rng.random((120, 2)), "ci": rng.exponential(size=(120, 2))}}
    out = bootstrap_intervals(split, inputs, resamples=40, seed=2)
    draws = np.random.default_rng(2).integers(0, 120, size=(40, 120))
    for metric in ("auc", "ci"):
        for j in range(2):
            one = Split(ids=split.ids, X=split.X, T=split.T[:, [j]], S=split.S[:, [j]], C=split.C[:, [j]],
                        T_true=split.T_true[:, [j]], mask=split.mask[:, [j]])
            values = inputs["CET"][metric][:, [j]]
            got = out["by_event"][metric]["CET"][j]
            per = np.array([_one_at_a_time(one, values, metric, d) for d in draws])
            assert got["estimate"] == pytest.approx(_one_at_a_time(one, values, metric, np.arange(120)))
            assert [got["low"], got["high"]] == pytest.approx(np.nanquantile(per, [0.025, 0.975]))
    undefined = bootstrap_intervals(split, {"CET": {"ci": np.column_stack([rng.random(120), np.full(120, np.nan)])}})
    assert undefined["by_event"]["ci"]["CET"][1] is None


@pytest.mark.slow  # about 6 s: the bootstrap of every row is the yardstick
def test_above_max_rows_the_spread_is_measured_on_a_subset_and_scaled_to_all_rows():
    """m of n rows resampled, each resample's deviation scaled by sqrt(m / n): the same estimates,
    intervals as wide as the bootstrap of every row (unscaled, they would be sqrt(10) times wider)."""
    rng = np.random.default_rng(3)
    n = 10_000
    c = (rng.random((n, 2)) < 0.3).astype(float)
    t = rng.exponential(size=(n, 2)) + 0.1
    s = c * (rng.random((n, 2)) < 0.8)
    split = Split(ids=np.arange(n), X=np.zeros((n, 1)), T=t, S=s, C=c, T_true=t)
    shared = c + rng.normal(0, 1.0, c.shape)
    inputs = {"CET": {"auc": shared + 0.3 * c, "ci": -shared * t}, "BC": {"auc": shared, "ci": -shared}}
    full = bootstrap_intervals(split, inputs, seed=1, max_rows=None)
    sub = bootstrap_intervals(split, inputs, seed=1, max_rows=1_000)
    assert (full["subset_rows"], sub["subset_rows"], sub["rows"]) == (n, 1_000, n)
    for metric in ("auc", "ci"):
        pairs = [(full["metrics"][metric][m], sub["metrics"][metric][m]) for m in ("CET", "BC")]
        pairs.append((full["differences"][metric]["BC"], sub["differences"][metric]["BC"]))
        for a, b in pairs:
            assert b["estimate"] == a["estimate"]
            assert b["low"] < b["estimate"] < b["high"]
            assert 0.75 < (b["high"] - b["low"]) / (a["high"] - a["low"]) < 1.33, (metric, a, b)
    with pytest.raises(ValueError, match="max_rows"):
        bootstrap_intervals(split, inputs, max_rows=1)
