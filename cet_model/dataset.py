"""The dataset contract shared by every flow: read, write and check a dataset folder.

A folder holds ``manifest.json``; ``features.parquet`` (``id``, ``split`` in train/val/test,
float feature columns); ``events.parquet`` (``id``, ``split`` and per event e: ``t_e`` observed
time > 0, ``s_e`` 1 if observed, ``c_e`` true occurrence or null where it is not known (data
censored by follow-up rather than by a build that kept the truth), ``t_true_e`` true time or null);
and optionally ``sequences.npy`` (n x 20 x D, in row order) and, in ``events.parquet``,
``mask_e`` columns (0 = leave this task out for this row, e.g. an event inside the feature
window; a missing column means every cell is used) and, in ``features.parquet``, ``split_group``
(text: the unit the split was drawn by when a subject has several rows, e.g. a patient's
``subject_id`` for MIMIC admissions, named by the manifest's ``split_by``; no group is in two
splits). Writes are atomic: the folder appears whole or not at all.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from .atomic import check_replaceable, replace_folder, temporary_name, writing
from .choices import IMPUTE, SPLIT_METHODS, TABLE_SPLIT_METHODS  # noqa: F401
from .comments import NpyRows, RowView
from .validation import kind_of

SPLITS = ("train", "val", "test")
DATASET_FILES = ("manifest.json", "features.parquet", "events.parquet")  # every dataset folder has these
REQUIRED_MANIFEST = ("name", "feature_names", "event_names", "time_unit", "censoring", "seeds",
                     "split_sizes", "source_fingerprints")


@dataclass
class Split:
    """One split as arrays: X (n, d), T, S, C, T_true (n, M), ids; sequences (n, L, D) or None
    (from ``load_dataset``: a ``RowView`` of the file's rows, read only when used). C is NaN
    where the true occurrence is not known, T_true where there is no true time."""
    ids: np.ndarray
    X: np.ndarray
    T: np.ndarray
    S: np.ndarray
    C: np.ndarray
    T_true: np.ndarray
    sequences: np.ndarray | None = None
    mask: np.ndarray | None = None  # (n, M) 1 = use the cell; None = use every cell
    groups: np.ndarray | None = None  # (n,) text: the unit the split was drawn by (``split_group``), or None

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, rows) -> Split:
        """The rows ``rows`` (an integer index array) of this split, as a new Split; the comment
        embeddings stay on disk (a ``RowView`` of the same file).

        >>> s = Split(np.arange(4), np.zeros((4, 1)), *(np.ones((4, 2)) for _ in range(4)))
        >>> s.take(np.array([3, 1])).ids, len(s.take(np.array([0])))
        (array([3, 1]), 1)
        """
        rows = np.asarray(rows, dtype=np.int64)
        seq = self.sequences
        if isinstance(seq, RowView):
            seq = RowView(seq.base, seq.rows[rows])
        elif seq is not None:
            seq = RowView(seq, rows)
        return Split(ids=self.ids[rows], X=self.X[rows], T=self.T[rows], S=self.S[rows], C=self.C[rows],
                     T_true=self.T_true[rows], sequences=seq, mask=None if self.mask is None else self.mask[rows],
                     groups=None if self.groups is None else self.groups[rows])


@dataclass
class Dataset:
    path: Path
    manifest: dict
    feature_names: list[str]
    event_names: list[str]
    splits: dict[str, Split] = field(default_factory=dict)

    @property
    def train(self) -> Split:
        return self.splits["train"]

    @property
    def val(self) -> Split:
        return self.splits["val"]

    @property
    def test(self) -> Split:
        return self.splits["test"]


EVENT_COLUMN = re.compile(r"(t_true|t|s|c|mask)_(.+)")
GROUP_COLUMN = "split_group"  # optional, in features.parquet: the unit the split was drawn by
ROW_NUMBERS = "row numbers"  # manifest "ids" of a table built without an id column: its rows' positions


def event_columns(event: str) -> tuple[str, str, str, str]:
    """The four ``events.parquet`` columns of one event.

    >>> event_columns("lactate")
    ('t_lactate', 's_lactate', 'c_lactate', 't_true_lactate')
    """
    return f"t_{event}", f"s_{event}", f"c_{event}", f"t_true_{event}"


def write_dataset(out_dir, features: pl.DataFrame, events: pl.DataFrame, manifest: dict,
                  sequences: np.ndarray | None = None) -> Path:
    """Check the frames against the contract, then write the folder atomically. ``sequences``:
    an (n, L, D) array or a ``RowView`` (written by blocks of rows, see ``save_rows``)."""
    given, out_dir = Path(out_dir), check_replaceable(out_dir, "dataset folder")  # never a folder of the user's
    manifest = dict(manifest)
    manifest.setdefault("split_sizes", {s: int((features["split"] == s).sum()) for s in SPLITS})
    manifest["n_rows"] = features.height
    check_frames(features, events, manifest, where=str(out_dir), sequences=sequences)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=temporary_name(out_dir)))
    try:
        for name, write in (("features.parquet", features.write_parquet), ("events.parquet", events.write_parquet),
                            ("sequences.npy", None if sequences is None else
                             lambda f: save_rows(f, sequences)),
                            ("manifest.json", lambda f: f.write_text(json.dumps(manifest, indent=2, sort_keys=True)))):
            if write is not None:
                with writing(out_dir / name):  # errors name the file the dataset would have
                    write(tmp / name)
        replace_folder(tmp, out_dir, "dataset")
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return given


def assign_splits(keys, seed: int = 0, fractions=(0.6, 0.2, 0.2), method: str = "random",
                  strata=None) -> np.ndarray:
    """train/val/test for each of the unique ``keys`` (n,), e.g. patients or rows; returns the
    labels (n,) as text, aligned with ``keys``.

    ``"random"``: a seeded permutation of the sorted keys, cut at the ``fractions`` (rounded
    counts). The result does not depend on the keys' order, but adding or removing one key moves
    others between splits. ``"hash"``: each key's split comes from a hash of ``seed`` and the key
    alone (its text), so a key keeps its split when keys are added or removed (a cohort that grows
    and is rebuilt and retrained on a schedule); the shares are ``fractions`` in expectation, not
    exactly. ``"stratified"`` (with ``strata``, (n,) a label per key, e.g. which events were
    observed): the keys of each stratum in a seeded random order, each stratum given train, val
    and test in the ``fractions`` to within one key (a rare outcome's few observed rows are spread
    over the splits, not left to chance), the totals within one key of the fractions. An empty
    split (too few keys) is refused.

    >>> assign_splits(np.array([3, 1, 2, 4, 5]), seed=0, fractions=(0.6, 0.2, 0.2)).tolist()
    ['train', 'val', 'test', 'train', 'train']
    >>> ids = np.arange(1000)
    >>> first = assign_splits(ids, method="hash")
    >>> grown = assign_splits(np.arange(1200), method="hash")
    >>> bool((grown[:1000] == first).all()), {k: int((first == k).sum()) for k in SPLITS}
    (True, {'train': 629, 'val': 185, 'test': 186})
    >>> seen = np.array([1] * 10 + [0] * 90)  # ten events in 100 rows: 6 / 2 / 2 of them in each split
    >>> labels = assign_splits(np.arange(100), method="stratified", strata=seen)
    >>> [int(((labels == k) & (seen == 1)).sum()) for k in SPLITS], [int((labels == k).sum()) for k in SPLITS]
    ([6, 2, 2], [60, 20, 20])
    """
    keys = np.asarray(keys)
    if keys.ndim != 1:
        raise ValueError(f"keys: expected a 1-D array, got shape {keys.shape}")
    if len(fractions) != 3 or min(fractions) < 0 or not math.isclose(sum(fractions), 1.0):
        raise ValueError(f"fractions: three shares (train, val, test) that sum to 1, got {tuple(fractions)}")
    if method not in TABLE_SPLIT_METHODS:
        raise ValueError(f"split_method: one of {TABLE_SPLIT_METHODS}, got {method!r}")
    if (method == "stratified") != (strata is not None):
        raise ValueError("strata: a label per key with split_method 'stratified', and only with it")
    order = np.argsort(keys, kind="stable")
    if keys.size > 1 and (keys[order][1:] == keys[order][:-1]).any():
        at = int(np.flatnonzero(keys[order][1:] == keys[order][:-1])[0])
        raise ValueError(f"keys: {keys[order][at].item()!r} comes twice; a split is drawn over unique keys")
    n = keys.size
    if method == "stratified":
        strata = np.asarray(strata).astype(str)
        if strata.shape != keys.shape:
            raise ValueError(f"strata: one label per key ({n}), got shape {strata.shape}")
        rng = np.random.default_rng(seed)
        # keys in the order of their strata, each stratum shuffled (over the sorted keys: the
        # result does not depend on the keys' order), then labelled along a sequence in which
        # every run of consecutive places holds each split in its share to within about one
        sequence = _proportional_sequence(n, fractions)
        places = np.concatenate([rng.permutation(np.flatnonzero(strata[order] == level))
                                 for level in np.unique(strata)]) if n else np.zeros(0, dtype=np.int64)
        labels = np.empty(n, dtype=object)
        labels[order[places]] = sequence
        empty = [
            name for name, share in zip(SPLITS, fractions, strict=True) if share > 0 and not (labels == name).any()
        ]
        if empty:
            raise ValueError(f"stratified split of {n} keys left {empty} empty; too few keys (at least "
                         f"{min_keys(fractions)})")
        return labels.astype(str)
    if method == "random":
        perm = np.random.default_rng(seed).permutation(n)
        n_train, n_val = _random_counts(n, fractions)
        if any(share > 0 and size == 0 for share, size in zip(fractions, (n_train, n_val, n - n_train - n_val),
                                                              strict=True)):
            raise ValueError(f"random split of {n} keys leaves a split empty: at least {min_keys(fractions)} keys "
                             f"for the fractions {tuple(fractions)}")
        by_rank = np.empty(n, dtype=object)
        by_rank[perm[:n_train]], by_rank[perm[n_train:n_train + n_val]] = "train", "val"
        by_rank[perm[n_train + n_val:]] = "test"
        labels = np.empty(n, dtype=object)
        labels[order] = by_rank
        return labels.astype(str)
    salt = f"{int(seed)}\x1f".encode()
    u = np.array([int.from_bytes(hashlib.blake2b(salt + str(k).encode(), digest_size=8).digest(), "big")
                  for k in keys.tolist()], dtype=np.float64) / 2.0 ** 64
    labels = np.where(u < fractions[0], "train", np.where(u < fractions[0] + fractions[1], "val", "test"))
    empty = [name for name, share in zip(SPLITS, fractions, strict=True) if share > 0 and not (labels == name).any()]
    if empty:
        raise ValueError(f"hash split of {n} keys left {empty} empty: its shares hold only on average; with so "
                         f"few keys use the random split (at least {min_keys(fractions)} keys)")
    return labels.astype(str)


def _random_counts(n: int, fractions) -> tuple[int, int]:
    return int(round(fractions[0] * n)), int(round(fractions[1] * n))


def min_keys(fractions=(0.6, 0.2, 0.2)) -> int:
    """The fewest keys the random split gives every split with a share > 0.

    >>> min_keys(), min_keys((0.8, 0.1, 0.1))
    (4, 8)
    """
    for n in range(1, 10_000):
        n_train, n_val = _random_counts(n, fractions)
        if all(share == 0 or size > 0 for share, size in zip(fractions, (n_train, n_val, n - n_train - n_val),
                                                              strict=True)):
            return n
    raise ValueError(f"fractions {tuple(fractions)}: no number of keys fills every split")


def _proportional_sequence(n: int, fractions) -> np.ndarray:
    """``n`` split names in which every prefix holds each split in its share to within one: at
    each place the split furthest behind its share (a largest-deficit, Bresenham-like sequence).

    >>> _proportional_sequence(10, (0.6, 0.2, 0.2)).tolist()
    ['train', 'val', 'train', 'test', 'train', 'train', 'val', 'train', 'test', 'train']
    """
    share = np.asarray(fractions, dtype=np.float64)
    counts = np.zeros(len(SPLITS))
    out = np.empty(n, dtype=object)
    for i in range(n):
        k = int(np.argmax((i + 1) * share - counts))
        counts[k] += 1
        out[i] = SPLITS[k]
    return out


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
    >>> t = pl.DataFrame({"age": [60.0, 71, 55, 80, 66], "days": [5.0, 9, 2, 7, 3], "died": [1, 0, 1, 0, 0]})
    >>> out = write_follow_up_dataset(tempfile.mkdtemp() + "/mine", t, ["age"], {"death": ("days", "died")},
    ...                               name="mine", time_unit="days")
    >>> ds = load_dataset(out)
    >>> len(ds.train) + len(ds.val) + len(ds.test), ds.event_names, bool(np.isnan(ds.train.C).all())
    (5, ['death'], True)
    """
    where, first_line = "table", None  # errors name the file and, in a CSV, the line too
    if isinstance(table, str | Path):
        where, first_line = str(table), first_data_line(table)
        table = read_table(table)
    table = table if isinstance(table, pl.DataFrame) else pl.from_pandas(table)

    def at(row: int) -> str:
        return row_at(row, first_line)
    if not events:
        raise ValueError("events: name at least one event as {name: (time column, indicator column)}")
    check_column_names(where, table.columns)
    chosen = features is None
    if chosen:
        named = {c for pair in events.values() for c in pair} | {id_column, split_column, group_column}
        features = [c for c in table.columns if c not in named]
        if not features:
            raise ValueError(f"{where}: no feature columns left; its columns {table.columns} are all named as event, "
                             "id, split or group columns")
    features = [str(f) for f in features]
    categorical = [str(c) for c in (categorical or ())]
    features += [c for c in categorical if c not in features]  # a categorical column is a feature
    reserved = [c for c in features if c in ("id", "split", GROUP_COLUMN)]
    if reserved:  # the contract's own columns in features.parquet
        c = reserved[0]
        how = {"id": "name it as the ids with --id-column id (id_column)", "split": "name it as the split with "
               "--split-column split (split_column)", GROUP_COLUMN: "rename it"}[c]
        raise ValueError(f"{where}: column {c!r} would be a feature, but the dataset keeps {c!r} for its own "
                         f"column: {how}, leave it out with --features, or rename it")
    if group_column is not None and split_column is not None:
        raise ValueError("group_column draws the split by groups; split_column gives it: name one of them")
    if split_method == "hash" and split_column is not None:
        raise ValueError("split_method 'hash' draws the split; split_column gives it: name one of them")
    wanted = [*features, *(c for pair in events.values() for c in pair),
              *(c for c in (id_column, split_column, group_column) if c is not None)]
    _require_columns(table, list(dict.fromkeys(wanted)), where)
    n = table.height
    if n == 0:
        raise ValueError(f"{where}: no rows")
    ids = table[id_column] if id_column is not None else pl.Series("id", np.arange(n))
    if id_column is not None:
        if ids.is_null().any():
            raise ValueError(f"{where}: column {id_column!r} {at(int(ids.is_null().arg_max()))} is missing; every row "
                             "needs an id")
        repeated = ids.is_duplicated()
        if repeated.any():
            first = int(repeated.arg_max())  # the first row whose id comes again
            again = int(np.flatnonzero((ids == ids[first]).to_numpy())[1])
            raise ValueError(f"{where}: column {id_column!r} {at(again)} repeats row {first}'s id: ids must be unique "
                             f"({int(repeated.sum())} rows share an id). Several rows per patient? Leave id_column "
                             "out (or give a row id) and name the patient with group_column (--group-column), "
                             "which keeps each patient in one split")
    if split_method not in TABLE_SPLIT_METHODS:
        raise ValueError(f"split_method: one of {TABLE_SPLIT_METHODS}, got {split_method!r}")
    if split_column is not None:
        split = table[split_column].cast(pl.String, strict=False)
        bad = ~split.is_in(list(SPLITS)).fill_null(False)
        if bad.any():
            row = int(bad.arg_max())
            raise ValueError(f"{where}: column {split_column!r} {at(row)} is not one of {SPLITS}"
                             f"{' (it is missing)' if table[split_column][row] is None else ''}")
    else:
        if group_column is not None:
            groups = table[group_column]
            if groups.is_null().any():
                raise ValueError(f"{where}: column {group_column!r} {at(int(groups.is_null().arg_max()))} is "
                                 "missing; every row needs its group")
            unit = groups.cast(pl.String).to_numpy()
            names, unit = np.unique(unit, return_inverse=True)  # rows -> group index (groups sorted: seed-stable)
        elif split_method == "hash" and id_column is not None:
            names, unit = ids.cast(pl.String).to_numpy(), np.arange(n)  # by id: a reordered table keeps its split
        else:
            names, unit = np.arange(n), np.arange(n)
        strata = None
        if split_method == "stratified":  # which events each row (group) was seen to have: "10", "01", ...
            seen = np.column_stack([table[c].cast(pl.Float64, strict=False).fill_null(0.0).to_numpy() == 1.0
                                    for _, c in events.values()])  # a bad indicator is refused below, by name
            per_unit = np.zeros((len(names), seen.shape[1]), dtype=bool)
            np.logical_or.at(per_unit, unit, seen)
            strata = np.array(["".join("1" if v else "0" for v in row) for row in per_unit])
        labels = assign_splits(names, seed, fractions, split_method, strata=strata)
        split = pl.Series(labels[unit].tolist(), dtype=pl.String)
    sizes = {k: int((split == k).sum()) for k in SPLITS}
    if any(v == 0 for v in sizes.values()):  # a given split column too: training, selection and test each need rows
        empty = [k for k, v in sizes.items() if v == 0]
        raise ValueError(f"{where}: {n} rows give the splits {sizes}: {' and '.join(empty)} would be empty; every "
                         f"split needs rows (with the seeded 60/20/20 split, at least {min_keys(fractions)} "
                         f"{'groups' if group_column else 'rows'}; a model evaluated on a handful of rows says little)")
    if impute not in IMPUTE:
        raise ValueError(f"impute: None (refuse missing feature values), 'median' or "
                         f"'median+indicator', got {impute!r}")
    feature_columns, medians, imputed, levels, level_counts, indicators = [], {}, {}, {}, {}, []
    for col in features:  # name the table's column and row, not the file the dataset would have
        if col in categorical:
            text = table[col].cast(pl.String)
            levels[col] = sorted(text.filter((split == "train") & text.is_not_null()).unique().to_list())
            if not levels[col]:
                raise ValueError(f"{where}: categorical column {col!r} has no value on any training row")
            if len(levels[col]) > MAX_LEVELS:
                raise ValueError(f"{where}: categorical column {col!r} has {len(levels[col])} levels on the training "
                                 f"rows (at most {MAX_LEVELS}): an identifier or free text? leave it out or group it")
            columns, missing, unseen = encode_levels(text, col, levels[col])
            feature_columns += columns
            level_counts[col] = {"missing": {k: int((missing & (split == k)).sum()) for k in SPLITS},
                                 "unseen": {k: int((unseen & (split == k)).sum()) for k in SPLITS}}
            continue
        values = table[col].cast(pl.Int8) if table[col].dtype == pl.Boolean else table[col]
        if not values.dtype.is_numeric():
            hint = (" or leave it out of the features (none were named, so every column but the event, id, split "
                    "and group columns is one)") if chosen else ""
            if _holds_dates(values):
                raise ValueError(f"{where}: column {col!r} has type {values.dtype}, expected numbers"
                                 f"{first_non_number(values, at)}: it holds dates; give what they mean as a number "
                                 f"(an age, days since a reference date) or leave it out of the features"
                                 f"{hint.removeprefix(' or leave it out of the features')}")
            raise ValueError(f"{where}: column {col!r} has type {values.dtype}, expected numbers"
                             f"{first_non_number(values, at)}; name it as "
                             f"categorical (one 0/1 column per level) or encode it first{hint}")
        values = values.cast(pl.Float64)
        missing = values.is_null() | values.is_nan().fill_null(True)
        if impute is None or not missing.any():
            try:
                _check_numeric(values, where, col, finite=True, first_line=first_line)
            except ValueError as exc:
                raise ValueError(f"{exc} (the models take no missing values: impute them, e.g. impute='median' "
                                 "(--impute median), or leave the rows out "
                                 "first, and say how in your report)") from None
        else:
            _check_numeric(
                values.fill_null(0.0).fill_nan(0.0), where, col, finite=True, first_line=first_line
            )  # +-inf: an error, not a gap
            train_values = values.filter(~missing & (split == "train"))
            if train_values.len() == 0:
                raise ValueError(f"{where}: column {col!r} has no value on any training row: nothing to impute "
                                 "from; leave the column out")
            medians[col] = float(train_values.median())
            imputed[col] = {k: int((missing & (split == k)).sum()) for k in SPLITS}
            values = values.fill_nan(None).fill_null(medians[col])
        if impute is not None and col not in medians:  # a complete column: its median for new rows
            medians[col] = float(values.filter(split == "train").median())
        feature_columns.append(values.alias(col))
        if impute == "median+indicator" and imputed.get(col, {}).get("train"):  # no training gap: nothing to learn
            indicators.append(col)
            feature_columns.append(missing.cast(pl.Float64).alias(missing_indicator(col)))
    names = [c.name for c in feature_columns]
    if GROUP_COLUMN in names:
        raise ValueError(f"{where}: feature column {GROUP_COLUMN!r} has the name of the dataset's column of split "
                         "groups; rename it")
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:
        raise ValueError(f"{where}: feature columns {twice} would be written twice (a column of the table has the "
                         "name of an indicator or a categorical level); rename it")
    cols = {"id": ids.alias("id"), "split": split.alias("split")}
    group = [] if group_column is None else [table[group_column].cast(pl.String).alias(GROUP_COLUMN)]
    features_frame = pl.DataFrame([*cols.values(), *group, *feature_columns])  # bool -> 0/1
    if missing_times not in ("refuse", "mask"):
        raise ValueError(f"missing_times: 'refuse' or 'mask', got {missing_times!r}")
    event_cols, masked = [], {}
    for e, (time_col, seen_col) in events.items():
        times, seen = table[time_col], table[seen_col].cast(pl.Float64, strict=False)
        numeric = times.dtype.is_numeric() or times.dtype == pl.Null  # text is refused below, naming the column
        gap = times.is_null() | (times.cast(pl.Float64).is_nan().fill_null(False) if numeric else False)
        if missing_times == "mask" and numeric and gap.any():
            seen_there = gap & (seen == 1.0).fill_null(False)
            if seen_there.any():
                row = int(seen_there.arg_max())
                raise ValueError(f"{where}: {at(row)} has {seen_col!r} = 1 but no {time_col!r}: an event seen "
                                 "without its time cannot be left out; give its time or drop the row")
            masked[e] = {k: int((gap & (split == k)).sum()) for k in SPLITS}
            # a placeholder the masked cell never uses (checked like any time, then ignored by the mask)
            times = times.cast(pl.Float64).fill_nan(None).fill_null(1.0)
            seen = seen.zip_with(~gap, pl.Series([0.0] * n))  # only there: elsewhere a missing indicator is an error
            event_cols.append(pl.Series(f"mask_{e}", (~gap).cast(pl.Int8)))
        try:
            _check_numeric(times, where, time_col, finite=True, positive=True, first_line=first_line)
        except ValueError as exc:
            raise ValueError(f"{exc} (a log-normal time must be > 0: an event on the day of entry needs a time "
                             "such as half a day, and a missing time a decision, e.g. missing_times='mask' "
                             "(--missing-times mask) leaves the event out for that "
                             "row; say which in your report)") from None
        bad = ~seen.is_in([0.0, 1.0]).fill_null(False)
        if bad.any():
            row = int(bad.arg_max())
            raise ValueError(f"{where}: column {seen_col!r} {at(row)} is "
                             f"{kind_of(table[seen_col][row])}{other_rows(bad)}; "
                             f"expected 0 or 1 (1 = event {e!r} seen at {time_col!r}, 0 = follow-up ended without it)")
        t, s, c, tt = event_columns(e)
        event_cols += [times.cast(pl.Float64).alias(t), seen.cast(pl.Int8).alias(s),
                       pl.Series(c, [None] * n, dtype=pl.Float64), pl.Series(tt, [None] * n, dtype=pl.Float64)]
    events_frame = pl.DataFrame([*cols.values(), *event_cols])
    if out_dir is None:  # checked only, nothing written
        return None
    digest = hashlib.sha256(features_frame.write_csv().encode() + events_frame.write_csv().encode()).hexdigest()
    manifest = {"name": name, "feature_names": [c.name for c in feature_columns],
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
    if impute is not None or levels:  # how new rows are prepared: flows.predict does the same to them
        manifest["featurization"] = {"source": "table", "impute": impute, "medians": medians, "imputed": imputed,
                                     "categorical": levels, "categorical_counts": level_counts,
                                     **({"indicators": indicators} if impute == "median+indicator" else {})}
    return write_dataset(out_dir, features_frame, events_frame, manifest)


MAX_LEVELS = 100  # a categorical column with more training levels is refused (an id or free text)


def missing_indicator(column: str) -> str:
    """The name of ``column``'s missingness indicator (``impute="median+indicator"``).

    >>> missing_indicator("lactate")
    'lactate_missing'
    """
    return f"{column}_missing"


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


def read_table(path) -> pl.DataFrame:
    """A table from a ``.csv`` file (types inferred from every row; an empty cell is null, and a
    column with no value at all is read as missing numbers, not text) or, under any other name, a
    parquet file; errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    kind = "CSV" if path.suffix.lower() == ".csv" else "parquet"
    try:
        table = pl.read_csv(path, infer_schema_length=None) if kind == "CSV" else pl.read_parquet(path)
    except Exception as exc:  # polars raises several types for an unreadable file
        raise ValueError(f"{path}: not a readable {kind} file ({exc})") from None
    if kind == "CSV":
        check_csv_header(path, table.columns)
    if kind == "CSV" and table.height:
        empty = [c for c in table.columns if table[c].null_count() == table.height]
        table = table.with_columns(pl.col(c).cast(pl.Float64) for c in empty)
    return table


def first_data_line(path) -> int | None:
    """The line of a table file's first data row (a CSV's header is line 1), or None where lines
    mean nothing (parquet). With ``row_at`` it names a row as the user finds it in an editor.

    >>> first_data_line("visits.csv"), first_data_line("visits.parquet")
    (2, None)
    """
    return 2 if Path(path).suffix.lower() == ".csv" else None


def row_at(row: int, first_line: int | None = None) -> str:
    """A row (counted from 0, the header not counted) for an error, with its line in the file
    when the file has lines.

    >>> row_at(5, 2), row_at(5)
    ('row 5 (line 7)', 'row 5')
    """
    return f"row {row}" + (f" (line {row + first_line})" if first_line else "")


def first_non_number(column: pl.Series, at=lambda row: f"row {row}") -> str:
    """Where a text column first holds a value that is not a number, as text for an error
    (``at`` names a row), or "" when every value is a number or missing.

    >>> first_non_number(pl.Series(["61", None, "n/a", "70"]))
    ' (row 2 is text that is not a number)'
    """
    text = column.cast(pl.String)
    bad = text.is_not_null() & text.str.strip_chars().cast(pl.Float64, strict=False).is_null()
    if not bad.any():
        return ""
    row = int(bad.arg_max())
    return f" ({at(row)} is {'text that is not a number' if text[row].strip() else 'empty text'})"


def check_csv_header(path, columns) -> None:
    """A CSV file read as one column whose name holds ';', a tab or '|' was written with another
    separator: an error that says so (rather than every column missing).

    >>> check_csv_header("cohort.csv", ["week;arrest;age"])
    Traceback (most recent call last):
    ...
    ValueError: cohort.csv: one column named 'week;arrest;age': the file seems separated by ';'; a CSV file here is
    separated by commas (with '.' as the decimal mark): convert it, or save it as parquet
    """
    if len(columns) == 1:
        sep = next((sep for sep in ";\t|" if sep in columns[0]), None)
        if sep is not None:
            raise ValueError(f"{path}: one column named {columns[0][:60]!r}: the file seems separated by {sep!r}; a "
                             "CSV file here is separated by commas (with '.' as the decimal mark): convert it, or "
                             "save it as parquet")
    try:  # the header as written: the reader renames a repeated name ("age_duplicated_0") and names an empty one
        with open(path, newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return
    check_column_names(path, header)


def check_column_names(where, names) -> None:
    """ValueError naming ``where`` and the column when a name is empty or repeated.

    >>> check_column_names("cohort.csv", ["age", "sofa", "age"])
    Traceback (most recent call last):
    ...
    ValueError: cohort.csv: column 'age' comes 2 times in the header (columns 0, 2); give each column its own name
    """
    for i, name in enumerate(names):
        if not str(name).strip():
            raise ValueError(f"{where}: column {i} (counted from 0) has an empty name in the header; name it")
    seen: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        seen.setdefault(str(name), []).append(i)
    for name, at in seen.items():
        if len(at) > 1:
            raise ValueError(f"{where}: column {name!r} comes {len(at)} times in the header (columns "
                             f"{', '.join(map(str, at))}); give each column its own name")


def save_rows(path, array, rows_per_write: int = 4096) -> None:
    """Write ``array`` as ``.npy`` (the bytes of ``np.save``). An ndarray is saved as is; any other
    array-like with ``shape`` and ``dtype`` (a ``RowView``: e.g. the rows of a larger array in
    another order) is written ``rows_per_write`` rows at a time with plain writes, never
    materialised whole (and not through a memory map, whose dirty pages would count as the
    writer's memory)."""
    if isinstance(array, np.ndarray):
        np.save(path, array, allow_pickle=False)
        return
    dtype, shape = np.dtype(array.dtype), tuple(int(n) for n in array.shape)
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        for lo in range(0, shape[0], rows_per_write):
            f.write(np.ascontiguousarray(array[slice(lo, lo + rows_per_write)], dtype=dtype).tobytes())


def check_frames(features: pl.DataFrame, events: pl.DataFrame, manifest: dict, where: str,
                 sequences: np.ndarray | None = None) -> None:
    """Raise ValueError naming the file, column and row of the first contract violation."""
    missing = [k for k in REQUIRED_MANIFEST if k not in manifest]
    if missing:
        raise ValueError(f"{where}/manifest.json: missing fields {missing}")
    feats, names = manifest["feature_names"], manifest["event_names"]
    fpath, epath = f"{where}/features.parquet", f"{where}/events.parquet"
    for key, listed in (("feature_names", feats), ("event_names", names)):
        repeated = sorted({str(v) for v in listed if list(listed).count(v) > 1})
        if repeated:
            raise ValueError(f"{where}/manifest.json: {key} lists {repeated} more than once")
    _require_columns(features, ["id", "split", *feats], fpath)
    _require_columns(events, ["id", "split", *[c for e in names for c in event_columns(e)]], epath)
    unknown = sorted({m.group(2) for col in events.columns if (m := EVENT_COLUMN.fullmatch(col))} - set(names))
    if unknown:  # an event the manifest does not name would be dropped without a word
        raise ValueError(f"{epath}: columns for events {unknown} that manifest.json's event_names "
                         f"{list(names)} does not name")
    if features.height != events.height:
        raise ValueError(f"{epath}: {events.height} rows but features.parquet has {features.height}")
    if not features["id"].equals(events["id"]):
        raise ValueError(f"{epath}: column 'id' is not in the same order as in features.parquet")
    if features["id"].n_unique() != features.height:
        raise ValueError(f"{fpath}: column 'id' has duplicate values")
    bad_split = ~features["split"].is_in(list(SPLITS)).fill_null(False)  # a null split is bad too
    if bad_split.any():
        row = int(bad_split.arg_max())
        raise ValueError(f"{fpath}: column 'split' row {row} is not one of {SPLITS}")
    differ = (features["split"] != events["split"]).fill_null(True)
    if differ.any():
        row = int(differ.arg_max())
        raise ValueError(f"{epath}: column 'split' row {row} differs from features.parquet's split of that row")
    if GROUP_COLUMN in feats:
        raise ValueError(f"{where}/manifest.json: {GROUP_COLUMN!r} is the column of the split's groups, not a "
                         "feature name; rename the feature")
    if GROUP_COLUMN in features.columns:
        _check_groups(features, fpath)
    counts = {k: int((features["split"] == k).sum()) for k in SPLITS}
    declared = manifest["split_sizes"]
    if (not isinstance(declared, dict) or set(declared) - set(SPLITS)
            or any(declared.get(k, 0) != counts[k] for k in SPLITS)):
        raise ValueError(f"{where}/manifest.json: split_sizes {declared} do not match the rows of "
                         f"features.parquet's 'split' column {counts}")
    for col in feats:
        _check_numeric(features[col], fpath, col, finite=True)
    for e in names:
        t, s, c, tt = event_columns(e)
        _check_numeric(events[t], epath, t, finite=True, positive=True)
        for col, unknown in ((s, False), (c, True)):  # c: null (or NaN) = the true occurrence is not known
            vals = events[col].cast(pl.Float64, strict=False)
            known = ~vals.fill_nan(None).is_null() if unknown else pl.Series([True] * len(vals))
            unreadable = vals.is_null() & events[col].is_not_null()  # e.g. text that is not a number
            bad = unreadable | (known & ~vals.is_in([0.0, 1.0]).fill_null(False))
            if bad.any():
                row = int(bad.arg_max())
                raise ValueError(f"{epath}: column {col!r} row {row} is {kind_of(events[col][row])}{other_rows(bad)}; "
                                 "expected 0 or 1"
                                 + (", or null where the true occurrence is not known" if unknown else ""))
        if f"mask_{e}" in events.columns:
            vals = events[f"mask_{e}"].cast(pl.Float64, strict=False)
            bad = vals.is_null() | ~vals.is_in([0.0, 1.0])
            if bad.any():
                row = int(bad.arg_max())
                raise ValueError(f"{epath}: column 'mask_{e}' row {row} is {kind_of(events[f'mask_{e}'][row])}; "
                                 f"expected 0 or 1")
        true_t = events[tt].cast(pl.Float64, strict=False).fill_null(float("nan")).to_numpy()
        bad_t = ~np.isnan(true_t) & ~(np.isfinite(true_t) & (true_t > 0))  # null / NaN: no true time
        if bad_t.any():
            row = int(np.flatnonzero(bad_t)[0])
            raise ValueError(f"{epath}: column {tt!r} row {row} is {kind_of(float(true_t[row]))}; a true time must be "
                             "finite and > 0, or null")
        bad = ((events[s] == 1) & (events[c].cast(pl.Float64, strict=False) == 0)).fill_null(False)
        if bad.any():
            raise ValueError(f"{epath}: row {int(bad.arg_max())} has {s} = 1 but {c} = 0 "
                             f"(an observed event must occur)")
    if sequences is not None and sequences.shape[0] != features.height:
        raise ValueError(f"{where}/sequences.npy: {sequences.shape[0]} rows but features.parquet "
                         f"has {features.height}")


def _check_groups(features: pl.DataFrame, fpath: str) -> None:
    """``split_group``: text, on every row, and no group in two splits."""
    groups = features[GROUP_COLUMN]
    if groups.dtype != pl.String:
        raise ValueError(f"{fpath}: column {GROUP_COLUMN!r} has type {groups.dtype}, expected text")
    if groups.is_null().any():
        raise ValueError(f"{fpath}: column {GROUP_COLUMN!r} row {int(groups.is_null().arg_max())} is missing; every "
                         "row needs the group its split was drawn by")
    spread = features.group_by(GROUP_COLUMN).agg(pl.col("split").n_unique().alias("n")).filter(pl.col("n") > 1)
    if spread.height:
        first = int(features[GROUP_COLUMN].is_in(spread[GROUP_COLUMN].implode()).arg_max())
        raise ValueError(f"{fpath}: column {GROUP_COLUMN!r} row {first} holds a group whose rows are in more "
                         f"than one split ({spread.height} such groups); a group's rows must share one split")


def _require_columns(df: pl.DataFrame, cols, path: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}{close_names(missing, df.columns)}")


def close_names(missing, present) -> str:
    """For an error about missing columns: the present column each missing name seems a misspelling
    of (another case, a typo), as text, or, when none is close, the columns there are (the first 10).

    >>> close_names(["wek", "Age", "zzz"], ["week", "arrest", "age"])
    "; did you mean 'week' for 'wek', 'age' for 'Age'?"
    >>> close_names(["pid"], ["week", "arrest"]), close_names(["pid"], [f"x{i}" for i in range(12)])[-29:]
    ('; the columns are week, arrest', 'x7, x8, x9 and 2 more columns')
    """
    import difflib

    by_case = {str(c).casefold(): c for c in present}
    guesses = []
    for name in missing:
        match = by_case.get(str(name).casefold()) or next(
            iter(difflib.get_close_matches(str(name), [str(c) for c in present], n=1, cutoff=0.8)), None)
        if match is not None:
            guesses.append(f"{match!r} for {name!r}")
    if guesses:
        return f"; did you mean {', '.join(guesses)}?"
    present = [str(c) for c in present]
    more = f" and {len(present) - 10} more columns" if len(present) > 10 else ""
    return f"; the columns are {', '.join(present[:10])}{more}" if present else ""


def _check_numeric(col: pl.Series, path: str, name: str, finite: bool, positive: bool = False,
                   first_line: int | None = None) -> None:
    if not col.dtype.is_numeric():
        where = first_non_number(col, lambda row: row_at(row, first_line))
        if not where and col.dtype == pl.String and col.is_not_null().any():
            where = " (every value reads as a number: store the column as numbers)"
        if _holds_dates(col):
            where += (": it holds dates; give the time from each subject's start of follow-up instead, "
                      "a number in the dataset's time unit (e.g. days from admission)")
        raise ValueError(f"{path}: column {name!r} has type {col.dtype}, expected a number{where}")
    vals = col.cast(pl.Float64).to_numpy()
    bad = ~np.isfinite(vals) if finite else np.zeros(len(vals), bool)
    if positive:
        bad |= ~(vals > 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        need = "finite and > 0" if positive else "finite"
        value = "missing (null)" if col[row] is None else kind_of(float(vals[row]))
        raise ValueError(f"{path}: column {name!r} {row_at(row, first_line)} is {value}{other_rows(bad)}; "
                         f"values must be {need}")


def _holds_dates(col: pl.Series) -> bool:
    """Whether a column is of a date or datetime type, or text whose first value reads as one.

    >>> [_holds_dates(pl.Series([v])) for v in ("2020-05-20", "05/20/2020", "20.05.2020 10:30", "52 weeks", "52")]
    [True, True, True, False, False]
    """
    if col.dtype.is_temporal():
        return True
    if col.dtype != pl.String or col.drop_nulls().is_empty():
        return False
    first = col.drop_nulls().head(1).str.strip_chars()
    try:
        if first.str.to_datetime(strict=False).is_not_null().all():
            return True
    except pl.exceptions.ComputeError:  # no ISO-like format fits the value: try day/month orders
        pass
    import datetime

    value = first[0].split(" ")[0]
    for fmt in ("%m/%d/%Y", "%d/%m/%Y", "%d.%m.%Y", "%Y/%m/%d", "%d-%b-%Y"):
        try:
            datetime.datetime.strptime(value, fmt)
            return True
        except ValueError:
            continue
    return False


def other_rows(bad) -> str:
    """How many rows beyond the first that an error names break the same rule (``bad``: a 0/1 mask
    of the rows), so that a user fixes them all at once rather than one run at a time.

    >>> other_rows(np.array([False, True, True, False, True])), other_rows(pl.Series([True, False]))
    (' (and 2 other rows)', '')
    """
    n = int(np.asarray(bad).sum()) - 1
    return f" (and {n} other row{'s' if n != 1 else ''})" if n > 0 else ""


def load_dataset(path) -> Dataset:
    """Read a dataset folder, check it against the contract, and split it into arrays."""
    path = Path(path)
    for fname in DATASET_FILES:
        if not (path / fname).is_file():
            raise FileNotFoundError(f"{path / fname}: missing; not a dataset folder")
    try:
        manifest = json.loads((path / "manifest.json").read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path / 'manifest.json'}: not valid JSON ({exc})") from None
    features = pl.read_parquet(path / "features.parquet")
    events = pl.read_parquet(path / "events.parquet")
    seq = None
    if (path / "sequences.npy").is_file():
        seq = NpyRows(path / "sequences.npy")  # rows are read when a batch needs them
    check_frames(features, events, manifest, where=str(path), sequences=seq)
    feats, names = list(manifest["feature_names"]), list(manifest["event_names"])
    ds = Dataset(path=path, manifest=manifest, feature_names=feats, event_names=names)
    split = features["split"].to_numpy()
    X = features.select(feats).cast(pl.Float64).to_numpy() if feats else np.zeros((features.height, 0))
    cols = {k: events.select([event_columns(e)[i] for e in names]).cast(pl.Float64).to_numpy()
            for i, k in enumerate(("T", "S", "C", "T_true"))}
    ids = features["id"].to_numpy()
    groups = features[GROUP_COLUMN].to_numpy() if GROUP_COLUMN in features.columns else None
    mask = None
    if any(f"mask_{e}" in events.columns for e in names):
        mask = np.column_stack([events[f"mask_{e}"].cast(pl.Float64).to_numpy() if f"mask_{e}" in events.columns
                                else np.ones(events.height) for e in names])
    for name in SPLITS:
        rows = np.flatnonzero(split == name)
        ds.splits[name] = Split(ids=ids[rows], X=X[rows], sequences=None if seq is None else RowView(seq, rows),
                                mask=None if mask is None else mask[rows],
                                groups=None if groups is None else groups[rows],
                                **{k: v[rows] for k, v in cols.items()})
    return ds
