"""The classical reference beside the models: per event a Cox proportional hazards fit on the
same splits, scored as ``evaluate`` scores a time model."""

from __future__ import annotations

import logging

import numpy as np

from .choices import CI_RMST
from .dataset import Split
from .evaluation import _harrell_c_or_nan, rmst_horizons
from .metrics import brier_times, integrated_brier_score, uno_c

log = logging.getLogger("cet_model.reference")

COX_PENALIZER = 0.01  # the ridge of the classical reference, per row (lifelines' ``penalizer`` scale)
# when a table shows the reference: "auto" on data without the true occurrence (where no Oracle
# can be trained), "cox" always (features only), "none" never
from .choices import REFERENCE, REFERENCE_CHOICES  # noqa: E402, F401  (REFERENCE re-exported)


def wants_reference(choice: str, no_truth: bool) -> bool:
    """Whether ``choice`` (one of REFERENCE_CHOICES) asks for the reference on data with
    (``no_truth=False``) or without the true occurrence.

    >>> wants_reference("auto", no_truth=True), wants_reference("auto", no_truth=False), wants_reference("cox", False)
    (True, False, True)
    """
    if choice not in REFERENCE_CHOICES:
        raise ValueError(f"reference must be one of {REFERENCE_CHOICES}, got {choice!r}")
    return choice == "cox" or (choice == "auto" and no_truth)


def cox_reference(train: Split, splits: dict[str, Split], event_names, rmst_at=None,
                  penalizer: float = COX_PENALIZER) -> tuple[dict, dict]:
    """A classical reference on the same splits: per event, a Cox proportional hazards model
    (scikit-survival's ``CoxPHSurvivalAnalysis`` with a small ridge, ``penalizer`` times the
    training rows) on the training rows' standardised features, scored on each of ``splits``
    ({name: split}) as ``evaluate`` scores a time model: Harrell's C (``ci``) and Uno's C of its
    linear predictor (the usual C of a Cox model), ``ci_rmst`` (Harrell's C of the restricted
    mean event-free time at ``rmst_horizons(train)``, or ``rmst_at``, from the step survival
    curve) and the integrated Brier score of the curves. For real data, where no Oracle can be
    trained, it answers whether CET ranks patients at least as well as the classical model.

    Returns ({split: {event: {metric: value}}}, {split: ``bootstrap_intervals`` inputs: "ci"
    (minus the linear predictor, as a time) and "ci_rmst", (n, M) each}). Masked cells are
    neither fitted nor scored (NaN). An event with no observed training event, or whose fit
    fails, gets the null model (every row the same risk, survival 1: C 0.5 where defined; logged),
    so that its averages over events are over the same events as the models'. Features only: a
    model input with comment embeddings is a ValueError.

        >>> rng = np.random.default_rng(0)
        >>> def split(n):
        ...     x = rng.standard_normal((n, 2))
        ...     t = rng.exponential(np.exp(-x[:, :1])) + 0.01
        ...     s = (rng.random((n, 1)) < 0.7).astype(float)
        ...     return Split(ids=np.arange(n), X=x, T=t, S=s, C=np.full((n, 1), np.nan), T_true=np.full((n, 1), np.nan))
        >>> scores, ranking = cox_reference(split(300), {"test": split(200)}, ["death"])
        >>> sorted(scores["test"]["death"]), bool(scores["test"]["death"]["ci"] > 0.6), ranking["test"]["ci_rmst"].shape
        (['ci', 'ci_rmst', 'ibs', 'uno_c'], True, (200, 1))
    """
    from sksurv.linear_model import CoxPHSurvivalAnalysis

    if train.sequences is not None:
        raise ValueError("cox_reference: features only; this dataset's model input has comment embeddings")
    x_tr = np.asarray(train.X, np.float64)
    mean, sd = x_tr.mean(axis=0), x_tr.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    m = len(event_names)
    horizons = rmst_horizons(train) if rmst_at is None else np.broadcast_to(np.asarray(rmst_at, float), (m,))
    scores = {name: {} for name in splits}
    ranking = {name: {"ci": np.full((len(sp), m), np.nan), CI_RMST: np.full((len(sp), m), np.nan)}
               for name, sp in splits.items()}
    nan = dict.fromkeys(("ci", CI_RMST, "uno_c", "ibs"), float("nan"))  # an event no row of a split keeps
    for j, e in enumerate(event_names):
        keep_tr = np.ones(len(train), bool) if train.mask is None else train.mask[:, j] == 1
        t_tr, s_tr = train.T[keep_tr, j], train.S[keep_tr, j]
        cox = None
        if (s_tr == 1).any():
            y = np.array(list(zip(s_tr == 1, t_tr, strict=True)), dtype=[("event", bool), ("time", float)])
            try:
                cox = CoxPHSurvivalAnalysis(alpha=penalizer * len(t_tr), ties="efron").fit(
                    ((x_tr - mean) / sd)[keep_tr], y
                )
            except (ValueError, np.linalg.LinAlgError, ArithmeticError) as exc:
                log.warning("%s: %s could not be fitted (%s): the null model in its place "
                            "(one risk for every row, C 0.5)", REFERENCE, e, exc)
        else:
            log.warning("%s: %s has no observed training event: the null model in its place (no risk, C 0.5)",
                        REFERENCE, e)
        for name, sp in splits.items():
            keep = np.ones(len(sp), bool) if sp.mask is None else sp.mask[:, j] == 1
            if not keep.any():
                scores[name][e] = dict(nan)
                continue
            z = (np.asarray(sp.X, np.float64)[keep] - mean) / sd
            t, s = sp.T[keep, j], sp.S[keep, j]
            if cox is None:  # the null model (beta = 0), what the partial likelihood gives without events:
                # every row ranks alike, as a model that learned nothing about the event does
                risk = np.zeros(len(z))
            else:
                risk = cox.predict(z)
            times = brier_times(t)
            rmst, curves = _cox_curves(cox, z, horizons[j], times)
            ranking[name]["ci"][keep, j], ranking[name][CI_RMST][keep, j] = -risk, rmst
            scores[name][e] = {
                "ci": _harrell_c_or_nan(t, -risk, s), CI_RMST: _harrell_c_or_nan(t, rmst, s),
                "uno_c": uno_c(t_tr, s_tr, t, s, -risk),
                "ibs": integrated_brier_score(t_tr, s_tr, t, s, curves, times) if len(times) >= 2 else float("nan")}
    return scores, ranking


