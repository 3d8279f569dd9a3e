"""Non-parametric estimators of the event-time distribution: Kaplan-Meier (curve, risk by a
horizon, risk gained between two times with its interval), the share that never has the event
(the plateau; a log-normal mixture cure fit), tests of whether the follow-up is long enough
to see that plateau (Maller-Zhou; Yuen-Musta), and for events that compete (the first ends the
follow-up of all) which they are and the Aalen-Johansen cumulative incidence."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import optimize, special, stats


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


def aalen_johansen_curve(t, kind, of: int) -> tuple[np.ndarray, np.ndarray]:
    """The Aalen-Johansen cumulative incidence curve of kind ``of`` (see
    :func:`aalen_johansen_risk`): (times, the share just after each), starting at (0, 0); a step
    function, drawn with ``where="post"``.

    >>> [a.tolist() for a in aalen_johansen_curve([1.0, 2.0, 3.0, 4.0], [1, 2, 1, 0], of=1)]
    [[0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 0.25, 0.25, 0.5, 0.5]]
    """
    kind = np.asarray(kind).reshape(-1)
    times, events, at_risk = _km_counts(t, kind > 0)
    own = _km_counts(t, kind == of)[1]  # the same distinct times, the events of this kind at each
    before = np.concatenate([[1.0], np.cumprod(1.0 - events / at_risk)[:-1]])  # no event of any kind yet
    return np.concatenate([[0.0], times]), np.concatenate([[0.0], np.cumsum(before * own / at_risk)])


def aalen_johansen_risk(t, kind, of: int, horizon: float | None = None) -> float:
    """The Aalen-Johansen cumulative incidence of kind ``of`` by ``horizon`` (None: by the last
    time): the estimated share whose first event by then is of that kind, where events of several
    kinds compete (the first of any ends the follow-up). Kaplan-Meier with the other kinds taken
    for censoring estimates the net risk instead, had no other kind come first: higher.

    Args:
        t: times, shape (n,), > 0.
        kind: 0 = censored, k >= 1 = the first event was of kind k, shape (n,).
        of: the kind.
        horizon: a time; events at exactly ``horizon`` count.

    Example:
        >>> aalen_johansen_risk([1.0, 2.0, 3.0, 4.0], [1, 2, 1, 0], of=1)
        0.5
        >>> kaplan_meier_risk([1.0, 2.0, 3.0, 4.0], [1, 0, 1, 0])   # kind 2 taken for censoring
        0.625
    """
    times, share = aalen_johansen_curve(t, kind, of)
    at = len(times) - 1 if horizon is None else int(np.searchsorted(times, horizon, side="right")) - 1
    return float(share[at]) if at >= 0 else 0.0


def competing_groups(T, S, mask=None) -> list[list[int]]:
    """The groups of events (columns of ``T`` and ``S``, (n, M)) that compete: on every row where
    their cells are kept (``mask`` > 0.5, None: all) they share one time and at most one is seen,
    as events coded by one status column are (the first ends the follow-up of all), and each is
    seen on some row. Groups of two or more, in column order.

    >>> T = np.array([[5.0, 5.0, 7.0], [3.0, 3.0, 2.0], [8.0, 8.0, 9.0]])
    >>> competing_groups(T, np.array([[1, 0, 1], [0, 1, 0], [0, 0, 1]]))
    [[0, 1]]
    >>> competing_groups(T, np.array([[1, 1, 1], [0, 1, 0], [0, 0, 1]]))  # both seen on a row: not competing
    []
    """
    T, S = np.asarray(T, dtype=np.float64), np.asarray(S, dtype=np.float64) > 0.5
    keep = np.ones(T.shape, bool) if mask is None else np.asarray(mask) > 0.5

    def compete(a: int, b: int) -> bool:
        both = keep[:, a] & keep[:, b]
        return bool(both.any() and S[both, a].any() and S[both, b].any()
                    and np.array_equal(T[both, a], T[both, b]) and not (S[both, a] & S[both, b]).any())

    groups: list[list[int]] = []
    for j in range(T.shape[1]):
        group = next((g for g in groups if all(compete(i, j) for i in g)), None)
        if group is None:
            groups.append([j])
        else:
            group.append(j)
    return [g for g in groups if len(g) > 1]


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

    Read it with care: in simulation (``python benchmarks/follow_up_test.py`` at 6e7c368, docs/datasets.md)
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
    Read it with care: in simulation (``python benchmarks/follow_up_test.py`` at 6e7c368, docs/datasets.md),
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
