"""Evaluation metrics: occurrence AUC, MRAE, Harrell's C, calibration.

Conventions follow lifelines: ``(event_times, predicted_times, event_observed)``, and a
longer predicted time means lower risk.

    >>> import numpy as np
    >>> occurrence_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    0.75
    >>> concordance_index([1.0, 2.0, 3.0], [1.5, 2.5, 2.0], [1, 1, 0])
    0.6666666666666666
    >>> mrae(np.array([2.0, 4.0]), np.array([3.0, 3.0]), np.array([1, 0]))   # censored: early only
    0.25
"""

from __future__ import annotations

import logging

import numpy as np

from .nonparametric import kaplan_meier_risk

log = logging.getLogger("cet_model.metrics")


def occurrence_auc(c_true, p) -> float:
    """ROC AUC of predicted occurrence probabilities against the true occurrence c.

    Returns NaN (rather than raising) when c_true has a single class, so a rare event in a
    small test split does not abort a whole report.
    """
    c = np.asarray(c_true).reshape(-1)
    score = np.asarray(p, dtype=np.float64).reshape(-1)
    if c.shape != score.shape:
        raise ValueError(f"c_true has {c.size} values but p has {score.size}")
    if not np.isfinite(score).all():
        raise ValueError("p: contains non-finite values")
    classes = np.unique(c)
    if classes.size < 2:
        return float("nan")
    if classes.size > 2:
        raise ValueError(f"c_true: two classes expected (occurred or not), got {classes.size}")
    # the Mann-Whitney statistic, as roc_auc_score gives it, without its checks' cost (milliseconds a call, which
    # permutation importance and the harness pay thousands of times)
    weights = np.ones((1, c.size))
    return float(_weighted_auc(c == classes[1], c == classes[0], score, weights, weights)[0])


def mrae(t, t_pred, s, t_max: float | None = None) -> float:
    """Mean relative absolute error (the paper's definition).

    Observed (s = 1): |t - t_hat| / t_max; censored (s = 0): max(0, t - t_hat) / t_max
    (a prediction after the censoring time is not penalised). ``t_max`` defaults to max(t).
    """
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    t_hat = np.asarray(t_pred, dtype=np.float64).reshape(-1)
    s = np.asarray(s).reshape(-1).astype(bool)
    if not (t.shape == t_hat.shape == s.shape):
        raise ValueError(f"t, t_pred and s must have the same length, got {t.size}, {t_hat.size}, {s.size}")
    scale = float(np.max(t)) if t_max is None else float(t_max)
    if not scale > 0:
        raise ValueError(f"t_max must be > 0, got {scale}")
    err = np.where(s, np.abs(t - t_hat), np.maximum(0.0, t - t_hat))
    return float(np.mean(err) / scale)


def concordance_index(event_times, predicted_times, event_observed=None) -> float:
    """Harrell's C with lifelines' semantics, in O(n log n).

    A pair (i, j) is comparable when i has an event and t_i < t_j, or t_i = t_j with i an
    event and j censored; it is concordant when predicted_i < predicted_j; tied predictions
    count one half. Two events at the same time are not comparable.
    """
    t, _, _ = _concordance_inputs(event_times, predicted_times, event_observed)
    c = resampled_concordance_index(event_times, predicted_times, event_observed, np.ones((1, t.size)))[0]
    if np.isnan(c):
        raise ZeroDivisionError("no admissible pairs: every subject is censored or all events are tied")
    return float(c)


RESAMPLE_BLOCK = 32  # resamples per pass: (rows, 32) arrays stay in cache; wider ones only cost more


