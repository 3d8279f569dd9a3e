"""Paired bootstrap intervals of a split's metrics (the test rows resampled, the same resamples
for every model); ``cet_model.summary`` writes their records as text."""

from __future__ import annotations

import numpy as np

from .choices import CI_RMST
from .dataset import Split
from .metrics import resampled_auc, resampled_concordance_index, resampled_horizon_auc
from .summary import nanmean_rows

BOOTSTRAP_RESAMPLES = 200
BOOTSTRAP_ROWS = 20_000  # above this many rows the spread is measured on a random subset of them


def bootstrap_intervals(split: Split, inputs: dict[str, dict[str, np.ndarray]], *, resamples: int = BOOTSTRAP_RESAMPLES,
                        level: float = 0.95, seed: int = 0, reference: str = "CET", train: Split | None = None,
                        horizons=None, max_rows: int | None = BOOTSTRAP_ROWS) -> dict:
    """Paired bootstrap intervals for the average over events of AUC and Harrell's C (of the
    predicted times, and of the restricted means where ``inputs`` have them), per model,
    and for ``reference`` minus each other model; with ``train`` and ``horizons`` ((M,), NaN for
    none) also of the AUC at each event's horizon of the risk by it (``auc_h``, the
    cumulative/dynamic AUC, ``cet_model.metrics.horizon_auc``; censoring weights from ``train``,
    which is not resampled).

    ``inputs``: {model: ``ranking_inputs(...)``} on ``split``'s rows, (n, M) each. The rows (the
    patients, users) are resampled ``resamples`` times; every model and event is scored on the
    same resamples, so a difference's interval is paired: it leaves out the part of the spread
    the models share. Per resample, the metric of each event (AUC on the rows whose true
    occurrence is known, C on all; masked cells out) is averaged over the events where it is
    defined, as ``average_over_tasks`` does; the interval is the ``level`` percentile interval of
    those averages. ``estimate`` is the average on the rows themselves (the summary's figure).

    Above ``max_rows`` rows (None: never), the resamples are drawn from a random subset of
    ``max_rows`` of them (``subset_rows``), and each resample's deviation from the subset's own
    figure is scaled by sqrt(subset rows / rows) and added to the estimate on all rows: the
    spread of a sqrt(n)-consistent metric (AUC, C) shrinks as 1 / sqrt(n), so the interval keeps
    its level at a tenth of the work and memory on 200,000 rows (tests/test_bootstrap.py checks
    its width against the bootstrap of all rows). Estimates are always exact.

    Returns {"resamples", "level", "seed", "rows", "subset_rows", "metrics": {metric: {model: {"estimate",
    "low", "high", "undefined_resamples"}}}, "differences": {metric: {model: {...}}}, "by_event":
    {metric: {model: [each event's interval on the same resamples, None where undefined]}}}, metric in
    "auc", "ci", "ci_rmst", "auc_h"; a metric no model has, or that is undefined on every event (AUC without
    the truth), is left out; "undefined_resamples" counts the resamples where no event defines it
    (a rare event drawn without a case), left out of the interval.

    >>> rng = np.random.default_rng(0)
    >>> c = (rng.random((300, 2)) < 0.5).astype(float)
    >>> t = rng.exponential(size=(300, 2)) + 0.1
    >>> test = Split(ids=np.arange(300), X=np.zeros((300, 1)), T=t, S=c, C=c, T_true=t)
    >>> good, noise = c + rng.normal(0, 0.5, c.shape), rng.random(c.shape)
    >>> out = bootstrap_intervals(test, {"CET": {"auc": good}, "BC": {"auc": noise}})
    >>> d = out["differences"]["auc"]["BC"]
    >>> bool(0 < d["low"] < d["estimate"] < d["high"])
    True
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if max_rows is not None and max_rows < 2:
        raise ValueError(f"max_rows must be at least 2 or None, got {max_rows}")
    n = len(split)
    m = n if max_rows is None else min(n, max_rows)
    out = {"resamples": resamples, "level": level, "seed": seed, "rows": n, "subset_rows": m, "metrics": {},
           "differences": {}}
    if n == 0:
        return out
    rng = np.random.default_rng(seed)
    subset = None if m == n else np.sort(rng.choice(n, size=m, replace=False))
    draws = rng.integers(0, m, size=(resamples, m))
    # how many times each row (of the subset) is drawn, per resample: (resamples, m)
    counts = np.bincount((draws + m * np.arange(resamples)[:, None]).reshape(-1), minlength=resamples * m)
    counts = counts.reshape(resamples, m).astype(np.float64)
    horizons = None if horizons is None else np.asarray(horizons, dtype=np.float64)
    for metric in ("auc", "ci", CI_RMST, "auc_h"):
        if metric == "auc_h" and (train is None or horizons is None):
            continue
        estimates, per_resample, per_event = {}, {}, {}
        for model, given in inputs.items():
            if metric not in given:
                continue
            values = np.asarray(given[metric], dtype=np.float64)
            by_event = [_metric_per_resample(split, metric, j, values[:, j], counts, train,
                                             None if horizons is None else horizons[j], subset)
                        for j in range(values.shape[1])]
            point = np.array([b[0] for b in by_event])
            if np.isnan(point).all():
                continue
            estimates[model] = float(np.nanmean(point))
            per_resample[model] = nanmean_rows(np.stack([b[1] for b in by_event]))
            per_event[model] = [None if np.isnan(b[0]) else _interval(b[0], b[1], level) for b in by_event]
        if not estimates:
            continue
        out["metrics"][metric] = {m: _interval(estimates[m], per_resample[m], level) for m in estimates}
        out.setdefault("by_event", {})[metric] = per_event
        if reference in estimates:
            out["differences"][metric] = {
                m: _interval(estimates[reference] - estimates[m], per_resample[reference] - per_resample[m], level)
                for m in estimates if m != reference}
    return out


def _metric_per_resample(split: Split, metric: str, j: int, values: np.ndarray, counts: np.ndarray,
                         train: Split | None = None, horizon: float | None = None, subset: np.ndarray | None = None):
    """(the metric of event j on the rows themselves, (resamples,) the metric on each resample);
    with ``subset`` (the rows ``counts`` resamples), each resample's deviation from the subset's
    figure scaled by sqrt(subset's rows / all rows) around the figure on all rows."""
    keep = np.ones(len(split), bool) if split.mask is None else split.mask[:, j] == 1
    if metric == "auc":
        keep &= ~np.isnan(split.C[:, j])
    if metric == "auc_h" and not (horizon is not None and np.isfinite(horizon) and np.isfinite(values[keep]).all()):
        return float("nan"), np.full(counts.shape[0], np.nan)
    if np.isnan(values[keep]).any():  # a model without a prediction for this event: undefined for it
        return float("nan"), np.full(counts.shape[0], np.nan)
    rows = np.flatnonzero(keep)
    if subset is None:
        weights = np.vstack([np.ones((1, rows.size)), counts[:, rows]])  # the rows themselves, then each resample
        got = _weighted_metric(split, metric, j, values, rows, weights, train, horizon)
        return float(got[0]), got[1:]
    full = float(_weighted_metric(split, metric, j, values, rows, np.ones((1, rows.size)), train, horizon)[0])
    inside = keep[subset]
    if not inside.any():
        return full, np.full(counts.shape[0], np.nan)
    sub_rows = subset[inside]
    got = _weighted_metric(split, metric, j, values, sub_rows,
                           np.vstack([np.ones((1, sub_rows.size)), counts[:, inside]]), train, horizon)
    return full, full + np.sqrt(sub_rows.size / rows.size) * (got[1:] - got[0])


def _weighted_metric(split: Split, metric: str, j: int, values: np.ndarray, rows: np.ndarray, weights: np.ndarray,
                     train: Split | None, horizon: float | None) -> np.ndarray:
    """Event j's metric on ``rows`` under each row of ``weights`` ((B, rows) multiplicities), (B,)."""
    if metric == "auc":
        return resampled_auc(split.C[rows, j], values[rows], weights)
    if metric in ("ci", CI_RMST):  # both rank times: a larger value, a later event
        return resampled_concordance_index(split.T[rows, j], values[rows], split.S[rows, j], weights)
    followed = np.ones(len(train), bool) if train.mask is None else train.mask[:, j] == 1
    return resampled_horizon_auc(train.T[followed, j], train.S[followed, j], split.T[rows, j], split.S[rows, j],
                                 values[rows], horizon, weights)


def _interval(estimate: float, resampled: np.ndarray, level: float) -> dict:
    defined = resampled[~np.isnan(resampled)]
    if defined.size == 0:
        return {"estimate": estimate, "low": float("nan"), "high": float("nan"), "undefined_resamples": resampled.size}
    low, high = np.quantile(defined, [(1 - level) / 2, 1 - (1 - level) / 2])
    return {"estimate": estimate, "low": float(low), "high": float(high),
            "undefined_resamples": int(resampled.size - defined.size)}
