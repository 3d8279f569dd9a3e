"""Tables a build must refuse before any flow starts (docs/reliability.md, "Tables too small or
clashing"): too few rows for every split, whatever the split method, and column names that clash
with the dataset contract or with each other. Each error names the file and the column."""

import re

import polars as pl
import pytest

from cet_model.dataset import assign_splits, min_keys
from flows import table as table_cli
from flows.lib.ingest import write_follow_up_dataset

pytestmark = pytest.mark.bad_input
ARGS = ["--name", "c", "--event", "death=days,died", "--time-unit", "days"]


def _csv(path, header: str, rows: list[str]):
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


def _rows(n: int) -> list[str]:
    return [f"{40 + i},{1 + i},{i % 2}" for i in range(n)]


def _refused(argv, capsys, tmp_path) -> str:
    with pytest.raises(SystemExit) as exc:
        table_cli.main(argv + ["--out", str(tmp_path / "out")])
    assert exc.value.code == 2 and not (tmp_path / "out").exists()
    return capsys.readouterr().err


@pytest.mark.parametrize("method", ["random", "hash", "stratified"])
@pytest.mark.parametrize("n", [1, 3])
def test_a_table_too_small_for_a_split_is_refused_for_every_method(tmp_path, capsys, n, method):
    table = _csv(tmp_path / "tiny.csv", "age,days,died", _rows(n))
    err = _refused(["--table", str(table), *ARGS, "--split-method", method], capsys, tmp_path)
    assert "tiny.csv" in err or "split of" in err
    assert "empty" in err and f"at least {min_keys()}" in err


def test_a_given_split_column_with_an_empty_split_is_refused(tmp_path, capsys):
    table = _csv(tmp_path / "t.csv", "age,days,died,part", [r + ",train" for r in _rows(8)] + ["50,3,1,val"])
    err = _refused(["--table", str(table), *ARGS, "--split-column", "part"], capsys, tmp_path)
    assert "t.csv: 9 rows give the splits {'train': 8, 'val': 1, 'test': 0}: test would be empty" in err


def test_the_smallest_table_the_random_split_fills_builds(tmp_path):
    table = pl.DataFrame({"age": [60.0, 71, 55, 80], "days": [5.0, 9, 2, 7], "died": [1, 0, 1, 0]})
    assert min_keys() == 4
    assert write_follow_up_dataset(None, table, ["age"], {"death": ("days", "died")}, name="m", time_unit="d") is None
    with pytest.raises(ValueError, match="random split of 3 keys leaves a split empty: at least 4 keys"):
        assign_splits([1, 2, 3])


@pytest.mark.parametrize("column", ["id", "split"])
def test_a_column_named_as_the_contracts_own_is_refused_by_name(tmp_path, capsys, column):
    values = ["7", "3"] * 5 if column == "split" else [str(i) for i in range(10)]
    table = _csv(
        tmp_path / "t.csv", f"age,days,died,{column}", [f"{r},{v}" for r, v in zip(_rows(10), values, strict=True)]
    )
    err = _refused(["--table", str(table), *ARGS], capsys, tmp_path)
    assert f"t.csv: column '{column}' would be a feature, but the dataset keeps '{column}' for its own column" in err


def test_an_empty_or_repeated_header_name_is_refused_by_name(tmp_path, capsys):
    empty = _csv(
        tmp_path / "e.csv", "age,,days,died", [f"{r.split(',')[0]},1,{','.join(r.split(',')[1:])}" for r in _rows(10)]
    )
    err = _refused(["--table", str(empty), *ARGS], capsys, tmp_path)
    assert "e.csv: column 1 (counted from 0) has an empty name in the header; name it\n" in err
    index = _csv(tmp_path / "i.csv", ",age,days,died", [f"{k},{r}" for k, r in enumerate(_rows(10))])  # pandas' index
    err = _refused(["--table", str(index), *ARGS], capsys, tmp_path)
    assert "i.csv: column 0 (counted from 0) has an empty name in the header; name it (an unnamed first column is " \
           "often a row index, as pandas' to_csv writes it without index=False: leave it out)" in err
    twice = _csv(tmp_path / "d.csv", "age,age,days,died", [f"{r.split(',')[0]},{r}" for r in _rows(10)])
    err = _refused(["--table", str(twice), *ARGS], capsys, tmp_path)
    assert "d.csv: column 'age' comes 2 times in the header (columns 0, 1)" in err


