"""The small evaluation API: a fitted model's per-task metrics on a split (the presets and their
fit: ``cet_model.presets``).

The production flow (``flows/train.py``) and the experiment harness (``cet_experiments``)
both train and score through these functions, so a table and a registered model version mean
the same thing.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> def split(n):
    ...     c = (rng.random((n, 1)) < 0.5).astype(float)
    ...     t = rng.exponential(size=(n, 1)) + 0.1
    ...     return Split(ids=np.arange(n), X=rng.standard_normal((n, 3)), T=t, S=c, C=c, T_true=t)
    >>> train, val, test = split(200), split(100), split(100)
    >>> from cet_model.presets import fit_preset
    >>> model = fit_preset("BC", train, val, seed=0, hidden_sizes=(8,), max_epochs=2, device="cpu")
    >>> sorted(evaluate("BC", model, test, ["T1"])["T1"])
    ['auc', 'ece']

Metrics per task (``evaluate``): AUC against the true occurrence c, ECE of P(ever); for time
models MRAE (t_max = the largest observed time of that event in the split, as the reference
code did) and Harrell's C of predicted medians (for CET: the median time *given* the event
happens, the paper's CI), and with the training split Uno's C of the same, the integrated Brier
score of the population survival curves and ``ci_rmst``, Harrell's C of the population's
restricted mean event-free time (``rmst_horizons``): how well the model ranks who has the event
later or never, which is what survival analyses compare on data without the truth.
"""

from __future__ import annotations

import logging

import numpy as np

from .comments import CommentInputs
from .dataset import Split
from .host import cpu_model, machine  # noqa: F401  (re-exported: reports and models record it)
from .metrics import (
    brier_times,
    concordance_index,
    expected_calibration_error,
    integrated_brier_score,
    mrae,
    occurrence_auc,
    uno_c,
)
from .nonparametric import RiskGained, kaplan_meier_risk_gained

log = logging.getLogger("cet_model.evaluation")

# the metrics' names (METRICS: the paper's tables' columns, and Uno's C, IBS; CI_RMST: Harrell's C of the
# population's restricted mean event-free time, ``rmst_horizons``, scored by ``evaluate`` with a training
# split beside METRICS: the survival ranking of data without the truth), and the thresholds reports quote
from .choices import CI_RMST, FOLLOWED_ROWS, METRICS  # noqa: E402

RMST_QUANTILE = 0.9  # the horizon of the restricted mean: this quantile of the training follow-up


def model_inputs(split: Split) -> np.ndarray | CommentInputs:
    """The model input of a split, (n, d): X, or [X | comment embeddings flattened] when the
    dataset has ``sequences.npy`` (n, L, D) -> (n, d + L * D), as a ``CommentInputs`` that
    reads the embeddings from disk one batch at a time."""
    return split.X if split.sequences is None else CommentInputs(split.X, split.sequences)