def resampled_concordance_index(event_times, predicted_times, event_observed, counts) -> np.ndarray:
    """Harrell's C (``concordance_index``) of each resample of the rows, (B,), in O(B n log n).

    ``counts``: (B, n) how many times each row is drawn in each resample (a bootstrap's
    multiplicities; 0 leaves a row out). Equal to ``concordance_index`` on the rows repeated
    that many times, without building them; NaN for a resample without a comparable pair.

    >>> t, pred, e = [1.0, 2.0, 3.0], [1.5, 2.5, 2.0], [1, 1, 0]
    >>> resampled_concordance_index(t, pred, e, [[1, 1, 1], [2, 0, 1], [0, 0, 3]]).round(4).tolist()
    [0.6667, 1.0, nan]
    """
    t, pred, e = _concordance_inputs(event_times, predicted_times, event_observed)
    return _pair_weighted_c(t, pred, e, _resample_counts(counts, t.size))


def weighted_concordance_index(event_times, predicted_times, event_observed, weights) -> float:
    """Harrell's C with row weights (``fit``'s ``sample_weight``): each comparable pair counts the
    product of its rows' weights, so a whole-number weight is the row repeated (as
    ``resampled_concordance_index``). NaN without a comparable pair of positive weight.

    >>> t, pred, e = [1.0, 2.0, 3.0], [1.5, 2.5, 2.0], [1, 1, 0]
    >>> weighted_concordance_index(t, pred, e, [2.0, 0.0, 1.0]), weighted_concordance_index(t, pred, e, [1, 1, 1])
    (1.0, 0.6666666666666666)
    """
    t, pred, e = _concordance_inputs(event_times, predicted_times, event_observed)
    w = np.asarray(weights, dtype=np.float64).reshape(1, -1)
    if w.shape[1] != t.size or not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"weights must be {t.size} finite values >= 0, one per row")
    return float(_pair_weighted_c(t, pred, e, w)[0])


def _pair_weighted_c(t, pred, e, w) -> np.ndarray:
    """Harrell's C under each row of weights ``w`` (B, n): a pair counts w_i w_j."""
    # order by time, events before censored at equal times
    order = np.lexsort((~e, t))
    t, pred, e, w = t[order], pred[order], e[order], w[:, order]
    rank = np.unique(pred, return_inverse=True)[1].astype(np.int64).reshape(-1)
    time_group = np.concatenate([[0], np.cumsum(t[1:] != t[:-1])]).astype(np.int64)
    ev = np.flatnonzero(e)
    out = np.empty(w.shape[0])
    for start in range(0, w.shape[0], RESAMPLE_BLOCK):
        block = np.ascontiguousarray(w[start:start + RESAMPLE_BLOCK].T)  # (n, b)
        # all pairs (i before j in this order, i an event) ...
        less, tied, total = _ordered_pair_weights(np.zeros(t.size, np.int64), e, rank, block)
        # ... minus pairs of two events at the same time (not comparable)
        less2, tied2, total2 = _ordered_pair_weights(time_group[ev], np.ones(ev.size, bool), rank[ev], block[ev])
        comparable = total - total2
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start:start + block.shape[1]] = np.where(
                comparable > 0, ((less - less2) + 0.5 * (tied - tied2)) / comparable, np.nan)
    return out


def _resample_counts(counts, n: int) -> np.ndarray:
    """(B, n) float multiplicities, checked."""
    w = np.asarray(counts, dtype=np.float64)
    if w.ndim != 2 or w.shape[1] != n:
        raise ValueError(f"counts must be (resamples, {n}) for {n} rows, got shape {w.shape}")
    if (w < 0).any() or (w != np.round(w)).any():
        raise ValueError("counts: multiplicities must be non-negative whole numbers")
    return w


def _concordance_inputs(event_times, predicted_times, event_observed):
    t = np.asarray(event_times, dtype=np.float64).reshape(-1)
    pred = np.asarray(predicted_times, dtype=np.float64).reshape(-1)
    e = np.ones_like(t, dtype=bool) if event_observed is None else np.asarray(event_observed).reshape(-1).astype(bool)
    if not (t.shape == pred.shape == e.shape):
        raise ValueError(f"lengths differ: event_times {t.size}, predicted_times {pred.size}, "
                         f"event_observed {e.size}")
    if np.isnan(t).any() or np.isnan(pred).any():
        raise ValueError("NaN in event_times or predicted_times")
    return t, pred, e


