"""Estimators of E_{c ~ p(c|x)}[log p(t, s | c, x)] and its gradient, chosen by name.

Each estimator takes the occurrence logits (n, M) and ``row_loglik``, a function mapping
occurrence patterns c of shape (n, K, M) to per-row log-likelihoods (n, K) (summed over
events; ``row_loglik(c, rows)`` evaluates the rows ``rows`` only). It returns an
:class:`Estimate` whose ``surrogate`` has the estimator's gradient and whose ``value`` is the
estimate of the objective itself.

The Jensen-type objectives (``paper``, ``bound``: an expectation over c) take ``gumbel``,
``arm`` or ``exact`` (all 2^M patterns). The marginal likelihood takes
:func:`marginal_exact` (enumerates only the censored cells of each row, importance sampling
beyond a per-row budget) or :func:`marginal_importance`. Which pairs are allowed is declared
in :mod:`cet_model.objectives`.

Noise is drawn independently per row, sample and event (the reference implementation
shared one draw across the whole batch and all events, which correlates the gradient
noise of every example; we do not copy that).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .losses import bernoulli_log_prob, bernoulli_log_prob_cells
from .objectives import OBJECTIVES, resolve

RowLogLik = Callable[[torch.Tensor], torch.Tensor]
MAX_EXACT_EVENTS = 12
# the marginal likelihood sums all 2^M patterns of every row in one pass up to this many patterns
# (M <= 3), and groups the rows by their number of free cells beyond (``marginal_exact``)
ALL_PATTERNS_UP_TO = 8


@dataclass
class Estimate:
    surrogate: torch.Tensor  # (n,): differentiate this
    value: torch.Tensor  # (n,): the objective estimate


def _uniform(shape, like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Uniforms in (0, 1) of ``like``'s dtype and device. A CPU generator for a tensor on a GPU
    draws on the CPU and the draws are moved, so that an evaluation seeded the same way uses the
    same numbers on every device. (Device types are compared: a CUDA generator says ``cuda``
    where its tensors say ``cuda:0``.)"""
    if generator is not None and generator.device.type == "cpu" and like.device.type != "cpu":
        u = torch.rand(shape, generator=generator, dtype=like.dtype).to(like.device)
    else:
        u = torch.rand(shape, generator=generator, device=like.device, dtype=like.dtype)
    tiny = torch.finfo(like.dtype).tiny
    return u.clamp(tiny, 1.0 - torch.finfo(like.dtype).eps)


def all_patterns(n_events: int, like: torch.Tensor, limit: int | None = MAX_EXACT_EVENTS) -> torch.Tensor:
    """Every occurrence pattern in {0, 1}^M, shape (2^M, M), row k = binary digits of k."""
    if limit is not None and n_events > limit:
        raise ValueError(f"exact enumeration needs M <= {MAX_EXACT_EVENTS} events, got M = {n_events}")
    k = torch.arange(2**n_events, device=like.device)
    bits = (k.unsqueeze(1) >> torch.arange(n_events, device=like.device)) & 1
    return bits.to(like.dtype)


def gumbel(logits, row_loglik: RowLogLik, *, n_samples: int, temperature: float,
           generator=None, **_) -> Estimate:
    """Binary concrete (Gumbel-Softmax) relaxation: c = sigmoid((logit + L) / tau), L ~ Logistic."""
    n, m = logits.shape
    u = _uniform((n, n_samples, m), logits, generator)
    noise = torch.log(u) - torch.log1p(-u)  # (n, S, M) logistic
    c = torch.sigmoid((logits.unsqueeze(1) + noise) / temperature)
    value = row_loglik(c).mean(1)
    return Estimate(surrogate=value, value=value)


def arm(logits, row_loglik: RowLogLik, *, n_samples: int, generator=None, **_) -> Estimate:
    """Augment-REINFORCE-merge (Yin & Zhou, 2019): unbiased gradient for the logits.

    grad_phi E[f(c)] = E_u[(f(1[u > sigmoid(-phi)]) - f(1[u < sigmoid(phi)])) (u - 1/2)].
    The decoder is trained on both (antithetic) hard samples.
    """
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


