"""The small evaluation API: named model presets, one fit on a dataset's splits, per-task metrics.

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
    >>> model = fit_preset("BC", train, val, seed=0, hidden_sizes=(8,), max_epochs=2, device="cpu")
    >>> sorted(evaluate("BC", model, test, ["T1"])["T1"])
    ['auc', 'ece']

Presets (``PRESETS``):

- ``CET``: the product default, ``CETModel()`` -- the exact log marginal likelihood (observed
  cells pinned, censored cells summed), a time head conditioned on the occurrences of all M
  events, occurrence logits started at each event's observed share, Adam lr 1e-3, automatic
  budget, early stopping per head (the occurrence head trained on alone after the joint stop).
- ``CET-paper``: the paper's model as the original code trained it (Gumbel-Softmax, tau 0.3,
  100 samples, penalty -log eps - log p with eps = 0.7, Adam lr 3e-4, logits started near 0,
  one joint early stop): what produced Tables 3-5.
- ``CET-bound``: eq. 8 exactly as printed (penalty -log eps, log eps = -2), otherwise as CET-paper.
- ``CET-unconditioned``: the default with a time head on x alone (``condition_on_occurrence=False``).
- ``CET-marginal``: the default with the marginal likelihood summed over every pattern of every
  row (no importance sampling: the reference for the per-row budget).
- ``CET-uniform-init``: the default with the occurrence logits started near 0, p = 0.5: the
  ablation of the start.
- ``ET``: same AFT head, no occurrence; its AUC is scored as in the paper, by the rank of the
  predicted median time (an earlier time = a higher score).
- ``BC``: the occurrence encoder trained as a classifier of s. AUC and ECE only.
- ``Oracle``: the same classifier trained on the true occurrence c (the paper's Figure 1).
- ``CET-Gumbel``, ``CET-ARM``, ``CET-exact``: the paper's objective with each estimator.

Metrics per task (``evaluate``): AUC against the true occurrence c, ECE of P(ever); for time
models MRAE (t_max = the largest observed time of that event in the split, as the reference
code did) and Harrell's C of predicted medians (for CET: the median time *given* the event
happens, the paper's CI), and with the training split Uno's C of the same, the integrated Brier
score of the population survival curves and ``ci_rmst``, Harrell's C of the population's
restricted mean event-free time (``rmst_horizons``): how well the model ranks who has the event
later or never, which is what survival analyses compare on data without the truth.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from .comments import CommentInputs
from .dataset import Split
from .estimators import MAX_EXACT_EVENTS
from .host import cpu_model, machine  # noqa: F401  (re-exported: reports and models record it)
from .metrics import (
    brier_times,
    concordance_index,
    expected_calibration_error,
    integrated_brier_score,
    mrae,
    occurrence_auc,
    resampled_auc,
    resampled_concordance_index,
    resampled_horizon_auc,
    uno_c,
)
from .models import BCModel, CETModel, ETModel
from .nonparametric import RiskGained, kaplan_meier_risk_gained
from .recipe import Recipe

log = logging.getLogger("cet_model.evaluation")

PAPER_CET = dict(objective="paper", lr=3e-4)  # its recipe: recipe.RECIPES["paper"]
# name: (estimator class, its parameters); a class ``with_recipe`` is a recipe variant (experiments only)
PRESETS: dict[str, tuple[type, dict]] = {
    "CET": (CETModel, {}),
    "CET-paper": (CETModel, PAPER_CET),
    "CET-bound": (CETModel, dict(PAPER_CET, objective="bound")),
    "CET-unconditioned": (CETModel, dict(condition_on_occurrence=False)),
    "CET-marginal": (CETModel.with_recipe(max_patterns=2**MAX_EXACT_EVENTS), {}),
    "CET-uniform-init": (CETModel.with_recipe(occurrence_init="uniform"), {}),
    "ET": (ETModel, {}),
    "BC": (BCModel, {}),
    "Oracle": (BCModel, {}),
    "CET-Gumbel": (CETModel, PAPER_CET),
    "CET-exact": (CETModel.with_recipe(estimator="exact"), PAPER_CET),
    "CET-ARM": (CETModel.with_recipe(estimator="arm"), PAPER_CET),
}
PRESET_OF_ESTIMATOR = {"gumbel": "CET-Gumbel", "arm": "CET-ARM", "exact": "CET-exact"}
DEFAULT_PRESETS = ("CET", "CET-paper", "ET", "BC", "Oracle")
RECIPE_FIELDS = frozenset(f.name for f in dataclasses.fields(Recipe))
METRICS = ("auc", "mrae", "ci", "ece", "uno_c", "ibs")  # the paper's tables' columns (and Uno's C, IBS)
# Harrell's C of the population's restricted mean event-free time (``rmst_horizons``), scored by
# ``evaluate`` with a training split beside METRICS: the survival ranking of data without the truth
from .choices import CI_RMST  # noqa: E402

RMST_QUANTILE = 0.9  # the horizon of the restricted mean: this quantile of the training follow-up
COMMENT_WIDTH = 100  # per-comment layer width when the dataset has sequences (Reddit)


def check_presets(names) -> tuple[str, ...]:
    """The names as a tuple; an unknown one is a ValueError listing the presets."""
    names = tuple(names)
    unknown = [m for m in names if m not in PRESETS]
    if unknown:
        raise ValueError(f"unknown models {unknown}; choose from {sorted(PRESETS)}")
    return names


def unknown_occurrence(split: Split) -> int:
    """How many cells of ``split`` (those the mask uses) have no known true occurrence (C NaN).

    >>> c = np.array([[1.0, np.nan], [0.0, np.nan]])
    >>> unknown_occurrence(Split(np.arange(2), np.zeros((2, 1)), c, c, c, c))
    2
    """
    unknown = np.isnan(split.C)
    if split.mask is not None:
        unknown &= split.mask == 1
    return int(unknown.sum())


def presets_for_truth(names, train: Split, val: Split) -> tuple[tuple[str, ...], dict[str, str]]:
    """The presets of ``names`` that can be trained on these splits, and {left-out preset: why}.

    The Oracle learns the true occurrence, so it is left out where a training or validation
    cell does not have it (data censored by follow-up alone); every other preset learns from
    the observed times and indicators and is always kept.
    """
    unknown = unknown_occurrence(train) + unknown_occurrence(val)
    if "Oracle" not in names or unknown == 0:
        return tuple(names), {}
    why = (f"the true occurrence is not known for {unknown} training and validation cells, and the Oracle "
           "learns it")
    return tuple(n for n in names if n != "Oracle"), {"Oracle": why}


def model_inputs(split: Split) -> np.ndarray | CommentInputs:
    """The model input of a split, (n, d): X, or [X | comment embeddings flattened] when the
    dataset has ``sequences.npy`` (n, L, D) -> (n, d + L * D), as a ``CommentInputs`` that
    reads the embeddings from disk one batch at a time."""
    return split.X if split.sequences is None else CommentInputs(split.X, split.sequences)


def comment_encoder_for(split: Split, width: int = COMMENT_WIDTH) -> dict | None:
    """The ``comment_encoder`` parameter for a dataset with sequences (None without)."""
    if split.sequences is None:
        return None
    _, length, dim = split.sequences.shape
    return {"n_aux": split.X.shape[1], "length": length, "dim": dim, "width": width}


def fit_preset(name: str, train: Split, val: Split, *, seed: int = 0, hidden_sizes=(100,),
               max_epochs: int | None = None, patience: int | None = None, params: dict | None = None,
               x_train: np.ndarray | None = None, x_val: np.ndarray | None = None, on_epoch=None, **model_params):
    """Fit preset ``name`` on ``train`` with early stopping on ``val``; returns the fitted model.

    ``params`` overrides the preset's parameters (e.g. a search's choice), ``model_params``
    adds others (e.g. ``device``); fields of ``cet_model.recipe.Recipe`` among them change the
    model's recipe (``with_recipe``). The Oracle learns the true occurrence c, the others the
    observed indicators s. ``x_train``/``x_val``: the model inputs when already computed.
    """
    cls, preset = PRESETS[check_presets([name])[0]]
    kwargs = dict(preset, **(params or {}), **model_params)
    changes = {k: kwargs.pop(k) for k in list(kwargs) if k in RECIPE_FIELDS}
    if changes:  # a recipe variant (an experiment's ablation or search)
        cls = cls.with_recipe(**changes)
    kwargs.setdefault("comment_encoder", comment_encoder_for(train))
    model = cls(hidden_sizes=hidden_sizes, max_epochs=max_epochs, patience=patience, seed=seed, **kwargs)
    x_train = model_inputs(train) if x_train is None else x_train
    x_val = model_inputs(val) if x_val is None else x_val
    left_out = presets_for_truth([name], train, val)[1]
    if left_out:
        raise ValueError(f"Oracle: {left_out['Oracle']}; leave it out on such data")
    # (a cell the mask leaves out may have no truth: it is not learned from, so any 0/1 does)
    y_train, y_val = (np.nan_to_num(train.C), np.nan_to_num(val.C)) if name == "Oracle" else (train.S, val.S)
    return model.fit(x_train, train.T, y_train, x_val, val.T, y_val, mask=train.mask, mask_val=val.mask,
                     on_epoch=on_epoch)


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
    p = model.predict_occurrence(x)
    timed = hasattr(model, "predict_time")
    t_hat = model.predict_time(x) if timed else None
    if rmst_at is None and train is not None:
        rmst_at = rmst_horizons(train)
    rmst = model.predict_rmst(x, rmst_at) if timed and rmst_at is not None else None
    tasks, no_truth = {}, {}
    for j, e in enumerate(event_names):
        keep = np.ones(len(split), bool) if split.mask is None else split.mask[:, j] == 1
        if not keep.any():
            tasks[e] = {k: float("nan") for k in ((*METRICS, *((CI_RMST,) if rmst is not None else ()))
                                                  if timed else ("auc", "ece"))}
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
                times = brier_times(t)
                surv = model.predict_survival(x[keep], times)[:, :, j] if len(times) >= 2 else None
                row["ibs"] = integrated_brier_score(t_tr, s_tr, t, s, surv, times) if surv is not None else float("nan")
        tasks[e] = row
    if no_truth and warn_no_truth:
        log.warning("%s%s: the true occurrence is not known for %s; AUC and ECE are over the rows where it "
                    "is (undefined where it is known for none)", name, f" on {label}" if label else "",
                    ", ".join(f"{e} ({n} rows)" for e, n in no_truth.items()))
    no_ibs = [e for e, row in tasks.items() if "ibs" in row and np.isnan(row["ibs"])]
    if no_ibs:
        log.warning("%s%s: integrated Brier score undefined for %s (too little follow-up in the split)",
                    name, f" on {label}" if label else "", ", ".join(no_ibs))
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


BEYOND_SHARE = 0.2  # a share of P(ever) past the training follow-up that reports and scoring logs name
FOLLOWED_ROWS = 10  # the follow-up's end, for P(ever): the last time this many training rows were still followed
RISING_SHARE = 0.1  # Kaplan-Meier still rises at the follow-up's end when its last quarter adds this share of the risk


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
    (``RISING_SHARE`` or more) where it still rises there: then the follow-up does not show how many
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
                                p_ever=None) -> dict[str, dict]:
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
    computed again).

        >>> rng = np.random.default_rng(0)
        >>> n = 600
        >>> t_true = rng.lognormal(np.log(20.0), 0.8, n)   # half never have it; of the rest, most
        >>> c = rng.random(n) < 0.5                          # would have it after the follow-up, 10
        >>> t, s = np.where(c, np.minimum(t_true, 10.0), 10.0), (c & (t_true <= 10.0)).astype(float)
        >>> x = np.zeros((n, 1))
        >>> cet = CETModel(hidden_sizes=(), max_epochs=200, lr=0.05, seed=0).fit(x, t[:, None], s[:, None])
        >>> r = occurrence_beyond_follow_up(cet, x, {"e": followed_until(t)}, ["e"])["e"]
        >>> r["follow_up"], round(r["by_follow_up"], 2), round(float(s.mean()), 2)   # by 10, as the data say
        (10.0, 0.09, 0.09)
        >>> round(r["p_ever"], 2), round(r["share_beyond"], 2)   # ever: 0.5 in truth; the tail says 0.33
        (0.33, 0.72)
        >>> r == occurrence_beyond_follow_up(cet, x, {"e": 10.0}, ["e"], p_ever=cet.predict_occurrence(x))["e"]
        True
    """
    names = [e for e in event_names if e in follow_up]
    if not names or len(x) == 0:
        return {}
    grid = sorted({float(follow_up[e]) for e in names})
    p = model.predict_occurrence(x) if p_ever is None else np.asarray(p_ever)  # (n, M)
    survival = model.predict_survival(x, grid)  # (n, H, M)
    out = {}
    for e in names:
        j, k = event_names.index(e), grid.index(float(follow_up[e]))
        rows = np.ones(len(p), bool) if mask is None else np.asarray(mask)[:, j] > 0.5
        if not rows.any():
            continue
        p_ever, by = float(p[rows, j].mean()), float((1.0 - survival[rows, k, j]).mean())
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
    p = model.predict_occurrence(x)
    t_hat = model.predict_time(x) if hasattr(model, "predict_time") else None
    out = {"auc": occurrence_score(name, p, t_hat), **({"ci": t_hat} if t_hat is not None else {})}
    if rmst_at is not None and hasattr(model, "predict_rmst"):
        out[CI_RMST] = model.predict_rmst(x, rmst_at)
    if horizons is not None and hasattr(model, "predict_survival"):
        horizons = np.asarray(horizons, dtype=np.float64)
        grid = np.unique(horizons[np.isfinite(horizons)])
        risk = np.full(p.shape, np.nan)
        if grid.size:
            survival = model.predict_survival(x, grid)  # (n, H, M)
            for j, h in enumerate(horizons):
                if np.isfinite(h):
                    risk[:, j] = 1.0 - survival[:, int(np.searchsorted(grid, h)), j]
        out["auc_h"] = risk
    return out