def test_a_file_without_a_header_is_refused_without_quoting_its_first_row(tmp_path, capsys):
    # the first row is a patient's: none of its cells (numbers, a date) may reach the error
    rows = [f"{r},2021-03-0{1 + i % 9}" for i, r in enumerate(_rows(10))]
    table = _csv(tmp_path / "n.csv", rows[1], [rows[0], *rows[2:]])
    err = _refused(["--table", str(table), *ARGS], capsys, tmp_path)
    assert "n.csv: the first line has numbers or dates for column names (columns 0, 1, 2, 3; counted from 0)" in err
    said = err.replace(str(table), "n.csv")  # the temporary folder's name may hold any digits
    assert "no header line" in said and "41" not in said and "2021" not in said


def test_a_file_that_is_not_utf8_is_refused_naming_its_line(tmp_path, capsys):
    # saved as Latin-1: the reader garbles a name in the header ("w\ufffdek") and refuses a cell without saying where
    rows = [*_rows(5), "45,6,1", *_rows(4)]
    table = tmp_path / "l.csv"
    table.write_bytes(("age,days,died,city\n" + "\n".join(f"{r},Z\u00fcrich" for r in rows) + "\n").encode("latin-1"))
    err = _refused(["--table", str(table), *ARGS, "--features", "age"], capsys, tmp_path)
    assert "l.csv: line 2 is not UTF-8 text" in err and "save it as CSV UTF-8, or as parquet" in err
    header = tmp_path / "h.csv"
    header.write_bytes(("\u00e2ge,days,died\n" + "\n".join(_rows(10)) + "\n").encode("latin-1"))
    assert "h.csv: line 1 is not UTF-8 text" in _refused(["--table", str(header), *ARGS], capsys, tmp_path)


@pytest.mark.parametrize("column, options, message", [
    ("tags", [], r"column 'tags' has type List\(String\): a feature is a number or a category in each row"),
    ("tags", ["--categorical", "tags"], r"categorical column 'tags' has type List\(String\)"),
    ("blob", [], r"column 'blob' has type Binary: a feature is a number"),
    ("pair", [], r"column 'pair' has type Struct\(\{'a': Int64, 'b': String\}\): a feature is a number"),
    ("tags", ["--features", "age", "--id-column", "tags"], r"column 'tags', the id column, has type List\(String\)"),
    ("tags", ["--features", "age", "--split-column", "tags"],
     r"column 'tags', the split column, has type List\(String\): it holds train, val or test"),
    ("tags", ["--features", "age", "--group-column", "tags"],
     r"column 'tags', the group column, has type List\(String\)"),
])
def test_a_column_of_lists_structs_or_bytes_is_named_by_its_type(tmp_path, capsys, column, options, message):
    """A parquet column that is neither numbers nor text was a traceback from the reader's cast."""
    n = 12
    frame = pl.DataFrame({"age": [40.0 + i for i in range(n)], "days": [1.0 + i for i in range(n)],
                          "died": [i % 2 for i in range(n)],
                          column: {"tags": [["SECRET", "b"]] * n, "blob": [b"SECRET"] * n,
                                   "pair": [{"a": 1, "b": "SECRET"}] * n}[column]})
    frame.write_parquet(tmp_path / "t.parquet")
    err = _refused(["--table", str(tmp_path / "t.parquet"), *ARGS, *options], capsys, tmp_path)
    assert re.search(rf"error: \S*t\.parquet: {message}", err) and "SECRET" not in err and "Traceback" not in err


def test_a_cell_the_reader_cannot_parse_is_not_quoted(tmp_path, capsys):
    """polars quotes the cell it cannot parse (a quote left open swallows the rest of the file):
    the error names the file and the column, not the cell."""
    table = _csv(tmp_path / "t.csv", "age,days,died", _rows(10) + ['41,"SECRET, J,1', "42,3,0"])
    err = _refused(["--table", str(table), *ARGS], capsys, tmp_path)
    assert re.search(r"error: \S*t\.csv: not a readable CSV file \(could not parse a value as dtype `\w+` at column "
                     r"'days'", err), err
    assert "SECRET" not in err
