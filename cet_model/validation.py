"""Checks at the public boundary. Every error names the argument, the row and the column, and
what kind of value is wrong there (``kind_of``), never the value itself."""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.exceptions import ComplexWarning

from .comments import CommentInputs


def column_names(a) -> list[str] | None:
    """The column names of a pandas or polars data frame (as strings), else None."""
    cols = getattr(a, "columns", None)
    if cols is None or isinstance(a, np.ndarray):
        return None
    return [str(c) for c in list(cols)]


def kind_of(value) -> str:
    """What a bad cell holds, for an error message, never the content itself (a cell of a
    clinical table is data about a person; messages reach logs and APIs).

    >>> [kind_of(v) for v in (None, "M", " ", float("nan"), float("inf"), -3.0, 0, 2, True)]
    ['missing', 'text', 'empty text', 'NaN', 'infinite', 'negative', '0', 'a number', 'a boolean']
    """
    if value is None:
        return "missing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "text" if value.strip() else "empty text"
    try:
        f = float(value)
    except (TypeError, ValueError):
        return f"a {type(value).__name__}"
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "infinite"
    return "negative" if f < 0 else "0" if f == 0 else "a number"


def codes_event_types(values) -> bool:
    """Whether indicator ``values`` hold a whole number above 1, as a status column that codes the
    kind of event does (0 = censored, 1 = relapse, 2 = death): a table that needs one 0/1 column
    per event, not a typo.

    >>> codes_event_types(np.array([0.0, 1.0, 2.0])), codes_event_types(np.array([0.0, 0.5, -1.0, np.nan]))
    (True, False)
    """
    v = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        return bool(((v > 1) & (v == np.round(v))).any())


def _unreadable_cell(a) -> str:
    """Where a data frame holds a value that is not a number: ``" (column 'sex', row 0: text)"``,
    or "" when ``a`` is not a data frame or no single cell is to blame."""
    cols = getattr(a, "columns", None)
    for label in ([] if cols is None or isinstance(a, np.ndarray) else list(cols)):
        try:
            values = list(a[label])
        except Exception:  # noqa: BLE001 - an unusual frame: fall back to the message without the cell
            return ""
        for row, v in enumerate(values):
            try:
                float(v)
            except (TypeError, ValueError):
                return f" (column {str(label)!r}, row {row}: {kind_of(v)})"
    return ""


def _complex(a) -> bool:
    """Whether ``a`` reads as an array of complex numbers (or holds one among Python numbers)."""
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError):
        return False
    return arr.dtype.kind == "c" or (arr.dtype == object and any(isinstance(v, complex) for v in arr.ravel()[:10_000]))


def as_matrix(a, name: str, n_cols: int | None = None) -> np.ndarray:
    """A 2-D float64 array; a 1-D input is one column. Raises ValueError naming ``name`` (and,
    for a data frame, the column and row of the first value that is not a number). Sparse and
    complex inputs are refused by name: densifying could take all the memory there is, and a float
    cast would drop the imaginary part in silence.

    >>> import scipy.sparse
    >>> as_matrix(scipy.sparse.eye(3, format="csr"), "X")
    Traceback (most recent call last):
    ...
    TypeError: X: a sparse matrix (csr_matrix); CET needs a dense array: X.toarray() if it fits in memory
    >>> as_matrix(np.array([1 + 2j]), "X")
    Traceback (most recent call last):
    ...
    ValueError: X: complex values; CET needs real numbers
    >>> as_matrix([[1.0, 2j]], "X")
    Traceback (most recent call last):
    ...
    ValueError: X: complex values; CET needs real numbers
    """
    if hasattr(a, "tocsr") and hasattr(a, "nnz"):  # scipy.sparse matrices and arrays (scipy need not be imported)
        raise TypeError(f"{name}: a sparse matrix ({type(a).__name__}); CET needs a dense array: "
                        f"{name}.toarray() if it fits in memory")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ComplexWarning)  # arrays and data frames alike
            arr = np.asarray(a, dtype=np.float64)
    except ComplexWarning:
        raise ValueError(f"{name}: complex values; CET needs real numbers") from None
    except (TypeError, ValueError) as exc:
        if _complex(a):  # a list of complex numbers: numpy refuses the cast instead of warning
            raise ValueError(f"{name}: complex values; CET needs real numbers") from None
        cell = _unreadable_cell(a)  # the library's message would quote the cell: its type only
        raise ValueError(f"{name}: cannot be read as a numeric array{cell or f' ({type(exc).__name__})'}") from None
    if arr.ndim == 1:
        if n_cols is not None and n_cols != 1:
            hint = f"; one row is {name}.reshape(1, -1)" if arr.size == n_cols else ""
            raise ValueError(f"{name}: a 1-D array of {arr.size} values, but {n_cols} columns are expected{hint}")
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array (rows x columns), got {arr.ndim} dimensions")
    if n_cols is not None and arr.shape[1] != n_cols:
        raise ValueError(f"{name}: expected {n_cols} columns, got {arr.shape[1]}")
    return arr


