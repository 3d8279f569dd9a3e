"""The Reddit comment encoder: a per-comment linear layer with tanh, then max and mean pooling
over the comments, concatenated with the aux features.

Models see one flat feature matrix: ``[aux | comment embeddings flattened]`` of width
``n_aux + L * D`` (``flatten_inputs``), so batching, chunking, validation and persistence
are the same as for tabular data; the first module of the network (``CommentEncoder``)
splits it back. Pass ``comment_encoder={"n_aux": a, "length": L, "dim": D, "width": H}`` to
CETModel, ETModel or BCModel.

At the paper's size the flat matrix does not fit in memory (492,059 users x 20 x 384 float32
is 15 GB). ``CommentInputs`` is the same matrix, lazily: the aux features in memory and the
embeddings read by rows from wherever they are (``NpyRows``: ``sequences.npy`` read with
``pread``, float32 or float16), flattened one batch or chunk at a time. The models accept it wherever they accept X
and then never hold more than a batch (training) or a chunk (evaluation, prediction) of it.
"""

from __future__ import annotations

import os

import numpy as np

SPEC_KEYS = ("n_aux", "length", "dim", "width")


def check_spec(spec: dict | None, n_features: int | None = None) -> dict | None:
    """Validate a ``comment_encoder`` dict (keys ``SPEC_KEYS``, positive sizes; its width must
    match ``n_features`` when given); returns it with int values, or None."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or sorted(spec) != sorted(SPEC_KEYS):
        raise ValueError(f"comment_encoder must be a dict with keys {SPEC_KEYS}, got {spec!r}")
    spec = {k: int(spec[k]) for k in SPEC_KEYS}
    if spec["n_aux"] < 0 or min(spec["length"], spec["dim"], spec["width"]) < 1:
        raise ValueError(f"comment_encoder sizes must be positive, got {spec}")
    width = spec["n_aux"] + spec["length"] * spec["dim"]
    if n_features is not None and n_features != width:
        raise ValueError(f"X has {n_features} columns but comment_encoder expects n_aux + length * dim = {width}")
    return spec


def flatten_inputs(aux: np.ndarray, sequences: np.ndarray) -> np.ndarray:
    """(n, a) aux features and (n, L, D) comment embeddings -> (n, a + L * D) float32, in memory
    (``CommentInputs`` reads the same matrix by rows instead)."""
    return CommentInputs(aux, sequences).rows(slice(None))


class NpyRows:
    """The rows of a ``.npy`` file, read with ``os.pread`` when asked for: never loaded whole and
    never memory-mapped, so a process's memory (RSS, which counts mapped file pages) holds only
    the rows in use. ``rows[index]`` (an integer array or a slice) reads runs of consecutive rows
    in one call each; ``np.asarray(rows)`` reads everything. The file is opened for each read
    (no descriptor is held, so copies and threads are safe).

        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "a.npy")
        >>> np.save(path, np.arange(12, dtype=np.float16).reshape(4, 3))
        >>> NpyRows(path)[np.array([3, 0])].tolist()
        [[9.0, 10.0, 11.0], [0.0, 1.0, 2.0]]
    """

    def __init__(self, path):
        self.path = str(path)
        try:
            with open(self.path, "rb") as f:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read(f)
                self.offset = f.tell()
        except (ValueError, OSError, EOFError) as exc:
            raise ValueError(f"{self.path}: not a readable .npy array ({exc})") from None
        if dtype.hasobject or not (np.issubdtype(dtype, np.number) or dtype == np.bool_):
            raise ValueError(f"{self.path}: dtype {dtype}, expected numbers")
        if fortran or len(shape) < 1:
            raise ValueError(f"{self.path}: expected a C-ordered array with rows, got shape {shape}"
                             f"{' in Fortran order' if fortran else ''}")
        self.shape, self.dtype, self.ndim = tuple(shape), dtype, len(shape)
        self.row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        size = os.path.getsize(self.path)
        if size < self.offset + self.row_bytes * self.shape[0]:
            raise ValueError(f"{self.path}: truncated: {size} bytes, the header promises "
                             f"{self.offset + self.row_bytes * self.shape[0]}")

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index) -> np.ndarray:
        if isinstance(index, slice):
            start, stop, step = index.indices(self.shape[0])
            if step == 1:
                return self._read(start, max(0, stop - start))
            index = np.arange(start, stop, step)
        index = np.asarray(index)
        if index.dtype == np.bool_:
            index = np.flatnonzero(index)
        index = index.astype(np.int64).reshape(-1)
        if index.size and (index.min() < -self.shape[0] or index.max() >= self.shape[0]):
            raise IndexError(f"{self.path}: row index out of range for {self.shape[0]} rows")
        index = np.where(index < 0, index + self.shape[0], index)
        out = np.empty((index.size, *self.shape[1:]), dtype=self.dtype)
        order = np.argsort(index, kind="stable")
        srt = index[order]
        breaks = np.flatnonzero(np.diff(srt) != 1) + 1  # runs of consecutive rows: one read each
        with open(self.path, "rb") as f:
            for lo, hi in zip(np.r_[0, breaks], np.r_[breaks, srt.size], strict=True):
                if hi > lo:
                    out[order[lo:hi]] = self._read(int(srt[lo]), int(srt[hi - 1] - srt[lo] + 1), f.fileno())
        return out

    def _read(self, start: int, count: int, fd: int | None = None) -> np.ndarray:
        if fd is None:
            with open(self.path, "rb") as f:
                return self._read(start, count, f.fileno())
        want = count * self.row_bytes
        buf = bytearray(want)
        view, got = memoryview(buf), 0
        while got < want:
            n = os.preadv(fd, [view[got:]], self.offset + start * self.row_bytes + got)
            if n == 0:
                raise ValueError(f"{self.path}: truncated while reading rows {start}..{start + count - 1}")
            got += n
        return np.frombuffer(buf, dtype=self.dtype).reshape(count, *self.shape[1:])

    def __array__(self, dtype=None, copy=None):
        out = self._read(0, self.shape[0])
        return out if dtype is None else out.astype(dtype)


class RowView:
    """Rows ``rows`` of an array-like ``base`` (e.g. an ``NpyRows``), not copied: ``view[i]`` reads
    ``base[rows[i]]``; ``np.asarray(view)`` materialises it."""

    def __init__(self, base, rows):
        self.base, self.rows = base, np.asarray(rows, dtype=np.int64)
        self.shape = (len(self.rows), *base.shape[1:])
        self.dtype = base.dtype
        self.ndim = len(self.shape)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index):
        return np.asarray(self.base[self.rows[index]])

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.base[self.rows], dtype=dtype)


def _all_finite(values) -> bool:
    """Whether every value is finite; float16 by its bits (exponent not all ones), 17x faster
    than ``np.isfinite`` on float16.

    >>> _all_finite(np.array([1.0, -2.0], np.float16)), _all_finite(np.array([1.0, np.inf], np.float16))
    (True, False)
    >>> _all_finite(np.array([[0.5, np.nan]], np.float32))
    False
    """
    values = np.asarray(values)
    if values.dtype == np.float16:
        return not ((values.view(np.uint16) & 0x7C00) == 0x7C00).any()
    return bool(np.isfinite(values).all())


class CommentInputs:
    """The model input ``[aux | sequences flattened]``, (n, a + L * D), read by rows on demand.

    ``aux``: (n, a) features, held in memory. ``sequences``: (n, L, D) comment embeddings, any
    array-like indexable by an integer row array: an ndarray, an ``NpyRows`` (float16 on disk is
    fine: rows are cast to float32) or a ``RowView`` of one.
    ``rows(index)`` returns those rows as a float32 (k, a + L * D) array; nothing else is read.

        >>> aux = np.zeros((3, 2)); seq = np.ones((3, 4, 5), dtype=np.float16)
        >>> x = CommentInputs(aux, seq)
        >>> x.shape, x.rows(np.array([2, 0])).shape, x.rows(slice(0, 1)).dtype
        ((3, 22), (2, 22), dtype('float32'))
    """

    ndim = 2
    dtype = np.dtype(np.float32)

    def __init__(self, aux, sequences):
        self.aux = np.asarray(aux, dtype=np.float32)
        if self.aux.ndim == 1:
            self.aux = self.aux.reshape(-1, 1)
        shape = tuple(getattr(sequences, "shape", ()))
        if len(shape) != 3 or shape[0] != self.aux.shape[0]:
            raise ValueError(f"sequences must be (n, L, D) with n = {self.aux.shape[0]}, got {shape}")
        self.sequences = sequences
        self.length, self.dim = shape[1], shape[2]
        self.shape = (shape[0], self.aux.shape[1] + self.length * self.dim)

    def __len__(self) -> int:
        return self.shape[0]

    def rows(self, index) -> np.ndarray:
        """Rows ``index`` (an integer array or a slice) as a float32 (k, a + L * D) array."""
        if isinstance(index, slice):
            index = np.arange(*index.indices(self.shape[0]))
        index = np.asarray(index, dtype=np.int64)
        seq = np.asarray(self.sequences[index], dtype=np.float32)
        return np.concatenate([self.aux[index], seq.reshape(len(index), -1)], axis=1)

    def __getitem__(self, rows) -> CommentInputs:
        """A row subset (boolean mask or integer array), still lazy: ``x[keep]``."""
        rows = np.asarray(rows)
        index = np.flatnonzero(rows) if rows.dtype == np.bool_ else rows.astype(np.int64)
        if rows.dtype == np.bool_ and len(rows) != self.shape[0]:
            raise IndexError(f"boolean row mask of length {len(rows)} for {self.shape[0]} rows")
        return CommentInputs(self.aux[index], RowView(self.sequences, index))

    def chunks(self, max_elements: int = 2**24):
        """Consecutive row slices of at most ``max_elements`` values each."""
        step = max(1, max_elements // max(1, self.shape[1]))
        for start in range(0, self.shape[0], step):
            yield slice(start, min(self.shape[0], start + step))

    def check(self, name: str = "X", n_features: int | None = None) -> CommentInputs:
        """Raise a ValueError naming the first non-finite value (row, column) or a wrong width;
        streams the rows chunk by chunk."""
        if n_features is not None and self.shape[1] != n_features:
            raise ValueError(f"{name}: expected {n_features} columns, got {self.shape[1]}")
        aux_finite = np.isfinite(self.aux).all(axis=1)
        for sl in self.chunks():
            seq = self.sequences[sl] if isinstance(self.sequences, np.ndarray) else self.sequences[np.arange(
                sl.start, sl.stop)]
            if aux_finite[sl].all() and _all_finite(seq):
                continue  # the usual case, without assembling the rows (a sixth of the time on float16)
            block = self.rows(sl)
            bad = ~np.isfinite(block)
            if bad.any():
                r, c = (int(v) for v in np.argwhere(bad)[0])
                kind = "NaN" if np.isnan(block[r, c]) else "infinite"  # its kind, never the value
                raise ValueError(f"{name}: non-finite value ({kind}) at row {sl.start + r}, "
                                 f"column {c} ({int(bad.sum())} non-finite values in rows "
                                 f"{sl.start}..{sl.stop - 1})")
        return self

    def __array__(self, dtype=None, copy=None):
        """The whole matrix in memory (what this class exists to avoid; for small data)."""
        out = self.rows(slice(None))
        return out if dtype is None else out.astype(dtype)