def _ordered_pair_weights(group: np.ndarray, first: np.ndarray, rank: np.ndarray, w: np.ndarray,
                          w_first: np.ndarray | None = None):
    """Over pairs (i, j) of distinct elements, i before j in the given order, same ``group``,
    ``first[i]`` true: the sums of w_i * w_j (column by column of ``w``, (n, B)) over those with
    rank_i < rank_j, rank_i == rank_j, and all: three (B,) arrays (whole numbers for counts).
    ``w_first`` (n, B), given: the weight of i (the first of the pair) in place of w_i.

    rank_i < rank_j is decided at the highest bit where the ranks differ. Walking the bits
    from the top, elements stay ordered by (group, rank prefix, position); at bit b the pairs
    with equal prefix, bit 0 at i and bit 1 at j are summed with cumulative sums, then each
    block is stably split by that bit. O(n B) per bit, O(n B log n) in all, no Python loop over n.
    (Two copies of one row are not a pair here; in Harrell's C they would be two events at the same
    time, or have no event, so they are not comparable either way.)
    """
    zeros = np.zeros(w.shape[1])
    if rank.size < 2:
        return zeros, zeros.copy(), zeros.copy()
    wf = w if w_first is None else w_first
    perm = np.lexsort((np.arange(rank.size), group))  # by group, then position
    group, first, rank, w, wf = group[perm], first[perm], rank[perm], w[perm], wf[perm]
    sizes = np.diff(np.flatnonzero(np.r_[True, group[1:] != group[:-1], True]))
    keep = np.repeat(sizes >= 2, sizes)  # a group of one has no pairs
    group, first, rank, w, wf = group[keep], first[keep], rank[keep], w[keep], wf[keep]
    n = rank.size
    if n < 2:
        return zeros, zeros.copy(), zeros.copy()
    fw = wf * first[:, None]
    total = _pair_weights_within(group, fw, w)
    n_bits = max(1, int(rank.max()).bit_length())
    full = (group << n_bits) | rank
    tied = _pair_weights_within(full, fw, w, stable_sort=True)
    idx = np.arange(n)
    less = zeros.copy()
    for b in range(n_bits - 1, -1, -1):
        key = full >> (b + 1)
        block_start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        block_size = np.diff(np.r_[block_start, n])
        bit0 = ((full >> b) & 1) == 0
        f0 = fw * bit0[:, None]
        fz = np.cumsum(f0, axis=0)  # flagged bit-0 weight so far
        fz_before = np.repeat(fz[block_start] - f0[block_start], block_size, axis=0)
        # each bit-1 element j: w_j times the flagged bit-0 weight before it in its block
        less += (w[~bit0] * (fz[~bit0] - fz_before[~bit0])).sum(axis=0)
        # stable split of every block: bit-0 elements first, then bit-1, positions kept
        z = np.cumsum(bit0)
        ones = block_size - np.add.reduceat(bit0.astype(np.int64), block_start)
        zb = np.repeat(z[block_start] - bit0[block_start], block_size)
        nz = np.repeat(block_size - ones, block_size)
        a = z - zb  # bit-0 elements up to and including i, within its block
        new_pos = np.where(bit0, np.repeat(block_start, block_size) + a - 1, idx + nz - a)
        source = np.empty_like(new_pos)
        source[new_pos] = idx
        full, fw, w = full[source], fw[source], w[source]
    return less, tied, total


