"""Staging of MIMIC-III tables on the real open demo (``tests/demo.py`` says where it is)."""

import csv
import gzip
import io
import os
from pathlib import Path

import duckdb
import pytest

from flows.lib.mimic.schema import TABLES
from flows.lib.mimic.staging import stage_table
from tests.demo import DEMO, requires_demo

DEMO_ROWS = {"PATIENTS": 100, "ADMISSIONS": 129, "ICUSTAYS": 136, "CHARTEVENTS": 758_355,
             "LABEVENTS": 76_074, "OUTPUTEVENTS": 11_320, "D_ITEMS": 12_487, "D_LABITEMS": 753}

pytestmark = requires_demo


def _rows(path):
    return duckdb.connect().execute("SELECT * FROM read_parquet($p) ORDER BY ALL", {"p": str(path)}).fetchall()


def _full_release_copy(table: str, dst: Path) -> Path:
    return to_full_release(DEMO / f"{table}.csv.gz", dst)


def to_full_release(src: Path, dst: Path) -> Path:
    """A table rewritten in the full release's dialect: upper-case quoted header, non-empty
    fields quoted, NULL as an empty unquoted field, gzipped, upper-case file name."""
    table = src.name.split(".")[0].upper()
    opener = gzip.open if src.name.endswith(".gz") else open
    with opener(src, "rt", newline="") as fh:
        rows = list(csv.reader(fh))
    buf = io.StringIO()
    for i, row in enumerate(rows):
        cells = [c.upper() if i == 0 else c for c in row]
        buf.write(",".join('"' + c.replace('"', '""') + '"' if c else "" for c in cells) + "\n")
    out = dst / f"{table}.csv.gz"
    with gzip.open(out, "wt", newline="") as fh:
        fh.write(buf.getvalue())
    return out


@pytest.fixture(scope="module")
def staged_demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("staged")
    return out, {t: stage_table(DEMO, t, out) for t in TABLES}


def test_demo_tables_stage_with_their_row_counts(staged_demo):
    out, staged = staged_demo
    assert {t: s.rows for t, s in staged.items()} == DEMO_ROWS
    con = duckdb.connect()
    path = str(out / "CHARTEVENTS.parquet")
    types = {r[0]: r[1] for r in con.execute("DESCRIBE SELECT * FROM read_parquet($p)", {"p": path}).fetchall()}
    assert types["VALUE"] == "VARCHAR" and types["VALUENUM"] == "DOUBLE" and types["CHARTTIME"] == "TIMESTAMP"
    errors = con.execute("SELECT count(*) FILTER (WHERE ERROR = 1), count(*) FILTER (WHERE ERROR IS NULL) "
                         "FROM read_parquet($p)", {"p": path}).fetchone()
    assert errors == (648, 376_076)  # MetaVision errors; CareVue rows have NULL ERROR


def test_unchanged_source_is_not_converted_again(staged_demo):
    out, _ = staged_demo
    again = stage_table(DEMO, "LABEVENTS", out)
    assert not again.converted and again.rows == DEMO_ROWS["LABEVENTS"]


@pytest.mark.parametrize("table", ["ADMISSIONS", "LABEVENTS", "OUTPUTEVENTS", "D_ITEMS"])
def test_full_release_layout_gives_identical_tables(tmp_path, staged_demo, table):
    src = tmp_path / "full"
    src.mkdir()
    _full_release_copy(table, src)
    full = stage_table(src, table, tmp_path / "out")
    assert _rows(full.parquet) == _rows(staged_demo[1][table].parquet)