BOOTSTRAP_RESAMPLES = 200


def bootstrap_intervals(split: Split, inputs: dict[str, dict[str, np.ndarray]], *, resamples: int = BOOTSTRAP_RESAMPLES,
                        level: float = 0.95, seed: int = 0, reference: str = "CET", train: Split | None = None,
                        horizons=None) -> dict:
    """Paired bootstrap intervals for the average over events of AUC and Harrell's C (of the
    predicted times, and of the restricted means where ``inputs`` have them), per model,
    and for ``reference`` minus each other model; with ``train`` and ``horizons`` ((M,), NaN for
    none) also of the AUC at each event's horizon of the risk by it (``auc_h``, the
    cumulative/dynamic AUC, ``cet_model.metrics.horizon_auc``; censoring weights from ``train``,
    which is not resampled).

    ``inputs``: {model: ``ranking_inputs(...)``} on ``split``'s rows, (n, M) each. The rows (the
    patients, users) are resampled ``resamples`` times; every model and event is scored on the
    same resamples, so a difference's interval is paired: it leaves out the part of the spread
    the models share. Per resample, the metric of each event (AUC on the rows whose true
    occurrence is known, C on all; masked cells out) is averaged over the events where it is
    defined, as ``average_over_tasks`` does; the interval is the ``level`` percentile interval of
    those averages. ``estimate`` is the average on the rows themselves (the summary's figure).

    Returns {"resamples", "level", "seed", "rows", "metrics": {metric: {model: {"estimate",
    "low", "high", "undefined_resamples"}}}, "differences": {metric: {model: {...}}}, "by_event":
    {metric: {model: [each event's interval on the same resamples, None where undefined]}}}, metric in
    "auc", "ci", "ci_rmst", "auc_h"; a metric no model has, or that is undefined on every event (AUC without
    the truth), is left out; "undefined_resamples" counts the resamples where no event defines it
    (a rare event drawn without a case), left out of the interval.

    >>> rng = np.random.default_rng(0)
    >>> c = (rng.random((300, 2)) < 0.5).astype(float)
    >>> t = rng.exponential(size=(300, 2)) + 0.1
    >>> test = Split(ids=np.arange(300), X=np.zeros((300, 1)), T=t, S=c, C=c, T_true=t)
    >>> good, noise = c + rng.normal(0, 0.5, c.shape), rng.random(c.shape)
    >>> out = bootstrap_intervals(test, {"CET": {"auc": good}, "BC": {"auc": noise}})
    >>> d = out["differences"]["auc"]["BC"]
    >>> bool(0 < d["low"] < d["estimate"] < d["high"])
    True
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    n = len(split)
    out = {"resamples": resamples, "level": level, "seed": seed, "rows": n, "metrics": {}, "differences": {}}
    if n == 0:
        return out
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    # how many times each row is drawn, per resample: (resamples, n)
    counts = np.bincount((draws + n * np.arange(resamples)[:, None]).reshape(-1), minlength=resamples * n)
    counts = counts.reshape(resamples, n).astype(np.float64)
    horizons = None if horizons is None else np.asarray(horizons, dtype=np.float64)
    for metric in ("auc", "ci", CI_RMST, "auc_h"):
        if metric == "auc_h" and (train is None or horizons is None):
            continue
        estimates, per_resample, per_event = {}, {}, {}
        for model, given in inputs.items():
            if metric not in given:
                continue
            values = np.asarray(given[metric], dtype=np.float64)
            by_event = [_metric_per_resample(split, metric, j, values[:, j], counts, train,
                                             None if horizons is None else horizons[j])
                        for j in range(values.shape[1])]
            point = np.array([b[0] for b in by_event])
            if np.isnan(point).all():
                continue
            estimates[model] = float(np.nanmean(point))
            per_resample[model] = _nanmean_rows(np.stack([b[1] for b in by_event]))
            per_event[model] = [None if np.isnan(b[0]) else _interval(b[0], b[1], level) for b in by_event]
        if not estimates:
            continue
        out["metrics"][metric] = {m: _interval(estimates[m], per_resample[m], level) for m in estimates}
        out.setdefault("by_event", {})[metric] = per_event
        if reference in estimates:
            out["differences"][metric] = {
                m: _interval(estimates[reference] - estimates[m], per_resample[reference] - per_resample[m], level)
                for m in estimates if m != reference}
    return out


def _metric_per_resample(split: Split, metric: str, j: int, values: np.ndarray, counts: np.ndarray,
                         train: Split | None = None, horizon: float | None = None):
    """(the metric of event j on the rows themselves, (resamples,) the metric on each resample)."""
    keep = np.ones(len(split), bool) if split.mask is None else split.mask[:, j] == 1
    if metric == "auc":
        keep &= ~np.isnan(split.C[:, j])
    if metric == "auc_h" and not (horizon is not None and np.isfinite(horizon) and np.isfinite(values[keep]).all()):
        return float("nan"), np.full(counts.shape[0], np.nan)
    if np.isnan(values[keep]).any():  # a model without a prediction for this event: undefined for it
        return float("nan"), np.full(counts.shape[0], np.nan)
    rows = np.flatnonzero(keep)
    weights = np.vstack([np.ones((1, rows.size)), counts[:, rows]])  # the rows themselves, then each resample
    if metric == "auc":
        got = resampled_auc(split.C[rows, j], values[rows], weights)
    elif metric in ("ci", CI_RMST):  # both rank times: a larger value, a later event
        got = resampled_concordance_index(split.T[rows, j], values[rows], split.S[rows, j], weights)
    else:
        followed = np.ones(len(train), bool) if train.mask is None else train.mask[:, j] == 1
        got = resampled_horizon_auc(train.T[followed, j], train.S[followed, j], split.T[rows, j], split.S[rows, j],
                                    values[rows], horizon, weights)
    return float(got[0]), got[1:]


def _nanmean_rows(a: np.ndarray) -> np.ndarray:
    """Column means of (events, runs or resamples) over the defined (non-NaN) events; NaN where
    none is, without numpy's "Mean of empty slice" warning."""
    defined = ~np.isnan(a)
    count = defined.sum(axis=0)
    return np.where(count > 0, np.where(defined, a, 0.0).sum(axis=0) / np.maximum(count, 1), np.nan)


