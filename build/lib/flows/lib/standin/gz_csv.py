"""Write a gzipped CSV in MIMIC-III's full-release dialect, fast and atomically.

Dialect: upper-case column names, each double-quoted; comma delimiter; LF line ends; string
values double-quoted with inner quotes doubled; numbers and ``YYYY-MM-DD HH:MM:SS``
timestamps bare; NULL is an empty unquoted field. Callers pass polars frames whose string
columns are already quoted (``quoted()``), so polars writes every field as is.

Each chunk becomes its own gzip member (a multi-member file is a valid gzip file: gzip,
zcat, Python and DuckDB read it whole); members are compressed on a thread pool while the
caller makes the next chunk. ``mtime=0`` keeps the bytes reproducible for a given seed.
The file appears under its final name only when ``close()`` succeeds.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
from collections import deque
from concurrent.futures import Executor
from pathlib import Path

import polars as pl

TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"


def quoted(column: str) -> pl.Expr:
    """A string column as a CSV field: wrapped in double quotes, inner quotes doubled; null stays null."""
    inner = pl.col(column).cast(pl.String).str.replace_all('"', '""', literal=True)
    return pl.concat_str([pl.lit('"'), inner, pl.lit('"')]).alias(column)


def header_line(columns: list[str]) -> bytes:
    return (",".join(f'"{c}"' for c in columns) + "\n").encode()


class GzCsvWriter:
    """Append polars frames (already in the dialect) to ``path`` as gzip members."""

    def __init__(self, path: Path, columns: list[str], pool: Executor, level: int = 6, max_pending: int = 3):
        self.path = Path(path)
        self.columns = columns
        self.tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self._fh = open(self.tmp, "wb")
        self._pool, self._level, self._max = pool, level, max_pending
        self._pending: deque = deque()
        self._sha = hashlib.sha256()
        self.rows = 0
        self.raw_bytes = 0
        self._submit(header_line(columns))

    def _submit(self, data: bytes) -> None:
        self.raw_bytes += len(data)
        self._pending.append(self._pool.submit(gzip.compress, data, self._level, mtime=0))
        while len(self._pending) > self._max:
            self._drain_one()

    def _drain_one(self) -> None:
        member = self._pending.popleft().result()
        self._fh.write(member)
        self._sha.update(member)

    def write(self, frame: pl.DataFrame) -> None:
        if list(frame.columns) != self.columns:
            raise ValueError(f"{self.path.name}: columns {frame.columns} differ from {self.columns}")
        if frame.height == 0:
            return
        buf = io.BytesIO()
        frame.write_csv(buf, include_header=False, quote_style="never", null_value="",
                        datetime_format=TIMESTAMP_FORMAT, line_terminator="\n")
        self.rows += frame.height
        self._submit(buf.getvalue())

    def close(self) -> str:
        """Finish, fsync and rename into place; returns the sha256 of the gzip file."""
        while self._pending:
            self._drain_one()
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        os.replace(self.tmp, self.path)
        return self._sha.hexdigest()

    def abort(self) -> None:
        for f in self._pending:
            f.cancel()
        self._pending.clear()
        self._fh.close()
        self.tmp.unlink(missing_ok=True)