def test_changed_source_is_converted_again(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    path = _full_release_copy("D_LABITEMS", src)
    first = stage_table(src, "D_LABITEMS", tmp_path / "out")
    with gzip.open(path, "rt") as fh:
        lines = fh.read().splitlines(keepends=True)
    with gzip.open(path, "wt") as fh:
        fh.writelines(lines[:-1])
    os.utime(path, ns=(1, 1))
    second = stage_table(src, "D_LABITEMS", tmp_path / "out")
    assert second.converted and second.rows == first.rows - 1 and second.fingerprint != first.fingerprint


def _write_gz(path: Path, text: str):
    with gzip.open(path, "wt") as fh:
        fh.write(text)


D_LAB_HEADER = "row_id,itemid,label,fluid,category,loinc_code\n"


@pytest.mark.parametrize("name,content,match", [
    (None, None, r"MIMIC table D_LABITEMS not found in .* \(looked for D_LABITEMS.csv.gz and D_LABITEMS.csv\)"),
    ("D_LABITEMS.csv.gz", "row_id,itemid,label,fluid,category\n1,50800,x,y,z\n",
     r"D_LABITEMS.csv.gz: table D_LABITEMS is missing column\(s\) \['LOINC_CODE'\]"),
    ("D_LABITEMS.csv.gz", b"\x1f\x8b\x08\x00garbage-not-gzip", r"D_LABITEMS.csv.gz: cannot be read"),
    ("D_LABITEMS.csv.gz", D_LAB_HEADER + "1,50800,SPECIMEN TYPE,BLOOD,Blood Gas,\n2,SPECIMEN,x,y,z,\n",
     r"D_LABITEMS.csv.gz: table D_LABITEMS could not be converted: Conversion Error: CSV Error on Line: 3 "
     r"\(column ITEMID: expected INTEGER\)$"),
    ("D_LABITEMS.csv.gz", D_LAB_HEADER + "1,50800,x,BLOOD,Blood Gas,\n2,50801,x,y,z,,SPECIMEN\n",
     r"could not be converted: Invalid Input Error: CSV Error on Line: 3 \(6 fields expected, 7 found\)$"),
    ("D_LABITEMS.csv.gz", D_LAB_HEADER + "1,50800,x,BLOOD,Blood Gas,\n2,50801,\"SPECIMEN,y,z,\n",
     r"could not be converted: Invalid Input Error: CSV Error on Line: 3 \(a quote left open\)$"),
    ("D_LABITEMS.csv.gz", "", r"D_LABITEMS.csv.gz: empty file"),
])
@pytest.mark.bad_input
def test_bad_sources_give_clear_errors_and_no_output(tmp_path, name, content, match):
    src = tmp_path / "src"
    src.mkdir()
    if name is not None:
        if isinstance(content, bytes):
            (src / name).write_bytes(content)
        else:
            _write_gz(src / name, content)
    with pytest.raises((ValueError, FileNotFoundError), match=match) as info:
        stage_table(src, "D_LABITEMS", tmp_path / "out")
    assert "SPECIMEN" not in str(info.value)  # no row contents in the message
    out = tmp_path / "out"
    assert not out.exists() or list(out.iterdir()) == []


def test_a_long_statement_logs_its_share_and_time_left(caplog):
    """Staging a full-size CHARTEVENTS takes minutes: DuckDB's progress, polled beside the statement, is logged
    with the time left. A failing statement raises as it would, and the watcher stops with it."""
    import threading

    from flows.lib.infra.sql_runner import execute_logged

    con = duckdb.connect()
    con.execute("SET threads = 1")
    with caplog.at_level("INFO", logger="flows.sql"):
        got = execute_logged(con, "SELECT count(*) FROM range(100000000) WHERE hash(range) % 7 = 0", None, "a count",
                             every=0.02).fetchone()[0]
        assert got > 10_000_000
        shares = [int(r.getMessage().split(": ")[1].split("%")[0]) for r in caplog.records]
        assert shares and shares == sorted(shares) and shares[-1] < 100
        assert all(r.getMessage().startswith("a count: ") and " left" in r.getMessage() for r in caplog.records)
        with pytest.raises(duckdb.Error):
            execute_logged(con, "SELECT * FROM no_such_table", None, "a bad one", every=0.01)
    assert not [t for t in threading.enumerate() if t.name == "sql-progress"]
