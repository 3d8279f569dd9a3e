"""Score a features parquet with a registered CET model.

Output: one row per input row, ``id``, then per event e ``p_e`` (P(e ever happens)) and
``t_qNN_e`` (the NN% quantile of the time to e given that it happens, in the dataset's
time unit). Written to a temporary name, then renamed.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import polars as pl

from cet_model.atomic import claim_files, temporary_name, write_csv, writing
from cet_model.choices import BEYOND_SHARE, FOLLOWED_ROWS
from cet_model.comments import CommentInputs, NpyRows, RowView
from cet_model.dataset import COMMA_HINT, comma_numbers, first_non_number, not_text, row_at
from cet_model.evaluation import occurrence_beyond_follow_up
from cet_model.models import load_model
from cet_model.rows import joined
from flows.lib.choices import RMST_NEEDS_HORIZONS
from flows.lib.infra.keys import key_matches
from flows.lib.ingest import encode_levels, missing_indicator
from flows.lib.modeling.scores_file import SCORES_MARK
from flows.lib.reddit.cohort import PSEUDONYM_KEY
from flows.lib.table_files import first_data_line, read_table, table_columns

log = logging.getLogger("flows.predict")
DEFAULT_QUANTILES = (0.1, 0.5, 0.9)


def columns_needed(columns, names: list[str], record: dict | None = None, id_column: str | None = None,
                   row_numbers: bool = False) -> list[str]:
    """What a file with ``columns`` lacks to be scored by a model with features ``names`` (the
    checks ``read_features`` makes after encoding, from the header alone: a categorical feature
    may come raw or encoded, an indicator is computed from its raw column). ``id`` may go by the
    training table's id column name, ``id_column``; with ``row_numbers`` (the training table had
    no ids) it may be left out.

    >>> columns_needed(["visit", "age", "site"], ["age", "site=a", "site=b"], {"categorical": {"site": ["a", "b"]}},
    ...                id_column="visit")
    []
    >>> columns_needed(["age"], ["age", "prio"], id_column="visit")
    ["id (or 'visit', the training table's id column)", 'prio']

    A categorical feature is named once, raw (its encoded columns are the other way to give it):

    >>> columns_needed(["id", "age"], ["age", "site=a", "site=b"], {"categorical": {"site": ["a", "b"]}})
    ['site (categorical; or its columns site=a, site=b)']
    """
    have, record = set(columns), record or {}
    categorical = record.get("categorical") or {}
    raw = {f"{c}={level}": c for c, levels in categorical.items() for level in levels}
    raw |= {missing_indicator(c): c for c in record.get("indicators") or ()}
    missing = [] if row_numbers or "id" in have or (id_column is not None and id_column in have) else [
        "id" + (f" (or {id_column!r}, the training table's id column)" if id_column not in (None, "id") else "")]
    for c in names:
        if c in have or raw.get(c) in have:
            continue
        if c in raw and raw[c] in categorical:
            c = f"{raw[c]} (categorical; or its columns {', '.join(f'{raw[c]}={lv}' for lv in categorical[raw[c]])})"
        if c not in missing:
            missing.append(c)
    return missing


def missing_for_version(path, version_dir) -> list[str]:
    """``columns_needed`` for the features file ``path`` and the model in ``version_dir``, from the
    file's header alone (a CLI checks this before any flow starts); errors name the file."""
    columns = table_columns(path)
    data = json.loads((Path(version_dir) / "data.json").read_text())
    record = data.get("featurization") or {}
    return columns_needed(columns, data["feature_names"], record if record.get("source") == "table" else None,
                          data.get("id_column"), bool(data.get("ids_are_row_numbers")))


