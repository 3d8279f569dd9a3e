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
from .choices import SPLIT_METHODS, TABLE_SPLIT_METHODS  # noqa: F401  (SPLIT_METHODS: the builds read it here)
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


def missing_indicator(column: str) -> str:
    """The name of ``column``'s missingness indicator (``impute="median+indicator"``).

    >>> missing_indicator("lactate")
    'lactate_missing'
    """
    return f"{column}_missing"


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


def row_at(row: int, first_line: int | None = None) -> str:
    """A row (counted from 0, the header not counted) for an error, with its line in the file
    when the file has lines.

    >>> row_at(5, 2), row_at(5)
    ('row 5 (line 7)', 'row 5')
    """
    return f"row {row}" + (f" (line {row + first_line})" if first_line else "")


def first_non_number(column: pl.Series, at=lambda row: f"row {row}") -> str:
    """Where a text column first holds a value that is not a number, as text for an error
    (``at`` names a row), or "" when every value is a number or missing, or the column holds dates
    or times, lists, structs or bytes (its type says what it is).

    >>> first_non_number(pl.Series(["61", None, "n/a", "70"]))
    ' (row 2 is text that is not a number)'
    >>> import datetime
    >>> first_non_number(pl.Series([datetime.date(2020, 1, 1)])), first_non_number(pl.Series([["a", "b"]]))
    ('', '')
    """
    if not_text(column.dtype):
        return ""
    text = column.cast(pl.String)
    bad = text.is_not_null() & text.str.strip_chars().cast(pl.Float64, strict=False).is_null()
    if not bad.any():
        return ""
    row = int(bad.arg_max())
    return f" ({at(row)} is {'text that is not a number' if text[row].strip() else 'empty text'})"


def not_text(dtype) -> bool:
    """Whether a column of type ``dtype`` holds neither numbers nor text: dates or times, lists,
    arrays, structs, bytes or Python objects. Such a column is named by its type, never read as text.

    >>> not_text(pl.List(pl.String)), not_text(pl.Binary), not_text(pl.String), not_text(pl.Float64)
    (True, True, False, False)
    """
    return dtype.is_temporal() or dtype.is_nested() or dtype in (pl.Binary, pl.Object)


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
    _check_manifest(manifest, where)
    feats, names = manifest["feature_names"], manifest["event_names"]
    fpath, epath = f"{where}/features.parquet", f"{where}/events.parquet"
    require_columns(features, ["id", "split", *feats], fpath)
    require_columns(events, ["id", "split", *[c for e in names for c in event_columns(e)]], epath)
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
    if GROUP_COLUMN in features.columns:
        _check_groups(features, fpath)
    counts = {k: int((features["split"] == k).sum()) for k in SPLITS}
    declared = manifest["split_sizes"]
    if (not isinstance(declared, dict) or set(declared) - set(SPLITS)
            or any(declared.get(k, 0) != counts[k] for k in SPLITS)):
        raise ValueError(f"{where}/manifest.json: split_sizes {declared} do not match the rows of "
                         f"features.parquet's 'split' column {counts}")
    for col in feats:
        check_numeric(features[col], fpath, col, finite=True)
    for e in names:
        _check_event(events, e, epath)
    if sequences is not None and sequences.shape[0] != features.height:
        raise ValueError(f"{where}/sequences.npy: {sequences.shape[0]} rows but features.parquet "
                         f"has {features.height}")


def _check_event(events: pl.DataFrame, e: str, epath: str) -> None:
    """Event ``e``'s columns: a time > 0, 0/1 indicators (``c_e`` null where unknown), an optional
    0/1 mask, a true time > 0 or null, and no observed event that did not occur."""
    t, s, c, tt = event_columns(e)
    check_numeric(events[t], epath, t, finite=True, positive=True)
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


def _check_manifest(manifest: dict, where: str) -> None:
    """The manifest's required fields, and no feature or event named twice or a feature named as
    the split's groups."""
    missing = [k for k in REQUIRED_MANIFEST if k not in manifest]
    if missing:
        raise ValueError(f"{where}/manifest.json: missing fields {missing}")
    for key in ("feature_names", "event_names"):
        listed = list(manifest[key])
        repeated = sorted({str(v) for v in listed if listed.count(v) > 1})
        if repeated:
            raise ValueError(f"{where}/manifest.json: {key} lists {repeated} more than once")
    if GROUP_COLUMN in manifest["feature_names"]:
        raise ValueError(f"{where}/manifest.json: {GROUP_COLUMN!r} is the column of the split's groups, not a "
                         "feature name; rename the feature")


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


