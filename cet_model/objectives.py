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
from dataclasses import dataclass


@dataclass(frozen=True)
class Objective:
    name: str
    estimators: tuple[str, ...]  # the first is the default ("auto")
    default_log_epsilon: float | None  # eps = P(event observed | c = 0) in the Jensen objectives
    summary: str


OBJECTIVES: dict[str, Objective] = {
    "marginal": Objective("marginal", ("exact", "importance"), None,
                          "exact log marginal likelihood log sum_c p(c|x) p(t,s|c,x)"),
    "paper": Objective("paper", ("gumbel", "arm", "exact"), math.log(0.7),
                       "the original code's objective: penalty -log eps - log p, eps = 0.7"),
    "bound": Objective("bound", ("gumbel", "arm", "exact"), -2.0,
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