def _time_kind(value) -> str:
    """A time that is not > 0, as an error names it: its kind, not its value.

    >>> _time_kind(0.0), _time_kind(-2.5)
    ('0', 'a negative time')
    """
    return "0" if value == 0 else "a negative time"


def _first_bad(mask: np.ndarray) -> tuple[int, int]:
    row, col = np.argwhere(mask)[0]
    return int(row), int(col)


def _label(labels: list[str] | None, col: int) -> str:
    """`` ('name')`` for column ``col`` of a data frame, "" for an array."""
    return f" ({labels[col]!r})" if labels is not None and col < len(labels) else ""


def check_finite(arr: np.ndarray, name: str, what: str = "column", labels: list[str] | None = None) -> None:
    """Raise a ValueError naming the first non-finite cell (row, column, and the column's label
    when ``labels`` are given) of a 2-d array and the count."""
    bad = ~np.isfinite(arr)
    if bad.any():
        r, c = _first_bad(bad)
        raise ValueError(f"{name}: non-finite value ({kind_of(arr[r, c])}) at row {r}, {what} {c}{_label(labels, c)} "
                         f"({int(bad.sum())} non-finite values in all)")


def check_features(X, name: str = "X", n_features: int | None = None) -> np.ndarray:
    """X (array or data frame) as a finite float (n, d) array with ``n_features`` columns when given.
    A ``CommentInputs`` is checked chunk by chunk and returned as it is (never materialised)."""
    if isinstance(X, CommentInputs):
        return X.check(name, n_features)
    arr = as_matrix(X, name, n_features)
    check_finite(arr, name, labels=column_names(X))
    return arr


def check_sample_weight(weight, n: int, name: str = "sample_weight") -> np.ndarray | None:
    """Row weights as float64 (n,), scaled to a mean of 1 (a fit's loss keeps its scale and step
    size), or None for none given. Each row's log-likelihood counts ``weight`` times: an integer
    weight is the row repeated. Refused, naming the first row: another length, a value that is not
    finite or is negative; and weights that are all 0.

    >>> check_sample_weight([1.0, 3.0], 2).tolist()
    [0.5, 1.5]
    >>> check_sample_weight([1.0, -1.0, 2.0], 3)
    Traceback (most recent call last):
    ...
    ValueError: sample_weight: weights must be finite and >= 0; found a negative value at row 1 (1 such rows in all)
    """
    if weight is None:
        return None
    try:
        w = np.asarray(weight, dtype=np.float64)
    except (TypeError, ValueError):  # numpy's message quotes the value
        raise ValueError(f"{name}: weights must be numbers") from None
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(f"{name}: one weight per row is needed, {n}; got shape {w.shape}")
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        kind = "a negative value" if np.isfinite(w[r]) else f"a non-finite value ({kind_of(w[r])})"
        raise ValueError(f"{name}: weights must be finite and >= 0; found {kind} at row {r} "
                         f"({int(bad.sum())} such rows in all)")
    if not w.sum() > 0:
        raise ValueError(f"{name}: every weight is 0; no row would count")
    return w / w.mean()


