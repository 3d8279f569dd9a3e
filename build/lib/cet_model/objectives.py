"""The objectives CET can be fitted to, and which estimators serve each: one registry.

=========  ================================================================  =====================
name       per row                                                           estimators
=========  ================================================================  =====================
marginal   log sum_c p(c|x) p(t,s|c,x): the exact log marginal likelihood    exact (default),
           (observed cells pin c_j = 1; only censored cells are summed)      importance
paper      E_c[...] of the original code's cell: s log f + (1-s) c log S     gumbel (default),
           + s (1-c)(log eps + log p), eps = 0.7 -- produced Tables 3-5      arm, exact
bound      E_c[...] of eq. 8 as printed: s log f + (1-s) c log S             gumbel (default),
           + s (1-c) log eps, log eps = -2                                   arm, exact
=========  ================================================================  =====================

``marginal`` is the default: it is the likelihood of the model, so its optimum is the
maximum-likelihood cure fraction; the two Jensen-type objectives are kept to reproduce the
paper (``paper``) and to show what eq. 8 as printed does (``bound``).

    >>> resolve("marginal", "auto")
    ('marginal', 'exact')
    >>> resolve("paper", "auto")
    ('paper', 'gumbel')
    >>> resolve("marginal", "gumbel")
    Traceback (most recent call last):
    ...
    ValueError: objective='marginal' cannot be used with estimator='gumbel'; it takes one of ['exact', 'importance']
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from . import losses


@dataclass(frozen=True)
class Objective:
    """One objective: which estimators serve it, its penalty default and its per-cell term.

    ``sums_patterns``: True when the row's objective is the log of a sum over the occurrence
    patterns c (the marginal likelihood), False when it is an expectation over c of a per-cell
    log term (the Jensen-type objectives). ``cell(c, log_t, s, mu, log_sigma, log_epsilon, log_p)``
    is that per-cell term, shape of c.
    """

    name: str
    estimators: tuple[str, ...]  # the first is the default ("auto")
    default_log_epsilon: float | None  # eps = P(event observed | c = 0) in the Jensen objectives
    sums_patterns: bool
    cell: Callable
    summary: str


OBJECTIVES: dict[str, Objective] = {
    "marginal": Objective("marginal", ("exact", "importance"), None, True,
                          lambda c, lt, s, mu, ls, log_eps, log_p: losses.marginal_cell_loglik(c, lt, s, mu, ls),
                          "exact log marginal likelihood log sum_c p(c|x) p(t,s|c,x)"),
    "paper": Objective("paper", ("gumbel", "arm", "exact"), math.log(0.7), False, losses.paper_cell_loglik,
                       "the original code's objective: penalty -log eps - log p, eps = 0.7"),
    "bound": Objective("bound", ("gumbel", "arm", "exact"), -2.0, False,
                       lambda c, lt, s, mu, ls, log_eps, log_p: losses.bound_cell_loglik(c, lt, s, mu, ls, log_eps),
                       "eq. 8 as printed: penalty -log eps"),
}
ESTIMATOR_NAMES = ("gumbel", "arm", "exact", "importance")
DEFAULT_OBJECTIVE = "marginal"


def resolve(objective: str, estimator: str = "auto") -> tuple[str, str]:
    """Check an (objective, estimator) pair and replace ``"auto"`` by the objective's default."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {sorted(OBJECTIVES)}")
    spec = OBJECTIVES[objective]
    if estimator == "auto":
        return objective, spec.estimators[0]
    if estimator not in ESTIMATOR_NAMES:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {['auto', *ESTIMATOR_NAMES]}")
    if estimator not in spec.estimators:
        raise ValueError(f"objective={objective!r} cannot be used with estimator={estimator!r}; "
                         f"it takes one of {list(spec.estimators)}")
    return objective, estimator


def log_epsilon_for(objective: str, log_epsilon: float | None) -> float | None:
    """The penalty's log eps: the given value, else the objective's default (None for marginal)."""
    if log_epsilon is not None:
        return float(log_epsilon)
    return OBJECTIVES[objective].default_log_epsilon
