"""How the registered CET model does within subgroups of the test split (``flows.train evaluate
--subgroups sex,age``): the check a clinical reader asks for before trusting a model, whether it
ranks and calibrates as well for women as for men, for the old as for the young.

A subgroup column is a categorical column of a table build (``--categorical``; one group per
training level, and one for rows with none of them: missing or unseen) or a feature: one group
per value when the training rows have at most ``MAX_VALUES`` distinct values, else two groups
split at the training median. Per group: rows, observed events, and CET's test metrics averaged
over events as ``train-evaluate`` reports them (Harrell's C; AUC and ECE where the true
occurrence is known; the predicted risk by each event's median training follow-up against the
Kaplan-Meier risk, and its cumulative/dynamic AUC there, ``calibration_by_horizon``), with a
bootstrap interval for C and AUC (a group of a few dozen rows is noisy: the interval says how
much). A group with fewer than ``SUBGROUPS_MIN_ROWS`` test rows is listed with its size only (no
metric, no count of events). Counts and metrics only, never a row; ``version_text.subgroup_lines``
prints them.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import numpy as np

from cet_model.atomic import write_text
from cet_model.bootstrap import bootstrap_intervals
from cet_model.dataset import Dataset, load_dataset
from cet_model.evaluation import evaluate, model_inputs, ranking_inputs, rmst_horizons
from cet_model.models import load_model
from flows.lib.modeling.version_facts import calibration_by_horizon, version_horizons
from flows.lib.modeling.version_text import SUBGROUPS_FILE, SUBGROUPS_MIN_ROWS

log = logging.getLogger("flows.train")

MAX_VALUES = 10  # a feature with at most this many distinct training values: one group per value


def check_columns(manifest: dict, columns) -> list[str]:
    """The subgroup columns as given, each a categorical column of the build or a feature of the
    dataset's ``manifest``; otherwise a ValueError naming it and what there is.

    >>> check_columns({"feature_names": ["age", "site=a"], "featurization": {"categorical": {"site": ["a"]}}},
    ...               ["site", "sex"])
    Traceback (most recent call last):
    ...
    ValueError: subgroups: ['sex'] not among the dataset's categorical columns or features: ['site', 'age']
    """
    categorical = (manifest.get("featurization") or {}).get("categorical") or {}
    features = manifest["feature_names"]
    columns = [str(c) for c in columns]
    unknown = [c for c in columns if c not in categorical and c not in features]
    if unknown:
        names = [*categorical, *(f for f in features if not any(f == f"{c}={lv}" for c, levels in
                                                                  categorical.items() for lv in levels))]
        raise ValueError(f"subgroups: {unknown} not among the dataset's categorical columns or features: "
                         f"{names[:30]}{' ...' if len(names) > 30 else ''}")
    return columns


def check_dataset_columns(dataset_dir, columns) -> list[str]:
    """``check_columns`` against a dataset folder's manifest (before anything trains)."""
    return check_columns(json.loads((Path(dataset_dir) / "manifest.json").read_text()), columns)


def groups_of(ds: Dataset, column: str, split_name: str = "test") -> dict[str, np.ndarray]:
    """{group label: boolean mask over ``split_name``'s rows} for one subgroup column.

    >>> import polars as pl, tempfile
    >>> from flows.lib.ingest import write_follow_up_dataset
    >>> t = pl.DataFrame({"age": [float(a) for a in range(40, 80)], "site": ["a", "b"] * 20,
    ...                   "days": [5.0] * 40, "died": [1, 0] * 20})
    >>> ds = load_dataset(write_follow_up_dataset(tempfile.mkdtemp() + "/d", t, ["age", "site"],
    ...     {"death": ("days", "died")}, name="d", time_unit="days", categorical=["site"]))
    >>> {k: int(v.sum()) for k, v in groups_of(ds, "site").items()}
    {'site=a': 1, 'site=b': 7, 'site missing or unseen': 0}
    >>> list(groups_of(ds, "age"))
    ['age < 60.5', 'age >= 60.5']
    """
    split = getattr(ds, split_name)
    categorical = (ds.manifest.get("featurization") or {}).get("categorical") or {}
    if column in categorical:
        level_columns = [f"{column}={level}" for level in categorical[column]]
        onehot = split.X[:, [ds.feature_names.index(c) for c in level_columns]] > 0.5
        out = {c: onehot[:, k] for k, c in enumerate(level_columns)}
        out[f"{column} missing or unseen"] = ~onehot.any(1)
        return out
    j = ds.feature_names.index(column)
    train_values, values = ds.train.X[:, j], split.X[:, j]
    distinct = np.unique(train_values)
    if len(distinct) <= MAX_VALUES:
        out = {f"{column} = {v:g}": values == v for v in distinct}
        other = ~np.isin(values, distinct)
        if other.any():
            out[f"{column}: a value training rows lack"] = other
        return out
    median = float(np.median(train_values))
    return {f"{column} < {median:g}": values < median, f"{column} >= {median:g}": values >= median}