def check_survival(X, T, S, *, names=("X", "T", "S"), n_features=None, n_events=None,
                   max_events=None, mask=None, mask_name="mask"):
    """Validate a feature matrix and its event times and indicators; return float64 arrays.

    Rules: X finite; T finite and > 0; S in {0, 1}; the same rows everywhere; T and S n x M.
    """
    x_name, t_name, s_name = names
    x = check_features(X, x_name, n_features)
    t = as_matrix(T, t_name, n_events)
    s = as_matrix(S, s_name, t.shape[1])
    for arr, nm in ((t, t_name), (s, s_name)):
        if arr.shape[0] != x.shape[0]:
            raise ValueError(f"{nm}: has {arr.shape[0]} rows but {x_name} has {x.shape[0]}")
    if t.shape[0] == 0:
        raise ValueError(f"{x_name}: no rows")
    if max_events is not None and t.shape[1] > max_events:
        raise ValueError(f"{t_name}: {t.shape[1]} events, but at most {max_events} are supported "
                         f"by this estimator (2^M patterns are enumerated)")
    t_labels, s_labels = column_names(T), column_names(S)
    check_finite(t, t_name, "event", t_labels)
    if (t <= 0).any():
        r, c = _first_bad(t <= 0)
        raise ValueError(f"{t_name}: event times must be > 0; found {_time_kind(t[r, c])} at row {r}, "
                         f"event {c}{_label(t_labels, c)}")
    check_finite(s, s_name, "event", s_labels)
    if not np.isin(s, (0.0, 1.0)).all():
        r, c = _first_bad(~np.isin(s, (0.0, 1.0)))
        hint = (f"; a status that codes the kind of event (0 = censored, 1, 2, ...) is given as one 0/1 column of "
                f"{s_name} per event" if codes_event_types(s) else "")
        raise ValueError(f"{s_name}: values must be 0 or 1; found another value at row {r}, "
                         f"event {c}{_label(s_labels, c)}{hint}")
    m = None
    if mask is not None:
        m = as_matrix(mask, mask_name, t.shape[1])
        if m.shape[0] != x.shape[0]:
            raise ValueError(f"{mask_name}: has {m.shape[0]} rows but {x_name} has {x.shape[0]}")
        if not np.isin(m, (0.0, 1.0)).all():
            r, c = _first_bad(~np.isin(m, (0.0, 1.0)))
            raise ValueError(f"{mask_name}: values must be 0 or 1; found another value at row {r}, event {c}")
    return x, t, s, m


def unobserved_events(s: np.ndarray, m: np.ndarray | None, labels: list[str] | None = None) -> str | None:
    """A sentence naming the events with no observed time among the rows used (``m``: 1 = cell
    used), or None when every event has one. Such an event's time head learns nothing from the
    data and its P(ever) only that no event was seen.

    >>> unobserved_events(np.array([[1.0, 0.0], [0.0, 0.0]]), None, ["troponin", "lipase"])
    "S: no observed time for event 1 ('lipase') among its 2 rows"
    >>> unobserved_events(np.array([[1.0, 1.0], [0.0, 0.0]]), np.array([[1.0, 0.0], [1.0, 0.0]]))
    'S: no observed time for event 1 (the mask drops all its cells)'
    """
    used = np.ones_like(s) if m is None else m
    empty = [j for j in range(s.shape[1]) if not (s[:, j] * used[:, j]).any()]
    if not empty:
        return None
    def where(j):
        n = int(used[:, j].sum())
        return f"event {j}{_label(labels, j)} " + (f"among its {n} rows" if n else "(the mask drops all its cells)")
    return "S: no observed time for " + ", ".join(where(j) for j in empty)
