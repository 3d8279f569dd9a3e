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
import math
from typing import NamedTuple

import numpy as np
from scipy import optimize, special, stats
from sklearn.metrics import roc_auc_score

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
    if np.unique(c).size < 2:
        return float("nan")
    return float(roc_auc_score(c, score))


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
    w = _resample_counts(counts, t.size)
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


def _ordered_pair_weights(group: np.ndarray, first: np.ndarray, rank: np.ndarray, w: np.ndarray):
    """Over pairs (i, j) of distinct elements, i before j in the given order, same ``group``,
    ``first[i]`` true: the sums of w_i * w_j (column by column of ``w``, (n, B)) over those with
    rank_i < rank_j, rank_i == rank_j, and all: three (B,) arrays (whole numbers for counts).

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
    perm = np.lexsort((np.arange(rank.size), group))  # by group, then position
    group, first, rank, w = group[perm], first[perm], rank[perm], w[perm]
    sizes = np.diff(np.flatnonzero(np.r_[True, group[1:] != group[:-1], True]))
    keep = np.repeat(sizes >= 2, sizes)  # a group of one has no pairs
    group, first, rank, w = group[keep], first[keep], rank[keep], w[keep]
    n = rank.size
    if n < 2:
        return zeros, zeros.copy(), zeros.copy()
    fw = w * first[:, None]
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


def kaplan_meier_plateau(t, s) -> float:
    """1 - S_KM(max t): the Kaplan-Meier estimate of the share that has the event by the end of
    follow-up, the classical nonparametric estimate of P(ever) in a cure model (Maller & Zhou 1996).

    Args:
        t: times, shape (n,), > 0.
        s: 1 = event observed, 0 = censored, shape (n,).

    Example:
        >>> kaplan_meier_plateau([1.0, 2.0, 3.0, 4.0], [1, 0, 1, 0])   # 1 - (3/4)(1/2)
        0.625
    """
    return kaplan_meier_risk(t, s)


def _cure_nll(theta: np.ndarray, log_t: np.ndarray, s: np.ndarray) -> float:
    """Negative log-likelihood of the intercept-only mixture-cure log-normal model, theta =
    (logit p, mu, log sigma), at log times ``log_t`` (n,) with indicators ``s`` (n,).

    >>> round(_cure_nll(np.array([0.0, 0.0, 0.0]), np.zeros(2), np.array([1.0, 0.0])), 4)
    1.8998
    """
    logit_p, mu, log_sigma = theta
    log_p, log_1mp = -np.logaddexp(0, -logit_p), -np.logaddexp(0, logit_p)
    z = (log_t - mu) / np.exp(log_sigma)
    log_f = stats.norm.logpdf(z) - log_sigma - log_t
    ll = np.where(s == 1, log_p + log_f, np.logaddexp(log_1mp, log_p + special.log_ndtr(-z)))
    return float(-ll.sum())


def mixture_cure_fit(t, s) -> tuple[float, float, float]:
    """The intercept-only mixture-cure log-normal maximum likelihood: (P(c = 1), mu, sigma) with
    log T | c = 1 ~ N(mu, sigma^2), fitted by L-BFGS-B (scipy) to times ``t`` and indicators ``s``.

    P(c = 1) is bounded to [observed share, 1 - 1e-3]: where follow-up ends before the tail of the
    times an unbounded fit may run to 1. With fewer than two observed events there is nothing to
    fit: the observed share (at least 1e-3), the mean log time and its standard deviation.

    Args:
        t: times, shape (n,), > 0.
        s: 1 = event observed, 0 = censored, shape (n,).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> c = rng.random(20_000) < 0.6                           # 60 % ever have the event
        >>> t_event, cens = np.exp(1.0 + 0.5 * rng.standard_normal(20_000)), rng.uniform(0, 8, 20_000)
        >>> s = (c & (t_event < cens)).astype(float)
        >>> p, mu, sigma = mixture_cure_fit(np.where(s == 1, t_event, cens), s)
        >>> round(p, 1), round(mu, 1), round(sigma, 1), round(float(s.mean()), 2)   # observed share 0.37
        (0.6, 1.0, 0.5, 0.37)
    """
    log_t = np.log(np.asarray(t, dtype=np.float64).reshape(-1))
    s = np.asarray(s, dtype=np.float64).reshape(-1)
    if log_t.shape != s.shape or log_t.size == 0:
        raise ValueError(f"t and s must be non-empty and of the same length, got {log_t.size} and {s.size}")
    lo = float(np.clip(s.mean(), 1e-3, 1 - 2e-3))
    if s.sum() < 2:
        return lo, float(log_t.mean()), float(log_t.std() + 1e-3)
    x0 = [special.logit(min(max(lo, 0.5), 1 - 2e-3)), float(log_t[s == 1].mean()), float(np.log(log_t.std() + 1e-3))]
    res = optimize.minimize(_cure_nll, x0, args=(log_t, s), method="L-BFGS-B",
                            bounds=[(special.logit(lo), special.logit(1 - 1e-3)), (None, None), (np.log(1e-2), None)])
    return float(special.expit(res.x[0])), float(res.x[1]), float(np.exp(res.x[2]))


def _km_counts(t, s) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct times of ``t`` (n,), ascending, with the events ``s`` (n,) at each and the rows
    still at risk just before it: what a Kaplan-Meier curve is made of."""
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    s = np.asarray(s, dtype=np.float64).reshape(-1)
    if t.shape != s.shape or t.size == 0:
        raise ValueError(f"t and s must be non-empty and of the same length, got {t.size} and {s.size}")
    order = np.lexsort((1.0 - s, t))  # by time, events first at equal times
    t, s = t[order], s[order]
    times, first = np.unique(t, return_index=True)
    return times, np.add.reduceat(s, first), t.size - first


