import itertools
import math

import numpy as np
import pytest
import torch

from cet_model import CETModel, estimators, losses
from cet_model.fused import conditional_hidden
from cet_model.networks import TimeDecoder
from tests.conftest import build


def _problem(seed=0, n=3, m=2, objective="paper"):
    torch.manual_seed(seed)
    dec = TimeDecoder(4, m, (8,), dropout=0.0, sigma="net").double().eval()
    x = torch.randn(n, 4, dtype=torch.float64)
    log_t = torch.randn(n, m, dtype=torch.float64)
    s = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)[:n, :m]
    logits = torch.randn(n, m, dtype=torch.float64)

    def row_loglik(c, rows=None):
        xs, lt, ss = (x, log_t, s) if rows is None else (x[rows], log_t[rows], s[rows])
        mu, ls = dec(xs, c)
        if objective == "marginal":
            cell = losses.marginal_cell_loglik(c, lt.unsqueeze(1), ss.unsqueeze(1), mu, ls)
        else:
            cell = losses.bound_cell_loglik(c, lt.unsqueeze(1), ss.unsqueeze(1), mu, ls, -2.0)
        return cell.sum(-1)

    return logits, row_loglik, dec


@pytest.mark.parametrize("objective", ["bound", "marginal"])
def test_exact_equals_brute_force_sum(objective):
    logits, row_loglik, _ = _problem(objective=objective)
    s = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    if objective == "marginal":
        got = estimators.marginal_exact(logits, row_loglik, free=s < 0.5).value
    else:
        got = estimators.exact(logits, row_loglik).value
    p = torch.sigmoid(logits)
    for i in range(logits.shape[0]):
        terms = []
        for pattern in itertools.product((0.0, 1.0), repeat=logits.shape[1]):
            c = torch.tensor(pattern, dtype=torch.float64)
            w = torch.prod(torch.where(c > 0, p[i], 1 - p[i]))
            ll = row_loglik(c.expand(logits.shape[0], 1, -1))[i, 0]
            terms.append((w, ll))
        if objective == "bound":
            want = sum(float((w * ll).detach()) for w, ll in terms)
        else:
            want = math.log(sum(float((w * torch.exp(ll)).detach()) for w, ll in terms))
        assert float(got[i].detach()) == pytest.approx(want, rel=1e-10, abs=1e-10)


def _grad(estimate_fn, logits):
    lg = logits.clone().requires_grad_(True)
    estimate_fn(lg).surrogate.sum().backward()
    return lg.grad


def test_arm_gradient_is_unbiased():
    logits, row_loglik, _ = _problem()
    exact = _grad(lambda lg: estimators.exact(lg, row_loglik), logits)
    gen = torch.Generator().manual_seed(0)
    arm = _grad(lambda lg: estimators.arm(lg, row_loglik, n_samples=200_000, generator=gen), logits)
    np.testing.assert_allclose(arm.numpy(), exact.numpy(), atol=0.02 * exact.abs().max().item())


def test_gumbel_gradient_approaches_exact_at_low_temperature():
    logits, row_loglik, _ = _problem()
    exact = _grad(lambda lg: estimators.exact(lg, row_loglik), logits)
    gen = torch.Generator().manual_seed(0)
    errs = []
    for tau in (1.0, 0.1):
        g = _grad(lambda lg, tau=tau: estimators.gumbel(lg, row_loglik, n_samples=200_000, temperature=tau,
                                               generator=gen), logits)
        errs.append((g - exact).abs().max().item())
    assert errs[1] < 0.05 * exact.abs().max().item()
    assert errs[1] < errs[0]  # the relaxation's bias shrinks with the temperature


def test_noise_is_independent_per_row_sample_and_event():
    seen = []
    gen = torch.Generator().manual_seed(0)
    estimators.gumbel(torch.zeros(4, 3), lambda c: seen.append(c) or c.sum(-1), n_samples=5,
                      temperature=0.3, generator=gen)
    c = seen[0]
    assert c.shape == (4, 5, 3)
    assert len(torch.unique(c)) == c.numel()  # no draw shared across rows, samples or events


def test_exact_refuses_too_many_events():
    with pytest.raises(ValueError, match="M <= 12"):
        estimators.all_patterns(13, torch.zeros(1))


@pytest.mark.bad_input
def test_unknown_estimator_and_objective_combinations():
    x, t, s = np.zeros((4, 1)), np.ones((4, 1)), np.ones((4, 1))
    with pytest.raises(ValueError, match="unknown estimator 'reinforce'"):
        build(CETModel, estimator="reinforce").fit(x, t, s)
    with pytest.raises(ValueError, match="objective='marginal' cannot be used with estimator='gumbel'"):
        build(CETModel, estimator="gumbel", objective="marginal").fit(x, t, s)
    with pytest.raises(ValueError, match="unknown objective 'elbo'"):
        CETModel(objective="elbo").fit(x, t, s)


@pytest.mark.slow
def test_fused_layer_matches_unfused_and_gradcheck():
    torch.manual_seed(0)
    a = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    c = torch.rand(6, 4, 3, dtype=torch.float64, requires_grad=True)
    V = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    mask = (torch.rand(6, 1, 5, dtype=torch.float64) > 0.5).double() * 2
    A = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, dtype=torch.float64, requires_grad=True)
    ref = (torch.relu(a.unsqueeze(1) + c @ V) * mask) @ A + b
    torch.testing.assert_close(conditional_hidden(a, c, V, mask, A, b), ref)
    assert torch.autograd.gradcheck(conditional_hidden, (a, c, V, mask, A, b))
    assert torch.autograd.gradcheck(conditional_hidden, (a, c, V, None, A, b))


def test_fused_layer_skips_the_gradient_of_fixed_patterns_and_keeps_the_others():
    """Enumerated patterns (the exact sum, M = 1's c = 1) need no gradient; the relaxed samples of
    Gumbel and ARM do. The other gradients are the same either way, to the bit."""
    torch.manual_seed(1)
    a = torch.randn(300, 8)  # more rows than one cache block: several blocks
    c = torch.rand(300, 40, 3)
    V, A, b = torch.randn(3, 8), torch.randn(8, 4), torch.randn(4)
    mask = (torch.rand(300, 1, 8) > 0.5).float() * 2
    grads = []
    for c_needs_grad in (True, False):
        leaves = [t.clone().requires_grad_() for t in (a, V, A, b)]
        cc = c.clone().requires_grad_(c_needs_grad)
        conditional_hidden(leaves[0], cc, leaves[1], mask, leaves[2], leaves[3]).pow(2).sum().backward()
        grads.append([t.grad for t in leaves] + [cc.grad])
    assert grads[0][4] is not None and grads[1][4] is None
    for with_c, without_c in zip(grads[0][:4], grads[1][:4], strict=True):
        assert torch.equal(with_c, without_c)


def test_decoder_never_tiles_x():
    """The decoder's first layer sees x once per row: its input has n rows, not n * K."""
    dec = TimeDecoder(7, 2, (16,), dropout=0.5, sigma="net")
    shapes = []
    dec.x_proj.register_forward_hook(lambda mod, inp, out: shapes.append(tuple(inp[0].shape)))
    mu, ls = dec(torch.randn(10, 7), torch.rand(10, 30, 2))
    assert shapes == [(10, 7)] and mu.shape == ls.shape == (10, 30, 2)