COX_CURVE_CELLS = 4_000_000  # rows x steps of Cox survival curves held at once (32 MB in float64)


def _cox_curves(cox, z: np.ndarray, horizon: float, times: np.ndarray,
                max_cells: int = COX_CURVE_CELLS) -> tuple[np.ndarray, np.ndarray]:
    """The restricted mean (n,) up to ``horizon`` and the survival (n, len(times)) at ``times`` of
    a fitted Cox model's step curves for the rows ``z`` (n, d), a block of rows at a time: a curve
    has a step at every distinct training event time, so all rows at once would hold rows x steps
    values (60,000 test rows x 8,000 steps: 3.8 GB, twice over). ``cox=None``: the null model,
    survival 1 everywhere."""
    if cox is None:
        return step_rmst(np.array([np.inf]), np.ones((len(z), 1)), horizon), np.ones((len(z), len(times)))
    steps = np.asarray(cox.unique_times_, float)
    at = np.searchsorted(steps, times, side="right")  # S(t) = surv[:, at - 1]; 1 before the first step
    rows = max(1, max_cells // max(len(steps), 1))
    rmst, curves = np.empty(len(z)), np.empty((len(z), len(times)))
    for lo in range(0, len(z), rows):
        # (rows, steps): each row's curve at its own steps, the training event times; what
        # return_array=True gives, without evaluating every curve at every step one row at a time
        surv = np.stack([f.y for f in cox.predict_survival_function(z[lo:lo + rows])])
        rmst[lo:lo + rows] = step_rmst(steps, surv, horizon)
        curves[lo:lo + rows] = np.where(at > 0, surv[:, np.maximum(at - 1, 0)], 1.0)
    return rmst, curves


def step_rmst(steps: np.ndarray, survival: np.ndarray, horizon: float) -> np.ndarray:
    """(n,) the area under right-continuous step survival curves from 0 to ``horizon``: curve i
    is 1 before ``steps[0]`` and ``survival[i, k]`` from ``steps[k]`` on.

        >>> step_rmst(np.array([1.0, 3.0]), np.array([[0.5, 0.0]]), 4.0)   # 1 + 0.5 * 2 + 0
        array([2.])
        >>> step_rmst(np.array([1.0, 3.0]), np.array([[0.5, 0.0]]), 2.0)   # 1 + 0.5 * 1
        array([1.5])
    """
    edges = np.minimum(np.concatenate([[0.0], steps, [horizon]]), horizon)  # 0, t_1..t_K, h; clipped at h
    heights = np.concatenate([np.ones((len(survival), 1)), survival], axis=1)  # on [0, t_1), [t_1, t_2), ...
    return heights @ np.diff(edges)