def check_for_version(path, version_dir) -> None:
    """Read and check the features file ``path`` as scoring with the model in ``version_dir``
    would (values, ids), writing nothing: the command line does so before any flow starts, so a
    bad value is a usage error naming the file, column and row (and a CSV's line). What the read
    counts (gaps filled, unseen levels) is logged once, by the scoring itself."""
    data = json.loads((Path(version_dir) / "data.json").read_text())
    record = data.get("featurization") or {}
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        read_features(Path(path), data["feature_names"], record if record.get("source") == "table" else None,
                      data.get("id_column"), bool(data.get("ids_are_row_numbers")))
    finally:
        log.setLevel(level)


def read_features(path: Path, names: list[str], record: dict | None = None,
                  id_column: str | None = None, row_numbers: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """ids and the feature matrix in the model's column order, from a parquet or a ``.csv`` file;
    errors name file, column, row. The ids are the column ``id_column`` (the training table's own
    name for its ids) when the file has it, otherwise the column ``id``. ``record``: the ``featurization`` of a
    dataset built from a table (``flows.lib.ingest.write_follow_up_dataset``): its categorical columns, given raw, are
    encoded with the training levels (a missing or unseen level is all zeros, counted in the log),
    with ``impute="median"`` its medians fill missing values (null or NaN), counted, and with
    ``"median+indicator"`` the recorded columns' indicators ``<column>_missing`` are computed from
    the raw values first; without imputation a missing value is an error. With ``row_numbers`` (the
    training table had no id column) a file without ids is numbered 0, 1, ... in its own order, as
    the training rows were."""
    df = _prepared(read_table(path), path, record or {})
    missing = columns_needed(df.columns, names, id_column=id_column, row_numbers=row_numbers)
    if missing:
        raise ValueError(f"{path}: missing columns {missing[:10]}{' ...' if len(missing) > 10 else ''} "
                         f"(the model needs id and {len(names)} features)")
    id_name = id_column if id_column is not None and id_column in df.columns else "id"
    line = first_data_line(path)  # a CSV's errors also name the line

    def at(row: int) -> str:
        return row_at(row, line)
    medians = (record or {}).get("medians") if (record or {}).get("impute") else None
    if id_name not in df.columns:  # row_numbers: the training table was numbered the same way
        log.info("%s: no id column: the rows are numbered 0 to %d in the file's order, as the training table's "
                 "rows were", path, df.height - 1)
        return np.arange(df.height), _feature_matrix(df, names, medians, path, at)
    _check_ids(df[id_name], path, at)
    return df[id_name].to_numpy(), _feature_matrix(df, names, medians, path, at)


def _prepared(df: pl.DataFrame, path, record: dict) -> pl.DataFrame:
    """``df`` with its raw categorical columns encoded with the training levels and the recorded
    missingness indicators computed from the raw values (``record``: the dataset's featurization)."""
    for c, levels in (record.get("categorical") or {}).items():
        encoded = [f"{c}={level}" for level in levels]
        if c not in df.columns and all(e in df.columns for e in encoded):
            continue  # already encoded (e.g. the dataset's own features.parquet)
        if c not in df.columns:
            raise ValueError(f"{path}: missing column {c!r} (a categorical feature: its levels "
                             f"{levels[:10]}{' ...' if len(levels) > 10 else ''})")
        columns, missing, unseen = encode_levels(df[c], c, levels)
        df = df.with_columns(columns)
        if missing.any() or unseen.any():  # a level training never saw is drift: the rows lose that feature
            n_missing, n_unseen = int(missing.sum()), int(unseen.sum())
            log.log(logging.WARNING if n_unseen else logging.INFO,
                    "%s: column %r: %d row%s missing and %d row%s at a level not seen in training, encoded as no level",
                    path, c, n_missing, "" if n_missing == 1 else "s", n_unseen, "" if n_unseen == 1 else "s")
    for c in record.get("indicators") or ():  # 1 where the raw value is missing, before it is filled
        if missing_indicator(c) not in df.columns and c in df.columns:
            gap = df[c].is_null()
            if df[c].dtype.is_float():
                gap = gap | df[c].is_nan().fill_null(True)
            df = df.with_columns(gap.cast(pl.Float64).alias(missing_indicator(c)))
    return df


def _check_ids(ids: pl.Series, path, at) -> None:
    """Every row has an id of its own: the scores are written by id."""
    if not_text(ids.dtype) and not ids.dtype.is_temporal():
        raise ValueError(f"{path}: column {ids.name!r} has type {ids.dtype}: ids are numbers or text")
    if ids.is_null().any():
        raise ValueError(f"{path}: column {ids.name!r} {at(int(ids.is_null().arg_max()))} is missing; every row "
                         "needs an id (the scores are written by id)")
    repeated = ids.is_duplicated()
    if repeated.any():
        first = int(repeated.arg_max())
        again = int(np.flatnonzero((ids == ids[first]).to_numpy())[1])
        raise ValueError(f"{path}: column {ids.name!r} {at(again)} repeats row {first}'s id ({int(repeated.sum())} "
                         "rows share an id): the scores are written by id, so each row needs its "
                         "own (e.g. a visit or row number)")


def _feature_matrix(df: pl.DataFrame, names: list[str], medians: dict | None, path, at) -> np.ndarray:
    """The features in the model's order as floats, gaps filled with the training ``medians``
    (counted in the log) when the dataset was built with imputation; a gap left is an error."""
    x, filled = np.empty((df.height, len(names)), dtype=np.float64), {}
    for j, c in enumerate(names):
        col = df[c].cast(pl.Int8) if df[c].dtype == pl.Boolean else df[c]
        if not col.dtype.is_numeric():
            hint = f": {COMMA_HINT}" if comma_numbers(col) else ""
            raise ValueError(f"{path}: column {c!r} has type {col.dtype}, expected numbers{first_non_number(col, at)}"
                             f"{hint}")
        v = col.cast(pl.Float64).to_numpy()
        if medians is not None:
            gap = np.isnan(v)  # null or NaN (polars gives NaN for a null here)
            if gap.any():
                v[gap] = medians[c]
                filled[c] = int(gap.sum())
        bad = ~np.isfinite(v)
        if bad.any():
            hint = "" if medians is not None else (" (this model's dataset was built without imputation: fill "
                                                   "missing values before scoring)")
            raise ValueError(f"{path}: column {c!r} {at(int(np.argmax(bad)))}: missing or non-finite value "
                             f"({int(bad.sum())} such rows){hint}")
        x[:, j] = v
    if filled:
        log.info("%s: filled %d missing values with the training medians (%s)", path, sum(filled.values()),
                 ", ".join(f"{c} {n}" for c, n in filled.items()))
    return x


def check_quantiles(quantiles) -> list[float]:
    qs = sorted({float(q) for q in quantiles})
    if not qs or not all(0 < q < 1 for q in qs):
        raise ValueError(f"quantiles must lie in (0, 1), got {list(quantiles)}")
    return qs


def _version(version_dir, quantiles) -> tuple[Path, dict, list[float]]:
    """The version folder, its data.json record and the checked quantiles."""
    version_dir = Path(version_dir)
    qs = check_quantiles(quantiles)
    return version_dir, json.loads((version_dir / "data.json").read_text()), qs


def score(features, version_dir, out, quantiles=DEFAULT_QUANTILES, sequences=None, device: str = "auto",
          horizons=(), rmst: bool = False) -> Path:
    """Score a features parquet or ``.csv`` (``id`` and the model's feature columns, already
    prepared as in the training dataset) with the model in ``version_dir``; write ``out``."""
    features = Path(features)
    version_dir, data, qs = _version(version_dir, quantiles)
    record = data.get("featurization") or {}
    ids, x = read_features(features, data["feature_names"], record if record.get("source") == "table" else None,
                           data.get("id_column"), bool(data.get("ids_are_row_numbers")))
    if data.get("sequences"):
        if sequences is None:
            raise ValueError(f"{version_dir}: this model reads comment sequences; pass the sequences .npy "
                             f"({data['sequences']['length']} x {data['sequences']['dim']} per row)")
        seq = NpyRows(sequences)  # read by rows while scoring, never whole
        want = (len(ids), data["sequences"]["length"], data["sequences"]["dim"])
        if seq.shape != want:
            raise ValueError(f"{sequences}: shape {seq.shape}, expected {want} (rows of {features})")
        x = CommentInputs(x, seq)
    return write_scores(ids, x, version_dir, data, out, qs, device, source=features.name, horizons=horizons,
                        rmst=rmst)


def score_mimic_raw(mimic_dir, version_dir, out, work_dir, quantiles=DEFAULT_QUANTILES,
                    device: str = "auto", horizons=(), rmst: bool = False,
                    keep_staged: bool = True) -> tuple[Path, dict]:
    """Score every admission in the raw MIMIC-III tables of ``mimic_dir``: featurised with the
    training build's items, medians and scaling (``flows.lib.mimic.featurize``), nothing refitted;
    output keyed by HADM_ID. Returns (output path, counts of admissions read / scored / left out).
    ``keep_staged=False``: the tables' staged copies in ``work_dir`` are removed when done."""
    from flows.lib.mimic import featurize  # MIMIC's SQL stack only when MIMIC is scored

    version_dir, data, qs = _version(version_dir, quantiles)
    frame, counts = featurize.featurize(mimic_dir, featurize.check_record(data.get("featurization"), version_dir),
                                        data["feature_names"], work_dir, keep_staged=keep_staged)
    if frame.height == 0:
        raise ValueError(f"{mimic_dir}: no admission with chart and lab rows to score "
                         f"({counts['admissions']} admissions read)")
    x = frame.select(data["feature_names"]).to_numpy().astype(np.float64)
    path = write_scores(frame["id"].to_numpy(), x, version_dir, data, out, qs, device, source=str(mimic_dir),
                        horizons=horizons, rmst=rmst)
    return path, counts


def score_reddit_raw(dumps, version_dir, out, work_dir, key: bytes, quantiles=DEFAULT_QUANTILES,
                     device: str = "auto", batch_size: int = 64, embedding_cache=None,
                     horizons=(), rmst: bool = False, keep_embeddings: bool = True) -> tuple[Path, dict]:
    """Score every user of the Pushshift dumps under ``dumps`` with 20 usable comments: their
    first 20 comments embedded with the training build's model, aux features scaled with its
    statistics (``flows.lib.reddit.featurize``); output keyed by pseudonym (``key``: the
    training build's key gives the training ids). Returns (output path, counts).
    ``keep_embeddings=False``: the comments' vectors cached in ``work_dir`` are removed when done
    (an ``embedding_cache`` given stays)."""
    # the scan and the embedding model only when Reddit is scored
    from flows.lib.reddit import featurize

    version_dir, data, qs = _version(version_dir, quantiles)
    record = featurize.check_record(data.get("featurization"), version_dir)
    if not data.get("sequences"):
        raise ValueError(f"{version_dir}: this model does not read comment sequences; it was not trained on a "
                         "Reddit build")
    frame, seqs, counts = featurize.featurize(dumps, record, data["feature_names"], work_dir, key, device,
                                              batch_size, embedding_cache, keep_embeddings)
    if frame.height == 0:
        raise ValueError(f"{dumps}: no user with 20 usable comments to score ({counts})")
    want = (data["sequences"]["length"], data["sequences"]["dim"])
    if seqs.shape[1:] != want:
        raise ValueError(f"{record['embedding_model']}: embeddings of shape {seqs.shape[1:]}, the model "
                         f"expects {want}")
    if record.get("pseudonym_key_id") and not key_matches(record["pseudonym_key_id"], key, PSEUDONYM_KEY):
        log.warning("the pseudonymisation key differs from the training build's: ids will not match "
                    "the training dataset's")
    x = CommentInputs(frame.select(data["feature_names"]).to_numpy().astype(np.float64), seqs)
    path = write_scores(frame["id"].to_numpy(), x, version_dir, data, out, qs, device, source=str(dumps),
                        horizons=horizons, rmst=rmst)
    return path, counts


def check_horizons(horizons) -> list[float]:
    """Sorted distinct horizons, each finite and > 0 (in the dataset's time unit)."""
    hs = sorted({float(h) for h in horizons})
    if not all(np.isfinite(h) and h > 0 for h in hs):
        raise ValueError(f"horizons must be finite and > 0 (in the dataset's time unit), got {list(horizons)}")
    return hs


def beyond_follow_up(horizons, data: dict) -> list[str]:
    """One line per horizon beyond the longest training follow-up of some event (a version's
    ``data.json`` record ``follow_up``): its risk there rests on the fitted log-normal's tail, not
    on data. A version trained before the record existed gives one line saying it is unchecked.

    >>> data = {"time_unit": "days", "follow_up": {"death": {"longest": 90.0}, "relapse": {"longest": 400.0}}}
    >>> beyond_follow_up([30.0, 365.0], data)
    ['horizon 365 days is beyond the longest follow-up in the training data of death (90 days): risk_365_death
    extrapolates the fitted time distribution']
    >>> beyond_follow_up([365.0], {"time_unit": "days"})
    ['this model version does not record its training follow-up (an older version): horizons not checked against it']
    """
    if not horizons:
        return []
    follow_up, unit = data.get("follow_up"), data.get("time_unit") or "time units"
    if follow_up is None:
        return ["this model version does not record its training follow-up (an older version): horizons "
                "not checked against it"]
    lines = []
    for h in horizons:
        over = {e: r["longest"] for e, r in follow_up.items() if r.get("longest") is not None and h > r["longest"]}
        if over:
            lines.append(f"horizon {h:g} {unit} is beyond the longest follow-up in the training data of "
                         + ", ".join(f"{e} ({v:g} {unit})" for e, v in over.items())
                         + ": " + ", ".join(f"risk_{h:g}_{e}" for e in over) + " extrapolate"
                         + ("s" if len(over) == 1 else "") + " the fitted time distribution")
    return lines


def far_outside_training(x, data: dict) -> dict[str, int]:
    """Per feature, how many rows of ``x`` (n, d; the model's feature columns) lie far outside
    the training rows: beyond the 1st-99th percentile range (``data.json``'s ``feature_ranges``)
    widened by its own width on each side. A column whose range has no width (the same value
    in 98 % of the training rows: a rare level, a flag) is not judged. Only columns with such
    rows are returned; a version without ranges (an older version, or one trained on fewer than
    200 rows) returns {}.

    >>> data = {"feature_names": ["age", "flag"], "feature_ranges": {"age": [20.0, 90.0], "flag": [0.0, 0.0]}}
    >>> far_outside_training(np.array([[45.0, 1.0], [700.0, 0.0], [-60.0, 1.0]]), data)   # 700 months?
    {'age': 2}
    """
    ranges = data.get("feature_ranges")
    if not ranges:
        return {}
    x = np.asarray(x, dtype=np.float64)
    out = {}
    for j, name in enumerate(data["feature_names"]):
        low, high = ranges[name]
        width = high - low
        if width > 0:
            far = int(((x[:, j] < low - width) | (x[:, j] > high + width)).sum())
            if far:
                out[name] = far
    return out


PART_ROWS = 50_000  # a larger file is scored this many rows at a time, with a progress line after each
SHIFT_SD = 0.5  # a batch mean this many training standard deviations from the training mean is said
MIN_ROWS_FOR_SHIFT = 50  # a smaller batch's mean is too noisy to judge
FEATURES_NAMED = 10  # a warning names this many features, the most affected first, and counts the rest


def labelled(feature: str, labels: dict[str, str]) -> str:
    """A feature's name for a warning, with its MIMIC item's label when the version recorded one
    (``data.json``'s ``item_labels``, keyed by ``<source>_<itemid>``).

    >>> labelled("lab_51275_max", {"lab_51275": "PTT"}), labelled("age", {})
    ('lab_51275_max (PTT)', 'age')
    """
    label = labels.get(feature.rsplit("_", 1)[0]) if "_" in feature else None
    return f"{feature} ({label})" if label else feature


def more_text(total: int, named: int, what: str = "") -> str:
    """``", and 185 more columns"`` after a list cut at ``named`` of ``total`` items (``what``: the
    singular noun, if any); "" when none was cut.

    >>> more_text(195, 10, "column"), more_text(11, 10, "column"), more_text(12, 10), more_text(3, 10, "column")
    (', and 185 more columns', ', and 1 more column', ', and 2 more', '')
    """
    if total <= named:
        return ""
    rest = total - named
    return f", and {rest} more" + (f" {what}{'s' if rest != 1 else ''}" if what else "")


def shifted_from_training(x, data: dict) -> dict[str, float] | None:
    """Per feature whose mean over the rows of ``x`` (n, d; the model's feature columns) lies at
    least ``SHIFT_SD`` training standard deviations from the training mean (``data.json``'s
    ``feature_moments``), that difference in training SDs, largest first: a batch unlike the
    training rows (another population, a changed unit or lab method), whose predictions rest on
    fewer training rows like them. A column constant in training is not judged. None when not
    judged: a version without moments (an older version, or one trained on fewer than 200 rows) or
    fewer than ``MIN_ROWS_FOR_SHIFT`` rows.

    >>> data = {"feature_names": ["age", "lactate", "flag"],
    ...         "feature_moments": {"age": [60.0, 10.0], "lactate": [2.0, 1.0], "flag": [1.0, 0.0]}}
    >>> x = np.column_stack([np.full(60, 75.0), np.full(60, 2.2), np.zeros(60)])
    >>> shifted_from_training(x, data)
    {'age': 1.5}
    >>> shifted_from_training(x[:10], data) is None
    True
    """
    moments = data.get("feature_moments")
    x = np.asarray(x, dtype=np.float64)
    if not moments or x.shape[0] < MIN_ROWS_FOR_SHIFT:
        return None
    out = {}
    for j, name in enumerate(data["feature_names"]):
        mean, sd = moments[name]
        if sd > 0:
            d = (float(x[:, j].mean()) - mean) / sd
            if abs(d) >= SHIFT_SD:
                out[name] = round(d, 2)
    return dict(sorted(out.items(), key=lambda kv: -abs(kv[1])))


def check_finite_scores(cols: dict, ids, source: str, named: int = 5) -> None:
    """ValueError naming the rows' ids (never their values) when a score is NaN or infinite: a
    value far outside what the model was trained on, or a damaged model; nothing is written."""
    bad = np.zeros(len(ids), dtype=bool)
    columns = []
    for name, values in list(cols.items())[1:]:
        wrong = ~np.isfinite(np.asarray(values, dtype=np.float64))
        if wrong.any():
            bad |= wrong
            columns.append(name)
    if bad.any():
        shown = [str(i) for i in np.asarray(ids)[bad][:named]]
        raise ValueError(f"{source}: {int(bad.sum())} of {len(ids)} rows scored NaN or infinite (ids "
                         f"{', '.join(shown)}{' ...' if bad.sum() > named else ''}; in {', '.join(columns[:4])}"
                         f"{' ...' if len(columns) > 4 else ''}): check those rows' values against the training "
                         "data's range and units; nothing was written")


def predict_in_parts(model, x, source: str, part_rows: int | None = None, **kw) -> dict:
    """``model.predict_all(x, **kw)``, ``PART_ROWS`` rows at a time when ``x`` has more: after each part
    a line with the rows scored so far and the time left at the pace so far. Each row is scored as
    it would be alone (common random numbers), so the parts give the values of one call, to float
    rounding; comment embeddings stay on disk, read part by part."""
    part_rows = PART_ROWS if part_rows is None else part_rows
    n = len(x)
    if n <= part_rows:
        return model.predict_all(x, **kw)
    parts, t0 = [], time.perf_counter()
    for start in range(0, n, part_rows):
        stop = min(n, start + part_rows)
        part = x[start:stop] if not isinstance(x, CommentInputs) else CommentInputs(
            x.aux[start:stop], RowView(x.sequences, np.arange(start, stop)))
        parts.append(model.predict_all(part, **kw))
        spent = time.perf_counter() - t0
        log.info("%s: scored %d of %d rows (%d %%), %s", source, stop, n, 100 * stop // n,
                 "done" if stop == n else f"about {_duration(spent / stop * (n - stop))} left")
    return joined(parts)


def _duration(seconds: float) -> str:
    """A time left as a person reads it: seconds below 90, then minutes below 90, then hours.

    >>> _duration(39.6), _duration(210.0), _duration(7200.0)
    ('40 s', '3.5 min', '2.0 h')
    """
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def score_columns(ids, data: dict, p, times: dict, hs, risk, means, crude: dict) -> dict:
    """The scores file's columns, in order: the ids, then per event ``p_<e>``, ``t_qNN_<e>`` per
    quantile of ``times``, ``risk_<h>_<e>`` per horizon, ``rmst_<h>_<e>`` with ``means`` and
    ``crude_<h>_<e>`` for an event in ``crude``; two names alike are an error."""
    cols = {data.get("id_column") or "id": ids}
    for j, e in enumerate(data["event_names"]):
        cols[f"p_{e}"] = p[:, j]
        for q, t in times.items():
            cols[f"t_q{round(q * 100):02d}_{e}"] = t[:, j]
        for k, h in enumerate(hs):
            cols[f"risk_{h:g}_{e}"] = risk[:, k, j]
        for h, mean in zip(hs, means, strict=False):  # none without rmst
            cols[f"rmst_{h:g}_{e}"] = mean[:, j]
        for k, h in enumerate(hs if e in crude else ()):
            cols[f"crude_{h:g}_{e}"] = crude[e][:, k]
    if len(cols) != 1 + len(data["event_names"]) * (1 + len(times) + len(hs) + len(means)) + len(crude) * len(hs):
        raise ValueError(f"quantiles {list(times)} or horizons {hs} give the same column name twice (quantile names "
                         "keep whole percents, horizon names six significant digits)")
    return cols


def write_scores(ids, x, version_dir: Path, data: dict, out, qs: list[float], device: str, source: str,
                 horizons=(), rmst: bool = False) -> Path:
    """Per event ``p_<e>`` (P(ever)), ``t_qNN_<e>`` (time quantiles given that it happens) and, per
    horizon h, ``risk_<h>_<e>`` = P(the event happens by h) = p_e (1 - S_e(h | it happens)), and with
    ``rmst`` ``rmst_<h>_<e>``, the restricted mean event-free time up to h, (1 - p_e) h + p_e
    E[min(T_e, h) | it happens]: the score whose ranking C (RMST) judges (larger: later or never). Where
    the version's events compete (``data["competing"]``: one follow-up time, never two seen on a row),
    ``crude_<h>_<e>`` too: P(the event by h, before every competing one), the crude risk
    (``CETModel.predict_cumulative_incidence``), where ``risk_<h>_<e>`` is the net one. A horizon
    beyond an event's longest training follow-up is warned of in the log (:func:`beyond_follow_up`);
    its columns are written all the same. The ids go in a column named as the training table's ids
    (``data["id_column"]``, e.g. ``visit``), else ``id``."""
    out = Path(out)
    hs = check_horizons(horizons)
    if rmst and not hs:
        raise ValueError(RMST_NEEDS_HORIZONS)
    for line in beyond_follow_up(hs, data):
        log.warning("%s: %s", version_dir, line)
    labels = data.get("item_labels") or {}
    far = far_outside_training(x.aux if isinstance(x, CommentInputs) else x, data)
    if far:
        most = sorted(far.items(), key=lambda kv: -kv[1])  # stable: columns with as many rows keep their order
        log.warning("%s: values far outside the training rows (beyond their 1st-99th percentile range widened by its "
                    "width on each side; check units and data entry), rows per column: %s%s; scored all the same",
                    source, ", ".join(f"{labelled(c, labels)} {n}" for c, n in most[:FEATURES_NAMED]),
                    more_text(len(most), FEATURES_NAMED, "column"))
    shifted = shifted_from_training(x.aux if isinstance(x, CommentInputs) else x, data)
    if shifted:
        named = list(shifted.items())[:FEATURES_NAMED]
        log.warning("%s: these %d rows are unlike the training rows: the mean of %d of %d features lies %g or more "
                    "training standard deviations from the training mean (%s%s); their predictions rest on fewer "
                    "training rows like them. Scored all the same", source, len(ids), len(shifted),
                    len(data["feature_names"]), SHIFT_SD, ", ".join(f"{labelled(c, labels)} {d:+.2f} "
                                                                    "SD" for c, d in named),
                    more_text(len(shifted), FEATURES_NAMED))
    model = load_model(version_dir / "CET", device=device)
    until = {e: v["followed_until"] for e, v in (data.get("follow_up") or {}).items()
             if v.get("followed_until") is not None}  # older versions do not record it
    if not until:
        log.info("%s: this model version does not record the end of its training follow-up (trained before the "
                 "check existed): how much of P(ever) lies past it is not checked; retrain to have it checked", source)
    # one pass of the time head (the mixture over the other events' occurrences) for every column and the check
    # below, which reads each event's curve at the end of its own follow-up (any time > 0 for an event without one)
    ends = [float(until.get(e, 1.0)) for e in data["event_names"]] if until else None
    names = data["event_names"]
    competing = {names.index(e): [names.index(k) for k in group if k != e]  # none without horizons
                 for group in (data.get("competing") or () if hs else ()) for e in group}
    scores = predict_in_parts(model, x, source, quantiles=qs, times=hs, rmst_horizons=hs if rmst else (),
                              risk_by=ends, crude=competing)
    p, times, means = scores["occurrence"], scores["time"], [scores["rmst"][h] for h in hs] if rmst else []
    risk = 1.0 - scores["survival"]  # (n, H, M): 1 - (1 - p + p S) = p (1 - S)
    beyond = occurrence_beyond_follow_up(model, x, until, data["event_names"], p_ever=p,
                                         risk_by_end=scores.get("risk_by"))
    for e, r in beyond.items():
        if r["share_beyond"] >= BEYOND_SHARE:
            log.warning("%s: p_%s: %.0f %% of P(ever) (%.3f on average over these rows, %.3f by %s, the end of %s's "
                        "training follow-up: the last time at least %d training rows were still followed) is placed "
                        "after it, where it rests on the log-normal tail, not on data (a risk by a horizon within the "
                        "follow-up, --horizons, does not)", source, e, 100 * r["share_beyond"], r["p_ever"],
                        r["by_follow_up"], f"{r['follow_up']:g} {data.get('time_unit') or ''}".rstrip(), e,
                        FOLLOWED_ROWS)
    crude = {names[j]: v for j, v in (scores.get("crude") or {}).items()}
    cols = score_columns(ids, data, p, {q: times[q] for q in qs}, hs, risk, means, crude)
    check_finite_scores(cols, ids, source)
    if out.suffix.lower() == ".csv":  # recorded in the folder's marker first: CSV carries no mark of its own
        claim_files(out.parent, [out.name], kind=SCORES_MARK["kind"], what="--out folder")
        write_csv(pl.DataFrame(cols), out)  # text ids a spreadsheet would run as formulas are escaped
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.parent / f"{temporary_name(out)}w"  # sweeps a killed run's leftovers
        with writing(out, tmp):
            pl.DataFrame(cols).write_parquet(tmp, metadata=SCORES_MARK)
            os.replace(tmp, out)
    log.info("scored %d rows of %s with %s -> %s", len(ids), source, version_dir, out)
    return out