def require_columns(df: pl.DataFrame, cols, path: str) -> None:
    """ValueError naming ``path`` and the missing columns (with close names the frame has)."""
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


def check_numeric(col: pl.Series, path: str, name: str, finite: bool, positive: bool = False,
                   first_line: int | None = None) -> None:
    """ValueError naming ``path``, the column and its first bad row (with its line when the file
    has lines, ``first_line``) unless every value is a number, finite where ``finite``, > 0 where
    ``positive``; never a cell's content."""
    if not col.dtype.is_numeric():
        where = first_non_number(col, lambda row: row_at(row, first_line))
        if not where and col.dtype == pl.String and col.is_not_null().any():
            where = " (every value reads as a number: store the column as numbers)"
        if isinstance(col.dtype, pl.Duration):
            where += ": it holds durations; give each as a number in the dataset's time unit (e.g. days)"
        elif holds_dates(col):
            where += (": it holds dates; give the time from each subject's start of follow-up instead, "
                      "a number in the dataset's time unit (e.g. days from admission)")
        elif comma_numbers(col):
            where += f": {COMMA_HINT}"
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


COMMA_HINT = ("its numbers are written with ',' (a decimal comma or a thousands separator); write them with '.' as "
              "the decimal mark and no separators")


def comma_numbers(col: pl.Series) -> bool:
    """Whether a text column's first value that is not a number reads as one written with ',': a
    decimal comma (``1,5``) or thousands separators (``12,000``).

    >>> [comma_numbers(pl.Series(["2", v])) for v in ("1,5", "12,000.5", "-3,25", "1,234,567", "n/a", "1,2,x")]
    [True, True, True, True, False, False]
    """
    if col.dtype != pl.String:
        return False
    text = col.drop_nulls().str.strip_chars()
    bad = text.filter(text.cast(pl.Float64, strict=False).is_null())
    return bool(len(bad)) and re.fullmatch(r"[+-]?(\d{1,3}(,\d{3})+(\.\d+)?|\d+,\d+)", bad[0]) is not None


def holds_dates(col: pl.Series) -> bool:
    """Whether a column is of a date or datetime type, or text whose first value reads as one.

    >>> [holds_dates(pl.Series([v])) for v in ("2020-05-20", "05/20/2020", "20.05.2020 10:30", "52 weeks", "52")]
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


def load_dataset(path, splits=SPLITS) -> Dataset:
    """Read a dataset folder, check it against the contract, and split it into arrays: the
    ``splits`` named (a fit needs only "train" and "val"; the others are not held in memory)."""
    path = Path(path)
    unknown = sorted(set(splits) - set(SPLITS))
    if unknown:
        raise ValueError(f"splits: {unknown} are not among {list(SPLITS)}")
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
    cols = {k: events.select([event_columns(e)[i] for e in names]).cast(pl.Float64).to_numpy()
            for i, k in enumerate(("T", "S", "C", "T_true"))}
    ids = features["id"].to_numpy()
    groups = features[GROUP_COLUMN].to_numpy() if GROUP_COLUMN in features.columns else None
    mask = None
    if any(f"mask_{e}" in events.columns for e in names):
        mask = np.column_stack([events[f"mask_{e}"].cast(pl.Float64).to_numpy() if f"mask_{e}" in events.columns
                                else np.ones(events.height) for e in names])
    rows = {name: np.flatnonzero((features["split"] == name).to_numpy()) for name in SPLITS if name in splits}
    X = {name: np.empty((r.size, len(feats))) for name, r in rows.items()}
    for k, f in enumerate(feats):  # a column at a time: no whole-table copy beside the frame and the splits
        column = features[f].cast(pl.Float64).to_numpy()
        for name, r in rows.items():
            X[name][:, k] = column[r]
    del features, events
    for name, r in rows.items():
        ds.splits[name] = Split(ids=ids[r], X=X[name], sequences=None if seq is None else RowView(seq, r),
                                mask=None if mask is None else mask[r],
                                groups=None if groups is None else groups[r],
                                **{k: v[r] for k, v in cols.items()})
    return ds
