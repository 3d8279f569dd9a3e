"""Estimators of E_{c ~ p(c|x)}[log p(t, s | c, x)] and its gradient, chosen by name.

Each estimator takes the occurrence logits (n, M) and ``row_loglik``, a function mapping
occurrence patterns c of shape (n, K, M) to per-row log-likelihoods (n, K) (summed over
events). It returns an :class:`Estimate` whose ``surrogate`` has the estimator's gradient
and whose ``value`` is the estimate of the objective itself.

Noise is drawn independently per row, sample and event (the reference implementation
shared one draw across the whole batch and all events, which correlates the gradient
noise of every example; we do not copy that).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .losses import bernoulli_log_prob

RowLogLik = Callable[[torch.Tensor], torch.Tensor]
MAX_EXACT_EVENTS = 12


@dataclass
class Estimate:
    surrogate: torch.Tensor  # (n,): differentiate this
    value: torch.Tensor  # (n,): the objective estimate


def _uniform(shape, like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    u = torch.rand(shape, generator=generator, device=like.device, dtype=like.dtype)
    tiny = torch.finfo(like.dtype).tiny
    return u.clamp(tiny, 1.0 - torch.finfo(like.dtype).eps)


def all_patterns(n_events: int, like: torch.Tensor) -> torch.Tensor:
    """Every occurrence pattern in {0, 1}^M, shape (2^M, M), row k = binary digits of k."""
    if n_events > MAX_EXACT_EVENTS:
        raise ValueError(f"exact enumeration needs M <= {MAX_EXACT_EVENTS} events, got M = {n_events}")
    k = torch.arange(2**n_events, device=like.device)
    bits = (k.unsqueeze(1) >> torch.arange(n_events, device=like.device)) & 1
    return bits.to(like.dtype)


def gumbel(logits, row_loglik: RowLogLik, *, n_samples: int, temperature: float,
           generator=None, objective: str = "paper", **_) -> Estimate:
    """Binary concrete (Gumbel-Softmax) relaxation: c = sigmoid((logit + L) / tau), L ~ Logistic."""
    _require_paper(objective, "gumbel")
    n, m = logits.shape
    u = _uniform((n, n_samples, m), logits, generator)
    noise = torch.log(u) - torch.log1p(-u)  # (n, S, M) logistic
    c = torch.sigmoid((logits.unsqueeze(1) + noise) / temperature)
    value = row_loglik(c).mean(1)
    return Estimate(surrogate=value, value=value)


def arm(logits, row_loglik: RowLogLik, *, n_samples: int, generator=None,
        objective: str = "paper", **_) -> Estimate:
    """Augment-REINFORCE-merge (Yin & Zhou, 2019): unbiased gradient for the logits.

    grad_phi E[f(c)] = E_u[(f(1[u > sigmoid(-phi)]) - f(1[u < sigmoid(phi)])) (u - 1/2)].
    The decoder is trained on both (antithetic) hard samples.
    """
    _require_paper(objective, "arm")
    n, m = logits.shape
    u = _uniform((n, n_samples, m), logits, generator)
    p = torch.sigmoid(logits.detach()).unsqueeze(1)
    c = (u < p).to(logits.dtype)
    c_anti = (u > 1.0 - p).to(logits.dtype)
    f = row_loglik(torch.cat([c, c_anti], dim=1))  # one decoder pass: (n, 2S)
    f_c, f_anti = f[:, :n_samples], f[:, n_samples:]
    grad_logits = ((f_anti - f_c).detach().unsqueeze(-1) * (u - 0.5)).mean(1)  # (n, M)
    value = 0.5 * (f_c + f_anti).mean(1)
    surrogate = value + (logits * grad_logits).sum(-1)
    return Estimate(surrogate=surrogate, value=value)


def exact(logits, row_loglik: RowLogLik, *, objective: str = "paper", **_) -> Estimate:
    """Enumerate all 2^M patterns weighted by p(c|x): no sampling noise.

    ``paper``: sum_c p(c|x) log p(t,s|c,x) (the Jensen bound, exactly).
    ``marginal``: log sum_c p(c|x) p(t,s|c,x) (the exact log marginal likelihood).
    """
    n, m = logits.shape
    c = all_patterns(m, logits).unsqueeze(0).expand(n, -1, -1)  # (n, 2^M, M)
    log_w = bernoulli_log_prob(c, logits.unsqueeze(1))  # (n, 2^M)
    f = row_loglik(c)  # (n, 2^M)
    if objective == "marginal":
        value = torch.logsumexp(log_w + f, dim=1)
    else:
        value = (torch.exp(log_w) * f).sum(1)
    return Estimate(surrogate=value, value=value)


def hard_monte_carlo(logits, row_loglik: RowLogLik, *, n_samples: int, generator=None, **_) -> Estimate:
    """Plain Monte Carlo with hard Bernoulli samples (no gradient for the logits): for evaluation."""
    n, m = logits.shape
    u = _uniform((n, n_samples, m), logits, generator)
    c = (u < torch.sigmoid(logits).unsqueeze(1)).to(logits.dtype)
    value = row_loglik(c).mean(1)
    return Estimate(surrogate=value, value=value)


def _require_paper(objective: str, name: str) -> None:
    if objective != "paper":
        raise ValueError(f"objective={objective!r} needs estimator='exact'; {name!r} supports 'paper' only")


ESTIMATORS: dict[str, Callable[..., Estimate]] = {"gumbel": gumbel, "arm": arm, "exact": exact}
OBJECTIVES = ("paper", "marginal")


def get_estimator(name: str) -> Callable[..., Estimate]:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"unknown estimator {name!r}; choose one of {sorted(ESTIMATORS)}") from None


def evaluation_estimate(logits, row_loglik, *, objective, n_samples, generator=None) -> Estimate:
    """The objective for validation and early stopping: exact when 2^M <= n_samples, or when
    the objective is ``marginal``; else Monte Carlo with hard samples (not the relaxation)."""
    m = logits.shape[1]
    if objective == "marginal" or 2**m <= n_samples:
        return exact(logits, row_loglik, objective=objective)
    return hard_monte_carlo(logits, row_loglik, n_samples=n_samples, generator=generator)


