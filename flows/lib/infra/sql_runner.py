"""Run the project's SQL files: one SELECT per file, the file stem is the table name.

Staging files become views (they read parquet paths from DuckDB variables set by the
caller); intermediate and mart files become tables. Named parameters (``$window_hours``)
are bound, never formatted into the text: each file gets exactly the parameters it uses.
"""

from __future__ import annotations

import importlib.resources
import logging
import re
import threading
import time
from pathlib import Path

import duckdb

from flows.lib.infra import interrupts
from flows.lib.infra.cli import duration_text

SQL_ROOT = Path(str(importlib.resources.files("cet_sql")))  # the repository's sql/, shipped as package cet_sql
_PARAM = re.compile(r"\$([a-z_][a-z0-9_]*)")


def run_sql_file(con: duckdb.DuckDBPyConnection, path: Path, params: dict | None = None) -> str:
    """Create ``<stem>`` from ``path`` (a view under staging/, else a table); returns the name."""
    path = Path(path)
    text = path.read_text()
    names = sorted(set(_PARAM.findall(text)))
    missing = [n for n in names if n not in (params or {})]
    if missing:
        raise ValueError(f"{path}: parameters {missing} were not given")
    kind = "VIEW" if path.parent.name == "staging" else "TABLE"
    if kind == "VIEW" and names:
        raise ValueError(f"{path}: staging views cannot take parameters (DuckDB); use getvariable()")
    try:
        con.execute(f"CREATE OR REPLACE {kind} {path.stem} AS\n{text}", {n: params[n] for n in names} or None)
        return path.stem
    except duckdb.InterruptException:
        error = interrupts.Interrupted(f"{path}: interrupted")
    except duckdb.Error as exc:
        error = RuntimeError(f"{path}: {error_text(exc)}")
    raise error  # not within the except: without DuckDB's error as its context, which holds its frames


_VALUE_ERRORS = ("Conversion Error", "Out of Range Error")
_TYPE = re.compile(r"\b(?:to|of) ([A-Z][A-Z0-9_]*(?:\(\d+, ?\d+\))?)")


def error_text(exc: Exception) -> str:
    """DuckDB's error in one line, without the data: an error about a value (a conversion, an
    overflow) names its kind and the type, never the value, which is a patient's.

    >>> error_text(duckdb.ConversionException("Conversion Error: Could not convert string 'abc' to INT32\\n\\nLINE 1"))
    'Conversion Error: a value does not convert to INT32 (the value is not shown)'
    >>> error_text(duckdb.OutOfRangeException("Out of Range Error: Overflow in addition of INT32 (2147483647 + 1)!"))
    'Out of Range Error: a value does not fit INT32 (the value is not shown)'
    >>> error_text(duckdb.BinderException('Binder Error: Referenced column "itemid" not found'))
    'Binder Error: Referenced column "itemid" not found'
    """
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    kind = first.split(":")[0]
    if kind not in _VALUE_ERRORS:
        return first
    typ = _TYPE.search(first, len(kind))
    verb = "does not convert to" if kind == "Conversion Error" else "does not fit"
    return f"{kind}: a value {verb} {typ[1] if typ else 'its type'} (the value is not shown)"


def set_variables(con: duckdb.DuckDBPyConnection, values: dict) -> None:
    for name, value in values.items():
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise ValueError(f"bad variable name {name!r}")
        con.execute(f"SET VARIABLE {name} = $v", {"v": value})


PROGRESS_EVERY = 60.0  # seconds between the log lines of a long statement
log = logging.getLogger("flows.sql")


def execute_logged(con: duckdb.DuckDBPyConnection, sql: str, params=None, what: str = "a statement",
                   every: float | None = None):
    """``con.execute(sql, params)``; while it runs, every ``every`` seconds (``PROGRESS_EVERY``) a
    log line with ``what``, the share DuckDB reports done and the time left (staging a
    full-size CHARTEVENTS takes minutes). Only the share is said, never a row."""
    every = PROGRESS_EVERY if every is None else every
    interrupts.check(what)
    con.execute("SET enable_progress_bar = true; SET enable_progress_bar_print = false")
    finished, started = threading.Event(), time.perf_counter()

    def watch():
        while not finished.wait(every):
            share = con.query_progress()  # percent, -1 when DuckDB cannot tell
            if 0 < share < 100:
                elapsed = time.perf_counter() - started
                log.info("%s: %d%% in %s; about %s left", what, share, duration_text(elapsed),
                         duration_text(elapsed * (100 - share) / share))

    watcher = threading.Thread(target=watch, name="sql-progress", daemon=True)
    watcher.start()
    try:
        return con.execute(sql, params)
    finally:
        finished.set()
        watcher.join()
