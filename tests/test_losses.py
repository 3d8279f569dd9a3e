import numpy as np
import pytest
import torch
from scipy import stats

from cet_model import losses


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 2e-4)])
def test_lognormal_matches_scipy(dtype, tol):
    rng = np.random.default_rng(1)
    t = rng.lognormal(0.0, 2.0, 500)
    mu = rng.normal(0, 1, 500)
    log_sigma = rng.normal(0, 0.5, 500)
    args = [torch.tensor(a, dtype=dtype) for a in (np.log(t), mu, log_sigma)]
    ref = stats.lognorm(s=np.exp(log_sigma), scale=np.exp(mu))
    np.testing.assert_allclose(losses.lognormal_log_pdf(*args).numpy(), ref.logpdf(t), rtol=tol, atol=tol)
    np.testing.assert_allclose(losses.lognormal_log_survival(*args).numpy(), ref.logsf(t), rtol=tol, atol=tol)
    np.testing.assert_allclose(losses.lognormal_log_cdf(*args).numpy(), ref.logcdf(t), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_survival_is_finite_and_accurate_far_in_the_tail(dtype):
    # z = 40: 1 - Phi(z) underflows to 0 in float64, but log S must stay finite and right
    log_t = torch.tensor([40.0, 200.0], dtype=dtype)
    zero = torch.zeros(2, dtype=dtype)
    log_s = losses.lognormal_log_survival(log_t, zero, zero)
    assert torch.isfinite(log_s).all()
    np.testing.assert_allclose(log_s.double().numpy(), stats.norm.logsf([40.0, 200.0]), rtol=1e-5)
    log_s.sum().backward() if log_s.requires_grad else None
    lt = log_t.clone().requires_grad_(True)
    losses.lognormal_log_survival(lt, zero, zero).sum().backward()
    assert torch.isfinite(lt.grad).all()


def test_marginal_cell_rules():
    c = torch.tensor([1.0, 0.0, 0.0])
    s = torch.tensor([1.0, 1.0, 0.0])
    log_t, mu, ls = torch.zeros(3), torch.zeros(3), torch.zeros(3)
    out = losses.marginal_cell_loglik(c, log_t, s, mu, ls)
    assert out[0] == pytest.approx(float(losses.lognormal_log_pdf(log_t, mu, ls)[0]))
    assert out[1] == -np.inf  # an observed event cannot have c = 0
    assert out[2] == 0.0  # censored and never occurs: probability 1


def test_bound_cell_is_eq8():
    log_t, mu, ls = torch.tensor(0.3), torch.tensor(0.1), torch.tensor(-0.2)
    log_f = losses.lognormal_log_pdf(log_t, mu, ls)
    log_s = losses.lognormal_log_survival(log_t, mu, ls)
    eps = -2.0
    for c in (0.0, 0.25, 1.0):
        c_t = torch.tensor(c)
        assert losses.bound_cell_loglik(c_t, log_t, torch.tensor(1.0), mu, ls, eps) == pytest.approx(
            float((1 - c) * eps + log_f))
        assert losses.bound_cell_loglik(c_t, log_t, torch.tensor(0.0), mu, ls, eps) == pytest.approx(
            float(c * log_s))
