"""Fits compared with independent implementations: lifelines (rossi) and a scipy cure MLE."""

import numpy as np
import pytest
import torch
from scipy import optimize, special, stats

from cet_model import CETModel, ETModel

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
    model = ETModel(**kw, standardize=False).fit(x, t, s)  # the weights in the features' own units
    dec = model.net_.decoder
    coef = dec.x_proj.weight.detach().numpy()[0]
    np.testing.assert_allclose(coef, [ROSSI[c] for c in cols], atol=1e-3)
    assert float(dec.x_proj.bias[0].detach()) == pytest.approx(ROSSI_INTERCEPT, abs=1e-3)
    assert float(dec.log_sigma[0].detach()) == pytest.approx(ROSSI_LOG_SIGMA, abs=1e-3)
    assert model.score(x, t, s) * len(x) == pytest.approx(ROSSI_LL, abs=1e-3)
    # age is in years (mean 24.6): the default scales the features inside the model; a linear
    # model on scaled features reaches the same maximum likelihood and the same predictions
    scaled = ETModel(**kw).fit(x, t, s)
    assert scaled.feature_scaling_ is not None and scaled.feature_scaling_[0][1] == pytest.approx(df["age"].mean())
    assert scaled.score(x, t, s) * len(x) == pytest.approx(ROSSI_LL, abs=1e-3)
    np.testing.assert_allclose(scaled.predict_time(x), model.predict_time(x), rtol=1e-3)


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
    model = CETModel(hidden_sizes=(), estimator="exact", objective="marginal", sigma="constant", dropout=0.0,
                     dtype="float64", optimizer="lbfgs", max_epochs=500, batch_size=None,
                     device="cpu").fit(np.zeros((n, 0)), t[:, None], s[:, None])
    p_hat = model.predict_occurrence(np.zeros((1, 0)))[0, 0]
    assert p_hat == pytest.approx(special.expit(ref.x[0]), abs=1e-3)
    # the location given c = 1 (bias + the weight on c, which only ever sees c = 1 here)
    mu, log_sigma = (a.detach() for a in model.net_.decoder(torch.zeros(1, 0, dtype=torch.float64),
                                                             torch.ones(1, 1, 1, dtype=torch.float64)))
    assert float(mu) == pytest.approx(ref.x[1], abs=1e-3)
    assert float(log_sigma) == pytest.approx(ref.x[2], abs=1e-3)
    assert model.score(np.zeros((n, 0)), t[:, None], s[:, None]) * n == pytest.approx(-ref.fun, abs=1e-3)
    assert abs(p_hat - 0.6) < 0.05  # and the truth is recovered
