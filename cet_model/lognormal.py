"""Log-normal and mixture numerics of the predictions: quantiles, restricted means, grids."""

from __future__ import annotations

import math

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


Z_STEPS = 400  # trapezoids over z = (log u - mu_j) / sigma_j in [-8, 8]: the crude incidence's integral
Z_LOCAL = 200  # more over each competitor's own +-8 sigma_k, where its survival falls (a narrow step in z)
CRUDE_ELEMENTS = 1 << 22  # rows x components x grid points computed at a time (16 MiB of float32)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _crude_integrand(z, m, sig, occ, j: int, others):
    """phi(z) prod_k (1 - c_k + c_k S_k(u)), log u = mu_j + sigma_j z: the density of T_j (in z) while
    no competitor has come yet. ``z`` broadcasts against (r, K, 1)."""
    g = torch.exp(-0.5 * z * z) / _SQRT_2PI
    log_u = m[..., j, None] + sig[..., j, None] * z
    for k in others:
        s_k = torch.special.ndtr((m[..., k, None] - log_u) / sig[..., k, None])
        g = g * (1.0 - occ[..., k, None] + occ[..., k, None] * s_k)
    return g


def _merged(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Two ascending grids merged along the last axis (the leading axes alike): each value placed by
    counting the other grid's values before it, cheaper than sorting the two joined.

    >>> _merged(torch.tensor([[0.0, 2.0, 4.0]]), torch.tensor([[1.0, 2.0, 5.0]])).tolist()
    [[0.0, 1.0, 2.0, 2.0, 4.0, 5.0]]
    """
    at_a = torch.arange(a.shape[-1], device=a.device) + torch.searchsorted(b, a, right=True)
    at_b = torch.arange(b.shape[-1], device=b.device) + torch.searchsorted(a, b, right=False)
    out = a.new_empty((*a.shape[:-1], a.shape[-1] + b.shape[-1]))
    return out.scatter_(-1, at_a, a).scatter_(-1, at_b, b)


def crude_incidence(log_w, c, mu, log_sigma, j: int, others, log_grid: np.ndarray) -> np.ndarray:
    """P(T_j <= t and T_j < T_k for every k in ``others`` | c_j = 1) at t = exp(``log_grid``) (T,),
    mixed over the components: weights ``log_w`` (n, K), the other events' occurrences ``c`` (0/1,
    or a probability where the times do not depend on them) and every event's ``mu`` and
    ``log_sigma`` (n, K, M); the times independent within a component, T_k never where c_k = 0.
    The trapezoid rule over z in [-8, 8], on a grid that also resolves each competitor's fall
    (``Z_LOCAL`` points over its own +-8 sigma, however narrow in z), the cumulative integral read
    at the z of each time, its last piece up to that z exactly; (n, T).

    With no other event it is the log-normal CDF; an event that always comes first leaves nothing:

    >>> mu, ls = torch.zeros(1, 1, 2), torch.zeros(1, 1, 2)
    >>> c, lw, t = torch.ones(1, 1, 2), torch.zeros(1, 1), np.log([1.0, 1e9])
    >>> crude_incidence(lw, c, mu, ls, 0, [], t).round(4).tolist()
    [[0.5, 1.0]]
    >>> crude_incidence(lw, c, mu, ls, 0, [1], t).round(4).tolist()   # two equal times: half each
    [[0.375, 0.5]]
    """
    base = torch.linspace(-8.0, 8.0, Z_STEPS + 1, dtype=mu.dtype, device=mu.device)
    local = torch.linspace(-8.0, 8.0, Z_LOCAL + 1, dtype=mu.dtype, device=mu.device)
    lt = torch.as_tensor(log_grid, dtype=mu.dtype, device=mu.device).view(1, 1, -1)
    weight = torch.softmax(log_w, dim=1)
    points = Z_STEPS + 1 + len(others) * (Z_LOCAL + 1)
    step = max(1, CRUDE_ELEMENTS // max(1, mu.shape[1] * (points + len(log_grid))))
    out = []
    for sl in [slice(i, i + step) for i in range(0, len(mu), step)] or [slice(0, 0)]:
        m, sig, occ = mu[sl], log_sigma[sl].exp(), c[sl]
        grids = [base.expand(*m.shape[:2], -1)]
        for k in others:  # where S_k falls, in event j's z: centre (mu_k - mu_j) / sigma_j, width sigma_k / sigma_j
            centre = (m[..., k] - m[..., j]) / sig[..., j]
            grids.append((centre[..., None] + (sig[..., k] / sig[..., j])[..., None] * local).clamp(-8.0, 8.0))
        z = grids[0].contiguous()
        for grid in grids[1:]:
            z = _merged(z, grid.contiguous())  # (r, K, points), ascending
        g = _crude_integrand(z, m, sig, occ, j, others)
        cum = torch.cumsum((g[..., 1:] + g[..., :-1]) * 0.5 * z.diff(dim=-1), dim=-1)
        cum = torch.cat([torch.zeros_like(cum[..., :1]), cum], dim=-1)
        zt = ((lt - m[..., j, None]) / sig[..., j, None]).clamp(-8.0, 8.0)  # (r, K, T)
        lo = (torch.searchsorted(z.contiguous(), zt.contiguous(), right=True) - 1).clamp_(0, points - 1)
        z_lo = torch.gather(z, -1, lo)
        last = (zt - z_lo) * 0.5 * (torch.gather(g, -1, lo) + _crude_integrand(zt, m, sig, occ, j, others))
        out.append((weight[sl].unsqueeze(-1) * (torch.gather(cum, -1, lo) + last)).sum(1))
    return torch.cat(out).clamp(0.0, 1.0).cpu().numpy().astype(np.float64)
