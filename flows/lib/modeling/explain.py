"""Which inputs a registered model version relies on: permutation importance on its own data.

``explain`` loads a version's model and the dataset it was trained on (refused if the folder
changed since: its rows could then include the model's training rows), groups the features as
they were built (``cet_model.importance.feature_groups``) and shuffles each group over the rows
of the validation split (default). ``table_lines`` is what the CLI prints, ``write_csv`` the
file it writes: one row per group, event and score. Aggregates only: no row of the data.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
import polars as pl

from cet_model.atomic import write_csv as write_safe_csv
from cet_model.dataset import load_dataset
from cet_model.evaluation import CI_RMST, rmst_horizons
from cet_model.importance import (
    CI_TIMING,
    COMMENTS,
    DEFAULT_REPEATS,
    SCORES,
    feature_groups,
    permutation_importance,
    ranked,
)
from cet_model.models import load_model
from cet_model.summary import difference_text
from flows.lib.choices import EXPLAIN_SPLITS
from flows.lib.infra import stage_cache
from flows.lib.infra.cli import time_left
from flows.lib.modeling import render
from flows.lib.modeling.version_facts import item_labels

log = logging.getLogger("flows.explain")
SPLITS = EXPLAIN_SPLITS
METRIC_TEXT = {"auc": "AUC", CI_RMST: "C (RMST)", CI_TIMING: "C (timing)"}
METRIC_MEANS = {  # what each score judges, for the printed header
    "auc": "whether the event happens (against the true occurrence)",
    CI_RMST: "who has the event later or never",
    CI_TIMING: "when, among the rows with the event observed (the time given that it happens)"}
NEAR_CHANCE = 0.55  # a score as it is at or below this (0.5: chance): its importances say little
EVENT_COLUMNS = 4  # up to this many events, the table has a column per event; beyond, the mean and the largest


def explain(version_dir, *, model: str = "CET", split: str = "val", repeats: int = DEFAULT_REPEATS, seed: int = 0,
            device: str = "cpu", scores=SCORES, max_rows: int | None = None, data_dir=None) -> dict:
    """``permutation_importance`` of the version's ``model`` on ``split`` of the dataset it was
    trained on (at most ``max_rows`` of its rows, drawn at random), with the version, model, split,
    dataset path and event and feature names added. ``data_dir``: the dataset folder where it is
    now, if it moved (it must hold the same files). Errors (ValueError, FileNotFoundError) name
    the version and what is wrong."""
    version_dir = Path(version_dir)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if not (version_dir / model / "config.json").is_file():
        have = sorted(p.name for p in version_dir.iterdir() if (p / "config.json").is_file())
        raise ValueError(f"{version_dir}: no {model} model in this version (it has {', '.join(have) or 'none'})")
    data = json.loads((version_dir / "data.json").read_text())
    dataset_dir = Path(data_dir or data["path"])
    if not dataset_dir.is_dir():
        raise FileNotFoundError(f"{dataset_dir}: the dataset {version_dir.name} was trained on is not there"
                                + (" any more; if it moved, give its folder with --data" if data_dir is None else ""))
    if stage_cache.fingerprint(dataset_dir) != data.get("fingerprint"):
        raise ValueError(f"{dataset_dir} is not the data {version_dir.name} was trained on"
                         + (" (it changed since)" if data_dir is None else "")
                         + f": its {split} rows may include rows the model was trained on. Explain a version trained "
                         "on the folder as it is now (python -m flows.train evaluate), or restore the data")
    ds = load_dataset(dataset_dir)  # the same files (fingerprint): the same features and events
    names = data["feature_names"]
    fitted = load_model(version_dir / model, device=device)
    groups = feature_groups(names, data.get("featurization"))
    rmst_at = rmst_horizons(ds.train) if hasattr(fitted, "predict_rmst") else None
    rows = ds.splits[split]
    total = len(groups) + (rows.sequences is not None)
    used = len(rows) if max_rows is None else min(max_rows, len(rows))
    log.info("%s %s: shuffling %d input groups %d times each over %s %s rows", version_dir, model, total,
             repeats, f"{used} of the {len(rows)}" if used < len(rows) else f"the {used}", split)
    last, started = [0.0], time.perf_counter()

    def progress(done, of, group):
        elapsed = time.perf_counter() - started
        if line_due(done, of, last[0], elapsed):
            last[0] = done / of
            log.info("%s %s: %s", version_dir.name, model,
                     time_left(done, of, elapsed, elapsed / done * (of - done), "groups"))

    result = permutation_importance(model, fitted, rows, groups, repeats=repeats, seed=seed, rmst_at=rmst_at,
                                    scores=scores, max_rows=max_rows, on_group=progress)
    labels = item_labels(ds.manifest)
    for g in result["groups"]:
        g["features"] = [names[i] for i in g["columns"]] if g["columns"] is not None else [COMMENTS]
        g["label"] = labels.get(g["name"])
    return result | {"version": version_dir.name, "model": model, "split": split, "dataset": str(dataset_dir),
                     "events": data["event_names"]}


QUIET_SECONDS = 5.0  # work done within this time gets its last progress line only


def line_due(done: int, of: int, last_share: float, elapsed: float) -> bool:
    """Whether a progress line is due after ``done`` of ``of`` groups, ``elapsed`` seconds in, the last
    line at ``last_share``: the last group always; before it, every tenth of the work once the work
    has taken ``QUIET_SECONDS`` (a small cohort's importance takes a second: one line, not ten).

    >>> line_due(1, 8, 0.0, 0.05), line_due(8, 8, 0.0, 0.4)
    (False, True)
    >>> line_due(1, 8, 0.0, 6.0), line_due(2, 8, 0.125, 12.0), line_due(2, 30, 0.0, 6.0)
    (True, True, False)
    """
    return done >= of or (done / of - last_share >= 0.1 and elapsed >= QUIET_SECONDS)


def _signed(v: float) -> str:
    """+0.012, -0.004; a value that rounds to zero is +0.000, as every difference the CLI prints."""
    return difference_text({"estimate": v})


def _cell(mean: float, sd: float) -> str:
    return "-" if not np.isfinite(mean) else f"{_signed(mean)} ± {sd:.3f}"


def table_lines(result: dict, top: int = 20, metric: str | None = None) -> list[list[str]]:
    """The CLI's table: the ``top`` groups by mean importance over events of ``metric`` (default
    the first score: AUC where the truth is known, else C (RMST)), with a column per event up to
    ``EVENT_COLUMNS`` events, else the mean and the event where the group matters most."""
    metric = metric or result["metrics"][0]
    events = result["events"]
    per_event = len(events) <= EVENT_COLUMNS
    header = ["input", "columns"] + ([f"{e}" for e in events] if per_event else ["mean over events", "most (event)"])
    table = [header]
    for g in ranked(result, metric)[:top]:
        mean = np.asarray(g[metric]["mean"], dtype=np.float64)
        sd = np.asarray(g[metric]["sd"], dtype=np.float64)
        label = g.get("label")
        cells = [g["name"] + (f" ({label[:28]})" if label else ""),
                 str(len(g["features"])) if g["columns"] is not None else "embeddings"]
        if per_event:
            cells += [_cell(m, s) for m, s in zip(mean, sd, strict=True)]
        else:
            finite = np.isfinite(mean)
            j = int(np.nanargmax(np.where(finite, mean, -np.inf))) if finite.any() else None
            cells += [_signed(np.nanmean(mean)) if finite.any() else "-",
                      "-" if j is None else f"{_signed(mean[j])} ({events[j]})"]
        table.append(cells)
    return table


def report_lines(result: dict, top: int = 20, metric: str | None = None) -> list[str]:
    """What ``python -m flows.train explain`` prints: what was measured, the scores as they are,
    ``table_lines`` as text, and what was left out of it."""
    metric = metric or result["metrics"][0]
    name = METRIC_TEXT[metric]
    rows = (f"{result['rows']} of the {result['of_rows']} {result['split']} rows (drawn at random)"
            if result["rows"] < result["of_rows"] else f"{result['rows']} {result['split']} rows")
    lines = [
        f"{result['version']} {result['model']}: {name}, {METRIC_MEANS[metric]}, on the {rows}, minus its {name} "
        "with one input shuffled between the rows (mean ± sd of "
        f"{result['repeats']} shuffles; larger: relied on more; about 0: not used, or what it says is also in "
        "other inputs)"
    ]
    base = np.asarray(result["baseline"][metric], dtype=np.float64)
    lines.append(
        f"  {name} as it is: "
        + ", ".join(
            (f"{e} {v:.3f}" if np.isfinite(v) else f"{e} -") + f" ({k} observed)"
            for e, v, k in zip(result["events"], base, result["observed"], strict=True)
        )
    )
    weak = [
        f"{e} ({v:.3f})" for e, v in zip(result["events"], base, strict=True) if np.isfinite(v) and v <= NEAR_CHANCE
    ]
    if weak:
        lines.append(f"  near chance as it is, so its importances say little: {', '.join(weak)}")
    lines += render.text(table_lines(result, top, metric))
    lone = dominant_input(result, metric)
    if lone:
        lines.append(
            f"  {lone} alone carries most of it: check that it is known when follow-up starts (a value "
            "recorded later can give the outcome away)"
        )
    if top < len(result["groups"]):
        lines.append(f"  ({top} of {len(result['groups'])} inputs shown; --top, or --out for all)")
    others = [m for m in result["metrics"] if m != metric]
    if others:
        lines.append(f"  also scored: {', '.join(f'{METRIC_TEXT[m]} (--score {m})' for m in others)}; all in --out")
    return lines


DOMINANT_DROP, DOMINANT_RATIO = 0.1, 5.0  # an input this important, this many times the next: said


def dominant_input(result: dict, metric: str) -> str | None:
    """The input whose mean importance over events is at least ``DOMINANT_DROP`` and
    ``DOMINANT_RATIO`` times the next input's, or None: one column doing nearly all the work is
    how a value recorded after the start of follow-up (a leak of the outcome) shows. The comment
    embeddings (a user's own text, known when follow-up starts) are not judged.

    >>> g = lambda name, v: {"name": name, "columns": [0], "auc": {"mean": [v], "sd": [0.0]}}
    >>> dominant_input({"metrics": ["auc"], "groups": [g("a", 0.02), g("status_2m", 0.24)]}, "auc")
    'status_2m'
    >>> dominant_input({"metrics": ["auc"], "groups": [g("a", 0.08), g("b", 0.24)]}, "auc") is None
    True
    """
    order = [g for g in ranked(result, metric) if g["columns"] is not None]  # the comment embeddings: not a column
    if len(order) < 2:
        return None
    means = [float(np.nanmean(g[metric]["mean"])) if np.isfinite(g[metric]["mean"]).any() else 0.0 for g in order[:2]]
    return order[0]["name"] if means[0] >= DOMINANT_DROP and means[0] >= DOMINANT_RATIO * max(means[1], 0.0) else None


def write_csv(result: dict, out) -> Path:
    """One row per group, event and score: ``input``, ``label`` (a MIMIC item's), ``features`` (space-separated),
    ``event``, ``score`` (auc, ci_rmst, ci_timing), ``baseline``, ``importance`` (mean drop), ``sd``, ``repeats``,
    ``split``, ``rows``, ``observed`` (rows with the event observed); written to a temporary name, then renamed."""
    out = Path(out)
    records = []
    for g in result["groups"]:
        for metric in result["metrics"]:
            for j, e in enumerate(result["events"]):
                records.append(
                    {
                        "input": g["name"],
                        "label": g.get("label"),
                        "features": " ".join(g["features"]),
                        "event": e,
                        "score": metric,
                        "baseline": result["baseline"][metric][j],
                        "importance": g[metric]["mean"][j],
                        "sd": g[metric]["sd"][j],
                        "repeats": result["repeats"],
                        "split": result["split"],
                        "rows": result["rows"],
                        "observed": result["observed"][j],
                    }
                )
    frame = pl.DataFrame(records).with_columns(pl.col("baseline", "importance", "sd").fill_nan(None))
    return write_safe_csv(frame, out)  # text cells a spreadsheet would run as formulas are escaped


CSV_COLUMNS = (
    "input",
    "label",
    "features",
    "event",
    "score",
    "baseline",
    "importance",
    "sd",
    "repeats",
    "split",
    "rows",
    "observed",
)


def written_csv(path) -> bool:
    """Whether ``path`` is an importance CSV this command wrote (its header is ``CSV_COLUMNS``)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.readline().rstrip("\r\n") == ",".join(CSV_COLUMNS)
    except (OSError, UnicodeDecodeError):
        return False