def _pair_weights_within(key: np.ndarray, fw: np.ndarray, w: np.ndarray, stable_sort: bool = False) -> np.ndarray:
    """Sum of fw_i * w_j over pairs i before j with equal key, elements already in position order."""
    if stable_sort:
        order = np.argsort(key, kind="stable")
        key, fw, w = key[order], fw[order], w[order]
    block_start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    size = np.diff(np.r_[block_start, key.size])
    running = np.cumsum(w, axis=0)
    after = running[np.repeat(block_start + size - 1, size)] - running  # weight after i in its block
    return (fw * after).sum(axis=0)


def resampled_auc(c_true, score, counts) -> np.ndarray:
    """ROC AUC (``occurrence_auc``) of each resample of the rows, (B,): the Mann-Whitney
    statistic with each row weighted by how many times it is drawn (``counts``, (B, n)); equal
    to the AUC of the rows repeated that many times. NaN for a resample with one class only.

    >>> resampled_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], [[1, 1, 1, 1], [2, 0, 1, 1], [1, 1, 0, 0]]).tolist()
    [0.75, 1.0, nan]
    """
    c = np.asarray(c_true, dtype=np.float64).reshape(-1)
    s = np.asarray(score, dtype=np.float64).reshape(-1)
    if c.shape != s.shape:
        raise ValueError(f"lengths differ: c_true {c.size}, score {s.size}")
    w = _resample_counts(counts, c.size)
    return _weighted_auc(c == 1, c == 0, s, w, w)


def _weighted_auc(positive, negative, score, w_pos, w_neg) -> np.ndarray:
    """Per row of the weights (B, n): sum over (positive i, negative j) of w_pos_i * w_neg_j *
    ([score_i > score_j] + 0.5 [tie]) over the sum of the weights of such pairs; NaN without a pair."""
    score = np.asarray(score, dtype=np.float64)
    if not np.isfinite(score).all():
        raise ValueError("score: contains non-finite values")
    order = np.argsort(score, kind="stable")
    positive, negative, score = positive[order], negative[order], score[order]
    w_pos, w_neg = w_pos[:, order], w_neg[:, order]
    out = np.full(w_pos.shape[0], np.nan)
    if not score.size:
        return out
    tie_start = np.flatnonzero(np.r_[True, score[1:] != score[:-1]])
    tie_size = np.diff(np.r_[tie_start, score.size])
    for start in range(0, w_pos.shape[0], RESAMPLE_BLOCK):
        pos = np.ascontiguousarray(w_pos[start:start + RESAMPLE_BLOCK].T) * positive[:, None]  # (n, b)
        neg = np.ascontiguousarray(w_neg[start:start + RESAMPLE_BLOCK].T) * negative[:, None]
        neg_in_tie = np.add.reduceat(neg, tie_start, axis=0)
        neg_below = np.cumsum(neg_in_tie, axis=0) - neg_in_tie  # negative weight with a lower score
        u = (pos * np.repeat(neg_below + 0.5 * neg_in_tie, tie_size, axis=0)).sum(axis=0)
        pairs = pos.sum(axis=0) * neg.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start:start + pos.shape[1]] = np.where(pairs > 0, u / pairs, np.nan)
    return out


def calibration_curve(c_true, p, n_bins: int = 10, strategy: str = "uniform"):
    """Observed frequency vs mean predicted probability per bin.

    Returns (prob_true, prob_pred, counts) for the non-empty bins. ``strategy`` is
    ``"uniform"`` (equal-width bins on [0, 1]) or ``"quantile"`` (equal-count bins).
    """
    c = np.asarray(c_true, dtype=np.float64).reshape(-1)
    prob = np.asarray(p, dtype=np.float64).reshape(-1)
    if c.shape != prob.shape:
        raise ValueError(f"c_true has {c.size} values but p has {prob.size}")
    if ((prob < 0) | (prob > 1)).any():
        raise ValueError("p: probabilities must lie in [0, 1]")
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    elif strategy == "quantile":
        edges = np.quantile(prob, np.linspace(0.0, 1.0, n_bins + 1))
    else:
        raise ValueError(f"strategy must be 'uniform' or 'quantile', got {strategy!r}")
    idx = np.clip(np.searchsorted(edges[1:-1], prob, side="right"), 0, n_bins - 1)
    counts = np.bincount(idx, minlength=n_bins)
    keep = counts > 0
    prob_true = np.bincount(idx, weights=c, minlength=n_bins)[keep] / counts[keep]
    prob_pred = np.bincount(idx, weights=prob, minlength=n_bins)[keep] / counts[keep]
    return prob_true, prob_pred, counts[keep]