def subgroup_rows(version_dir, dataset_dir, columns, split_name: str = "test") -> list[dict]:
    """Per subgroup of ``columns``: column, group, rows, events (observed, summed over events) and
    CET's metrics averaged over events (``ci``, ``ci_rmst``, ``auc``, ``ece``, ``risk_vs_km``,
    ``auc_at_h``), with ``ci_interval``, ``ci_rmst_interval``, ``auc_interval`` and ``auc_at_h_interval``: [low, high],
    the 95 % bootstrap interval over the group's
    rows (``bootstrap_intervals``, the version's training seed); events, metrics and intervals
    None where undefined or the group has fewer than ``SUBGROUPS_MIN_ROWS`` rows."""
    ds = load_dataset(dataset_dir)
    columns = check_columns(ds.manifest, columns)
    model = load_model(Path(version_dir) / "CET", device="cpu")
    seed = json.loads((Path(version_dir) / "params.json").read_text()).get("seed", 0)
    split = getattr(ds, split_name)
    horizons = version_horizons(version_dir, ds.train, ds.event_names)  # those the version's calibration used
    by_event_horizon = [horizons.get(e, np.nan) for e in ds.event_names]
    rmst_at = rmst_horizons(ds.train)  # as train-evaluate scored C (RMST)
    rows = []
    for column in columns:
        for label, member in groups_of(ds, column, split_name).items():
            index = np.flatnonzero(member)
            row = {"column": column, "group": label, "rows": int(index.size), "events": None,
                   "ci": None, "ci_rmst": None, "auc": None, "ece": None, "risk_vs_km": None, "auc_at_h": None,
                   "ci_interval": None, "ci_rmst_interval": None, "auc_interval": None, "auc_at_h_interval": None}
            if index.size >= SUBGROUPS_MIN_ROWS:  # a smaller group: its size only (no small counts of events either)
                seen = split.S[index] if split.mask is None else split.S[index] * split.mask[index]
                row["events"] = int(np.nansum(seen))
                sub = split.take(index)
                x = model_inputs(sub)
                with warnings.catch_warnings():  # a metric undefined in a small group is None in the row
                    warnings.simplefilter("ignore")
                    scores = evaluate("CET", model, sub, ds.event_names, x, warn_no_truth=False, rmst_at=rmst_at)
                    calibrated = calibration_by_horizon(model, sub, x, ds.event_names, horizons, train=ds.train)
                for key in ("ci", "ci_rmst", "auc", "ece"):
                    row[key] = _mean([r.get(key) for r in scores.values()])
                row["risk_vs_km"] = _mean([r["ece"] for r in calibrated.values()])
                row["auc_at_h"] = _mean([r["auc"] for r in calibrated.values()])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    bounds = bootstrap_intervals(sub, {"CET": ranking_inputs("CET", model, x, by_event_horizon,
                                                                             rmst_at)},
                                                 seed=seed, train=ds.train, horizons=by_event_horizon)["metrics"]
                for key, name in (("ci", "ci"), ("ci_rmst", "ci_rmst"), ("auc", "auc"), ("auc_h", "auc_at_h")):
                    v = (bounds.get(key) or {}).get("CET")
                    if v is not None and v["low"] is not None and np.isfinite(v["low"]):
                        row[f"{name}_interval"] = [v["low"], v["high"]]
            rows.append(row)
    return rows


def write_subgroups(version_dir, dataset_dir, columns) -> Path:
    """``subgroup_rows`` on the test split, written to ``<version>/subgroups.json`` (temporary
    name, then renamed); returns its path."""
    rows = subgroup_rows(version_dir, dataset_dir, columns)
    out = write_text(Path(version_dir) / SUBGROUPS_FILE,
                     json.dumps({"split": "test", "model": "CET", "min_rows": SUBGROUPS_MIN_ROWS, "rows": rows},
                                indent=2))
    small = [f"{r['group']} ({r['rows']})" for r in rows if r["rows"] < SUBGROUPS_MIN_ROWS]
    if small:
        log.info("subgroups with fewer than %d test rows, sizes only: %s", SUBGROUPS_MIN_ROWS, ", ".join(small))
    return out


def _mean(values) -> float | None:
    finite = [float(v) for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(finite)) if finite else None
