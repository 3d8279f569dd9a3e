"""The mixture quantile behind CETModel.predict_time: stopping the bisection once it is at a
fixed point gives exactly what all 60 halvings give."""

import numpy as np
import pytest
import torch

from cet_model.lognormal import mixture_quantile


def _sixty_halvings(log_w, mu, log_sigma, z):
    """The bisection as it was before it stopped early: every one of the 60 halvings."""
    sigma = torch.exp(log_sigma)
    comp = mu + sigma * z
    lo, hi = comp.min(1).values, comp.max(1).values
    q = float(torch.special.ndtr(torch.tensor(z, dtype=torch.float64)))
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        below = (torch.exp(log_w) * torch.special.ndtr((mid.unsqueeze(1) - mu) / sigma)).sum(1) < q
        lo, hi = torch.where(below, mid, lo), torch.where(below, hi, mid)
    return torch.exp(0.5 * (lo + hi)).numpy().astype(np.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("k", [1, 3, 100])
def test_early_stop_gives_the_same_quantile_as_sixty_halvings(dtype, k):
    gen = torch.Generator().manual_seed(k)
    n = 500
    log_w = torch.log_softmax(torch.randn((n, k), generator=gen, dtype=dtype) * 2, dim=1)
    mu = torch.randn((n, k), generator=gen, dtype=dtype) * 3
    log_sigma = torch.randn((n, k), generator=gen, dtype=dtype) * 0.7
    for q in (0.1, 0.5, 0.9):
        z = float(torch.special.ndtri(torch.tensor(q, dtype=torch.float64)))
        ours = mixture_quantile(log_w, mu, log_sigma, z)
        np.testing.assert_array_equal(ours, _sixty_halvings(log_w, mu, log_sigma, z))
        # and it is the quantile: the mixture's CDF there is q (to the dtype's precision)
        cdf = (torch.exp(log_w) * torch.special.ndtr((torch.log(torch.as_tensor(ours, dtype=dtype)).unsqueeze(1) - mu)
                                                     / torch.exp(log_sigma))).sum(1)
        np.testing.assert_allclose(cdf.numpy(), q, atol=1e-5 if dtype == torch.float32 else 1e-9)