def expected_calibration_error(c_true, p, n_bins: int = 10, strategy: str = "uniform") -> float:
    """ECE = sum over bins of (bin share) x |observed frequency - mean prediction|."""
    prob_true, prob_pred, counts = calibration_curve(c_true, p, n_bins, strategy)
    return float(np.sum(counts * np.abs(prob_true - prob_pred)) / np.sum(counts))


def horizon_calibration(t, s, risk, horizon: float, min_group: int = 20, max_groups: int = 10) -> dict:
    """How well predicted risks by a horizon match what happened, with no true occurrence needed:
    rows grouped by predicted risk (equal-size groups, as many as ``max_groups`` with at least
    ``min_group`` rows each), each group's mean predicted risk against its Kaplan-Meier risk
    1 - S_KM(horizon) (censoring handled as in any survival curve). ``ece``: the mean absolute
    difference weighted by group size (0: calibrated at this horizon).

    Args:
        t: follow-up times, shape (n,), > 0.
        s: 1 = event observed, 0 = censored, shape (n,).
        risk: predicted P(event by ``horizon``), shape (n,), in [0, 1].
        horizon: a time within the follow-up (beyond the last time a group's risk is its plateau).

    Returns:
        {"horizon", "ece", "groups": [{"n", "predicted", "observed"}, ...] (low to high risk)}.

    Example:
        >>> t = np.array([1.0, 2, 3, 4, 5, 6, 7, 8]); s = np.array([1, 1, 0, 1, 0, 0, 1, 0])
        >>> out = horizon_calibration(t, s, np.array([.9, .8, .7, .6, .1, .2, .3, .2]), 4.5, min_group=4)
        >>> [(g["n"], round(g["predicted"], 3), round(g["observed"], 3)) for g in out["groups"]]
        [(4, 0.2, 0.0), (4, 0.75, 1.0)]
        >>> round(out["ece"], 3)
        0.225
    """
    t, s, risk = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (t, s, risk))
    if not (t.shape == s.shape == risk.shape) or t.size == 0:
        raise ValueError(f"t, s and risk must be non-empty and of one length, got {t.size}, {s.size}, {risk.size}")
    n_groups = int(max(1, min(max_groups, t.size // max(1, min_group))))
    groups = []
    for rows in np.array_split(np.argsort(risk, kind="stable"), n_groups):
        groups.append({"n": int(rows.size), "predicted": float(risk[rows].mean()),
                       "observed": kaplan_meier_risk(t[rows], s[rows], horizon)})
    ece = sum(g["n"] * abs(g["predicted"] - g["observed"]) for g in groups) / t.size
    return {"horizon": float(horizon), "ece": float(ece), "groups": groups}


def _surv_array(t, s):
    from sksurv.util import Surv

    return Surv.from_arrays(event=np.asarray(s).astype(bool), time=np.asarray(t, dtype=np.float64))


def uno_c(t_train, s_train, t, s, predicted_times, tau: float | None = None) -> float:
    """Uno's IPCW concordance of predicted times (an earlier predicted time is a higher risk),
    as scikit-survival's ``concordance_index_ipcw`` computes it, in O(n log n) (scikit-survival's
    loop is O(events x n): minutes on 10^5 rows). A pair is comparable as in Harrell's C (i an
    event before j, or at j's time with j censored); i weighs 1 / G(t_i)^2, G the Kaplan-Meier
    curve of the training split's censoring, and 0 from ``tau`` on (default: the 90th percentile
    of the training times). NaN when undefined (no comparable pair, G zero at an event).

    >>> rng = np.random.default_rng(0)
    >>> t, s = rng.exponential(size=300), rng.random(300) < 0.7
    >>> pred = t + rng.normal(0, 0.5, 300)
    >>> from sksurv.metrics import concordance_index_ipcw
    >>> reference = concordance_index_ipcw(_surv_array(t, s), _surv_array(t, s), -pred, tau=np.quantile(t, 0.9))[0]
    >>> bool(abs(uno_c(t, s, t, s, pred) - reference) < 1e-12)
    True
    """
    from sksurv.nonparametric import CensoringDistributionEstimator

    t_train, t = np.asarray(t_train, np.float64), np.asarray(t, np.float64).reshape(-1)
    e = np.asarray(s).reshape(-1).astype(bool)
    pred = np.asarray(predicted_times, np.float64).reshape(-1)
    tau = float(np.quantile(t_train, 0.9)) if tau is None else tau
    before = t < tau
    try:
        censoring = CensoringDistributionEstimator().fit(_surv_array(t_train, s_train))
        ipcw = np.zeros(t.size)
        ipcw[before] = censoring.predict_ipcw(_surv_array(t[before], e[before]))
    except ValueError:  # G is zero at an event time, or no row before tau
        return float("nan")
    order = np.lexsort((~e, t))  # by time, events before censored rows at the same time
    t, pred, e, w_i = t[order], pred[order], e[order], np.square(ipcw[order])[:, None]
    rank = np.unique(pred, return_inverse=True)[1].astype(np.int64).reshape(-1)
    ones = np.ones((t.size, 1))
    less, tied, total = _ordered_pair_weights(np.zeros(t.size, np.int64), e, rank, ones, w_i)
    ev = np.flatnonzero(e)  # less the pairs of two events at the same time, not comparable
    time_group = np.concatenate([[0], np.cumsum(t[1:] != t[:-1])]).astype(np.int64)
    less2, tied2, total2 = _ordered_pair_weights(time_group[ev], np.ones(ev.size, bool), rank[ev], ones[ev], w_i[ev])
    comparable = float((total - total2)[0])
    if not comparable > 0:
        return float("nan")
    return float(((less - less2) + 0.5 * (tied - tied2))[0] / comparable)


def horizon_auc(t_train, s_train, t, s, risk, horizon: float) -> float:
    """Cumulative/dynamic AUC at ``horizon`` (Uno et al. 2007; the estimator of scikit-survival's
    ``cumulative_dynamic_auc``): how well the risk ranks the cases, rows with an observed event by
    the horizon (t <= h), above the controls, rows known to be event-free after it (t > h, or
    censored at h), each case weighted by 1 / G(t-), G the Kaplan-Meier curve of the training
    split's censoring just before the case's time. Ties in risk count one half. Needs no true
    occurrence: the AUC of a risk by a horizon on follow-up data, O(n log n). NaN without a case or
    a control, or where G reaches 0 before a case.

    Args:
        t_train, s_train: training follow-up times and event indicators (the censoring weights).
        t, s: the scored rows' times and indicators, shape (n,).
        risk: predicted P(event by ``horizon``) (any score, higher = more at risk), shape (n,).

    Example:
        >>> t_tr = np.arange(1.0, 21.0); s_tr = np.array([1, 0] * 10)
        >>> t, s = np.array([2.0, 4, 6, 12, 14, 16]), np.array([1, 1, 0, 1, 0, 1])
        >>> round(horizon_auc(t_tr, s_tr, t, s, np.array([.9, .8, .5, .3, .85, .1]), 10.0), 3)
        0.829
    """
    return float(resampled_horizon_auc(t_train, s_train, t, s, risk, horizon, np.ones((1, np.size(t))))[0])


def resampled_horizon_auc(t_train, s_train, t, s, risk, horizon: float, counts) -> np.ndarray:
    """``horizon_auc`` of each resample of the scored rows, (B,), each row weighted by how many
    times it is drawn (``counts``, (B, n)); the censoring weights stay those of the training rows.

    >>> t_tr = np.arange(1.0, 21.0); s_tr = np.array([1, 0] * 10)
    >>> t, s = np.array([2.0, 4, 12, 14]), np.array([1, 1, 1, 0])
    >>> resampled_horizon_auc(t_tr, s_tr, t, s, np.array([.9, .8, .3, .85]), 10.0, [[1, 1, 1, 1], [0, 2, 1, 0]])
    array([0.74324324, 1.        ])
    """
    t_train, s_train = np.asarray(t_train, np.float64).reshape(-1), np.asarray(s_train).reshape(-1).astype(bool)
    t, risk = np.asarray(t, np.float64).reshape(-1), np.asarray(risk, np.float64).reshape(-1)
    s = np.asarray(s).reshape(-1).astype(bool)
    if not (t.shape == s.shape == risk.shape):
        raise ValueError(f"t, s and risk must be of one length, got {t.size}, {s.size}, {risk.size}")
    w = _resample_counts(counts, t.size)
    if not t_train.size:
        return np.full(w.shape[0], np.nan)
    case = s & (t <= horizon)
    control = (t > horizon) | (~s & (t == horizon))
    weight = np.zeros(t.size)
    if case.any():
        # the training censoring's Kaplan-Meier curve just before each case's time
        times = np.unique(t_train)
        censored_at = np.bincount(np.searchsorted(times, t_train[~s_train]), minlength=times.size)
        at_risk = t_train.size - np.searchsorted(np.sort(t_train), times)  # rows with t >= each time
        curve = np.cumprod(1.0 - censored_at / at_risk)
        before = np.searchsorted(times, t[case], side="left")  # training times strictly before each case
        g = np.where(before > 0, curve[np.maximum(before - 1, 0)], 1.0)
        if (g <= 0).any():
            return np.full(w.shape[0], np.nan)
        weight[case] = 1.0 / g
    return _weighted_auc(case, control, risk, w * weight, w)


def brier_times(t, n: int = 20) -> np.ndarray:
    """An evaluation grid strictly inside the observed follow-up: quantiles 10 %..90 %."""
    grid = np.unique(np.quantile(np.asarray(t, np.float64), np.linspace(0.1, 0.9, n)))
    return grid[(grid > np.min(t)) & (grid < np.max(t))]


def integrated_brier_score(t_train, s_train, t, s, survival, times) -> float:
    """Integrated Brier score (scikit-survival, IPCW) of survival curves ``survival`` (n, len(times))
    at ``times``. Lower is better; NaN when undefined.

    A scored row followed past the training split's last time, while ``times`` end before it, is
    read as followed to that last time. Its terms are the same: it is at risk at every one of
    ``times``, and its own censoring weight is never used. scikit-survival would otherwise refuse
    the whole score, since the training censoring curve ends there. Where ``times`` themselves pass
    that time, the score stays undefined.

    >>> t_train, s_train = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1, 0, 1, 1])
    >>> t, s = np.array([1.5, 2.5, 9.0]), np.array([1, 1, 1])  # 9.0: past the training's last time
    >>> times = np.array([1.6, 2.6])
    >>> survival = np.array([[0.2, 0.1], [0.9, 0.3], [0.9, 0.8]])
    >>> round(integrated_brier_score(t_train, s_train, t, s, survival, times), 4)
    0.0442
    """
    from sksurv.metrics import integrated_brier_score as ibs

    if len(times) < 2:
        return float("nan")
    t, times = np.asarray(t, np.float64), np.asarray(times, np.float64)
    last = float(np.max(t_train))
    if times.max() < last:
        t = np.minimum(t, last)
    try:
        return float(ibs(_surv_array(t_train, s_train), _surv_array(t, s), np.asarray(survival, np.float64), times))
    except (ValueError, ZeroDivisionError) as exc:  # undefined here (e.g. no follow-up left); the caller
        log.debug("integrated Brier score undefined: %s", exc)  # reports it once, naming the task
        return float("nan")


def net_benefit(t, s, risk, horizon: float, thresholds, of: int | None = None) -> np.ndarray:
    """Decision curve analysis for an outcome by a time (Vickers, Cronin, Elkin and Gonen 2008):
    the net benefit of treating the rows whose predicted risk is at least each threshold ``p``,

        NB(p) = P(risk >= p) * (R - (1 - R) * p / (1 - p)),

    R the Kaplan-Meier risk by ``horizon`` of those rows (censoring handled as in any survival
    curve). ``p / (1 - p)`` is the harm of one needless treatment in units of one treated event,
    as a reader who would treat at risk ``p`` weighs them. Treating everyone is ``risk`` all ones;
    treating no one is 0. A model is worth using at ``p`` where its NB is above both.

    With ``of``, ``s`` is the kind of each row's first event (0 censored, k >= 1 kind k, as
    :func:`cet_model.nonparametric.aalen_johansen_risk`), R the Aalen-Johansen share whose first
    event by the horizon is of kind ``of``, and ``risk`` should be a crude risk of that kind.

    Args:
        t: follow-up times, shape (n,), > 0.
        s: 1 = event observed, 0 = censored (with ``of``: the kinds), shape (n,).
        risk: predicted P(event by ``horizon``), shape (n,).
        horizon: the time the outcome is counted by; events at exactly ``horizon`` count.
        thresholds: the risks ``p`` in [0, 1).

    Returns:
        NB at each threshold, shape (len(thresholds),): 0 where no row is treated, NaN where the
        treated rows' follow-up all ends before the horizon (their risk by then is unknown).

    Example:
        >>> t = np.array([1.0, 2, 3, 4, 5, 6, 7, 8]); s = np.array([1, 1, 0, 1, 0, 0, 1, 0])
        >>> risk = np.array([.9, .8, .7, .6, .1, .2, .3, .2])
        >>> net_benefit(t, s, risk, 4.5, [0.05, 0.25, 0.95]).round(4)  # 0.25: 5/8 treated, R 0.7
        array([0.3684, 0.375 , 0.    ])
        >>> net_benefit(t, s, np.ones(8), 4.5, [0.05, 0.25, 0.5]).round(4)   # treat all: R = 0.4
        array([ 0.3684,  0.2   , -0.2   ])
        >>> net_benefit(t, s, risk, 4.5, [0.5])  # the four treated are followed to 4 at most
        array([nan])
    """
    from .nonparametric import aalen_johansen_risk

    t, risk = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (t, risk))
    s = np.asarray(s).reshape(-1)
    p = np.asarray(thresholds, dtype=np.float64).reshape(-1)
    if not (t.shape == s.shape == risk.shape) or t.size == 0:
        raise ValueError(f"t, s and risk must be non-empty and of one length, got {t.size}, {s.size}, {risk.size}")
    if ((p < 0) | (p >= 1) | np.isnan(p)).any():
        raise ValueError("thresholds must lie in [0, 1)")
    out, seen = np.zeros(p.size), {}  # the treated rows are nested: their count names them
    for k, threshold in enumerate(p):
        treated = risk >= threshold
        n = int(treated.sum())
        if n == 0:
            continue
        if n not in seen:
            seen[n] = (np.nan if t[treated].max() < horizon
                       else kaplan_meier_risk(t[treated], s[treated], horizon) if of is None
                       else aalen_johansen_risk(t[treated], s[treated], of, horizon))
        out[k] = n / t.size * (seen[n] - (1.0 - seen[n]) * threshold / (1.0 - threshold))
    return out