def _interval(estimate: float, resampled: np.ndarray, level: float) -> dict:
    defined = resampled[~np.isnan(resampled)]
    if defined.size == 0:
        return {"estimate": estimate, "low": float("nan"), "high": float("nan"), "undefined_resamples": resampled.size}
    low, high = np.quantile(defined, [(1 - level) / 2, 1 - (1 - level) / 2])
    return {"estimate": estimate, "low": float(low), "high": float(high),
            "undefined_resamples": int(resampled.size - defined.size)}


def _harrell_c_or_nan(t, t_hat, s) -> float:
    try:
        return concordance_index(t, t_hat, s)
    except ZeroDivisionError:  # no comparable pair
        return float("nan")


def mean_std(values) -> tuple[float, float]:
    """(mean, std) ignoring NaN; (nan, nan) when nothing is defined.

    >>> [round(v, 3) for v in mean_std([0.5, 0.7, float("nan")])]
    [0.6, 0.1]
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0 or np.isnan(arr).all():
        return float("nan"), float("nan")
    return float(np.nanmean(arr)), float(np.nanstd(arr))


def average_over_tasks(tasks: dict, metric: str) -> list[float]:
    """Per-run mean over tasks (the paper's Avg row): {task: {metric: [runs]}} -> [runs].

    A task whose metric is undefined in a run (NaN: e.g. no event occurs in the test rows) is
    left out of that run's mean; a run where no task defines it gets NaN, without numpy's
    "Mean of empty slice" warning.

    >>> [round(v, 3) for v in average_over_tasks({"T1": {"auc": [0.8, 0.9]}, "T2": {"auc": [0.6, 0.7]}}, "auc")]
    [0.7, 0.8]
    >>> average_over_tasks({"T1": {"auc": [0.8, float("nan")]}, "T2": {"auc": [0.6, float("nan")]}}, "auc")
    [0.7, nan]
    """
    per_task = [v[metric] for v in tasks.values() if metric in v]
    if not per_task:
        return []
    return _nanmean_rows(np.asarray(per_task, dtype=np.float64)).tolist()


def bounds_text(v: dict | None, signed: bool = False) -> str:
    """An interval record's bounds as text, "" without them.

    >>> bounds_text({"estimate": 0.71, "low": 0.68, "high": 0.74}), bounds_text(None)
    (' [0.680, 0.740]', '')
    """
    if not v or v.get("low") is None:
        return ""
    form = "+.3f" if signed else ".3f"
    return f" [{_no_minus_zero(v['low']):{form}}, {_no_minus_zero(v['high']):{form}}]"


def difference_text(v: dict) -> str:
    """A difference with its interval; a difference that rounds to zero is shown as +0.000.

    >>> difference_text({"estimate": 0.0301, "low": 0.0119, "high": 0.048})
    '+0.030 [+0.012, +0.048]'
    >>> difference_text({"estimate": -1e-6, "low": -2e-6, "high": 1e-6})
    '+0.000 [+0.000, +0.000]'
    """
    return f"{_no_minus_zero(v['estimate']):+.3f}" + bounds_text(v, signed=True)


def _no_minus_zero(x: float) -> float:
    return round(float(x), 3) + 0.0


COX_PENALIZER = 0.01  # the ridge of the classical reference, per row (lifelines' ``penalizer`` scale)
REFERENCE = "Cox (reference)"
# when a table shows the reference: "auto" on data without the true occurrence (where no Oracle
# can be trained), "cox" always (features only), "none" never
from .choices import REFERENCE_CHOICES  # noqa: E402,F401


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
        surv = cox.predict_survival_function(z[lo:lo + rows], return_array=True)  # (rows, steps)
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
