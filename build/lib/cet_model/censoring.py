"""Artificial right censoring with the ground truth kept (shared by every dataset build).

Per event j: C ~ U(0, upper_j); t = min(t_true, C) when c = 1, t = C when c = 0;
s = 1[c = 1 and t_true < C]. For MIMIC and Reddit upper_j = factor x the median true event
time of event j over the *training* rows (factor 2 in the paper). Drawn once, seeded.
"""

from __future__ import annotations

import numpy as np


def censor_uniform(t_true: np.ndarray, c: np.ndarray, upper, rng: np.random.Generator):
    """Apply C ~ U(0, upper_j] per cell. Arrays are n x M; t_true may be NaN where c = 0.

    Returns (t, s, C): observed time, observed indicator (0/1 int), censoring time.
    """
    t_true = np.asarray(t_true, dtype=np.float64)
    c = np.asarray(c).astype(bool)
    upper = np.broadcast_to(np.asarray(upper, dtype=np.float64), (t_true.shape[1],))
    if not (np.isfinite(upper).all() and (upper > 0).all()):
        raise ValueError(f"censoring upper bounds must be finite and > 0, got {upper.tolist()}")
    bad = c & ~(np.isfinite(t_true) & (t_true > 0))
    if bad.any():
        r, j = np.argwhere(bad)[0]
        raise ValueError(f"t_true: row {r}, event {j} occurs (c = 1) but has true time {t_true[r, j]!r}")
    cens = upper * (1.0 - rng.random(t_true.shape))  # (0, upper]: never exactly 0
    observed = c & (np.where(c, t_true, np.inf) < cens)
    t = np.where(observed, t_true, cens)
    return t, observed.astype(np.int8), cens


def median_upper(t_true: np.ndarray, c: np.ndarray, train: np.ndarray, factor: float = 2.0,
                 event_names=None, fallback: bool = False) -> tuple[np.ndarray, dict]:
    """factor x median_j, the median over training rows with c_j = 1 of the true time.

    Without training rows for an event the median is undefined: an error, or with
    ``fallback`` the median over all rows with the event, else the median of the other
    events' medians (the reference's rule). Returns (upper, {event: source of its median}).
    """
    t_true = np.asarray(t_true, dtype=np.float64)
    c = np.asarray(c).astype(bool)
    train = np.asarray(train, dtype=bool)
    names = list(event_names) if event_names is not None else list(range(t_true.shape[1]))
    med = np.full(t_true.shape[1], np.nan)
    source = {}
    for j, name in enumerate(names):
        for rows, label in ((train & c[:, j], "train"), (c[:, j], "all rows")):
            if rows.any():
                med[j], source[str(name)] = float(np.median(t_true[rows, j])), label
                break
            if not fallback:
                raise ValueError(f"event {name!r}: no training row has the event, so the censoring "
                                 f"median is undefined")
    if np.isnan(med).all():
        raise ValueError("no event occurs in any row; the censoring medians are undefined")
    for j, name in enumerate(names):
        if np.isnan(med[j]):
            med[j], source[str(name)] = float(np.nanmedian(med)), "median of the other events"
    return factor * med, source


def censor_by_median(t_true, c, train, *, factor: float = 2.0, seed: int = 0, event_names=None,
                     fallback: bool = False):
    """The MIMIC/Reddit censoring: U(0, factor x training median). Returns (t, s, params)."""
    upper, source = median_upper(t_true, c, train, factor, event_names, fallback)
    t, s, _ = censor_uniform(t_true, c, upper, np.random.default_rng(seed))
    params = {"scheme": "uniform(0, factor * train median)", "factor": factor, "seed": seed,
              "upper": upper.tolist(), "median": (upper / factor).tolist(), "median_from": source}
    return t, s, params