def evaluate(name: str, model, split: Split, event_names, x: np.ndarray | None = None,
             train: Split | None = None, label: str = "", warn_no_truth: bool = True,
             rmst_at=None) -> dict[str, dict[str, float]]:
    """Per-task metrics {event: {metric: value}} of a fitted model on a split.

    ``x``: the split's model input, if already computed. With ``train`` (the training split)
    time models also get Uno's C, the integrated Brier score and ``ci_rmst`` (Harrell's C of
    ``predict_rmst`` at ``rmst_horizons(train)``, or at ``rmst_at``, (M,) horizons, without a
    training split). Masked cells are not scored.
    A metric undefined on some tasks is NaN there, reported in one warning naming the model,
    ``label`` (e.g. the dataset and split) and the tasks. AUC and ECE are scored on the rows whose
    true occurrence is known (C not NaN): on data censored by follow-up alone, none, and they are NaN
    (``warn_no_truth=False``: the caller has said so once; no warning here).
    """
    x = model_inputs(split) if x is None else x
    timed = hasattr(model, "predict_time")
    if rmst_at is None and train is not None:
        rmst_at = rmst_horizons(train)
    keeps = [np.ones(len(split), bool) if split.mask is None else split.mask[:, j] == 1
             for j in range(len(event_names))]
    grids = [brier_times(split.T[keep, j]) if keep.any() else np.zeros(0) for j, keep in enumerate(keeps)]
    curves = None  # each event's survival at its Brier times, on every row of the split, where one pass gives them
    if timed and hasattr(model, "predict_all"):  # CET: the mixture over the other events once, not once per call
        every = model.predict_all(x, quantiles=(0.5,), rmst_horizons=() if rmst_at is None else (rmst_at,),
                                  event_times=grids if train is not None else None)
        p, t_hat = every["occurrence"], every["time"][0.5]
        rmst = next(iter(every["rmst"].values()), None)  # the one horizon asked for
        curves = every.get("event_survival")
    else:
        p = model.predict_occurrence(x)
        t_hat = model.predict_time(x) if timed else None
        rmst = model.predict_rmst(x, rmst_at) if timed and rmst_at is not None else None
    tasks, no_truth, no_ibs = {}, {}, {}  # no_ibs: {event: why its integrated Brier score is undefined}
    for j, e in enumerate(event_names):
        keep = keeps[j]
        if not keep.any():
            tasks[e] = {k: float("nan") for k in ((*METRICS, *((CI_RMST,) if rmst is not None else ()))
                                                  if timed else ("auc", "ece"))}
            if "ibs" in tasks[e]:
                no_ibs[e] = "no row of the split is followed for it"
            continue
        t, s = split.T[keep, j], split.S[keep, j]
        known = keep & ~np.isnan(split.C[:, j])  # AUC and ECE need the true occurrence
        c = split.C[known, j]
        score = occurrence_score(name, p, t_hat)[known, j]
        row = ({"auc": occurrence_auc(c, score), "ece": expected_calibration_error(c, p[known, j])} if known.any()
               else {"auc": float("nan"), "ece": float("nan")})
        if not known[keep].all():
            no_truth[e] = int((keep & ~known).sum())
        if timed:
            row["mrae"] = mrae(t, t_hat[keep, j], s, t.max())
            row["ci"] = _harrell_c_or_nan(t, t_hat[keep, j], s)
            if rmst is not None:
                row[CI_RMST] = _harrell_c_or_nan(t, rmst[keep, j], s)
            if train is not None:
                keep_tr = np.ones(len(train), bool) if train.mask is None else train.mask[:, j] == 1
                t_tr, s_tr = train.T[keep_tr, j], train.S[keep_tr, j]
                row["uno_c"] = uno_c(t_tr, s_tr, t, s, t_hat[keep, j])
                times = grids[j]
                if len(times) < 2:
                    surv = None
                elif curves is not None:
                    surv = curves[j][keep]
                else:  # on every row, as the one pass scores them: a network's float32 outputs can differ in
                    # their last bits with the number of rows scored together (BLAS kernels by size)
                    surv = model.predict_survival(x, times, event=j)[keep]
                row["ibs"] = integrated_brier_score(t_tr, s_tr, t, s, surv, times) if surv is not None else float("nan")
                if np.isnan(row["ibs"]):
                    no_ibs[e] = "no event in the split" if not s.any() else "too little follow-up in the split"
        tasks[e] = row
    if no_truth and warn_no_truth:
        log.warning("%s%s: the true occurrence is not known for %s; AUC and ECE are over the rows where it "
                    "is (undefined where it is known for none)", name, f" on {label}" if label else "",
                    ", ".join(f"{e} ({n} rows)" for e, n in no_truth.items()))
    if no_ibs:
        log.warning("%s%s: integrated Brier score undefined for %s", name, f" on {label}" if label else "",
                    ", ".join(f"{e} ({why})" for e, why in no_ibs.items()))
    return tasks


def rmst_horizons(train: Split) -> np.ndarray:
    """(M,) the horizon of each event's restricted mean event-free time (``predict_rmst``): the
    ``RMST_QUANTILE`` quantile of its training follow-up times (the cells the mask keeps), so that
    the restricted mean is read where the training rows still have follow-up.

    >>> tr = Split(ids=np.arange(10), X=np.zeros((10, 1)), T=np.arange(1.0, 11.0)[:, None], S=np.ones((10, 1)),
    ...            C=np.ones((10, 1)), T_true=np.ones((10, 1)))
    >>> rmst_horizons(tr)
    array([9.1])
    """
    out = np.empty(train.T.shape[1])
    for j in range(train.T.shape[1]):
        keep = np.ones(len(train), bool) if train.mask is None else train.mask[:, j] == 1
        out[j] = np.quantile(train.T[keep, j], RMST_QUANTILE) if keep.any() else 1.0
    return out




