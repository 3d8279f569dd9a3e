"""The objective registry: the original code's penalty, the marginal likelihood with pinned
observed cells, its factorised form, the importance-weighted bound, and the pairs allowed."""

import itertools
import math
import warnings

import numpy as np
import pytest
import torch
from scipy import optimize, special, stats

from cet_model import CETModel, estimators, likelihood, losses, objectives
from cet_model.networks import TimeDecoder
from cet_model.objectives import OBJECTIVES
from tests.conftest import build


def test_paper_cell_matches_a_hand_computation():
    t, mu, sigma, eps, p = 1.7, 0.2, 0.8, 0.7, 0.3
    log_f = stats.lognorm(s=sigma, scale=math.exp(mu)).logpdf(t)
    log_s = stats.lognorm(s=sigma, scale=math.exp(mu)).logsf(t)
    args = dict(log_t=torch.tensor(math.log(t), dtype=torch.float64), mu=torch.tensor(mu, dtype=torch.float64),
                log_sigma=torch.tensor(math.log(sigma), dtype=torch.float64), log_epsilon=math.log(eps),
                log_p=torch.tensor(math.log(p), dtype=torch.float64))
    for c in (0.0, 0.4, 1.0):
        c_t = torch.tensor(c, dtype=torch.float64)
        observed = float(losses.paper_cell_loglik(c_t, s=torch.tensor(1.0, dtype=torch.float64), **args))
        censored = float(losses.paper_cell_loglik(c_t, s=torch.tensor(0.0, dtype=torch.float64), **args))
        # nll = s (-log f) + (1 - s) c (-log S) + s (1 - c) (-log eps - log p)
        assert -observed == pytest.approx(-log_f + (1 - c) * (-math.log(eps) - math.log(p)), rel=1e-12)
        assert -censored == pytest.approx(c * -log_s, rel=1e-12, abs=1e-15)


def test_paper_penalty_pushes_p_up_for_observed_events():
    """The -log p term has a gradient on the encoder: a log loss on a wrongly low p."""
    logit = torch.tensor(-2.0, requires_grad=True)
    z = torch.tensor(0.0)
    cell = losses.paper_cell_loglik(torch.tensor(0.2), z, torch.tensor(1.0), z, z, math.log(0.7),
                                    torch.nn.functional.logsigmoid(logit))
    cell.backward()
    assert logit.grad > 0  # increasing the log-likelihood raises p


def _decoder_problem(n=12, m=4, seed=0, conditioned=True):
    torch.manual_seed(seed)
    dec = TimeDecoder(3, m, (8,), dropout=0.0, sigma="net", use_c=conditioned).double().eval()
    x = torch.randn(n, 3, dtype=torch.float64)
    log_t = 0.5 * torch.randn(n, m, dtype=torch.float64)
    gen = torch.Generator().manual_seed(seed)
    s = (torch.rand(n, m, generator=gen, dtype=torch.float64) < 0.35).double()
    s[0] = 0.0  # a row with every cell censored (the skipped all-zero pattern)
    s[1] = 1.0  # a row with every cell observed (one pattern)
    logits = torch.randn(n, m, dtype=torch.float64)

    def row_loglik(c, rows=None):
        xs, lt, ss = (x, log_t, s) if rows is None else (x[rows], log_t[rows], s[rows])
        mu, ls = dec(xs, c) if conditioned else (dec(xs)[0].unsqueeze(1), dec(xs)[1].unsqueeze(1))
        return losses.marginal_cell_loglik(c, lt.unsqueeze(1), ss.unsqueeze(1), mu, ls).sum(-1)

    return dec, x, log_t, s, logits, row_loglik


def _brute_force_marginal(logits, row_loglik, n, m):
    """log sum over all 2^M patterns, every row, from the definition."""
    out = []
    p = torch.sigmoid(logits)
    for i in range(n):
        total = 0.0
        for pattern in itertools.product((0.0, 1.0), repeat=m):
            c = torch.tensor(pattern, dtype=torch.float64)
            w = float(torch.prod(torch.where(c > 0, p[i], 1 - p[i])))
            ll = float(row_loglik(c.expand(n, 1, m))[i, 0].detach())
            total += w * math.exp(ll)
        out.append(math.log(total))
    return np.array(out)