def kaplan_meier_curve(t, s) -> tuple[np.ndarray, np.ndarray]:
    """The Kaplan-Meier survival curve: (times, S_KM just after each), starting at (0, 1); a step
    function, drawn with ``where="post"``.

    >>> [a.tolist() for a in kaplan_meier_curve([1.0, 2.0, 3.0, 4.0], [1, 0, 1, 0])]
    [[0.0, 1.0, 2.0, 3.0, 4.0], [1.0, 0.75, 0.75, 0.375, 0.375]]
    """
    times, deaths, at_risk = _km_counts(t, s)
    return np.concatenate([[0.0], times]), np.concatenate([[1.0], np.cumprod(1.0 - deaths / at_risk)])


def kaplan_meier_risk(t, s, horizon: float | None = None) -> float:
    """1 - S_KM(horizon): the Kaplan-Meier estimate of the share that has the event by
    ``horizon`` (None: by the last time, as :func:`kaplan_meier_plateau`).

    Args:
        t: times, shape (n,), > 0.
        s: 1 = event observed, 0 = censored, shape (n,).
        horizon: a time; events at exactly ``horizon`` count.

    Example:
        >>> kaplan_meier_risk([1.0, 2.0, 3.0, 4.0], [1, 0, 1, 0], horizon=2.5)   # 1 - 3/4
        0.25
    """
    times, deaths, at_risk = _km_counts(t, s)
    upto = slice(None) if horizon is None else times <= horizon
    return float(1.0 - np.prod((1.0 - deaths / at_risk)[upto]))


class RiskGained(NamedTuple):
    """What :func:`kaplan_meier_risk_gained` returns."""

    gain: float  # S_KM(start) - S_KM(end)
    low: float | None  # the confidence interval's ends (None without an event between the two times)
    high: float | None
    events: int  # the events between the two times: the interval is reliable with four or more