def exact(logits, row_loglik: RowLogLik, **_) -> Estimate:
    """sum_c p(c|x) row_loglik(c) over all 2^M patterns (the Jensen-type objectives, exactly)."""
    n, m = logits.shape
    c = all_patterns(m, logits).unsqueeze(0).expand(n, -1, -1)  # (n, 2^M, M)
    log_w = bernoulli_log_prob(c, logits.unsqueeze(1))  # (n, 2^M)
    value = (torch.exp(log_w) * row_loglik(c)).sum(1)
    return Estimate(surrogate=value, value=value)


def hard_monte_carlo(logits, row_loglik: RowLogLik, *, n_samples: int, generator=None, **_) -> Estimate:
    """Plain Monte Carlo with hard Bernoulli samples (no gradient for the logits): for evaluation."""
    n, m = logits.shape
    u = _uniform((n, n_samples, m), logits, generator)
    c = (u < torch.sigmoid(logits).unsqueeze(1)).to(logits.dtype)
    value = row_loglik(c).mean(1)
    return Estimate(surrogate=value, value=value)


# --- the marginal likelihood ---------------------------------------------------------------------

def free_patterns(free: torch.Tensor, k: int) -> torch.Tensor:
    """Every assignment of the k free cells of each row, the other cells pinned to 1.

    ``free`` (r, M) bool with exactly k True per row -> c (r, 2^k, M); pattern p gives the
    row's i-th free cell bit i of p.

    >>> free_patterns(torch.tensor([[True, False, True]]), 2)[0].tolist()
    [[0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """
    r, m = free.shape
    dtype = torch.get_default_dtype() if not free.is_floating_point() else free.dtype
    if k == 0:
        return torch.ones((r, 1, m), dtype=dtype, device=free.device)
    bits = all_patterns(k, torch.empty(0, dtype=dtype, device=free.device), limit=None)  # (2^k, k)
    rank = (torch.cumsum(free.long(), dim=1) - 1).clamp(min=0)  # (r, M): index among the free cells
    gathered = bits.t()[rank]  # (r, M, 2^k)
    return torch.where(free.unsqueeze(-1), gathered, torch.ones_like(gathered)).transpose(1, 2)


def _by_free_count(free: torch.Tensor):
    """Row groups with the same number of free cells: [(k, row index tensor), ...]."""
    counts = free.sum(1)
    return [(int(k), torch.nonzero(counts == k).squeeze(1)) for k in torch.unique(counts).tolist()]


def _enumerate_rows(logits, row_loglik, free, rows, k: int) -> torch.Tensor:
    """log sum over the 2^k assignments of the free cells of ``rows`` (all free cells summed)."""
    m = logits.shape[1]
    lg = logits[rows]
    c = free_patterns(free[rows], k).to(lg.dtype)
    skip_zero = k == m and k > 0  # every cell free: the all-zero pattern has likelihood exactly 1
    if skip_zero:
        c = c[:, 1:]
    log_w = bernoulli_log_prob(c, lg.unsqueeze(1))
    terms = log_w + row_loglik(c, rows)
    if skip_zero:
        terms = torch.cat([bernoulli_log_prob(torch.zeros_like(c[:, :1]), lg.unsqueeze(1)), terms], dim=1)
    return torch.logsumexp(terms, dim=1)


def _importance_rows(logits, row_loglik, free, rows, proposal, n_samples: int, generator) -> torch.Tensor:
    """log (1/K) sum_k p(c_k|x) p(t,s|c_k,x) / q(c_k): the importance-weighted bound.

    c_k ~ q (the free cells Bernoulli(q), the others pinned to 1); q is detached, so the gradient
    is the self-normalised weighted gradient of log p(c_k|x) + log p(t,s|c_k,x).
    """
    lg = logits[rows]
    fr = free[rows]
    q = proposal(rows).detach().clamp(1e-4, 1.0 - 1e-4)  # (r, M)
    u = _uniform((len(rows), n_samples, lg.shape[1]), lg, generator)
    c = torch.where(fr.unsqueeze(1), (u < q.unsqueeze(1)).to(lg.dtype), torch.ones_like(u))
    log_q = torch.where(fr.unsqueeze(1), bernoulli_log_prob_cells(c, torch.logit(q).unsqueeze(1)),
                        torch.zeros_like(c)).sum(-1)
    log_w = bernoulli_log_prob(c, lg.unsqueeze(1)) + row_loglik(c, rows) - log_q
    return torch.logsumexp(log_w, dim=1) - math.log(n_samples)


