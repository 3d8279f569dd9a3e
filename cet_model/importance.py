"""Which inputs a fitted model relies on: permutation importance per event, with groups.

A group of input columns (one feature, a categorical column's levels, a feature with its
missingness indicator, every statistic of one MIMIC item, or the comment embeddings of a
Reddit user) is shuffled across the rows of a split, all its columns by the same permutation,
and the model is scored again: the importance is the score on the rows as they are minus the
score with the group shuffled, per event, averaged over ``repeats`` shuffles (with their
standard deviation). The scores are the ones the product reports:

- ``auc``: AUC of the occurrence score against the true occurrence (rows where it is known;
  for ET the negated predicted time, as ``occurrence_score`` says): what *whether* relies on;
- ``ci_rmst``: Harrell's C of the restricted mean event-free time (time models, with
  ``rmst_at``): who has the event later or never, the ranking on data without the truth;
- ``ci_timing``: Harrell's C of the predicted time *given that the event happens* among the rows
  where it was observed (time models): what the model's *when* relies on, apart from its *whether*
  (CET's time head; with AUC, its two heads one at a time).

Shuffling a group keeps its distribution and breaks its link with the outcome and with the
other inputs; a group whose information the other inputs also carry can show little importance
though the model uses it (e.g. a statistic of a lab value beside another statistic of it, which
is why an item's statistics are one group). Compute it on a validation split, not on the test
split that the reported figures come from.

    >>> import numpy as np
    >>> from cet_model import BCModel
    >>> from cet_model.dataset import Split
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((400, 3))
    >>> c = (x[:, [0]] + 0.3 * rng.standard_normal((400, 1)) > 0).astype(float)
    >>> split = Split(ids=np.arange(400), X=x, T=np.ones((400, 1)), S=c, C=c, T_true=np.ones((400, 1)))
    >>> model = BCModel(hidden_sizes=(8,), seed=0).fit(x, np.ones((400, 1)), c)
    >>> out = permutation_importance("BC", model, split, feature_groups(["a", "b", "c"]), repeats=2)
    >>> [(g["name"], round(g["auc"]["mean"][0], 1)) for g in ranked(out)]
    [('a', 0.5), ('c', 0.0), ('b', 0.0)]
"""

from __future__ import annotations

import logging
import re
import time

import numpy as np

from .comments import CommentInputs
from .dataset import Split, missing_indicator
from .evaluation import CI_RMST, _harrell_c_or_nan, model_inputs, occurrence_score
from .metrics import occurrence_auc

log = logging.getLogger("cet_model.importance")

from .choices import CI_TIMING, IMPORTANCE_REPEATS, IMPORTANCE_SCORES  # noqa: E402

COMMENTS = "comments"  # the group of a split's comment embeddings (sequences.npy)
DEFAULT_REPEATS = IMPORTANCE_REPEATS
MIMIC_STATISTIC = re.compile(r"^((?:chart|lab|output)_\d+)_(?:count|mean|min|max|sum)$")


def feature_groups(feature_names, featurization: dict | None = None) -> dict[str, list[int]]:
    """{group name: column indices} of a model's features, in first-column order.

    A categorical column's level columns (``site=a``, ``site=b``: ``featurization["categorical"]``)
    and a feature's missingness indicator (``lactate_missing``: ``featurization["indicators"]``)
    join the column they come from; on MIMIC features (``featurization["source"] == "mimic"``) the
    statistics of one item (``lab_50912_count``, ``_mean``, ``_min``, ``_max``) are one group,
    ``lab_50912``. Every other feature is its own group.

    >>> feature_groups(["age", "site=a", "site=b", "lactate", "lactate_missing"],
    ...                {"categorical": {"site": ["a", "b"]}, "indicators": ["lactate"]})
    {'age': [0], 'site': [1, 2], 'lactate': [3, 4]}
    >>> feature_groups(["lab_50912_count", "lab_50912_mean", "chart_211_count"], {"source": "mimic"})
    {'lab_50912': [0, 1], 'chart_211': [2]}
    """
    featurization = featurization or {}
    source_of = {f"{c}={level}": c for c, levels in (featurization.get("categorical") or {}).items()
                 for level in levels}
    source_of |= {missing_indicator(c): c for c in featurization.get("indicators") or ()}
    mimic = featurization.get("source") == "mimic"
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(feature_names):
        group = source_of.get(name)
        if group is None and mimic:
            m = MIMIC_STATISTIC.match(name)
            group = m.group(1) if m else None
        groups.setdefault(group or name, []).append(i)
    return groups


