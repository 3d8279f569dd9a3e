"""Stage MIMIC-III CSV tables into typed parquet, once per source fingerprint.

Reads ``NAME.csv.gz`` or ``NAME.csv`` (either header case: upper-case quoted in the full
release, lower-case in the demo) with every column typed explicitly, under a DuckDB memory
limit and temp directory so the full CHARTEVENTS converts in bounded memory. The parquet
appears whole (temporary name, then rename) and a sidecar ``NAME.json`` records the source
fingerprint; an unchanged source is not converted again. Errors name the file and column.
No row values are ever logged.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import os
import re
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path

import duckdb

from cet_model.atomic import remove_dead_leftovers, storage_error, writing
from flows.lib.infra import interrupts
from flows.lib.infra.crash import crash_point
from flows.lib.infra.download import sha256_file as fingerprint
from flows.lib.infra.errors import InputError
from flows.lib.infra.sql_runner import execute_logged
from flows.lib.mimic.schema import TABLES

log = logging.getLogger("flows.mimic.staging")
STAGING_VERSION = 1


@dataclass(frozen=True)
class StagedTable:
    """One MIMIC table converted to typed parquet, with its source's fingerprint (sha256)."""
    table: str
    parquet: Path
    rows: int
    fingerprint: str
    converted: bool  # False when the existing parquet was reused


def find_table_file(src_dir: Path, table: str) -> Path:
    """The table's CSV in ``src_dir``: NAME.csv.gz or NAME.csv, any file-name case."""
    src_dir = Path(src_dir)
    if not src_dir.is_dir():
        raise FileNotFoundError(f"MIMIC directory {src_dir} does not exist")
    wanted = {f"{table}.csv.gz".lower(), f"{table}.csv".lower()}
    hits = sorted(p for p in src_dir.iterdir() if p.name.lower() in wanted)
    if not hits:
        raise FileNotFoundError(f"MIMIC table {table} not found in {src_dir} "
                                f"(looked for {table}.csv.gz and {table}.csv)")
    return hits[0]


def check_tables(src_dir: Path, tables) -> None:
    """Every one of ``tables`` in ``src_dir`` with the release's header, else an error naming
    all the missing tables at once, or the first file whose header is not the release's (what a
    command line checks before its flow starts)."""
    missing = []
    for table in tables:
        try:
            find_table_file(src_dir, table)
        except FileNotFoundError:
            missing.append(table)
    if missing:
        raise FileNotFoundError(f"MIMIC table{'s' if len(missing) > 1 else ''} {', '.join(missing)} not found in "
                                f"{src_dir} (looked for NAME.csv.gz and NAME.csv)")
    for table in tables:
        check_header(table, find_table_file(src_dir, table))


def _open_text(path: Path):
    raw = gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")
    return io.TextIOWrapper(raw, encoding="utf-8", newline="")


def read_header(path: Path) -> list[str]:
    """The header's column names, upper-cased. A corrupt gzip or an empty file is an error."""
    try:
        with _open_text(path) as fh:
            line = fh.readline()
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot be read ({exc})") from None
    if not line.strip():
        raise InputError(f"{path}: empty file, no header row")
    return [c.strip().upper() for c in next(csv.reader([line]))]


def check_header(table: str, path: Path) -> None:
    expected = [c for c, _ in TABLES[table]]
    got = read_header(path)
    missing = [c for c in expected if c not in got]
    if missing:
        raise InputError(f"{path}: table {table} is missing column(s) {missing}")
    extra = [c for c in got if c not in expected]
    if extra or got != expected:
        raise InputError(f"{path}: table {table} has columns {got}; expected exactly {expected} in this order")


def _sidecar(out_dir: Path, table: str) -> Path:
    return out_dir / f"{table}.json"


def _cached(out_dir: Path, table: str, src: Path) -> dict | None:
    """The sidecar record if it matches the source's size and mtime (skips rehashing)."""
    side = _sidecar(out_dir, table)
    if not (side.is_file() and (out_dir / f"{table}.parquet").is_file()):
        return None
    try:
        rec = json.loads(side.read_text())
    except json.JSONDecodeError:
        return None
    st = src.stat()
    if rec.get("version") != STAGING_VERSION or rec.get("source_name") != src.name:
        return None
    if rec.get("size") == st.st_size and rec.get("mtime_ns") == st.st_mtime_ns:
        return rec
    return rec if rec.get("sha256") == fingerprint(src) and rec.get("size") == st.st_size else None


