"""Run the project's SQL files: one SELECT per file, the file stem is the table name.

Staging files become views (they read parquet paths from DuckDB variables set by the
caller); intermediate and mart files become tables. Named parameters (``$window_hours``)
are bound, never formatted into the text: each file gets exactly the parameters it uses.
"""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path

import duckdb

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
    except duckdb.Error as exc:
        raise RuntimeError(f"{path}: {str(exc).splitlines()[0]}") from None
    return path.stem


def set_variables(con: duckdb.DuckDBPyConnection, values: dict) -> None:
    for name, value in values.items():
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise ValueError(f"bad variable name {name!r}")
        con.execute(f"SET VARIABLE {name} = $v", {"v": value})