SCORES = IMPORTANCE_SCORES


def _scores(name: str, model, split: Split, x, rmst_at, wanted) -> dict[str, np.ndarray]:
    """{metric: (M,) per-event score} of the model on the split's rows with input ``x``, for the
    metrics in ``wanted`` the model can give (only what they need is predicted)."""
    timed = hasattr(model, "predict_time")
    want_time = timed and (CI_TIMING in wanted or (name == "ET" and "auc" in wanted))
    want_rmst = timed and rmst_at is not None and CI_RMST in wanted
    if hasattr(model, "predict_all") and (want_time or want_rmst):  # CET: one pass of the time head for all three
        key = tuple(np.ravel(rmst_at).tolist()) if want_rmst else None
        every = model.predict_all(x, quantiles=(0.5,) if want_time else (), rmst_horizons=(key,) if want_rmst else ())
        p, t_hat = every["occurrence"], every["time"].get(0.5)
        rmst = every["rmst"][key] if want_rmst else None
    else:
        p = model.predict_occurrence(x)
        t_hat = model.predict_time(x) if want_time else None
        rmst = model.predict_rmst(x, rmst_at) if want_rmst else None
    m = p.shape[1]
    out = {k: np.full(m, np.nan) for k, ok in (("auc", True), (CI_RMST, rmst is not None),
                                               (CI_TIMING, timed and t_hat is not None)) if k in wanted and ok}
    score = occurrence_score(name, p, t_hat) if "auc" in out else None
    for j in range(m):
        keep = np.ones(len(split), bool) if split.mask is None else split.mask[:, j] == 1
        known = keep & ~np.isnan(split.C[:, j])
        if score is not None and known.any():
            out["auc"][j] = occurrence_auc(split.C[known, j], score[known, j])
        if CI_RMST in out and keep.any():
            out[CI_RMST][j] = _harrell_c_or_nan(split.T[keep, j], rmst[keep, j], split.S[keep, j])
        seen = keep & (split.S[:, j] == 1)
        if CI_TIMING in out and seen.sum() >= 2:
            out[CI_TIMING][j] = _harrell_c_or_nan(split.T[seen, j], t_hat[seen, j], split.S[seen, j])
    return out


