"""Log-normal and mixture numerics of the predictions: quantiles, restricted means, grids."""

from __future__ import annotations

import numpy as np
import torch

from .losses import lognormal_log_survival


def check_q(q: float) -> None:
    """Refuse anything but one quantile in (0, 1), naming what was given."""
    if isinstance(q, bool) or not isinstance(q, int | float | np.floating | np.integer):
        raise TypeError(f"q must be one number in (0, 1), got {type(q).__name__} {q!r}; call "
                        "predict_time once per quantile (CET's predict_all takes several in one pass)")
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q}")


def ndtri(q: float) -> float:
    """The standard normal's q-quantile, in float64."""
    return float(torch.special.ndtri(torch.tensor(q, dtype=torch.float64)))


def log_times(times, name: str = "times") -> np.ndarray:
    """log of a grid of times >= 0 (log 0 = -inf, where every survival curve is 1); an error names
    the argument ``name``."""
    grid = np.asarray(times, dtype=np.float64).reshape(-1)
    if not np.isfinite(grid).all() or (grid < 0).any():
        bad = grid[~(np.isfinite(grid) & (grid >= 0))][0]
        raise ValueError(f"{name}: must be finite and >= 0; found {float(bad)!r}")
    with np.errstate(divide="ignore"):
        return np.log(grid)


def non_increasing_in_time(values: np.ndarray, times) -> np.ndarray:
    """``values`` (n, T, ...) of survival curves at ``times`` (T, in any order), made non-increasing
    in time by a running minimum over the times sorted: a mixture of curves computed in float32 can
    rise by a rounding error (of order 1e-8) between two times where it is flat at 1.

    >>> non_increasing_in_time(np.array([[0.99999996, 1.0, 0.5]]), [1e-6, 1e-3, 1.0]).tolist()
    [[0.99999996, 0.99999996, 0.5]]
    >>> non_increasing_in_time(np.array([[0.5, 1.0, 0.99999996]]), [1.0, 1e-6, 1e-3]).tolist()
    [[0.5, 1.0, 0.99999996]]
    """
    order = np.argsort(np.asarray(times, dtype=np.float64).reshape(-1), kind="stable")
    out = np.empty_like(values)
    out[:, order] = np.minimum.accumulate(values[:, order], axis=1)
    return out


def log_horizons(horizon, n_events: int) -> np.ndarray:
    """log of ``horizon``: one time > 0 for every event, or (M,) one per event."""
    h = np.asarray(horizon, dtype=np.float64)
    if h.ndim > 1 or (h.ndim == 1 and h.shape[0] != n_events):
        raise ValueError(f"horizon: one time or one per event ({n_events}), got shape {h.shape}")
    h = np.broadcast_to(h, (n_events,))
    if not (np.isfinite(h) & (h > 0)).all():
        raise ValueError(f"horizon: must be finite and > 0, got {h.tolist()}")
    return np.log(h)


def lognormal_log_rmst(log_h, mu, log_sigma):
    """log E[min(T, h)] for T ~ LogNormal(mu, sigma), elementwise (broadcast):
    exp(mu + sigma^2 / 2) Phi((log h - mu - sigma^2) / sigma) + h (1 - Phi((log h - mu) / sigma)),
    in log space (no overflow for a wide sigma)."""
    sigma = torch.exp(log_sigma)
    z = (log_h - mu) / sigma
    below = mu + 0.5 * sigma ** 2 + torch.special.log_ndtr(z - sigma)
    return torch.logaddexp(below, log_h + torch.special.log_ndtr(-z))


def mixture_survival(log_w, mu, log_sigma, log_grid: np.ndarray) -> np.ndarray:
    """S(t) of the mixture sum_k w_k LogNormal(mu_k, sigma_k) at the times exp(``log_grid``) (T,);
    ``log_w``, ``mu``, ``log_sigma`` (n, K); (n, T). The weights sum to 1 only within float32
    rounding: divided by their own sum, S(0) is 1 exactly, and a survival of 1 + 1e-7 is 1."""
    lt = torch.as_tensor(log_grid, dtype=mu.dtype, device=mu.device).view(1, -1, 1)
    log_s = lognormal_log_survival(lt, mu.unsqueeze(1), log_sigma.unsqueeze(1))
    log_mix = torch.logsumexp(log_w.unsqueeze(1) + log_s, dim=2) - torch.logsumexp(log_w, dim=1, keepdim=True)
    return log_mix.clamp(max=0.0).exp().cpu().numpy()


def mixture_rmst(log_w, mu, log_sigma, log_h: float) -> np.ndarray:
    """E[min(T, h)] of the mixture, h = exp(``log_h``); (n,). The float32 weights are divided by
    their own sum, as in :func:`mixture_survival`: never past the horizon."""
    log_r = torch.logsumexp(log_w + lognormal_log_rmst(log_h, mu, log_sigma), dim=1) - torch.logsumexp(log_w, dim=1)
    return log_r.clamp(max=log_h).exp().cpu().numpy()


def mixture_quantile(log_w, mu, log_sigma, z: float, iters: int = 60) -> np.ndarray:
    """q-quantile of sum_k w_k LogNormal(mu_k, sigma_k), by bisection on log t. Shapes (n, K).

    At most ``iters`` halvings; it stops as soon as a halving changes no row's bracket (the
    brackets are then as narrow as the dtype allows, and every later halving would compute the
    same one again), which gives the same result as all ``iters`` in about 25 in float32."""
    sigma = torch.exp(log_sigma)
    weight = torch.exp(log_w)
    comp = mu + sigma * z  # each component's quantile; the mixture's lies between them
    lo, hi = comp.min(1).values, comp.max(1).values
    q = float(torch.special.ndtr(torch.tensor(z, dtype=torch.float64)))
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        cdf = (weight * torch.special.ndtr((mid.unsqueeze(1) - mu) / sigma)).sum(1)
        below = cdf < q
        new_lo, new_hi = torch.where(below, mid, lo), torch.where(below, hi, mid)
        if torch.equal(new_lo, lo) and torch.equal(new_hi, hi):  # a fixed point: the same bracket from now on
            break
        lo, hi = new_lo, new_hi
    return torch.exp(0.5 * (lo + hi)).cpu().numpy().astype(np.float64)