def read_staged(parquet: Path) -> StagedTable:
    """The StagedTable behind a staged parquet (from its sidecar record): what a staging task
    hands to the build. A missing or unreadable record is an error naming the file."""
    parquet = Path(parquet)
    side = _sidecar(parquet.parent, parquet.stem)
    try:
        rec = json.loads(side.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{side}: no readable staging record for {parquet.name} ({exc})") from None
    if rec.get("version") != STAGING_VERSION or rec.get("table") != parquet.stem or not parquet.is_file():
        raise ValueError(f"{side}: not a current staging record of {parquet}")
    return StagedTable(rec["table"], parquet, int(rec["rows"]), rec["sha256"], False)


def stage_all(mimic_dir, out_dir) -> dict[str, StagedTable]:
    """Stage every table the build reads (``TABLES``), one after another."""
    return {t: stage_table(mimic_dir, t, out_dir) for t in TABLES}


def connect(memory_limit: str = "4GB", temp_dir: Path | None = None, threads: int | None = None):
    """A DuckDB connection with bounded memory and spilling to ``temp_dir``, whose statements
    Ctrl-C interrupts (``interrupts.stoppable``)."""
    con = interrupts.stoppable(duckdb.connect())
    con.execute("SET memory_limit = $m", {"m": memory_limit})
    con.execute("SET preserve_insertion_order = false")
    if temp_dir is not None:
        Path(temp_dir).mkdir(parents=True, exist_ok=True)
        con.execute("SET temp_directory = $t", {"t": str(temp_dir)})
    if threads:
        con.execute("SET threads = $n", {"n": int(threads)})
    return con


COPY_SQL = """
COPY (SELECT * FROM read_csv($path, columns = $columns, header = true, auto_detect = false, delim = ',',
                             quote = '"', escape = '"', timestampformat = '%Y-%m-%d %H:%M:%S'))
TO $out (FORMAT parquet, COMPRESSION zstd)
"""


def stage_table(src_dir, table: str, out_dir, con: duckdb.DuckDBPyConnection | None = None,
                memory_limit: str = "1GB") -> StagedTable:
    """Convert one table to ``out_dir/TABLE.parquet`` unless an identical source was staged."""
    if table not in TABLES:
        raise ValueError(f"unknown MIMIC table {table!r}; expected one of {sorted(TABLES)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    src = find_table_file(Path(src_dir), table)
    rec = _cached(out_dir, table, src)
    if rec is not None:
        log.info("%s: unchanged source, staged parquet reused", table)
        return StagedTable(table, out_dir / f"{table}.parquet", rec["rows"], rec["sha256"], False)
    check_header(table, src)
    digest = fingerprint(src)
    remove_dead_leftovers(out_dir, f".{table}.*.tmp-*")
    tmp = out_dir / f".{table}.parquet.tmp-{os.getpid()}"
    own = con is None
    con = con or connect(memory_limit, out_dir / f".duckdb-tmp-{table}")
    error = None
    try:
        execute_logged(con, COPY_SQL, {"path": str(src), "columns": dict(TABLES[table]), "out": str(tmp)},
                       f"staging {table}")
        crash_point("staging")
        rows = con.execute("SELECT count(*) FROM read_parquet($p)", {"p": str(tmp)}).fetchone()[0]
    except duckdb.Error as exc:
        tmp.unlink(missing_ok=True)
        error = _staging_error(exc, src, table, out_dir)
    finally:
        if own:  # release DuckDB's buffers now: tables are staged in parallel, then the SQL runs
            con.close()
            con = None
            shutil.rmtree(out_dir / f".duckdb-tmp-{table}", ignore_errors=True)
    if error is not None:  # raised here, without DuckDB's error as its context: a failed task's record
        raise error  # keeps its traceback, whose frames would keep the connection until the exit
    os.replace(tmp, out_dir / f"{table}.parquet")
    st = src.stat()
    record = {"version": STAGING_VERSION, "table": table, "source_name": src.name, "size": st.st_size,
              "mtime_ns": st.st_mtime_ns, "sha256": digest, "rows": rows}
    side_tmp = out_dir / f".{table}.json.tmp-{os.getpid()}"
    with writing(_sidecar(out_dir, table), side_tmp):
        side_tmp.write_text(json.dumps(record, indent=2))
        os.replace(side_tmp, _sidecar(out_dir, table))
    log.info("%s: staged %d rows", table, rows)
    return StagedTable(table, out_dir / f"{table}.parquet", rows, digest, True)


def _staging_error(exc: duckdb.Error, src: Path, table: str, out_dir: Path) -> BaseException:
    """The error to raise for DuckDB's ``exc`` while staging ``table`` from ``src``."""
    if isinstance(exc, duckdb.InterruptException):
        return interrupts.Interrupted(f"staging {table}: interrupted")
    full = storage_error(out_dir / f"{table}.parquet", exc)
    if full is not None:  # the output's fault, not the source's
        return full
    return InputError(f"{src}: table {table} could not be converted: {_first_line(exc)}")


_WHY = (re.compile(r'Error when converting column "([A-Za-z_][A-Za-z0-9_]*)".*? to \'([A-Z]+)\''),
        re.compile(r"Expected Number of Columns: (\d+) Found: (\d+)"),
        re.compile(r"Value with unterminated quote found"))


def _first_line(exc: Exception) -> str:
    """DuckDB's message without echoed row contents (privacy: no MIMIC values in errors/logs):
    its first line (the line number), and what is wrong with the row in words of its own, never a
    value: the column and the type a value is not, the count of fields, a quote left open.

    >>> _first_line(Exception('Conversion Error: CSV Error on Line: 3\\nOriginal Line: 2,x\\n'
    ...                       'Error when converting column "ITEMID". Could not convert string "x" to \\'INTEGER\\''))
    'Conversion Error: CSV Error on Line: 3 (column ITEMID: expected INTEGER)'
    >>> _first_line(Exception('Invalid Input Error: CSV Error on Line: 9\\nOriginal Line: 1,2\\n'
    ...                       'Expected Number of Columns: 3 Found: 2'))
    'Invalid Input Error: CSV Error on Line: 9 (3 fields expected, 2 found)'
    """
    text = str(exc)
    first = (text.splitlines()[0] if text else type(exc).__name__).split("Original Line:")[0].strip()
    column, fields, quote = (p.search(text) for p in _WHY)
    if column:
        return f"{first} (column {column[1]}: expected {column[2]})"
    if fields:
        return f"{first} ({fields[1]} fields expected, {fields[2]} found)"
    return f"{first} (a quote left open)" if quote else first
