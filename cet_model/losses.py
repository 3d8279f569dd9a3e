"""Pure likelihood functions for the log-normal AFT model and the CET objectives.

All functions are elementwise and broadcast; nothing here holds state or an optimizer.
Log densities are with respect to t (they include the -log t Jacobian), so they compare
directly with scipy.stats.lognorm and lifelines' LogNormalAFTFitter.
"""

from __future__ import annotations

import math

import torch

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def lognormal_log_pdf(log_t: torch.Tensor, mu: torch.Tensor, log_sigma: torch.Tensor) -> torch.Tensor:
    """log f(t) of LogNormal(mu, sigma), given log t.

    log f(t) = log phi(z) - log sigma - log t,  z = (log t - mu) / sigma.
    """
    z = (log_t - mu) * torch.exp(-log_sigma)
    return -0.5 * z * z - _LOG_SQRT_2PI - log_sigma - log_t


def lognormal_log_survival(log_t: torch.Tensor, mu: torch.Tensor, log_sigma: torch.Tensor) -> torch.Tensor:
    """log S(t) = log(1 - Phi(z)), computed as log_ndtr(-z): stable far in the right tail."""
    z = (log_t - mu) * torch.exp(-log_sigma)
    return torch.special.log_ndtr(-z)


def lognormal_log_cdf(log_t: torch.Tensor, mu: torch.Tensor, log_sigma: torch.Tensor) -> torch.Tensor:
    """log F(t) = log Phi(z), stable far in the left tail."""
    z = (log_t - mu) * torch.exp(-log_sigma)
    return torch.special.log_ndtr(z)


def censored_lognormal_loglik(log_t, s, mu, log_sigma):
    """Per-cell log-likelihood of a right-censored log-normal time: s log f + (1 - s) log S.

    Uses ``where`` rather than products so a -inf in the unused branch cannot make a NaN.
    """
    log_f = lognormal_log_pdf(log_t, mu, log_sigma)
    log_s = lognormal_log_survival(log_t, mu, log_sigma)
    return torch.where(s > 0.5, log_f, log_s)


def bound_cell_loglik(c, log_t, s, mu, log_sigma, log_epsilon: float):
    """Eq. 8 of the paper exactly as printed, per event, up to terms free of theta and c.

    log p(t, s | c, x) ~ s (1 - c) log eps + s log f(t | x, c) + (1 - s) c log S(t | x, c)

    ``c`` may be a hard {0, 1} sample or a relaxed sample in (0, 1) (Gumbel-Softmax). The
    objective ``bound`` averages this over c ~ p(c | x) (Jensen's bound); it is linear in p
    and drives p(c | x) to 0 or 1 (docs: the saturation analysis).

    Shape: all arguments broadcast to (n, K, M); returns (n, K, M).

    >>> import torch
    >>> round(float(bound_cell_loglik(torch.tensor(0.), torch.tensor(0.), torch.tensor(1.),
    ...                               torch.tensor(0.), torch.tensor(0.), -2.0)), 4)  # log eps + log phi(0)
    -2.9189
    """
    log_f = lognormal_log_pdf(log_t, mu, log_sigma)
    log_s = lognormal_log_survival(log_t, mu, log_sigma)
    observed = log_f + (1.0 - c) * log_epsilon
    censored = c * log_s
    return torch.where(s > 0.5, observed, censored)