def followed_until(t, rows: int = FOLLOWED_ROWS) -> float:
    """The last time at which at least ``rows`` of the follow-up times ``t`` (n,) were still
    followed (the ``rows``-th largest; the smallest of fewer): past it, what a survival curve says
    rests on fewer rows than that, and at the very end on one (a Kaplan-Meier curve there drops to 0
    when the last row has the event).

    >>> followed_until([52.0] * 30 + [10.0]), followed_until(np.arange(1.0, 101.0)), followed_until([3.0, 5.0])
    (52.0, 91.0, 3.0)
    """
    t = np.sort(np.asarray(t, dtype=float))
    return float(t[-rows] if len(t) >= rows else t[0])


def risk_gained_last_quarter(t, s, end: float, level: float = 0.95) -> RiskGained:
    """The Kaplan-Meier risk gained over the last quarter of the follow-up, from ``0.75 * end`` to
    ``end`` (e.g. :func:`followed_until` of ``t``), of times ``t`` (n,) with indicators ``s`` (n,),
    with its ``level`` confidence interval and the events in that quarter
    (:func:`cet_model.nonparametric.kaplan_meier_risk_gained`: Greenwood's variance, log scale; reliable
    with about four or more events): near 0 where the curve has levelled off by the end (a plateau:
    the data show about how many will ever have the event), a large part of the risk by the end
    (``cet_model.choices.RISING_SHARE`` or more) where it still rises there: then the follow-up does not show how many
    ever will, and P(ever) rests on the fitted time distribution's tail however little of it the
    model places after the end. The interval says whether that rise is more than a few rows' chance.

    >>> t = np.r_[np.linspace(1.0, 5.0, 50), np.full(150, 20.0)]   # 50 events early, then 150 followed on
    >>> risk_gained_last_quarter(t, (t < 10).astype(float), followed_until(t))   # a plateau
    RiskGained(gain=0.0, low=None, high=None, events=0)
    >>> t = np.r_[np.linspace(1.0, 20.0, 50), np.full(150, 20.0)]   # events until the end
    >>> s = (t < 20).astype(float)
    >>> r = risk_gained_last_quarter(t, s, followed_until(t))
    >>> from cet_model.nonparametric import kaplan_meier_risk
    >>> round(r.gain, 3), round(r.gain / kaplan_meier_risk(t, s, 20.0), 2)   # a quarter of the risk by 20
    (0.06, 0.24)
    >>> round(r.low, 3), round(r.high, 3), r.events
    (0.035, 0.104, 12)
    """
    return kaplan_meier_risk_gained(t, s, 0.75 * end, end, level)


def occurrence_beyond_follow_up(model, x, follow_up: dict[str, float], event_names, mask=None,
                                p_ever=None, risk_by_end=None) -> dict[str, dict]:
    """How much of a cure model's P(ever) lies beyond the training data, per event of
    ``follow_up`` ({event: the end of its training follow-up, e.g. ``followed_until`` of its
    training times}): the mean over the rows ``x`` of P(ever) (``p_ever``) and of the risk by that
    time (``by_follow_up``: 1 - the population survival there), their difference (``beyond``: the
    occurrences the model places after the follow-up) and its share of P(ever) (``share_beyond``).
    Past the follow-up ``beyond`` rests on the fitted log-normal tail, not on data: where it is a
    large share, P(ever) is an extrapolation (right only as far as the times are log-normal), and
    a risk by a horizon within the follow-up is what the data support.

    ``model``: a fitted model with ``predict_occurrence`` and ``predict_survival`` (CET; ET has no
    P(ever)); ``x``: its input rows (n, d); ``event_names``: the model's events, in order;
    ``mask`` (n, M): 0 leaves a row out of an event's means (a cell the data do not follow);
    ``p_ever`` (n, M): ``model.predict_occurrence(x)`` when the caller already has it (not
    computed again); ``risk_by_end`` (n, M): each event's risk by the end of its follow-up,
    ``predict_all(x, risk_by=...)["risk_by"]``, likewise (events not in ``follow_up`` are not read).

        >>> rng = np.random.default_rng(0)
        >>> n = 600
        >>> t_true = rng.lognormal(np.log(20.0), 0.8, n)   # half never have it; of the rest, most
        >>> c = rng.random(n) < 0.5                          # would have it after the follow-up, 10
        >>> t, s = np.where(c, np.minimum(t_true, 10.0), 10.0), (c & (t_true <= 10.0)).astype(float)
        >>> x = np.zeros((n, 1))
        >>> from cet_model.models import CETModel
        >>> y = t[:, None], s[:, None]                       # stopped on its own rows: fitted to every row
        >>> cet = CETModel(hidden_sizes=(), max_epochs=200, lr=0.05, seed=0).fit(x, *y, x, *y)
        >>> r = occurrence_beyond_follow_up(cet, x, {"e": followed_until(t)}, ["e"])["e"]
        >>> r["follow_up"], round(r["by_follow_up"], 2), round(float(s.mean()), 2)   # by 10, as the data say
        (10.0, 0.09, 0.09)
        >>> round(r["p_ever"], 2), round(r["share_beyond"], 2)   # ever: 0.5 in truth; the tail says 0.41
        (0.41, 0.78)
        >>> given = cet.predict_all(x, quantiles=(), risk_by=[10.0])
        >>> r == occurrence_beyond_follow_up(cet, x, {"e": 10.0}, ["e"], p_ever=given["occurrence"],
        ...                                  risk_by_end=given["risk_by"])["e"]
        True
    """
    names = [e for e in event_names if e in follow_up]
    if not names or len(x) == 0:
        return {}
    p = model.predict_occurrence(x) if p_ever is None else np.asarray(p_ever)  # (n, M)
    if risk_by_end is None:
        grid = sorted({float(follow_up[e]) for e in names})
        survival = model.predict_survival(x, grid)  # (n, H, M)
        risk_by_end = np.stack([1.0 - survival[:, grid.index(float(follow_up[e])), j] if e in follow_up
                                else np.full(len(p), np.nan) for j, e in enumerate(event_names)], 1)
    out = {}
    for e in names:
        j = event_names.index(e)
        rows = np.ones(len(p), bool) if mask is None else np.asarray(mask)[:, j] > 0.5
        if not rows.any():
            continue
        p_ever, by = float(p[rows, j].mean()), float(np.asarray(risk_by_end)[rows, j].mean())
        beyond = max(p_ever - by, 0.0)
        out[e] = {"follow_up": float(follow_up[e]), "p_ever": p_ever, "by_follow_up": by, "beyond": beyond,
                  "share_beyond": beyond / p_ever if p_ever > 0 else float("nan")}
    return out


