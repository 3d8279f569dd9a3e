"""Your own table to the dataset contract (``flows.table``): read a table file
(``flows.lib.table_files``) or take a frame, check every column, split the rows, impute and
encode the features, and write the dataset folder (``cet_model.dataset.write_dataset``). Errors
name the file, the column and the row, never a cell's content."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from cet_model.choices import IMPUTE, TABLE_SPLIT_METHODS
from cet_model.dataset import (
    COMMA_HINT,
    GROUP_COLUMN,
    ROW_NUMBERS,
    SPLITS,
    assign_splits,
    check_numeric,
    comma_numbers,
    event_columns,
    first_non_number,
    holds_dates,
    min_keys,
    missing_indicator,
    not_text,
    other_rows,
    require_columns,
    row_at,
    write_dataset,
)
from cet_model.validation import codes_event_types, kind_of
from flows.lib.table_files import check_column_names, first_data_line, read_table


def write_follow_up_dataset(out_dir, table, features, events: dict, *, name: str, time_unit: str,
                            id_column: str | None = None, split_column: str | None = None, seed: int = 0,
                            fractions=(0.6, 0.2, 0.2), impute: str | None = None,
                            categorical=None, missing_times: str = "refuse",
                            group_column: str | None = None, split_method: str = "random") -> Path | None:
    """A dataset folder from one table of your own data: a row per subject, numeric feature
    columns, and per event a follow-up time and an indicator (1 = the event was seen at that
    time, 0 = follow-up ended without it). Such data carry no true occurrence: ``c_e`` and
    ``t_true_e`` are written null, so AUC and ECE against the truth are left undefined, the
    Oracle is left out, and promotion goes by Harrell's C (docs/datasets.md, "Your own data").

    ``table``: a polars or pandas frame (n rows), or the path of a ``.csv`` or ``.parquet`` file
    holding one. ``features``: column names (d), or None for every column that ``events``,
    ``id_column``, ``split_column`` and ``group_column`` do not name, in the table's order. ``events``:
    {event name: (time column, indicator column)} (M). ``id_column``: unique ids (default: the
    row number). ``split_column``: train/val/test per row (default: a seeded random split in
    ``fractions``; with ``group_column``, e.g. a patient id when a patient has several rows, whole
    groups are drawn, so no group is in two splits, and ``fractions`` are shares of the groups).
    ``split_method``: ``"random"`` (exact shares), ``"hash"`` (each id, or group, keeps its
    split when the table grows) or ``"stratified"`` (each combination of observed events, per row
    or per group, in every split in the shares: for a rare outcome; :func:`assign_splits`).
    ``impute``: None (default) refuses a missing feature value (null or NaN); ``"median"`` fills it with the column's
    median over the training rows, and records the
    medians and the count of filled cells per column and split in the manifest's
    ``featurization`` (what ``flows.predict`` applies to new rows); ``"median+indicator"`` does the
    same and adds, right after each column with a gap on some training row, a 0/1 column
    ``<column>_missing`` (1 where the value was missing: in clinical data a test not ordered is
    information), listed in ``featurization["indicators"]``. ``categorical``: feature
    columns (text or numbers) turned into one 0/1 column per level seen in the training rows,
    named ``<column>=<level>`` (at most ``MAX_LEVELS`` levels); a missing value, or a level the
    training rows do not have, is all zeros and counted; the levels are recorded in
    ``featurization`` for new rows. ``missing_times``: ``"refuse"`` (default) refuses a missing
    time; ``"mask"`` leaves that event out for that row (``mask_e`` = 0: no term in the likelihood,
    no place in a metric; e.g. an outcome not followed at one site), where its indicator is
    missing or 0, counted per event and split in the manifest's ``censoring``. Bad values are
    refused naming the file (or ``table`` for a frame), the column and the row (counted from 0,
    the header not counted; in a CSV file also its line). ``out_dir=None`` checks the table the
    same way and writes nothing (returns None): what ``flows.table`` does before its flow starts.

    >>> import polars as pl, tempfile
    >>> from cet_model.dataset import load_dataset
    >>> t = pl.DataFrame({"age": [60.0, 71, 55, 80, 66], "days": [5.0, 9, 2, 7, 3], "died": [1, 0, 1, 0, 0]})
    >>> out = write_follow_up_dataset(tempfile.mkdtemp() + "/mine", t, ["age"], {"death": ("days", "died")},
    ...                               name="mine", time_unit="days")
    >>> ds = load_dataset(out)
    >>> len(ds.train) + len(ds.val) + len(ds.test), ds.event_names, bool(np.isnan(ds.train.C).all())
    (5, ['death'], True)
    """
    src = _Source.of(table)
    if not events:
        raise ValueError("events: name at least one event as {name: (time column, indicator column)}")
    if split_method not in TABLE_SPLIT_METHODS:
        raise ValueError(f"split_method: one of {TABLE_SPLIT_METHODS}, got {split_method!r}")
    if impute not in IMPUTE:
        raise ValueError(f"impute: None (refuse missing feature values), 'median' or "
                         f"'median+indicator', got {impute!r}")
    if missing_times not in ("refuse", "mask"):
        raise ValueError(f"missing_times: 'refuse' or 'mask', got {missing_times!r}")
    if group_column is not None and split_column is not None:
        raise ValueError("group_column draws the split by groups; split_column gives it: name one of them")
    if split_method == "hash" and split_column is not None:
        raise ValueError("split_method 'hash' draws the split; split_column gives it: name one of them")
    check_column_names(src.where, src.table.columns)
    coded = _coded_indicators(src, events)
    chosen = features is None
    others = (id_column, split_column, group_column, *dict.fromkeys(coded.values()))
    features, categorical = _feature_columns(src, features, categorical, events, others)
    _refuse_event_columns(src, features, events, coded)
    wanted = [*features, *(c for pair in events.values() for c in pair),
              *(c for c in others if c is not None)]
    require_columns(src.table, list(dict.fromkeys(wanted)), src.where)
    _check_key_types(src, id_column, split_column, group_column)
    if src.table.height == 0:
        raise ValueError(f"{src.where}: no rows")
    ids = _ids(src, id_column)
    if split_column is not None:
        split = _given_split(src, split_column)
    else:
        split = _drawn_split(src, ids, events, id_column, group_column, seed, fractions, split_method)
    _check_split_sizes(src, split, fractions, group_column)
    text = [c for c in features if c not in categorical and not src.table[c].dtype.is_numeric()
            and src.table[c].dtype != pl.Boolean and not not_text(src.table[c].dtype) and not holds_dates(src.table[c])]
    encoded = _Features(src, split, impute, chosen, text)
    for col in features:  # name the table's column and row, not the file the dataset would have
        if col in categorical:
            encoded.add_levels(col)
        else:
            encoded.add_numbers(col)
    encoded.check_names()
    cols = [ids.alias("id"), split.alias("split")]
    group = [] if group_column is None else [src.table[group_column].cast(pl.String).alias(GROUP_COLUMN)]
    features_frame = pl.DataFrame([*cols, *group, *encoded.columns])  # bool -> 0/1
    event_cols, masked = [], {}
    for e, (time_col, seen_col) in events.items():
        event_cols += _event_frame_columns(src, split, e, time_col, seen_col, missing_times, masked)
    events_frame = pl.DataFrame([*cols, *event_cols])
    if out_dir is None:  # checked only, nothing written
        return None
    digest = hashlib.sha256(features_frame.write_csv().encode() + events_frame.write_csv().encode()).hexdigest()
    manifest = {"name": name, "feature_names": [c.name for c in encoded.columns],
                "event_names": [str(e) for e in events],
                "time_unit": time_unit, "seeds": {"split": None if split_column else seed},
                **({} if split_column else {"split_method": split_method}),
                **({"split_by": group_column} if group_column is not None else {}),
                **({"ids": ROW_NUMBERS} if id_column is None else {"id_column": str(id_column)}),
                "censoring": {"kind": "follow-up", "artificial": False,
                              "note": "times censored by the end of follow-up; the true occurrence is not known",
                              **({"masked": masked, "masked_note": "cells without a follow-up time, left out "
                                  "(mask_e = 0)"} if masked else {})},
                "source_fingerprints": {"table": digest}}
    if impute is not None or encoded.levels:  # how new rows are prepared: flows.predict does the same to them
        manifest["featurization"] = encoded.record()
    return write_dataset(out_dir, features_frame, events_frame, manifest)


@dataclass
class _Source:
    """The table and how its errors name it: the file (or ``table`` for a frame) and, in a CSV
    file, the line of a row."""

    table: pl.DataFrame
    where: str = "table"
    first_line: int | None = None

    @classmethod
    def of(cls, table) -> _Source:
        if isinstance(table, str | Path):
            return cls(read_table(table), str(table), first_data_line(table))
        return cls(table if isinstance(table, pl.DataFrame) else pl.from_pandas(table))

    def at(self, row: int) -> str:
        return row_at(row, self.first_line)


def _coded_indicators(src: _Source, events: dict) -> dict[str, str]:
    """Indicators given as ``column:code`` (a status column that codes the kind of event: 0 =
    censored, 1 = relapse, 2 = death): each becomes a 0/1 column of that name in ``src.table``, 1
    where the column holds the code, 0 where it holds another value (censoring, or another kind of
    event, which ends this one's follow-up at its time), missing where it is missing. An indicator
    that names a column of the table is that column. Returns {indicator: the status column it reads}
    (no status column is a feature by default).

    >>> src = _Source(pl.DataFrame({"months": [5.0, 9, 2], "status": [0, 1, 2]}))
    >>> _coded_indicators(src, {"relapse": ("months", "status:1"), "death": ("months", "status:2")})
    {'status:1': 'status', 'status:2': 'status'}
    >>> src.table["status:1"].to_list(), src.table["status:2"].to_list()
    ([0, 1, 0], [0, 0, 1])
    """
    status = {}
    for e, (_, spec) in events.items():
        column, sep, code = str(spec).rpartition(":")
        if spec in src.table.columns or not sep or column not in src.table.columns:
            continue  # a column of the table, or missing: refused with the other missing columns
        values, code = src.table[column], code.strip()
        if values.dtype == pl.Boolean:
            values = values.cast(pl.Int8)
        if values.dtype.is_numeric():
            try:
                wanted = float(code)
            except ValueError:
                raise ValueError(f"{src.where}: event {e!r}: indicator {spec!r} gives the code {code!r}, but column "
                                 f"{column!r} holds numbers") from None
            hit = values.cast(pl.Float64).fill_nan(None) == wanted  # NaN is missing, not another code
        elif values.dtype in (pl.String, pl.Categorical, pl.Enum):
            hit = values.cast(pl.String).str.strip_chars() == code
        else:
            raise ValueError(f"{src.where}: event {e!r}: indicator {spec!r}: column {column!r} has type "
                             f"{values.dtype}; a status column holds numbers or text codes")
        if not hit.fill_null(False).any():
            raise ValueError(f"{src.where}: event {e!r}: no row of column {column!r} holds the code {code!r} of "
                             f"indicator {spec!r}")
        src.table = src.table.with_columns(hit.cast(pl.Int8).alias(spec))
        status[spec] = column
    return status


def _check_key_types(src, id_column, split_column, group_column) -> None:
    """An id, split or group column of lists, structs or bytes: refused by its type."""
    for role, c, holds in (("id", id_column, "ids are numbers or text"),
                           ("split", split_column, "it holds train, val or test"),
                           ("group", group_column, "groups are numbers or text")):
        if c is not None and not_text(src.table[c].dtype) and not src.table[c].dtype.is_temporal():
            raise ValueError(f"{src.where}: column {c!r}, the {role} column, has type {src.table[c].dtype}: {holds}")


def _feature_columns(src: _Source, features, categorical, events: dict, others) -> tuple[list[str], list[str]]:
    """The feature columns (every column not named otherwise when ``features`` is None; a
    categorical column is a feature) and the categorical ones, refusing the contract's names."""
    default = features is None
    if default:
        named = {c for pair in events.values() for c in pair} | set(others)
        features = [c for c in src.table.columns if c not in named]
        if not features:
            raise ValueError(f"{src.where}: no feature columns left; its columns {src.table.columns} are all named "
                             "as event, id, split or group columns")
    features = [str(f) for f in features]
    categorical = [str(c) for c in (categorical or ())]
    features += [c for c in categorical if c not in features]
    reserved = [c for c in features if c in ("id", "split", GROUP_COLUMN)]
    if reserved:  # the contract's own columns in features.parquet
        c = reserved[0]
        how = {"id": "name it as the ids with --id-column id (id_column)", "split": "name it as the split with "
               "--split-column split (split_column)", GROUP_COLUMN: "rename it"}[c]
        raise ValueError(f"{src.where}: column {c!r} would be a feature, but the dataset keeps {c!r} for its own "
                         f"column: {how}, leave it out with --features, or rename it")
    if default:
        _refuse_identifiers(src, features)
    return features, categorical


def _refuse_event_columns(src: _Source, features: list[str], events: dict, coded: dict) -> None:
    """A feature that is an event's time or indicator column (or the status column that a
    ``column:code`` indicator reads, ``coded``) would give the answer away: refused, naming the
    column and the event."""
    for e, (time_col, seen_col) in events.items():
        for role, col in (("time", time_col), ("indicator", seen_col), ("status column", coded.get(seen_col))):
            if col is not None and col in features:
                raise ValueError(f"{src.where}: column {col!r} is named as a feature and as the {role} of event {e!r}: "
                                 "what the model is to predict cannot be one of its inputs; leave it out of the "
                                 "features")


_ID_SUFFIX = re.compile(r"(.*[\s._-])?(id|key|index|no)")  # lower case: patient_id, row.index, record no
_ID_CAMEL = re.compile(r".*[a-z0-9](ID|Id)")  # PatientID, subjectId
_ID_NAMES = {"pid", "ptid", "sid", "uid", "mrn", "subject", "patient", "record", "row", "rownum", "unnamed: 0"}


def looks_like_identifier(name: str, column: pl.Series) -> bool:
    """Whether a column is an identifier more than a measurement: named as one (``pid``,
    ``patient_id``, ``PatientID``, ``index``, ``Unnamed: 0`` as pandas writes its index) and a
    different whole number on every row. By its values alone a measurement of a small table can
    look the same, so the name decides.

    >>> looks_like_identifier("pid", pl.Series([7, 3, 12]))
    True
    >>> looks_like_identifier("age", pl.Series([40, 41, 42, 43]))  # not named as an id
    False
    >>> looks_like_identifier("lipid", pl.Series([210, 187, 243]))  # a measurement that ends in "id"
    False
    >>> looks_like_identifier("patient_id", pl.Series([1, 2, 2]))   # repeated: not one per row
    False
    """
    if not (name.lower() in _ID_NAMES or _ID_SUFFIX.fullmatch(name.lower()) or _ID_CAMEL.fullmatch(name)):
        return False
    if column.len() < 2 or column.null_count() or not column.dtype.is_numeric():
        return False
    values = column.cast(pl.Float64)
    return bool((values == values.round(0)).all()) and values.n_unique() == values.len()


def _refuse_identifiers(src: _Source, features: list[str]) -> None:
    """Refuse a default feature that looks like an identifier (``looks_like_identifier``): as a
    feature, a row number or a patient id gives the model noise to fit, or a leak, with no error."""
    found = [c for c in features if looks_like_identifier(str(c), src.table[c])]
    if found:
        c = found[0]
        raise ValueError(f"{src.where}: column {c!r} looks like an identifier (named as one, with a different "
                         "whole number on every row), and every column not named otherwise would be a feature: "
                         f"name it as the ids with --id-column {c} (id_column), or list the features with "
                         "--features (features)")


def _ids(src: _Source, id_column: str | None) -> pl.Series:
    """The id column, checked complete and unique, or the row numbers."""
    if id_column is None:
        return pl.Series("id", np.arange(src.table.height))
    ids = src.table[id_column]
    if ids.is_null().any():
        raise ValueError(f"{src.where}: column {id_column!r} {src.at(int(ids.is_null().arg_max()))} is missing; "
                         "every row needs an id")
    repeated = ids.is_duplicated()
    if repeated.any():
        first = int(repeated.arg_max())  # the first row whose id comes again
        again = int(np.flatnonzero((ids == ids[first]).to_numpy())[1])
        raise ValueError(f"{src.where}: column {id_column!r} {src.at(again)} repeats row {first}'s id: ids must be "
                         f"unique ({int(repeated.sum())} rows share an id). Several rows per patient? Leave id_column "
                         "out (or give a row id) and name the patient with group_column (--group-column), "
                         "which keeps each patient in one split")
    return ids


def _given_split(src: _Source, split_column: str) -> pl.Series:
    split = src.table[split_column].cast(pl.String, strict=False)
    bad = ~split.is_in(list(SPLITS)).fill_null(False)
    if bad.any():
        row = int(bad.arg_max())
        raise ValueError(f"{src.where}: column {split_column!r} {src.at(row)} is not one of {SPLITS}"
                         f"{' (it is missing)' if src.table[split_column][row] is None else ''}{other_rows(bad)}: "
                         "every row names its split as train, val or test, in lower case")
    return split


def _drawn_split(src: _Source, ids, events: dict, id_column, group_column, seed, fractions, method) -> pl.Series:
    """A seeded split drawn over rows, ids (``"hash"``) or groups (``assign_splits``)."""
    table, n = src.table, src.table.height
    if group_column is not None:
        groups = table[group_column]
        if groups.is_null().any():
            raise ValueError(f"{src.where}: column {group_column!r} {src.at(int(groups.is_null().arg_max()))} is "
                             "missing; every row needs its group")
        names, unit = np.unique(groups.cast(pl.String).to_numpy(), return_inverse=True)  # groups sorted: seed-stable
    elif method == "hash" and id_column is not None:
        names, unit = ids.cast(pl.String).to_numpy(), np.arange(n)  # by id: a reordered table keeps its split
    else:
        names, unit = np.arange(n), np.arange(n)
    strata = None
    if method == "stratified":  # which events each row (group) was seen to have: "10", "01", ...
        seen = np.column_stack([table[c].cast(pl.Float64, strict=False).fill_null(0.0).to_numpy() == 1.0
                                for _, c in events.values()])  # a bad indicator is refused later, by name
        per_unit = np.zeros((len(names), seen.shape[1]), dtype=bool)
        np.logical_or.at(per_unit, unit, seen)
        strata = np.array(["".join("1" if v else "0" for v in row) for row in per_unit])
    labels = assign_splits(names, seed, fractions, method, strata=strata)
    return pl.Series(labels[unit].tolist(), dtype=pl.String)


def _check_split_sizes(src: _Source, split: pl.Series, fractions, group_column) -> None:
    sizes = {k: int((split == k).sum()) for k in SPLITS}
    if any(v == 0 for v in sizes.values()):  # a given split column too: training, selection and test each need rows
        empty = [k for k, v in sizes.items() if v == 0]
        raise ValueError(f"{src.where}: {src.table.height} rows give the splits {sizes}: {' and '.join(empty)} would "
                         f"be empty; every split needs rows (with the seeded 60/20/20 split, at least "
                         f"{min_keys(fractions)} {'groups' if group_column else 'rows'}; a model evaluated on a "
                         "handful of rows says little)")


@dataclass
class _Features:
    """The encoded feature columns, built column by column, with what ``flows.predict`` needs to
    prepare new rows the same way (``record``)."""

    src: _Source
    split: pl.Series
    impute: str | None
    chosen: bool  # the features were every column not named otherwise
    text: list = field(default_factory=list)  # the features held as text and not named categorical
    columns: list = field(default_factory=list)
    medians: dict = field(default_factory=dict)
    imputed: dict = field(default_factory=dict)
    levels: dict = field(default_factory=dict)
    level_counts: dict = field(default_factory=dict)
    indicators: list = field(default_factory=list)

    def per_split(self, mask: pl.Series) -> dict[str, int]:
        return {k: int((mask & (self.split == k)).sum()) for k in SPLITS}

    def add_levels(self, col: str) -> None:
        """One 0/1 column per level of ``col`` seen in the training rows."""
        self._refuse_nested(col, "categorical ")
        where, text = self.src.where, self.src.table[col].cast(pl.String)
        levels = sorted(text.filter((self.split == "train") & text.is_not_null()).unique().to_list())
        if not levels:
            raise ValueError(f"{where}: categorical column {col!r} has no value on any training row")
        if len(levels) > MAX_LEVELS:
            raise ValueError(f"{where}: categorical column {col!r} has {len(levels)} levels on the training "
                             f"rows (at most {MAX_LEVELS}): an identifier or free text? leave it out or group it")
        columns, missing, unseen = encode_levels(text, col, levels)
        self.levels[col] = levels
        self.columns += columns
        self.level_counts[col] = {"missing": self.per_split(missing), "unseen": self.per_split(unseen)}

    def add_numbers(self, col: str) -> None:
        """A numeric column, checked, its gaps filled with the training median when imputing (and,
        with ``"median+indicator"``, its missingness column after it)."""
        values = self._numbers(col)
        missing = values.is_null() | values.is_nan().fill_null(True)
        if self.impute is None or not missing.any():
            try:
                check_numeric(values, self.src.where, col, finite=True, first_line=self.src.first_line)
            except ValueError as exc:
                raise ValueError(f"{exc} (the models take no missing values: impute them, e.g. impute='median' "
                                 "(--impute median), or leave the rows out first, and say how in your "
                                 "report)") from None
        else:
            check_numeric(values.fill_null(0.0).fill_nan(0.0), self.src.where, col, finite=True,
                          first_line=self.src.first_line)  # +-inf: an error, not a gap
            train_values = values.filter(~missing & (self.split == "train"))
            if train_values.len() == 0:
                raise ValueError(f"{self.src.where}: column {col!r} has no value on any training row: nothing to "
                                 "impute from; leave the column out")
            self.medians[col] = float(train_values.median())
            self.imputed[col] = self.per_split(missing)
            values = values.fill_nan(None).fill_null(self.medians[col])
        if self.impute is not None and col not in self.medians:  # a complete column: its median for new rows
            self.medians[col] = float(values.filter(self.split == "train").median())
        self.columns.append(values.alias(col))
        if self.impute == "median+indicator" and self.imputed.get(col, {}).get("train"):  # no training gap: none
            self.indicators.append(col)
            self.columns.append(missing.cast(pl.Float64).alias(missing_indicator(col)))

    def _numbers(self, col: str) -> pl.Series:
        """``col`` as floats (booleans as 0/1); text is refused with what to do about it."""
        self._refuse_nested(col)
        where, column = self.src.where, self.src.table[col]
        if column.null_count() == column.len():
            raise ValueError(f"{where}: column {col!r} is empty in every row: leave it out of the features")
        if isinstance(column.dtype, pl.Duration):
            raise ValueError(f"{where}: column {col!r} has type {column.dtype}, expected numbers: it holds durations; "
                             "give each as a number (e.g. days)")
        values = column.cast(pl.Int8) if column.dtype == pl.Boolean else column
        if values.dtype.is_numeric():
            return values.cast(pl.Float64)
        first = first_non_number(values, self.src.at)
        hint = (" or leave it out of the features (none were named, so every column but the event, id, split "
                "and group columns is one)") if self.chosen else ""
        if holds_dates(values):
            raise ValueError(f"{where}: column {col!r} has type {values.dtype}, expected numbers{first}: it holds "
                             "dates; give what they mean as a number (an age, days since a reference date) or leave "
                             f"it out of the features{hint.removeprefix(' or leave it out of the features')}")
        if comma_numbers(values):
            raise ValueError(f"{where}: column {col!r} has type {values.dtype}, expected numbers{first}: {COMMA_HINT}")
        every = (f". Text features: {', '.join(self.text)}; categorical={self.text} (--categorical "
                 f"{','.join(self.text)}) names them all") if len(self.text) > 1 else ""
        raise ValueError(f"{where}: column {col!r} has type {values.dtype}, expected numbers{first}; name it as "
                         f"categorical (one 0/1 column per level) or encode it first{hint}{every}")

    def _refuse_nested(self, col: str, kind: str = "") -> None:
        """A column of lists, structs, bytes or objects is no feature: refused by its type."""
        dtype = self.src.table[col].dtype
        if not_text(dtype) and not dtype.is_temporal():
            hint = " or leave it out of the features" if self.chosen else ""
            raise ValueError(f"{self.src.where}: {kind}column {col!r} has type {dtype}: a feature is a number or a "
                             f"category in each row; give what it holds as columns of numbers{hint}")

    def check_names(self) -> None:
        names = [c.name for c in self.columns]
        if GROUP_COLUMN in names:
            raise ValueError(f"{self.src.where}: feature column {GROUP_COLUMN!r} has the name of the dataset's "
                             "column of split groups; rename it")
        twice = sorted({c for c in names if names.count(c) > 1})
        if twice:
            raise ValueError(f"{self.src.where}: feature columns {twice} would be written twice (a column of the "
                             "table has the name of an indicator or a categorical level); rename it")

    def record(self) -> dict:
        """The manifest's ``featurization``: what ``flows.predict`` applies to new rows."""
        return {"source": "table", "impute": self.impute, "medians": self.medians, "imputed": self.imputed,
                "categorical": self.levels, "categorical_counts": self.level_counts,
                **({"indicators": self.indicators} if self.impute == "median+indicator" else {})}


def _event_frame_columns(src: _Source, split, e: str, time_col: str, seen_col: str, missing_times: str,
                         masked: dict) -> list[pl.Series]:
    """The contract's columns of event ``e`` (``t_e``, ``s_e``, null ``c_e`` and ``t_true_e``,
    and ``mask_e`` where missing times are masked, counted into ``masked``), checked."""
    table, n, out = src.table, src.table.height, []
    times, seen = table[time_col], table[seen_col].cast(pl.Float64, strict=False)
    numeric = times.dtype.is_numeric() or times.dtype == pl.Null  # text is refused below, naming the column
    gap = times.is_null() | (times.cast(pl.Float64).is_nan().fill_null(False) if numeric else False)
    if missing_times == "mask" and numeric and gap.any():
        seen_there = gap & (seen == 1.0).fill_null(False)
        if seen_there.any():
            raise ValueError(f"{src.where}: {src.at(int(seen_there.arg_max()))} has {seen_col!r} = 1 but no "
                             f"{time_col!r}: an event seen without its time cannot be left out; give its time or "
                             "drop the row")
        masked[e] = {k: int((gap & (split == k)).sum()) for k in SPLITS}
        # a placeholder the masked cell never uses (checked like any time, then ignored by the mask)
        times = times.cast(pl.Float64).fill_nan(None).fill_null(1.0)
        seen = seen.zip_with(~gap, pl.Series([0.0] * n))  # only there: elsewhere a missing indicator is an error
        out.append(pl.Series(f"mask_{e}", (~gap).cast(pl.Int8)))
    try:
        check_numeric(times, src.where, time_col, finite=True, positive=True, first_line=src.first_line)
    except ValueError as exc:
        if not numeric:  # text: check_numeric said what the column holds
            raise
        raise ValueError(f"{exc} (a log-normal time must be > 0: an event on the day of entry needs a time "
                         "such as half a day, and a missing time a decision, e.g. missing_times='mask' "
                         "(--missing-times mask) leaves the event out for that row; say which in your "
                         "report)") from None
    bad = ~seen.is_in([0.0, 1.0]).fill_null(False)
    if bad.any():
        row = int(bad.arg_max())
        raise ValueError(f"{src.where}: column {seen_col!r} {src.at(row)} is "
                         f"{kind_of(table[seen_col][row])}{other_rows(bad)}; "
                         f"expected 0 or 1 (1 = event {e!r} seen at {time_col!r}, 0 = follow-up ended without it)"
                         + (f"; {seen_col!r} seems to code the kind of event (0 = censored, 1, 2, ...): give each kind "
                            f"its own event with the indicator '{seen_col}:CODE' (e.g. --event {e}={time_col},"
                            f"{seen_col}:1), 1 where {seen_col!r} holds that code"
                            if codes_event_types(seen.to_numpy()) else
                            f"; for a column of text codes give the indicator '{seen_col}:CODE' (1 where it holds "
                            f"CODE, 0 elsewhere), e.g. --event {e}={time_col},{seen_col}:CODE"
                            if table[seen_col].dtype == pl.String else ""))
    t, s, c, tt = event_columns(e)
    return out + [times.cast(pl.Float64).alias(t), seen.cast(pl.Int8).alias(s),
                  pl.Series(c, [None] * n, dtype=pl.Float64), pl.Series(tt, [None] * n, dtype=pl.Float64)]


MAX_LEVELS = 100  # a categorical column with more training levels is refused (an id or free text)


def encode_levels(column: pl.Series, name: str, levels: list[str]) -> tuple[list[pl.Series], pl.Series, pl.Series]:
    """One 0/1 float column per level (``<name>=<level>``) of ``column`` read as text, and the
    masks of its missing values and of its values outside ``levels`` (both encoded as all zeros).

    >>> cols, missing, unseen = encode_levels(pl.Series(["a", None, "c", "b"]), "site", ["a", "b"])
    >>> [c.name for c in cols], cols[0].to_list(), missing.to_list(), unseen.to_list()
    (['site=a', 'site=b'], [1.0, 0.0, 0.0, 0.0], [False, True, False, False], [False, False, True, False])
    """
    text = column.cast(pl.String)
    columns = [(text == level).fill_null(False).cast(pl.Float64).alias(f"{name}={level}") for level in levels]
    missing = text.is_null()
    return columns, missing, ~missing & ~text.is_in(levels).fill_null(False)
