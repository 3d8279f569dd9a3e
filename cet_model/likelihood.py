"""CET's likelihood assembled from its network's outputs: pure functions of tensors.

The objectives (``cet_model.objectives``) say what one cell contributes given an occurrence
pattern c; these functions put the cells together for a batch of rows: the decoder's (mu, log
sigma) for patterns c, each row's log-likelihood as a function of c (what the estimators sum or
sample over), the importance proposal for censored cells, and the closed form where the
occurrences sum out exactly.
"""

from __future__ import annotations

import torch

from . import losses


def decode(decoder, x, c, conditioned: bool):
    """(mu, log sigma), each (n, K, M), for occurrence patterns c (n, K, M); a decoder that does
    not read c gives one pattern's worth, broadcast over K."""
    if conditioned:
        return decoder(x, c)
    mu, log_sigma = decoder(x)
    return mu.unsqueeze(1), log_sigma.unsqueeze(1)


def masked(cell, mask):
    """Cells the mask drops (mask <= 0.5) contribute 0."""
    if mask is None:
        return cell
    return torch.where(mask > 0.5, cell, torch.zeros_like(cell))


def row_loglik(decoder, conditioned: bool, cell_loglik, log_epsilon, x, logits, log_t, s, mask):
    """A function (c, rows=None) -> log p(t, s | c, x) summed over the events, (r, K), for c (r, K, M):
    ``cell_loglik`` is the objective's cell term (``Objective.cell``)."""
    log_p = torch.nn.functional.logsigmoid(logits)

    def loglik(c, rows=None):
        def pick(a):
            return a if rows is None or a is None else a[rows]
        mu, log_sigma = decode(decoder, pick(x), c, conditioned)
        lt, ss = pick(log_t).unsqueeze(1), pick(s).unsqueeze(1)
        cell = cell_loglik(c, lt, ss, mu, log_sigma, log_epsilon, pick(log_p).unsqueeze(1))
        mk = pick(mask)
        return masked(cell, None if mk is None else mk.unsqueeze(1)).sum(-1)
    return loglik


def proposal(decoder, conditioned: bool, x, logits, log_t, s, mask):
    """A function rows -> q: q_j = p_j S_j / (1 - p_j + p_j S_j) for censored cells (p_j for masked
    ones), from one decoder pass at c = p with observed cells pinned to 1: close to the posterior of c."""
    def q_of(rows):
        with torch.no_grad():
            p = torch.sigmoid(logits[rows])
            c0 = torch.where(s[rows] > 0.5, torch.ones_like(p), p).unsqueeze(1)
            mu, log_sigma = decode(decoder, x[rows], c0, conditioned)
            surv = torch.exp(losses.lognormal_log_survival(log_t[rows], mu[:, 0], log_sigma[:, 0]))
            q = p * surv / (1.0 - p + p * surv)
            return q if mask is None else torch.where(mask[rows] > 0.5, q, p)
    return q_of


def closed_form_decoder(decoder, conditioned: bool, n_events: int, h):
    """(mu, log sigma), each (n, M), of the closed form: at c = 1 for a conditioned decoder (M = 1),
    from x alone otherwise. ``h``: the features, (n, d)."""
    if conditioned:
        c = torch.ones((len(h), 1, n_events), dtype=h.dtype, device=h.device)
        return tuple(a[:, 0] for a in decoder(h, c))
    return decoder(h)


def closed_form_loglik(logits, log_t, s, mu, log_sigma, mask):
    """Each row's exact log marginal likelihood where the occurrences sum out cell by cell (events
    independent given x, or M = 1, where the decoder matters only at c = 1), (n,)."""
    return masked(losses.factorised_marginal_loglik(logits, log_t, s, mu, log_sigma), mask).sum(-1)