def occurrence_score(name: str, p: np.ndarray, t_hat: np.ndarray | None) -> np.ndarray:
    """What a preset's AUC ranks, (n, M): P(ever), or for ET (no occurrence head) the negated
    predicted median time, as the paper scored it (an earlier time = a higher score)."""
    return -t_hat if name == "ET" else p


def ranking_inputs(name: str, model, x, horizons=None, rmst_at=None) -> dict[str, np.ndarray]:
    """A fitted preset's test-time inputs to ``bootstrap_intervals``: {"auc": the occurrence
    score (n, M), and for time models "ci": the predicted times (n, M), with ``rmst_at`` ((M,),
    ``rmst_horizons``) "ci_rmst": the restricted mean event-free times (n, M), and, with
    ``horizons`` ((M,) times, NaN for none), "auc_h": the risk of each event by its horizon,
    1 - S(h) (n, M)}."""
    grid = np.zeros(0) if horizons is None else np.unique(np.asarray(horizons, np.float64)[np.isfinite(horizons)])
    if hasattr(model, "predict_all"):  # CET: every prediction from one pass of the time head (the same values)
        every = model.predict_all(x, quantiles=(0.5,), times=grid, rmst_horizons=() if rmst_at is None else (rmst_at,))
        p, t_hat, survival = every["occurrence"], every["time"][0.5], every["survival"]
        rmst = next(iter(every["rmst"].values()), None)  # the one horizon asked for
    else:
        timed = hasattr(model, "predict_time")
        p = model.predict_occurrence(x)
        t_hat = model.predict_time(x) if timed else None
        rmst = model.predict_rmst(x, rmst_at) if timed and rmst_at is not None else None
        survival = model.predict_survival(x, grid) if timed and grid.size else None  # (n, H, M)
    out = {"auc": occurrence_score(name, p, t_hat), **({"ci": t_hat} if t_hat is not None else {})}
    if rmst is not None:
        out[CI_RMST] = rmst
    if horizons is not None and t_hat is not None:
        risk = np.full(p.shape, np.nan)
        if grid.size:
            for j, h in enumerate(np.asarray(horizons, dtype=np.float64)):
                if np.isfinite(h):
                    risk[:, j] = 1.0 - survival[:, int(np.searchsorted(grid, h)), j]
        out["auc_h"] = risk
    return out



def _harrell_c_or_nan(t, t_hat, s) -> float:
    try:
        return concordance_index(t, t_hat, s)
    except ZeroDivisionError:  # no comparable pair
        return float("nan")


