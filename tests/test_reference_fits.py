"""Fits compared with independent implementations: lifelines (rossi) and a scipy cure MLE."""

import numpy as np
import pytest
import torch
from scipy import optimize, special, stats

from cet_model import CETModel, ETModel
from tests.conftest import build

# lifelines LogNormalAFTFitter on rossi (lifelines' documented example data)
ROSSI = {"fin": 0.34283, "age": 0.02721, "race": -0.36311, "wexp": 0.26813, "mar": 0.46024,
         "paro": 0.05588, "prio": -0.06552}
ROSSI_INTERCEPT, ROSSI_LOG_SIGMA, ROSSI_LL = 4.26754, 0.25816, -683.23463


def test_linear_et_matches_lifelines_on_rossi():
    from lifelines.datasets import load_rossi

    df = load_rossi()
    cols = list(ROSSI)
    x = df[cols].to_numpy(float)
    t = df[["week"]].to_numpy(float)
    s = df[["arrest"]].to_numpy(float)
    kw = dict(hidden_sizes=(), sigma="constant", dropout=0.0, dtype="float64", optimizer="lbfgs",
              max_epochs=500, batch_size=None, device="cpu")
    # age is in years (mean 24.6): the model scales such columns inside itself; a linear model on
    # scaled features reaches the same maximum likelihood, its weights mapped back to the features' units
    model = build(ETModel, **kw).fit(x, t, s)
    shift, scale = model.feature_scaling_
    assert shift[cols.index("age")] == pytest.approx(df["age"].mean())
    dec = model.net_.decoder
    w = dec.x_proj.weight.detach().numpy()[0]
    np.testing.assert_allclose(w / scale, [ROSSI[c] for c in cols], atol=1e-3)
    assert float(dec.x_proj.bias[0].detach()) - float(np.sum(w * shift / scale)) == pytest.approx(ROSSI_INTERCEPT,
                                                                                                   abs=1e-3)
    assert float(dec.log_sigma[0].detach()) == pytest.approx(ROSSI_LOG_SIGMA, abs=1e-3)
    assert model.objective_score(x, t, s) * len(x) == pytest.approx(ROSSI_LL, abs=1e-3)


def _cure_nll(theta, t, s):
    """-log L of the mixture cure model with log-normal latency (independent of cet_model)."""
    logit_p, mu, log_sigma = theta
    log_p, log_1mp = -np.logaddexp(0, -logit_p), -np.logaddexp(0, logit_p)
    sigma = np.exp(log_sigma)
    z = (np.log(t) - mu) / sigma
    log_f = stats.norm.logpdf(z) - log_sigma - np.log(t)
    log_surv = special.log_ndtr(-z)
    ll = np.where(s == 1, log_p + log_f, np.logaddexp(log_1mp, log_p + log_surv))
    return -ll.sum()


def test_intercept_only_marginal_is_the_mixture_cure_mle():
    rng = np.random.default_rng(0)
    n = 4000
    c = rng.random(n) < 0.6
    t_true = np.exp(0.5 + 0.8 * rng.standard_normal(n))
    cens = 8.0 * (1 - rng.random(n))
    s = (c & (t_true < cens)).astype(float)
    t = np.where(s == 1, t_true, cens)
    ref = optimize.minimize(_cure_nll, x0=[0.0, 0.0, 0.0], args=(t, s), method="BFGS", options={"gtol": 1e-9})
    model = build(CETModel, hidden_sizes=(), estimator="exact", objective="marginal", sigma="constant", dropout=0.0,
                     dtype="float64", optimizer="lbfgs", max_epochs=500, batch_size=None,
                     device="cpu").fit(np.zeros((n, 0)), t[:, None], s[:, None])
    p_hat = model.predict_occurrence(np.zeros((1, 0)))[0, 0]
    assert p_hat == pytest.approx(special.expit(ref.x[0]), abs=1e-3)
    # the location given c = 1 (bias + the weight on c, which only ever sees c = 1 here)
    mu, log_sigma = (a.detach() for a in model.net_.decoder(torch.zeros(1, 0, dtype=torch.float64),
                                                             torch.ones(1, 1, 1, dtype=torch.float64)))
    assert float(mu) == pytest.approx(ref.x[1], abs=1e-3)
    assert float(log_sigma) == pytest.approx(ref.x[2], abs=1e-3)
    assert model.objective_score(np.zeros((n, 0)), t[:, None], s[:, None]) * n == pytest.approx(-ref.fun, abs=1e-3)
    assert abs(p_hat - 0.6) < 0.05  # and the truth is recovered