def permutation_importance(name: str, model, split: Split, groups: dict[str, list[int]], *,
                           repeats: int = DEFAULT_REPEATS, seed: int = 0, rmst_at=None, comments: bool = True,
                           scores=SCORES, max_rows: int | None = None, on_group=None) -> dict:
    """Permutation importance of each group of ``model``'s input columns on ``split``, per event.

    ``name``: the model's preset name (``"ET"`` scores AUC by its predicted time). ``groups``:
    {name: column indices of ``split.X``}, e.g. ``feature_groups(...)``. ``rmst_at``: (M,) the
    horizons of the restricted means (``evaluation.rmst_horizons(train)``); without it no C (RMST).
    With ``comments`` and a split that has comment embeddings, they are one more group,
    ``COMMENTS``. ``scores``: which of ``SCORES`` to compute (each costs a prediction per shuffle).
    ``max_rows``: a larger split is cut to that many rows drawn at random (seeded; the cost grows
    with the rows). ``on_group(done, total, group)``: called after each group (progress).

    Returns {"rows" (used), "of_rows" (the split's), "repeats", "seed", "observed": [M counts of
    rows with the event observed (s = 1)], "metrics": the scores computed, in ``SCORES`` order
    ("auc" only where some row has the true occurrence; "ci_rmst" for time models with
    ``rmst_at``; "ci_timing" for time models), "baseline": {metric: [M scores on the rows as they
    are]}, "groups": [{"name", "columns": [indices] (None for the comments), metric: {"mean": [M],
    "sd": [M]}}, ...] in ``groups`` order}, where each value is the baseline minus the score with
    the group shuffled (larger: the model relies on the group more; near 0 or below: not at all,
    within the shuffles' noise). NaN where a score is undefined (an event without a case on these
    rows).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    unknown = [k for k in scores if k not in SCORES]
    if unknown or not scores:
        raise ValueError(f"scores must be some of {', '.join(SCORES)}, got {list(scores)}")
    if max_rows is not None and max_rows < 2:
        raise ValueError(f"max_rows must be at least 2, got {max_rows}")
    n_all, d = split.X.shape
    bad = {g: cols for g, cols in groups.items() if not cols or min(cols) < 0 or max(cols) >= d}
    if bad:
        raise ValueError(f"groups {sorted(bad)} name no column or columns outside the {d} features")
    rng = np.random.default_rng(seed)
    if max_rows is not None and n_all > max_rows:
        split = split.take(np.sort(rng.choice(n_all, max_rows, replace=False)))
    n = len(split)
    x = model_inputs(split)
    wanted = set(scores)
    baseline = _scores(name, model, split, x, rmst_at, wanted)
    metrics = [k for k in SCORES if k in baseline and not np.isnan(baseline[k]).all()]  # e.g. AUC without the truth
    if not metrics:
        seen = (split.S if split.mask is None else split.S * split.mask).sum(axis=0)
        raise ValueError(f"nothing to score: {', '.join(scores)} {'is' if len(scores) == 1 else 'are'} undefined "
                         "on these rows (AUC needs the true occurrence, C (RMST) a time model, horizons and the "
                         "event observed in some rows, C (timing) a time model and two rows with the event "
                         f"observed); rows of the {n} with the event observed, per event: "
                         f"{', '.join(str(int(k)) for k in seen)}")
    todo = [(g, list(cols)) for g, cols in groups.items()]
    if comments and split.sequences is not None:
        todo.append((COMMENTS, None))
    keep = np.ones(split.S.shape, bool) if split.mask is None else split.mask == 1
    out = {"rows": n, "of_rows": n_all, "repeats": repeats, "seed": seed,
           "observed": ((split.S == 1) & keep).sum(axis=0).tolist(), "metrics": metrics,
           "baseline": {k: baseline[k].tolist() for k in metrics}, "groups": []}
    t0 = time.perf_counter()
    for done, (group, cols) in enumerate(todo, start=1):
        drops = {k: [] for k in metrics}
        for _ in range(repeats):
            perm = rng.permutation(n)
            if cols is None:  # the comment embeddings, shuffled between rows (read from disk by rows)
                shuffled = CommentInputs(split.X, split.take(perm).sequences)
            else:
                xs = split.X.copy()
                xs[:, cols] = split.X[perm][:, cols]
                shuffled = xs if split.sequences is None else CommentInputs(xs, split.sequences)
            got = _scores(name, model, split, shuffled, rmst_at, set(metrics))
            for k in metrics:
                drops[k].append(baseline[k] - got[k])
        row = {"name": group, "columns": cols}
        for k in metrics:
            a = np.stack(drops[k])  # (repeats, M)
            row[k] = {"mean": a.mean(axis=0).tolist(),
                      "sd": (a.std(axis=0, ddof=1) if repeats > 1 else np.zeros(a.shape[1])).tolist()}
        out["groups"].append(row)
        if on_group is not None:
            on_group(done, len(todo), group)
    log.debug("permutation importance: %d groups x %d shuffles of %d rows in %.1fs", len(todo), repeats, n,
              time.perf_counter() - t0)
    return out


def ranked(result: dict, metric: str | None = None) -> list[dict]:
    """``result["groups"]`` ordered by the mean over events of ``metric``'s importance, largest
    first (``metric``: the first of ``result["metrics"]`` by default: AUC where the truth is known).
    A group whose importance is undefined on every event goes last."""
    metric = metric or result["metrics"][0]

    def key(g):
        v = np.asarray(g[metric]["mean"], dtype=np.float64)
        return -np.nanmean(v) if np.isfinite(v).any() else np.inf

    return sorted(result["groups"], key=key)