def test_marginal_with_pinned_observed_cells_equals_brute_force():
    n, m = 12, 4
    dec, x, log_t, s, logits, row_loglik = _decoder_problem(n, m)
    want = _brute_force_marginal(logits, row_loglik, n, m)
    got = estimators.marginal_exact(logits, row_loglik, free=s < 0.5).value.detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10)
    # and its gradient equals the gradient of the full 2^M enumeration
    lg = logits.clone().requires_grad_(True)
    estimators.marginal_exact(lg, row_loglik, free=s < 0.5).value.sum().backward()
    lg_full = logits.clone().requires_grad_(True)
    c = estimators.all_patterns(m, lg_full).unsqueeze(0).expand(n, -1, -1)
    full = torch.logsumexp(losses.bernoulli_log_prob(c, lg_full.unsqueeze(1)) + row_loglik(c), dim=1)
    full.sum().backward()
    torch.testing.assert_close(lg.grad, lg_full.grad)


def test_pinning_evaluates_only_the_censored_patterns():
    """A row with k censored cells costs 2^k decoder evaluations (2^M - 1 when every cell is free)."""
    n, m = 12, 4
    _, _, _, s, logits, row_loglik = _decoder_problem(n, m)
    seen = []

    def counting(c, rows=None):
        seen.append(c.shape[0] * c.shape[1])
        return row_loglik(c, rows)

    estimators.marginal_exact(logits, counting, free=s < 0.5)
    k = (s < 0.5).sum(1)
    assert sum(seen) == int(sum(2 ** int(v) - (1 if v == m else 0) for v in k))