def kaplan_meier_risk_gained(t, s, start: float, end: float, level: float = 0.95) -> RiskGained:
    """The Kaplan-Meier risk gained between ``start`` and ``end``, G = S_KM(start) - S_KM(end),
    with a ``level`` confidence interval on the log scale, G exp(+-z sd / G) (always above 0, as
    skewed as a small gain is), sd from Greenwood's formula by the delta method:
    Var G = G^2 V(start) + S(end)^2 (V(end) - V(start)), V(u) = sum over event times u_i <= u of
    d_i / (n_i (n_i - d_i)) (Greenwood's covariance of S(start) and S(end) is
    S(start) S(end) V(start)); the upper end is clipped at S(start), all that can still have it.

    The interval rests on a normal approximation: in simulation (``tests/test_metrics.py``, 1,000
    samples of a cure model each) it covered the true gain 95.3 % and 94.1 % of the time with 9.3
    and 4.1 events between the two times on average, and 77.9 % with 1.6, so ``events`` is
    returned with it.
    Without an event between the two times the gain is 0 and there is no interval (None, None).

    Args:
        t: times, shape (n,), > 0.
        s: 1 = event observed, 0 = censored, shape (n,).
        start, end: the two times, ``start`` <= ``end``; events at exactly a time count by it.
        level: the confidence level, in (0, 1).

    Returns:
        ``RiskGained(gain, low, high, events)``.

    Example:
        >>> t = np.r_[np.linspace(1.0, 20.0, 50), np.full(150, 20.0)]   # events until the end
        >>> r = kaplan_meier_risk_gained(t, (t < 20).astype(float), 15.0, 20.0)
        >>> round(r.gain, 3), round(r.low, 3), round(r.high, 3), r.events
        (0.06, 0.035, 0.104, 12)
    """
    from scipy.stats import norm

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if start > end:
        raise ValueError(f"start ({start}) must not be after end ({end})")
    times, deaths, at_risk = _km_counts(t, s)
    left = at_risk - deaths
    # where everyone at risk has the event the curve ends at 0, and that term is not needed
    terms = np.divide(deaths, at_risk * left, out=np.zeros_like(deaths), where=left > 0)
    by_start, window = times <= start, (times > start) & (times <= end)
    step = 1.0 - deaths / at_risk
    s_start = float(np.prod(step[by_start]))
    kept = float(np.prod(step[window]))  # S(end) / S(start): exactly 1 without an event in the window
    s_end, gain = s_start * kept, s_start * (1.0 - kept)
    events = int(round(deaths[window].sum()))
    if gain <= 0.0:
        return RiskGained(0.0, None, None, events)
    var = gain**2 * terms[by_start].sum() + s_end**2 * terms[window].sum()
    spread = math.exp(float(norm.ppf(0.5 + level / 2.0)) * math.sqrt(var) / gain)
    return RiskGained(gain, gain / spread, min(gain * spread, s_start), events)


class FollowUpTest(NamedTuple):
    """What :func:`maller_zhou_test` returns."""

    p_value: float  # (1 - events / n) ** n: small where the data say the follow-up was sufficient
    events: int  # N_n: the events in (2 last_event - last_time, last_event]
    n: int  # the rows
    last_event: float  # t*_n: the largest time with an event
    last_time: float  # t_n: the largest time, event or not


def _finite_times(t, s) -> tuple[np.ndarray, np.ndarray]:
    """``t`` and ``s`` as float64 vectors of one length, every value finite; otherwise a
    ValueError naming the first bad row (a NaN time would silently drop out of any comparison)."""
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    s = np.asarray(s, dtype=np.float64).reshape(-1)
    if t.shape != s.shape or t.size == 0:
        raise ValueError(f"t and s must be non-empty and of the same length, got {t.size} and {s.size}")
    bad = ~(np.isfinite(t) & np.isfinite(s))
    if bad.any():
        raise ValueError(f"t and s must be finite; row {int(np.argmax(bad))} is not (t={t[bad][0]}, s={s[bad][0]}), "
                         f"{int(bad.sum())} such rows")
    return t, s