def _all_rows_at_once(logits, row_loglik, free) -> torch.Tensor:
    """log sum over every pattern of {0, 1}^M for all rows in one decoder pass; a pattern that sets
    an observed (not free) cell to 0 is impossible and is left out of the row's sum.

    The same sum as grouping the rows by their number of free cells (``_enumerate_rows``), with
    the few patterns of a small M evaluated for every row: one pass instead of one per group of
    rows. On CPU a small network's step is bound by the number of tensor operations, not by their
    size, so this is the faster form while 2^M <= ``ALL_PATTERNS_UP_TO``."""
    n, m = logits.shape
    c = all_patterns(m, logits)  # (2^M, M)
    possible = (free.unsqueeze(1) | (c > 0.5)).all(-1)  # (n, 2^M)
    c = c.unsqueeze(0).expand(n, -1, -1)
    terms = bernoulli_log_prob(c, logits.unsqueeze(1)) + row_loglik(c)
    return torch.logsumexp(terms.masked_fill(~possible, -math.inf), dim=1)


def _marginal(logits, row_loglik, free, proposal, n_samples, generator, max_patterns) -> Estimate:
    n, m = logits.shape
    if max_patterns is not None and 2**m <= min(max_patterns, ALL_PATTERNS_UP_TO):
        value = _all_rows_at_once(logits, row_loglik, free)
        return Estimate(surrogate=value, value=value)
    parts, order = [], []
    for k, rows in _by_free_count(free):
        if max_patterns is not None and 2**k <= max_patterns:
            parts.append(_enumerate_rows(logits, row_loglik, free, rows, k))
        else:
            parts.append(_importance_rows(logits, row_loglik, free, rows, proposal, n_samples, generator))
        order.append(rows)
    value = torch.cat(parts)[torch.argsort(torch.cat(order))] if parts else logits.new_zeros(n)
    return Estimate(surrogate=value, value=value)


def marginal_exact(logits, row_loglik: RowLogLik, *, free, proposal=None, n_samples: int = 100,
                   generator=None, max_patterns: int = 1024, **_) -> Estimate:
    """log sum_c p(c|x) p(t,s|c,x), summing only over each row's free (censored or masked) cells.

    An observed event pins c_j = 1 (c_j = 0 would make it impossible), so a row with k free cells
    has 2^k terms, not 2^M. Rows are grouped by k; a group with 2^k <= ``max_patterns`` is
    enumerated exactly, a larger one uses the importance-weighted bound (``proposal``,
    ``n_samples``). With few events (2^M <= ``ALL_PATTERNS_UP_TO`` and <= ``max_patterns``) every
    row sums its possible patterns among all 2^M in a single pass instead.
    Shapes: logits, free (n, M) -> value (n,).
    """
    return _marginal(logits, row_loglik, free, proposal, n_samples, generator, max_patterns)


def marginal_importance(logits, row_loglik: RowLogLik, *, free, proposal, n_samples: int,
                        generator=None, **_) -> Estimate:
    """The importance-weighted bound for every row (K = ``n_samples``), tight as K grows."""
    return _marginal(logits, row_loglik, free, proposal, n_samples, generator, None)


ESTIMATORS: dict[str, Callable[..., Estimate]] = {"gumbel": gumbel, "arm": arm, "exact": exact}
MARGINAL_ESTIMATORS: dict[str, Callable[..., Estimate]] = {"exact": marginal_exact,
                                                           "importance": marginal_importance}


def get_estimator(objective: str, estimator: str) -> Callable[..., Estimate]:
    """The estimator function for a (resolved) pair of :mod:`cet_model.objectives`."""
    objective, estimator = resolve(objective, estimator)
    return (MARGINAL_ESTIMATORS if OBJECTIVES[objective].sums_patterns else ESTIMATORS)[estimator]


def evaluation_estimate(logits, row_loglik, *, objective, n_samples, generator=None, **marginal_kw) -> Estimate:
    """The objective for validation and early stopping. ``marginal``: exact within the per-row
    budget, else the importance-weighted bound. Jensen-type: exact when 2^M <= n_samples, else
    Monte Carlo with hard samples (not the relaxation)."""
    m = logits.shape[1]
    if OBJECTIVES[objective].sums_patterns:
        return marginal_exact(logits, row_loglik, n_samples=n_samples, generator=generator, **marginal_kw)
    if 2**m <= n_samples:
        return exact(logits, row_loglik)
    return hard_monte_carlo(logits, row_loglik, n_samples=n_samples, generator=generator)