@pytest.mark.parametrize("m", [1, 2, 3])
def test_few_events_sum_every_rows_patterns_in_one_pass_as_the_grouped_sum_does(m):
    """With 2^M <= ALL_PATTERNS_UP_TO the rows are not grouped by their free cells: one decoder
    pass over all 2^M patterns, the impossible ones left out. Value and gradients equal the grouped
    sum's (and the definition's), with a masked cell among the free ones."""
    n = 16
    dec, x, log_t, s, logits, _ = _decoder_problem(n, m, seed=m)
    s[2, 0] = 1.0
    mask = torch.ones_like(s)
    mask[2, 0] = 0.0  # an observed cell the mask drops: free, and it adds nothing
    row_loglik = likelihood.row_loglik(dec, True, OBJECTIVES["marginal"].cell, None, x, logits, log_t, s, mask)
    free = (s < 0.5) | (mask < 0.5)
    calls = []

    def counting(c, rows=None):
        calls.append(rows)
        return row_loglik(c, rows)

    def run(limit):
        old, estimators.ALL_PATTERNS_UP_TO = estimators.ALL_PATTERNS_UP_TO, limit
        try:
            dec.zero_grad()
            lg = logits.clone().requires_grad_(True)
            value = estimators.marginal_exact(lg, counting, free=free).value
            value.sum().backward()
            return value.detach(), lg.grad, [p.grad.clone() for p in dec.parameters()]
        finally:
            estimators.ALL_PATTERNS_UP_TO = old

    calls.clear()
    one_pass = run(estimators.ALL_PATTERNS_UP_TO)
    assert calls == [None]  # every row at once
    calls.clear()
    grouped = run(1)
    assert len(calls) == len({int(k) for k in free.sum(1)}) > 1
    torch.testing.assert_close(one_pass[0], grouped[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(one_pass[1], grouped[1], rtol=1e-10, atol=1e-12)
    for a, b in zip(one_pass[2], grouped[2], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert all(torch.isfinite(g).all() for g in one_pass[2])
    np.testing.assert_allclose(one_pass[0].numpy(), _brute_force_marginal(logits, row_loglik, n, m), rtol=1e-10,
                               atol=1e-12)
    assert estimators.ALL_PATTERNS_UP_TO == 8


def test_factorised_form_equals_enumeration_for_an_unconditioned_decoder():
    n, m = 12, 4
    dec, x, log_t, s, logits, row_loglik = _decoder_problem(n, m, conditioned=False)
    mu, ls = dec(x)
    got = losses.factorised_marginal_loglik(logits, log_t, s, mu, ls).sum(-1).detach().numpy()
    np.testing.assert_allclose(got, _brute_force_marginal(logits, row_loglik, n, m), rtol=1e-10)


@pytest.mark.parametrize("m", [3, 6, 10])
def test_importance_weighted_bound_converges_to_the_exact_marginal(m):
    n = 8
    dec, x, log_t, s, logits, row_loglik = _decoder_problem(n, m, seed=m)
    free = s < 0.5
    exact = estimators.marginal_exact(logits, row_loglik, free=free, max_patterns=2**m).value

    def proposal(rows):  # the factorised posterior at c = p (what CETModel uses)
        p = torch.sigmoid(logits[rows])
        mu, ls = dec(x[rows], torch.where(s[rows] > 0.5, torch.ones_like(p), p).unsqueeze(1))
        surv = torch.exp(losses.lognormal_log_survival(log_t[rows], mu[:, 0], ls[:, 0]))
        return p * surv / (1 - p + p * surv)

    def iw(k, gen):
        return estimators.marginal_importance(logits, row_loglik, free=free, proposal=proposal, n_samples=k,
                                              generator=gen).value.detach()

    gen = torch.Generator().manual_seed(1)
    gaps = [float((exact.detach() - iw(k, gen)).abs().max()) for k in (4, 64, 4096)]
    assert gaps[-1] < 0.01  # converges to the exact sum as K grows
    assert gaps[-1] < gaps[0]
    # a lower bound in expectation (Jensen): averaged over 200 draws at K = 4, not above the exact value
    mean_k4 = torch.stack([iw(4, gen) for _ in range(200)]).mean(0)
    assert float((exact.detach() - mean_k4).min()) > -0.01


def test_budget_switches_rows_to_importance_sampling():
    n, m = 12, 4
    _, _, _, s, logits, row_loglik = _decoder_problem(n, m)
    free = s < 0.5
    calls = []
    estimators.marginal_exact(logits, lambda c, rows=None: calls.append(c.shape[1]) or row_loglik(c, rows),
                              free=free, max_patterns=4, n_samples=7,
                              proposal=lambda rows: torch.full((len(rows), m), 0.5, dtype=torch.float64),
                              generator=torch.Generator().manual_seed(0))
    k = (s < 0.5).sum(1)
    assert 7 in calls  # the rows with 2^k > 4 were sampled
    assert all(c <= 4 or c == 7 for c in calls)
    assert int((2 ** k > 4).sum()) > 0


def test_registry_declares_the_pairs_once():
    assert objectives.resolve("marginal") == ("marginal", "exact")
    assert objectives.resolve("paper") == ("paper", "gumbel")
    assert objectives.resolve("bound", "arm") == ("bound", "arm")
    with pytest.raises(ValueError, match="objective='paper' cannot be used with estimator='importance'"):
        objectives.resolve("paper", "importance")
    assert objectives.log_epsilon_for("paper", None) == pytest.approx(math.log(0.7))
    assert objectives.log_epsilon_for("bound", None) == -2.0
    assert CETModel().objective == "marginal"


def test_single_event_cet_makes_one_decoder_pass_per_row():
    """M = 1: an observed row has one pattern, a censored row's c = 0 term is exactly 1 (no pass):
    the marginal objective costs one decoder evaluation per row, like ET."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((100, 3))
    t = rng.exponential(size=(100, 1)) + 0.1
    s = (rng.random((100, 1)) < 0.5).astype(float)
    model = CETModel(hidden_sizes=(8,), max_epochs=1, device="cpu", condition_on_occurrence=True)
    model.fit(x, t, s)
    rows = []
    model.net_.decoder.register_forward_hook(lambda mod, inp, out: rows.append(inp[1].shape[0] * inp[1].shape[1]))
    model.net_.train()
    model._train_loss(*model._tensors(x, t, s, None))
    assert sum(rows) == 100


# --- convergence with default arguments, against an independent maximum likelihood ---------------

def _cure_nll(theta, t, s):
    logit_p, mu, log_sigma = theta
    log_p, log_1mp = -np.logaddexp(0, -logit_p), -np.logaddexp(0, logit_p)
    z = (np.log(t) - mu) / np.exp(log_sigma)
    log_f = stats.norm.logpdf(z) - log_sigma - np.log(t)
    ll = np.where(s == 1, log_p + log_f, np.logaddexp(log_1mp, log_p + special.log_ndtr(-z)))
    return -ll.sum()


@pytest.mark.slow
def test_default_intercept_only_fit_reaches_the_mixture_cure_mle():
    """Lymphoma (lifelines; 80 patients, 54 deaths): a linear CETModel with every other argument at
    its default, on no features and stopped on its own rows, lands on the mixture-cure maximum
    likelihood fitted by scipy (cured share 0.195). With the earlier one-step-per-epoch x 100 epochs
    budget it stayed at 0.49. (Given no validation data it would hold out a fifth of the rows.)"""
    from lifelines.datasets import load_lymphoma
    from sklearn.exceptions import ConvergenceWarning

    df = load_lymphoma()
    t, s = df["Time"].to_numpy(float), df["Censor"].to_numpy(float)
    ref = optimize.minimize(_cure_nll, x0=[0.0, np.log(t).mean(), 0.0], args=(t, s), method="BFGS",
                            options={"gtol": 1e-9})
    assert 1 - special.expit(ref.x[0]) == pytest.approx(0.195, abs=0.001)
    x = np.zeros((len(t), 0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # not converged here is a failure
        y = t[:, None], s[:, None]  # stopped on its own rows: the maximum of every row's likelihood
        model = CETModel(hidden_sizes=(), device="cpu").fit(x, *y, x, *y)
    p_hat = float(model.predict_occurrence(np.zeros((1, 0)))[0, 0])
    assert p_hat == pytest.approx(special.expit(ref.x[0]), abs=0.01)
    assert model.objective_score(x, t[:, None], s[:, None]) * len(t) == pytest.approx(-ref.fun, abs=0.05)


def test_convergence_warning_when_the_budget_ends_early():
    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.default_rng(0)
    t = rng.exponential(size=(80, 1)) + 0.1
    s = (rng.random((80, 1)) < 0.5).astype(float)
    with pytest.warns(ConvergenceWarning, match="budget of 5 epochs ended"):
        CETModel(hidden_sizes=(), max_epochs=5, lr=1e-4, device="cpu").fit(np.zeros((80, 0)), t, s)


def test_single_event_closed_form_equals_the_enumeration():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((50, 3))
    t = rng.exponential(size=(50, 1)) + 0.1
    s = (rng.random((50, 1)) < 0.5).astype(float)
    model = build(CETModel, hidden_sizes=(8,), max_epochs=2, device="cpu", dtype="float64").fit(x, t, s)
    xt, lt, st, _ = model._tensors(x, t, s, None)
    with torch.no_grad():
        closed = model._estimate(xt, lt, st, None, train=False).value
        feats = model.net_.features(xt)
        logits = model.net_.encoder(feats)
        enum = estimators.marginal_exact(
            logits,
            likelihood.row_loglik(
                model.net_.decoder,
                model._conditioned,
                OBJECTIVES[model.objective_].cell,
                model.log_epsilon_,
                feats,
                logits,
                lt,
                st,
                None,
            ),
            free=st < 0.5,
        ).value
    torch.testing.assert_close(closed, enum)


def test_with_validation_data_the_automatic_budget_is_a_cap_four_times_as_long(monkeypatch):
    """A loss that keeps falling: without validation data the automatic budget is the fit's length;
    with them early stopping decides, under a cap VALIDATED_CAP times that budget (patience alike)."""
    from sklearn.exceptions import ConvergenceWarning

    from cet_model import train as training

    monkeypatch.setattr(training, "MIN_STEPS", 1)  # 100 epochs of one step: a short budget
    module = torch.nn.Linear(1, 1)
    falling = iter(range(10**6))

    def batch_loss(idx):
        return module.weight.sum() * 0.0 + 1.0 / (2 + next(falling))

    cfg = training.TrainConfig(batch_size=None)
    assert cfg.budget(8) == (100, 10) and cfg.budget(8, validated=True) == (400, 10)
    gen = torch.Generator().manual_seed(0)
    with pytest.warns(ConvergenceWarning, match="budget of 100 epochs"):
        alone = training.train(module, batch_loss, 8, cfg, gen)
    ticks = iter(range(10**6))
    with pytest.warns(ConvergenceWarning, match="budget of 400 epochs"):
        checked = training.train(module, batch_loss, 8, cfg, gen, val_loss=lambda: -float(next(ticks)))
    assert len(alone.train_loss) == 100 and len(checked.train_loss) == 400
    stopped = training.train(module, batch_loss, 8, cfg, gen, val_loss=lambda: 1.0)  # no gain: patience ends it
    assert stopped.stopped_early and len(stopped.train_loss) == 11
