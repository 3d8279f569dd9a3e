"""Figures repeated over runs, events or resamples, and interval records as text: numpy only, so
that a command that reads a version's records (``python -m flows.train show``) loads no model code."""

from __future__ import annotations

import numpy as np


def mean_std(values) -> tuple[float, float]:
    """(mean, std) ignoring NaN; (nan, nan) when nothing is defined.

    >>> [round(v, 3) for v in mean_std([0.5, 0.7, float("nan")])]
    [0.6, 0.1]
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0 or np.isnan(arr).all():
        return float("nan"), float("nan")
    return float(np.nanmean(arr)), float(np.nanstd(arr))


def average_over_tasks(tasks: dict, metric: str) -> list[float]:
    """Per-run mean over tasks (the paper's Avg row): {task: {metric: [runs]}} -> [runs].

    A task whose metric is undefined in a run (NaN: e.g. no event occurs in the test rows) is
    left out of that run's mean; a run where no task defines it gets NaN, without numpy's
    "Mean of empty slice" warning.

    >>> [round(v, 3) for v in average_over_tasks({"T1": {"auc": [0.8, 0.9]}, "T2": {"auc": [0.6, 0.7]}}, "auc")]
    [0.7, 0.8]
    >>> average_over_tasks({"T1": {"auc": [0.8, float("nan")]}, "T2": {"auc": [0.6, float("nan")]}}, "auc")
    [0.7, nan]
    """
    per_task = [v[metric] for v in tasks.values() if metric in v]
    if not per_task:
        return []
    return nanmean_rows(np.asarray(per_task, dtype=np.float64)).tolist()


def nanmean_rows(a: np.ndarray) -> np.ndarray:
    """Column means of (events, runs or resamples) over the defined (non-NaN) events; NaN where
    none is, without numpy's "Mean of empty slice" warning."""
    defined = ~np.isnan(a)
    count = defined.sum(axis=0)
    return np.where(count > 0, np.where(defined, a, 0.0).sum(axis=0) / np.maximum(count, 1), np.nan)


def resamples_text(record: dict, split: str = "test") -> str:
    """How a record's resamples were drawn, for the reports.

    >>> resamples_text({"resamples": 200, "rows": 87, "subset_rows": 87})
    '200 resamples of the 87 test rows'
    >>> resamples_text({"resamples": 200, "rows": 200000, "subset_rows": 20000})
    '200 resamples of 20,000 of the 200,000 test rows, spread scaled by sqrt(20,000 / 200,000)'
    """
    n, m = record["rows"], record.get("subset_rows", record["rows"])
    if m >= n:
        return f"{record['resamples']} resamples of the {n:,} {split} rows"
    return f"{record['resamples']} resamples of {m:,} of the {n:,} {split} rows, spread scaled by sqrt({m:,} / {n:,})"


def bounds_text(v: dict | None, signed: bool = False) -> str:
    """An interval record's bounds as text, "" without them.

    >>> bounds_text({"estimate": 0.71, "low": 0.68, "high": 0.74}), bounds_text(None)
    (' [0.680, 0.740]', '')
    """
    if not v or v.get("low") is None:
        return ""
    form = "+.3f" if signed else ".3f"
    return f" [{_no_minus_zero(v['low']):{form}}, {_no_minus_zero(v['high']):{form}}]"


def difference_text(v: dict) -> str:
    """A difference with its interval; a difference that rounds to zero is shown as +0.000.

    >>> difference_text({"estimate": 0.0301, "low": 0.0119, "high": 0.048})
    '+0.030 [+0.012, +0.048]'
    >>> difference_text({"estimate": -1e-6, "low": -2e-6, "high": 1e-6})
    '+0.000 [+0.000, +0.000]'
    """
    return f"{_no_minus_zero(v['estimate']):+.3f}" + bounds_text(v, signed=True)


def _no_minus_zero(x: float) -> float:
    return round(float(x), 3) + 0.0