def maller_zhou_test(t, s) -> FollowUpTest:
    """Maller and Zhou's (1996, *Survival Analysis with Long-Term Survivors*) test of
    sufficient follow-up, the Q_n test: is the follow-up long enough that anyone who will ever have
    the event would have had it by its end? H0, insufficient follow-up: the times of those who will
    have it reach past the longest follow-up. The statistic counts the events near the largest event
    time, N_n = #{i: s_i = 1, 2 t*_n - t_n < t_i <= t*_n} (t*_n the largest event time, t_n the
    largest time): a long event-free stretch after t*_n with events crowding just before it is
    what sufficient follow-up looks like. p-value (1 - N_n / n)^n (about exp(-N_n): three events
    in the window reject at 5 %). Without a censored time after the last event (t_n = t*_n) the
    window is empty and p = 1.

    Read it with care: in simulation (``python benchmarks/follow_up_test.py``, docs/benchmarks.md)
    it rejects far more often than its level says where the follow-up is insufficient (at 5 %: in
    24-63 % of the samples, by censoring design and tail), and nearly always where a thin tail
    reaches past the follow-up (H0 holds, but few would have the event after it: "practically"
    sufficient in Yuen and Musta's sense, arXiv:2403.16832). So a small p is weak evidence of
    sufficient follow-up; read it beside the Kaplan-Meier risk gained at the end
    (:func:`kaplan_meier_risk_gained`), which the pipeline's record keeps.

    Args:
        t: times, shape (n,), > 0.
        s: 1 = event observed, 0 = censored, shape (n,).

    Returns:
        ``FollowUpTest(p_value, events, n, last_event, last_time)``; without an event, p = 1 and
        ``last_event`` NaN.

    Example:
        >>> t = np.r_[np.linspace(1.0, 5.0, 50), np.linspace(6.0, 12.0, 150)]   # events until 5, then
        >>> r = maller_zhou_test(t, (t <= 5.0).astype(float))                   # 150 followed to 12
        >>> r.events, r.last_event, r.last_time, f"{r.p_value:.1e}"   # (−2, 5]: every event
        (50, 5.0, 12.0, '1.0e-25')
        >>> t = np.r_[np.linspace(1.0, 12.0, 50), np.linspace(6.0, 12.0, 150)]   # events to the end
        >>> maller_zhou_test(t, (np.arange(200) < 50).astype(float)).p_value   # last event at the end
        1.0
    """
    t, s = _finite_times(t, s)
    seen = s > 0.5
    last_time = float(t.max())
    if not seen.any():
        return FollowUpTest(1.0, 0, int(t.size), float("nan"), last_time)
    last_event = float(t[seen].max())
    events = int((seen & (t > 2.0 * last_event - last_time) & (t <= last_event)).sum()) if last_time > last_event else 0
    return FollowUpTest(float((1.0 - events / t.size) ** t.size), events, int(t.size), last_event, last_time)


class SufficientFollowUpTest(NamedTuple):
    """What :func:`yuen_musta_test` returns."""

    p_value: float  # small where the data say the follow-up was practically sufficient
    density: float  # the statistic: the Grenander estimate of the event-time density at ``at``
    threshold: float  # eps F_KM(end) / (tau - end): the least density at the end that H0 allows
    scale: float  # the statistic's standard scale, sqrt(density) / (n^((1 - rate) / 2) sqrt(shift (1 - G(end-))))
    at: float  # end - shift n^-rate, where the density is estimated
    end: float  # tau_G: the end of follow-up
    tau: float  # no event after it
    eps: float
    n: int
    events_after: (
        int  # the events in (at, end]: with none the estimate is 0 (p = 0, or exp(-lambda0) with empty="count")
    )
    followed: float  # 1 - G(end-), the reverse Kaplan-Meier share followed to the end