def paper_cell_loglik(c, log_t, s, mu, log_sigma, log_epsilon: float, log_p):
    """The original code's objective per event (mengelhard/cft, every final training script).

    s log f + (1 - s) c log S + s (1 - c) (log eps + log p)

    It differs from eq. 8 by the ``log p`` in the penalty: ``p`` is the encoder's probability
    p(c = 1 | x) (not the sample), so an observed event under a sample c = 0 costs
    -log eps - log p, a log loss on a wrongly low p that keeps p away from 0 and 1. The
    original used eps = 0.7. The density term is not multiplied by c.

    Shape: c, log_t, s, mu, log_sigma broadcast to (n, K, M); ``log_p`` (n, 1, M); returns (n, K, M).

    >>> import math, torch
    >>> z = torch.tensor(0.)
    >>> round(float(paper_cell_loglik(z, z, torch.tensor(1.), z, z, math.log(0.7),
    ...                               torch.tensor(math.log(0.5)))), 4)  # log phi(0) + log 0.7 + log 0.5
    -1.9688
    """
    log_f = lognormal_log_pdf(log_t, mu, log_sigma)
    log_s = lognormal_log_survival(log_t, mu, log_sigma)
    observed = log_f + (1.0 - c) * (log_epsilon + log_p)
    censored = c * log_s
    return torch.where(s > 0.5, observed, censored)


def marginal_cell_loglik(c, log_t, s, mu, log_sigma):
    """Exact per-event log p(t, s | c, x) for hard c (the mixture-cure likelihood, epsilon = 0).

    c = 1: s log f + (1 - s) log S.  c = 0: an observed event is impossible (-inf); a censored
    one has probability 1 (the censoring density g is dropped, as it is free of theta).

    Shape: broadcast to (n, K, M); returns (n, K, M).
    """
    ll_occurs = censored_lognormal_loglik(log_t, s, mu, log_sigma)
    ll_never = torch.where(s > 0.5, torch.full_like(ll_occurs, -math.inf), torch.zeros_like(ll_occurs))
    return torch.where(c > 0.5, ll_occurs, ll_never)


def factorised_marginal_loglik(logits, log_t, s, mu, log_sigma):
    """Exact per-event log marginal likelihood when the time model does not see c.

    log [ s p f(t) + (1 - s) (1 - p + p S(t)) ]: the mixture-cure likelihood of each event; with
    a decoder on x alone the events are independent given x, so the row's log-likelihood is
    the sum over events: O(M), any M.

    Shape: all (n, M); returns (n, M).

    >>> import torch
    >>> z = torch.zeros(1, 1)
    >>> round(float(factorised_marginal_loglik(z, z, z, z, z)), 6)  # log(0.5 + 0.5 * 0.5)
    -0.287682
    """
    return mixture_cure_loglik(logits, s, lognormal_log_pdf(log_t, mu, log_sigma),
                               lognormal_log_survival(log_t, mu, log_sigma))


def mixture_cure_loglik(logits, s, log_f, log_surv):
    """log [ s p f + (1 - s) (1 - p + p S) ] from the time head's log density ``log_f`` and log
    survival ``log_surv`` at the recorded times: :func:`factorised_marginal_loglik` with the time
    head already evaluated (a frozen time head's values can be computed once and reused).

    Shape: all (n, M); returns (n, M).

    >>> import torch
    >>> z = torch.zeros(1, 1)
    >>> round(float(mixture_cure_loglik(z, z, z, torch.log(torch.full((1, 1), 0.5)))), 6)
    -0.287682
    """
    log_p = torch.nn.functional.logsigmoid(logits)
    log_1mp = torch.nn.functional.logsigmoid(-logits)
    observed = log_p + log_f
    censored = torch.logaddexp(log_1mp, log_p + log_surv)
    return torch.where(s > 0.5, observed, censored)


def bernoulli_log_prob_cells(c, logits):
    """Per-cell log Bernoulli(c; sigmoid(logits)), broadcast: (n, K, M)."""
    return c * torch.nn.functional.logsigmoid(logits) + (1.0 - c) * torch.nn.functional.logsigmoid(-logits)


def bernoulli_log_prob(c, logits):
    """log p(c | x) of independent Bernoulli(sigmoid(logits)) summed over the last axis.

    Shape: c (n, K, M), logits (n, 1, M) -> (n, K).
    """
    return bernoulli_log_prob_cells(c, logits).sum(-1)


def binary_cross_entropy(logits, s):
    """Per-cell -log p(s | x) of a Bernoulli classifier (the BC baseline)."""
    return torch.nn.functional.binary_cross_entropy_with_logits(logits, s, reduction="none")
