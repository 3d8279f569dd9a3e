"""What a version records of its training data beside its metrics, and the checks at a horizon
that need no true occurrence: the calibration horizons and the calibration by them, the features'
ranges and moments (``flows.predict`` flags new rows far from them), the follow-up of each event,
and how much of P(ever) lies beyond it. Aggregates over many rows, never one row's values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cet_model.evaluation import followed_until, occurrence_beyond_follow_up, risk_gained_last_quarter
from cet_model.metrics import horizon_auc, horizon_calibration
from cet_model.nonparametric import kaplan_meier_risk
from flows.lib.infra.evaluation_record import Evaluation


def calibration_horizons(split, event_names, horizon: float | None = None) -> dict[str, float]:
    """Per event, the horizon at which ``train-evaluate`` checks calibration and the AUC at h:
    ``horizon`` when given (``--horizon``, one time for every event), else the median follow-up
    time of the training rows (cells the mask leaves out not counted), so that half of them are
    still followed there. Events no training row follows are left out.

    >>> from types import SimpleNamespace
    >>> calibration_horizons(SimpleNamespace(T=np.array([[5.0], [9.0], [7.0]]), mask=None), ["a"])
    {'a': 7.0}
    >>> calibration_horizons(SimpleNamespace(T=np.array([[5.0], [9.0], [7.0]]), mask=None), ["a"], 6)
    {'a': 6.0}
    """
    keep = np.ones(split.T.shape, bool) if split.mask is None else split.mask > 0.5
    return {e: float(np.median(split.T[keep[:, j], j]) if horizon is None else horizon)
            for j, e in enumerate(event_names) if keep[:, j].any()}


def version_horizons(version: Path, split, event_names) -> dict[str, float]:
    """The horizons a version's calibration used (recorded per event in ``metrics.json``), or for a
    version without that record, ``calibration_horizons`` of the training split."""
    record = Evaluation.read(version).calibration.get("test") or {}
    events = record.get("CET") or next(iter(record.values()), {})
    return {e: float(r["horizon"]) for e, r in events.items()} or calibration_horizons(split, event_names)


def calibration_by_horizon(model, split, x, event_names, horizons: dict[str, float], train=None) -> dict[str, dict]:
    """Per event, :func:`cet_model.metrics.horizon_calibration` of ``model``'s risk by the event's
    horizon (P(the event by h) = 1 - S(h), from ``predict_survival``) on ``split``'s followed rows:
    groups by predicted risk, each against its Kaplan-Meier risk. Needs no true occurrence, so it
    is the calibration check on data censored by follow-up. With ``train`` (the training split,
    for the censoring weights) each event's record also holds ``auc``: the cumulative/dynamic AUC
    of that risk at the horizon (:func:`cet_model.metrics.horizon_auc`), its discrimination on
    such data. Events without a horizon (no training row followed) are left out."""
    out = {}
    names = [e for e in event_names if e in horizons]
    if not names or len(split) == 0:
        return out
    grid = sorted({horizons[e] for e in names})
    survival = model.predict_survival(x, grid)  # (n, H, M)
    for e in names:
        j, k = event_names.index(e), grid.index(horizons[e])
        keep = np.ones(len(split), bool) if split.mask is None else split.mask[:, j] == 1
        if keep.any():
            risk = 1.0 - survival[keep, k, j]
            out[e] = horizon_calibration(split.T[keep, j], split.S[keep, j], risk, horizons[e])
            if train is not None:
                followed = np.ones(len(train), bool) if train.mask is None else train.mask[:, j] == 1
                out[e]["auc"] = horizon_auc(train.T[followed, j], train.S[followed, j], split.T[keep, j],
                                            split.S[keep, j], risk, horizons[e])
    return out


MIN_ROWS_FOR_RANGES = (
    200  # fewer training rows: no feature ranges recorded (a percentile would be nearly one row's value)
)


def feature_ranges(x, feature_names) -> dict[str, list[float]] | None:
    """Per feature, the 1st and 99th percentiles of the training rows ``x`` (n, d), which
    ``flows.predict`` uses to flag new values far outside them (a unit mistake, a data error).
    Aggregates over many rows, never one row's value: None with fewer than
    ``MIN_ROWS_FOR_RANGES`` rows.

    >>> x = np.column_stack([np.arange(1000.0), np.zeros(1000)])
    >>> feature_ranges(x, ["age", "flag"])
    {'age': [9.99, 989.01], 'flag': [0.0, 0.0]}
    >>> feature_ranges(x[:50], ["age", "flag"]) is None
    True
    """
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] < MIN_ROWS_FOR_RANGES:
        return None
    low, high = np.quantile(x, [0.01, 0.99], axis=0)
    return {name: [round(float(a), 6), round(float(b), 6)] for name, a, b in zip(feature_names, low, high, strict=True)}


def item_labels(manifest: dict) -> dict[str, str]:
    """{``chart_211``: "Heart Rate", ...}: the labels of a MIMIC build's feature items (its
    manifest's ``items``, from D_ITEMS and D_LABITEMS); empty for other datasets. Recorded in a version's
    ``data.json`` (``item_labels``), so that ``flows.predict`` can name an item in its warnings.

    >>> item_labels({"items": [{"source": "lab", "itemid": 50912, "label": "Creatinine"}]})
    {'lab_50912': 'Creatinine'}
    """
    return {f"{r['source']}_{r['itemid']}": r["label"] for r in manifest.get("items") or ()
            if isinstance(r, dict) and r.get("label") and "source" in r and "itemid" in r}


def feature_moments(x, feature_names) -> dict[str, list[float]] | None:
    """Per feature, the mean and standard deviation of the training rows ``x`` (n, d), which
    ``flows.predict`` compares a batch of new rows with (``shifted_from_training``): aggregates
    over many rows, None with fewer than ``MIN_ROWS_FOR_RANGES`` rows.

    >>> feature_moments(np.column_stack([np.arange(1000.0), np.ones(1000)]), ["age", "flag"])
    {'age': [499.5, 288.819436], 'flag': [1.0, 0.0]}
    """
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] < MIN_ROWS_FOR_RANGES:
        return None
    mean, sd = x.mean(axis=0), x.std(axis=0, ddof=1)
    return {name: [round(float(m), 6), round(float(v), 6)] for name, m, v in zip(feature_names, mean, sd, strict=True)}


def training_follow_up(split, event_names) -> dict[str, dict]:
    """Per event, the longest follow-up time of the training rows (``longest``, observed or
    censored; cells the mask leaves out not counted) and the longest time at which the event was
    seen (``longest_observed``; None when it never was), in the dataset's time unit. Beyond
    ``longest`` a risk by a horizon rests on the fitted log-normal's tail alone. ``followed_until``:
    the last time at least ``FOLLOWED_ROWS`` (10) training rows were still followed
    (:func:`cet_model.evaluation.followed_until`), the follow-up's end for P(ever).

    >>> from types import SimpleNamespace
    >>> tr = SimpleNamespace(T=np.array([[5.0, 2.0], [9.0, 4.0]]), S=np.array([[1.0, 0.0], [0.0, 0.0]]), mask=None)
    >>> training_follow_up(tr, ["a", "b"])["a"]
    {'longest': 9.0, 'longest_observed': 5.0, 'followed_until': 5.0}
    """
    keep = np.ones(split.T.shape, bool) if split.mask is None else split.mask > 0.5
    out = {}
    for j, e in enumerate(event_names):
        t, seen = split.T[keep[:, j], j], split.S[keep[:, j], j] > 0.5
        out[e] = {"longest": float(t.max()) if len(t) else None,
                  "longest_observed": float(t[seen].max()) if seen.any() else None,
                  "followed_until": followed_until(t) if len(t) else None}
    return out


def beyond_follow_up(model, x, train, event_names, split=None) -> dict[str, dict]:
    """Per event, :func:`cet_model.evaluation.occurrence_beyond_follow_up` of a CET ``model`` on the
    rows ``x`` at the end of the event's training follow-up (``followed_until``: the last time at
    least 10 training rows were still followed), with ``km_by_follow_up``: the training rows'
    Kaplan-Meier risk by that time (what the data say there) and ``km_last_quarter``: the part of
    it gained over the follow-up's last quarter (still rising at the end: the data do not show how
    many ever will), with ``km_last_quarter_ci`` (its 95 % interval, Greenwood's variance) and
    ``km_last_quarter_events`` (the events it rests on), and, with ``split`` (the rows of
    ``x``), ``km_split_by_follow_up``: its own rows' (what the mean risk of those rows compares
    with), and where it knows the true occurrence (a stand-in) ``true_share``: the share of its rows
    that have the event, which P(ever) estimates, and ``true_by_follow_up``: the share that have it
    by the follow-up's end (what the risk by it estimates; the rest is what the tail should hold).
    Events no training row follows are left out."""
    follow = training_follow_up(train, event_names)
    until = {e: v["followed_until"] for e, v in follow.items() if v["followed_until"] is not None}
    out = occurrence_beyond_follow_up(model, x, until, event_names, mask=None if split is None else split.mask)
    keep = np.ones(train.T.shape, bool) if train.mask is None else train.mask > 0.5
    for e, record in out.items():
        j = event_names.index(e)
        record["km_by_follow_up"] = kaplan_meier_risk(train.T[keep[:, j], j], train.S[keep[:, j], j],
                                                      horizon=record["follow_up"])
        quarter = risk_gained_last_quarter(train.T[keep[:, j], j], train.S[keep[:, j], j], record["follow_up"])
        record["km_last_quarter"] = quarter.gain
        record["km_last_quarter_ci"] = [quarter.low, quarter.high]  # 95 %; None, None without an event
        record["km_last_quarter_events"] = quarter.events
        if split is None:
            continue
        kept = np.ones(len(split), bool) if split.mask is None else split.mask[:, j] > 0.5  # some: e is in out
        record["km_split_by_follow_up"] = kaplan_meier_risk(split.T[kept, j], split.S[kept, j],
                                                            horizon=record["follow_up"])
        if np.isfinite(split.C[kept, j]).all():  # every scored row's truth (P(ever) is averaged over them all)
            occurs = split.C[kept, j] > 0.5
            record["true_share"] = float(occurs.mean())
            t_true = split.T_true[kept, j][occurs]
            if np.isfinite(t_true).all():  # and when each of them has it
                record["true_by_follow_up"] = float((t_true <= record["follow_up"]).sum() / len(occurs))
    return out


def observed_events(split, event_names: list[str]) -> dict[str, int]:
    """Per event, how many of a split's rows have it observed (s = 1, masked cells left out): what a
    metric of that event rests on.

    >>> from types import SimpleNamespace
    >>> split = SimpleNamespace(S=np.array([[1.0, 0.0], [1.0, 1.0]]), mask=np.array([[1, 1], [0, 1]]))
    >>> observed_events(split, ["a", "b"])
    {'a': 1, 'b': 1}
    """
    seen = split.S > 0.5 if split.mask is None else (split.S > 0.5) & (split.mask > 0.5)
    return {e: int(seen[:, j].sum()) for j, e in enumerate(event_names)}