def lcm_slope_sf(a):
    """P(D > a), D the right-hand slope at t = 1 of the least concave majorant of a standard
    Brownian motion on [0, inf): the limit law of :func:`yuen_musta_test`'s statistic.

    The majorant's slope at 1 exceeds a exactly when W(t) - a t peaks after t = 1; by Brownian
    scaling that peak's time is sigma / a^2, sigma the time of the maximum of W(t) - t, whose
    tail (Williams' path decomposition: a hitting time of an exponential level) is
    P(sigma > x) = 2 [(1 + x) Phi(-sqrt x) - sqrt(x) phi(sqrt x)]. So P(D > a) =
    2 [(1 + a^2) Phi(-a) - a phi(a)] for a >= 0 and 1 below (tests/test_metrics.py checks it
    against majorants of simulated paths).

    Args:
        a: thresholds, any shape.

    Returns:
        the tail probabilities, the shape of ``a`` (a float for a scalar).

    Example:
        >>> float(lcm_slope_sf(0.0)), round(float(lcm_slope_sf(1.0)), 4), round(float(lcm_slope_sf(1.4647)), 4)
        (1.0, 0.1507, 0.05)
    """
    from scipy.stats import norm

    a = np.maximum(np.asarray(a, dtype=np.float64), 0.0)
    return np.clip(2.0 * ((1.0 + a * a) * norm.sf(a) - a * norm.pdf(a)), 0.0, 1.0)


def grenander_density(t, s, at, end: float | None = None):
    """The Grenander estimate of the event-time density from right-censored data: the slopes of
    the least concave majorant of the Kaplan-Meier risk 1 - S_KM on [0, end] (Huang and Wellner
    1995), the nonparametric estimate of a density that does not increase. The slope right of
    ``at`` is returned (the segment [x_k, x_k+1) holding it).

    Args:
        t: times, shape (n,), > 0.
        s: 1 = event observed, 0 = censored, shape (n,).
        at: where to estimate, any shape, in [0, end).
        end: the last time used (None: the largest of ``t``).

    Returns:
        the estimates, the shape of ``at``.

    Example:
        >>> t = np.array([1.0, 2.0, 3.0, 4.0]); s = np.array([1.0, 1.0, 0.0, 0.0])
        >>> grenander_density(t, s, [0.5, 1.5, 3.5])   # risk 1/4 at 1, 1/2 at 2, flat after
        array([0.25, 0.25, 0.  ])
    """
    times, deaths, at_risk = _km_counts(*_finite_times(t, s))
    end = float(times[-1]) if end is None else float(end)
    keep = times <= end
    risk = 1.0 - np.cumprod(1.0 - deaths / at_risk)[keep]
    x = np.r_[0.0, times[keep]]
    y = np.r_[0.0, risk]
    if x[-1] < end:  # the curve stays flat to the end
        x, y = np.r_[x, end], np.r_[y, y[-1]]
    hull = [0]
    for i in range(1, x.size):  # upper hull, left to right (monotone chain)
        while len(hull) >= 2:
            j, k = hull[-2], hull[-1]
            if (x[k] - x[j]) * (y[i] - y[j]) - (y[k] - y[j]) * (x[i] - x[j]) >= 0.0:
                hull.pop()
            else:
                break
        hull.append(i)
    knots = np.asarray(hull)
    slopes = np.diff(y[knots]) / np.diff(x[knots])
    at = np.asarray(at, dtype=np.float64)
    k = np.clip(np.searchsorted(x[knots], at, side="right") - 1, 0, slopes.size - 1)
    return slopes[k] if slopes.size else np.zeros_like(at)