def test_cox_reference_ranks_as_lifelines_cox_on_rossi():
    """``cox_reference`` without a ridge is the Cox partial likelihood fit: its linear predictor is
    lifelines' CoxPHFitter's (in the features' own units) up to a constant, so both C's agree; its
    restricted means follow lifelines' survival curves."""
    from lifelines import CoxPHFitter
    from lifelines.datasets import load_rossi

    from cet_model.dataset import Split
    from cet_model.evaluation import CI_RMST, concordance_index
    from cet_model.reference import cox_reference

    df = load_rossi()
    cols = list(ROSSI)
    n = len(df)
    split = Split(ids=np.arange(n), X=df[cols].to_numpy(float), T=df[["week"]].to_numpy(float),
                  S=df[["arrest"]].to_numpy(float), C=np.full((n, 1), np.nan), T_true=np.full((n, 1), np.nan))
    scores, ranking = cox_reference(split, {"all": split}, ["arrest"], rmst_at=40.0, penalizer=0.0)
    cph = CoxPHFitter().fit(df[[*cols, "week", "arrest"]], "week", "arrest")
    log_hazard = np.log(cph.predict_partial_hazard(df[cols]).to_numpy())
    ours = -ranking["all"]["ci"][:, 0]
    np.testing.assert_allclose(ours - ours.mean(), log_hazard - log_hazard.mean(), atol=1e-4)
    assert scores["all"]["arrest"]["ci"] == pytest.approx(concordance_index(df["week"], -log_hazard, df["arrest"]))
    # the restricted means: the area under lifelines' curves up to week 40 (its baseline hazard under
    # Efron's ties is not scikit-survival's Breslow-type estimate: within 1 %), and under the curves
    # of scikit-survival's own step functions (the same fit: to the grid's error)
    from sksurv.linear_model import CoxPHSurvivalAnalysis

    grid = np.linspace(0, 40.0, 40001)
    curves = cph.predict_survival_function(df[cols].iloc[:25], times=grid).to_numpy().T  # (25, grid)
    area = ((curves[:, 1:] + curves[:, :-1]) / 2 * np.diff(grid)).sum(1)
    np.testing.assert_allclose(ranking["all"][CI_RMST][:25, 0], area, rtol=1e-2)
    y = np.array(list(zip(df["arrest"] == 1, df["week"].astype(float), strict=True)), dtype=[("e", bool), ("t", float)])
    z = (split.X - split.X.mean(0)) / split.X.std(0)
    steps = CoxPHSurvivalAnalysis(ties="efron").fit(z, y).predict_survival_function(z[:25])
    area = [np.trapezoid(np.where(grid < f.x[0], 1.0, f(np.clip(grid, f.x[0], None))), grid) for f in steps]
    np.testing.assert_allclose(ranking["all"][CI_RMST][:25, 0], area, rtol=1e-4)


def test_cox_reference_gives_an_event_without_training_events_the_null_model():
    """An event no training row has (a rare lab in a small cohort) gets the null model, every row
    the same risk: C 0.5 where the test rows have events, columns without NaN, so the paired
    bootstrap of CET minus the reference averages over the same events for both."""
    from cet_model.bootstrap import bootstrap_intervals
    from cet_model.dataset import Split
    from cet_model.evaluation import CI_RMST
    from cet_model.reference import REFERENCE, cox_reference

    rng = np.random.default_rng(1)

    def split(n, seen):
        x = rng.standard_normal((n, 3))
        t = rng.exponential(np.exp(-x[:, :1]), size=(n, 2)) + 0.01
        s = (rng.random((n, 2)) < 0.6).astype(float)
        if not seen:
            s[:, 1] = 0.0
        return Split(ids=np.arange(n), X=x, T=t, S=s, C=np.full((n, 2), np.nan), T_true=np.full((n, 2), np.nan))

    train, test = split(200, seen=False), split(150, seen=True)
    scores, ranking = cox_reference(train, {"test": test}, ["a", "b"])
    assert scores["test"]["b"]["ci"] == 0.5 and scores["test"]["b"][CI_RMST] == 0.5
    assert scores["test"]["a"]["ci"] > 0.6 and not np.isnan(ranking["test"]["ci"]).any()
    assert np.ptp(ranking["test"][CI_RMST][:, 1]) == 0  # every row the same restricted mean
    got = bootstrap_intervals(test, {"CET": ranking["test"], REFERENCE: ranking["test"]}, resamples=20)
    assert got["differences"]["ci"][REFERENCE]["estimate"] == 0.0
    blank = {k: v.copy() for k, v in ranking["test"].items()}
    for v in blank.values():
        v[:, 1] = np.nan  # a model with no prediction for event b: b is undefined for it, not an error
    got = bootstrap_intervals(test, {"CET": ranking["test"], REFERENCE: blank}, resamples=20)
    assert got["metrics"]["ci"][REFERENCE]["estimate"] == pytest.approx(scores["test"]["a"]["ci"])


def test_cox_curves_by_blocks_of_rows_are_the_curves_of_all_rows_at_once():
    """The reference's step curves are computed a block of rows at a time (rows x steps would
    otherwise be held whole: gigabytes at 60,000 test rows): the same restricted means (to the
    last bits: numpy vectorises by block) and the same survival at the Brier times as all rows at once."""
    from lifelines.datasets import load_rossi
    from sksurv.linear_model import CoxPHSurvivalAnalysis

    from cet_model.metrics import brier_times
    from cet_model.reference import _cox_curves, step_rmst

    df = load_rossi()
    z = df[list(ROSSI)].to_numpy(float)
    z = (z - z.mean(0)) / z.std(0)
    y = np.array(list(zip(df["arrest"] == 1, df["week"].astype(float), strict=True)), dtype=[("e", bool), ("t", float)])
    cox = CoxPHSurvivalAnalysis(ties="efron").fit(z, y)
    times = brier_times(df["week"].to_numpy(float))
    steps = np.asarray(cox.unique_times_, float)
    surv = cox.predict_survival_function(z, return_array=True)  # all 432 rows at once
    at = np.searchsorted(steps, times, side="right")
    rmst, curves = _cox_curves(cox, z, 40.0, times, max_cells=len(steps) * 7)  # blocks of 7 rows, the last of 5
    np.testing.assert_allclose(rmst, step_rmst(steps, surv, 40.0), rtol=1e-14)
    np.testing.assert_allclose(curves, np.where(at > 0, surv[:, np.maximum(at - 1, 0)], 1.0), rtol=1e-14)
    null_rmst, null_curves = _cox_curves(None, z, 40.0, times)
    assert (null_rmst == 40.0).all() and (null_curves == 1.0).all()