def yuen_musta_test(t, s, tau: float, *, end: float | None = None, eps: float = 0.01,
                    rate: float = 0.34, shift: float | None = None, empty: str = "zero") -> SufficientFollowUpTest:
    """Yuen and Musta's test of *practically* sufficient follow-up (Biometrical Journal 2026,
    arXiv:2403.16832), with the Grenander estimator: is the follow-up long enough that at most a
    share ``eps`` of those who will ever have the event have it after its end?

    H0: q_{1-eps} >= end (insufficient: the (1 - eps) quantile of the event time of those who
    will have it is at or after the end of follow-up) against H1: q_{1-eps} < end. It assumes
    that no event comes after ``tau`` (> end, chosen from what is known of the disease or
    behaviour, not from the data) and that the event-time density does not increase after the
    end. Under H0 the density at the end is then at least ``threshold`` = eps F(end) / (tau - end),
    F(end) from Kaplan-Meier; the statistic is the Grenander estimate at
    ``at`` = end - shift n^-rate, whose error there is sqrt(f / (shift (1 - G(end-)))) times
    n^-(1-rate)/2 times minus the right-hand slope at 1 of the least concave majorant of a
    Brownian motion (G the censoring distribution, from the reverse Kaplan-Meier), so
    p = P(D > (threshold - density) / scale) (:func:`lcm_slope_sf`); a density estimate at or
    above the threshold gives p = 1, a flat Kaplan-Meier curve at ``at`` gives p = 0.

    Unlike :func:`maller_zhou_test` it does not ask for a "cure time" after which nobody has
    the event, and a thin tail past the end is allowed. This is the authors' Grenander version
    (their smoothed version with a bootstrap, recommended for its level, is not implemented).
    Read it with care: in simulation (``python benchmarks/follow_up_test.py``, docs/benchmarks.md),
    with four in five rows followed to the end, it keeps H0 where 13 % or 33 % of the events come
    after the end and finds an exponential tail (0.005 % after) sufficient, but where exactly
    ``eps`` = 1 % come after it, thinly spread (its least favourable case), it rejects at 5 % in
    85 %, 64 % and 29 % of the samples of 200, 1,000 and 5,000 rows: no event falls after
    ``at``, the estimate is 0 and so is p (``events_after``). It also needs rows followed to
    the end (``followed`` > 0 and not small): with entry spread over the study it rejects too
    often. ``empty="count"`` replaces that p = 0 by the chance of an empty window under H0 (see
    Args; this library's addition, not the authors'), which keeps the level there and shows what
    the data can say: with eps = 1 % that chance is large unless n is in the tens of thousands.

    Args:
        t: times, shape (n,), > 0.
        s: 1 = event observed, 0 = censored, shape (n,).
        tau: the time after which nobody has the event, > end.
        end: tau_G, the end of follow-up, at most the largest time (None: the largest time, as
            the authors' software does).
        eps: the share allowed after the end, in (0, 1); the authors' default 0.01.
        rate: a in (1/3, 1), how fast ``at`` nears the end; the authors' 0.34.
        shift: c > 0 in ``at``; None: ``end``, as the authors' software does.
        empty: p where no event falls in (at, end], so the estimate is 0 by construction:
            ``"zero"``, the authors' p = 0; or ``"count"``, exp(-lambda0), the chance of no event
            there if H0 held: under H0 the hazard there is at least threshold / S(at), so the
            expected count given the rows at risk is at least lambda0 = threshold *
            sum_i (min(t_i, end) - at)_+ / S_KM(at).

    Returns:
        ``SufficientFollowUpTest(p_value, density, threshold, scale, at, end, tau, eps, n,
        events_after, followed)``.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> will = rng.random(1000) < 0.6                     # 60 % will have it, by 5
        >>> time = np.where(will, rng.uniform(0.0, 5.0, 1000), np.inf)
        >>> t = np.minimum(time, 10.0); s = (time <= 10.0).astype(float)   # followed to 10
        >>> r = yuen_musta_test(t, s, tau=20.0)
        >>> r.p_value, r.density, round(r.threshold, 5)    # flat at 9.05: sufficient
        (0.0, 0.0, 0.00058)
        >>> round(yuen_musta_test(t, s, tau=20.0, empty="count").p_value, 2)  # no evidence yet
        0.57
        >>> time = np.where(will, rng.uniform(0.0, 15.0, 1000), np.inf)  # a third after 10
        >>> t = np.minimum(time, 10.0); s = (time <= 10.0).astype(float)
        >>> yuen_musta_test(t, s, tau=20.0).p_value
        1.0
    """
    t, s = _finite_times(t, s)
    end = float(t.max()) if end is None else float(end)
    if end > t.max():
        raise ValueError(f"end ({end:g}) is after the last time ({t.max():g}): no row is followed to it")
    shift = end if shift is None else float(shift)
    if not (np.isfinite(tau) and tau > end):
        raise ValueError(f"tau must be after the end of follow-up ({end:g}), got {tau}")
    if not 0.0 < eps < 1.0:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    if not 1.0 / 3.0 < rate < 1.0:
        raise ValueError(f"rate must be in (1/3, 1), got {rate}")
    if not shift > 0.0:
        raise ValueError(f"shift must be > 0, got {shift}")
    if empty not in ("zero", "count"):
        raise ValueError(f"empty must be 'zero' or 'count', got {empty!r}")
    n = int(t.size)
    at = end - shift * n ** -rate
    if at <= 0.0:
        raise ValueError(f"end - shift n^-rate = {at:g} is not after 0: too few rows ({n}) for this shift ({shift:g})")
    density = float(grenander_density(t, s, at, end=end))
    threshold = eps * kaplan_meier_risk(t, s, horizon=end) / (tau - end)
    # 1 - G(end-): the reverse Kaplan-Meier (censoring as the event; events first at equal times)
    times, censored, at_risk = _km_counts(t, 1.0 - s)
    events_at = np.zeros_like(times)
    np.add.at(events_at, np.searchsorted(times, t[s > 0.5]), 1.0)
    left = at_risk - events_at  # >= censored: where a row is censored, it is at risk of it
    step = 1.0 - np.divide(censored, left, out=np.zeros_like(censored), where=censored > 0)
    still = float(np.prod(step[times < end]))
    scale = math.sqrt(density) / (n ** ((1.0 - rate) / 2.0) * math.sqrt(shift * still))
    if density >= threshold:
        p = 1.0
    elif density <= 0.0 and empty == "zero":
        p = 0.0
    elif density <= 0.0:  # no event in (at, end]: how likely that is under H0
        exposure = float(np.clip(np.minimum(t, end) - at, 0.0, None).sum())
        p = math.exp(-threshold * exposure / max(1.0 - kaplan_meier_risk(t, s, horizon=at), 1e-300))
    else:
        p = float(lcm_slope_sf((threshold - density) / scale))
    events_after = int(((s > 0.5) & (t > at) & (t <= end)).sum())
    return SufficientFollowUpTest(p, density, threshold, scale, at, end, float(tau), float(eps), n, events_after, still)


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
    """Uno's IPCW concordance (scikit-survival) of predicted times: an earlier predicted time
    is a higher risk. Censoring weights come from the training split; ``tau`` defaults to
    the 90th percentile of the training times. NaN when undefined (no comparable pair,
    no event)."""
    from sksurv.metrics import concordance_index_ipcw

    t_train, t = np.asarray(t_train, np.float64), np.asarray(t, np.float64)
    tau = float(np.quantile(t_train, 0.9)) if tau is None else tau
    try:
        return float(concordance_index_ipcw(_surv_array(t_train, s_train), _surv_array(t, s),
                                            -np.asarray(predicted_times, np.float64), tau=tau)[0])
    except (ValueError, ZeroDivisionError):
        return float("nan")


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
    at ``times``. Lower is better; NaN when undefined."""
    from sksurv.metrics import integrated_brier_score as ibs

    if len(times) < 2:
        return float("nan")
    try:
        return float(ibs(_surv_array(t_train, s_train), _surv_array(t, s), np.asarray(survival, np.float64),
                         np.asarray(times, np.float64)))
    except (ValueError, ZeroDivisionError) as exc:  # undefined here (e.g. no follow-up left); the caller
        log.debug("integrated Brier score undefined: %s", exc)  # reports it once, naming the task
        return float("nan")
