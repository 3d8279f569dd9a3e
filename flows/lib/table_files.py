"""A user's table file, read whatever its kind: comma- or tab-separated text (``.csv``, ``.tsv``,
``.tab``, each also gzip-compressed as ``.csv.gz``), a Stata data set (``.dta``, its value labels
read as text) or parquet (any other name). A kind this project does not read (SAS, SPSS, Excel,
R) is refused by its name, with how to export it. Errors name the file, and a text file's line,
never a cell's content."""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

TEXT_KINDS = {".csv": ("CSV", ","), ".tsv": ("TSV", "\t"), ".tab": ("TSV", "\t")}
# kinds refused by name: what the file is, said to the user
EXPORT_FIRST = {".sas7bdat": "a SAS data set", ".xpt": "a SAS transport file", ".sav": "an SPSS data file",
                ".zsav": "an SPSS data file", ".por": "an SPSS data file", ".xlsx": "an Excel workbook",
                ".xls": "an Excel workbook", ".xlsm": "an Excel workbook", ".ods": "a spreadsheet",
                ".rds": "an R object", ".rda": "an R workspace", ".rdata": "an R workspace", ".json": "a JSON file"}
KINDS_READ = "a table is a .csv or .tsv file (either may end in .gz), a Stata .dta file or a parquet file"


@dataclass(frozen=True)
class TableKind:
    """How a table file is read: ``name`` as errors say it, the ``separator`` of a text file (None
    otherwise) and whether the text is gzip-compressed."""

    name: str
    separator: str | None = None
    compressed: bool = False

    @property
    def label(self) -> str:
        return f"gzip-compressed {self.name}" if self.compressed else self.name


def table_kind(path) -> TableKind:
    """The kind of a table file, by its name; a kind not read here is a ValueError that says what
    to do.

    >>> table_kind("cohort.csv"), table_kind("Cohort.TSV.gz").label, table_kind("cohort.dta").name
    (TableKind(name='CSV', separator=',', compressed=False), 'gzip-compressed TSV', 'Stata')
    >>> table_kind("cohort.parquet").name, table_kind("cohort.txt").name  # any other name: parquet
    ('parquet', 'parquet')
    >>> table_kind("cohort.sas7bdat")
    Traceback (most recent call last):
    ...
    ValueError: cohort.sas7bdat: a SAS data set is not read here: export it as CSV (UTF-8) or parquet; a table is a .csv
    or .tsv file (either may end in .gz), a Stata .dta file or a parquet file
    """
    name = Path(path).name.lower()
    compressed = name.endswith(".gz")
    suffix = Path(name.removesuffix(".gz")).suffix
    if suffix in TEXT_KINDS:
        return TableKind(*TEXT_KINDS[suffix], compressed)
    if compressed:
        raise ValueError(f"{path}: a compressed table is read as .csv.gz or .tsv.gz; {KINDS_READ}")
    if suffix in EXPORT_FIRST:
        raise ValueError(f"{path}: {EXPORT_FIRST[suffix]} is not read here: export it as CSV (UTF-8) or parquet; "
                         f"{KINDS_READ}")
    return TableKind("Stata") if suffix == ".dta" else TableKind("parquet")


def read_table(path) -> pl.DataFrame:
    """A table from a file of any kind ``table_kind`` reads. A text file's types are inferred from
    every row; an empty cell is null, and a column with no value at all is read as missing
    numbers, not text. A Stata file's labelled values are their labels (text), its missing values
    null. Errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    kind = table_kind(path)
    if kind.name == "Stata":
        return _read_stata(path)
    if kind.separator:
        check_utf8(path)
    try:
        table = (pl.read_csv(path, separator=kind.separator, infer_schema_length=None) if kind.separator
                 else pl.read_parquet(path))
    except Exception as exc:  # polars raises several types for an unreadable file
        if kind.separator:  # e.g. ';' as the separator and ',' as the decimal mark: more fields than the header
            check_csv_header(path, header_of(path, kind.separator), kind.separator)
        raise ValueError(f"{path}: not a readable {kind.label} file ({reader_error(exc)}){other_kind(path)}") from None
    if kind.separator:
        check_csv_header(path, table.columns, kind.separator)
        if table.height:
            empty = [c for c in table.columns if table[c].null_count() == table.height]
            table = table.with_columns(pl.col(c).cast(pl.Float64) for c in empty)
    return table


def table_columns(path) -> list[str]:
    """The column names of a table file, from a text file's header or a parquet file's schema alone
    (a Stata file is read whole); errors name the file."""
    path = Path(path)
    kind = table_kind(path)
    if kind.name == "Stata":
        return read_table(path).columns
    if kind.separator:
        check_utf8(path)
    try:
        columns = (pl.read_csv(path, separator=kind.separator, n_rows=0).columns if kind.separator
                   else list(pl.read_parquet_schema(path)))
    except Exception as exc:  # polars raises several types for an unreadable file
        raise ValueError(f"{path}: not a readable {kind.label} file ({reader_error(exc)}){other_kind(path)}") from None
    if kind.separator:
        check_csv_header(path, columns, kind.separator)
    return columns


def _read_stata(path: Path) -> pl.DataFrame:
    """A Stata data set (pandas' reader): labelled values as their labels, or as their codes where a
    column's labels repeat (pandas cannot make categories of them); dates as dates."""
    import pandas as pd

    try:
        try:
            frame = pd.read_stata(path, convert_categoricals=True)
        except ValueError:  # a column's value labels are not unique: its codes, as numbers
            frame = pd.read_stata(path, convert_categoricals=False)
    except Exception as exc:  # the reader raises several types for an unreadable file
        raise ValueError(f"{path}: not a readable Stata file ({type(exc).__name__}){other_kind(path)}") from None
    table = pl.from_pandas(frame)
    labelled = [c for c, dtype in table.schema.items() if isinstance(dtype, pl.Categorical | pl.Enum)]
    return table.with_columns(pl.col(c).cast(pl.String) for c in labelled)


_QUOTED = re.compile(r"`([^`]*)`", re.DOTALL)


def reader_error(exc: Exception) -> str:
    """The reader's message on an unreadable table, its first line, without the data: polars quotes
    the cell it could not parse (``could not parse `…` as dtype``), which may be a patient's. Only
    a type's name stays quoted.

    >>> reader_error(ValueError("could not parse `\\"Smith, J` as dtype `str` at column 'name'\\n\\nhint"))
    "could not parse a value as dtype `str` at column 'name'"
    """
    text = _QUOTED.sub(lambda m: m[0] if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\[\]]*", m[1]) else "a value", str(exc))
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def first_data_line(path) -> int | None:
    """The line of a table file's first data row (a text file's header is line 1), or None where
    lines mean nothing (parquet, Stata). With ``row_at`` it names a row as the user finds it in an
    editor.

    >>> first_data_line("visits.csv"), first_data_line("visits.tsv.gz"), first_data_line("visits.parquet")
    (2, 2, None)
    """
    try:
        return 2 if table_kind(path).separator else None
    except ValueError:
        return None


def other_kind(path) -> str:
    """What to do with a file read as parquet for want of a name of another kind, as the tail of an
    error.

    >>> other_kind("cohort.txt")
    "; a table is a .csv or .tsv file (either may end in .gz), a Stata .dta file or a parquet file, and this one's
    name says none of them: rename it, or save it as .csv or parquet"
    >>> other_kind("cohort.parquet")
    ''
    """
    name = Path(path).name.lower().removesuffix(".gz")
    if Path(name).suffix in (".csv", ".tsv", ".tab", ".dta", ".parquet", ".pq", ".parq"):
        return ""
    return f"; {KINDS_READ}, and this one's name says none of them: rename it, or save it as .csv or parquet"


# a number (sign, decimals, exponent; ',' as the decimal mark too) or a date: a cell, not a column name
_VALUE = re.compile(r"[-+]?(\d+([.,]\d*)?|[.,]\d+)([eE][-+]?\d+)?|\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}([ T].*)?")


def _open_bytes(path):
    """The file's bytes, decompressed where its name ends in ``.gz``."""
    return gzip.open(path, "rb") if str(path).lower().endswith(".gz") else open(path, "rb")


def check_utf8(path, block: int = 1 << 24) -> None:
    """ValueError naming ``path`` and the first line that is not UTF-8 text (e.g. a file saved as
    Latin-1 or Windows-1252, which the reader would take for garbled names or refuse without a
    line), or a ``.gz`` file that is not gzip. Nothing of the line is quoted.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "cohort.csv"
    >>> _ = path.write_bytes("age,city\\n60,Bern\\n71,Z\\u00fcrich\\n".encode("latin-1"))
    >>> try:
    ...     check_utf8(path)
    ... except ValueError as exc:
    ...     print(str(exc).split(": ", 1)[1])
    line 3 is not UTF-8 text (Latin-1 or Windows-1252, as older tools save a CSV?): save it as CSV UTF-8, or as parquet
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    line = 1
    try:
        with _open_bytes(path) as fh:
            while True:
                chunk = fh.read(block)
                held = decoder.getstate()[0]  # the last block's unfinished character: no newline in it
                try:
                    decoder.decode(chunk, final=not chunk)
                except UnicodeDecodeError as exc:  # exc.start counts from the bytes held back
                    line += (held + chunk)[:exc.start].count(b"\n")
                    raise ValueError(f"{path}: line {line} is not UTF-8 text (Latin-1 or Windows-1252, as older tools "
                                     "save a CSV?): save it as CSV UTF-8, or as parquet") from None
                if not chunk:
                    return
                line += chunk.count(b"\n")
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: not a readable gzip file ({type(exc).__name__}): its name ends in .gz") from None


def header_of(path, separator: str = ",") -> list[str]:
    """A text table's header as written ([] where it cannot be read)."""
    try:
        with _open_bytes(path) as raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as fh:
            return next(csv.reader(fh, delimiter=separator), [])
    except (OSError, EOFError, UnicodeDecodeError, csv.Error):
        return []


def check_csv_header(path, columns, separator: str = ",") -> None:
    """A text table read as one column whose name holds another separator (';', a tab, '|', or a
    comma in a tab-separated file) was written with that separator: an error that says so (rather
    than every column missing).

    >>> check_csv_header("cohort.csv", ["week;arrest;age"])
    Traceback (most recent call last):
    ...
    ValueError: cohort.csv: the first line reads as one column holding 2 ';': the file seems separated by ';'; a CSV
    file here is separated by commas (with '.' as the decimal mark): convert it, or save it as parquet
    >>> check_csv_header("cohort.tsv", ["week,arrest,age"], "\\t")
    Traceback (most recent call last):
    ...
    ValueError: cohort.tsv: the first line reads as one column holding 2 ',': the file seems separated by ','; a .tsv
    or .tab file here is separated by tabs: rename a comma-separated file .csv

    The line itself is not quoted: in a file without a header it is a row of data. A first line
    with numbers or dates for names is such a row, and is refused without quoting it:

    >>> check_csv_header("cohort.csv", ["20", "1", "0", "27", "2021-03-01", "age"])
    Traceback (most recent call last):
    ...
    ValueError: cohort.csv: the first line has numbers or dates for column names (columns 0, 1, 2, 3, 4; counted from
    0): the file seems to have no header line; add one that names each column (a name that is not a number)
    """
    if len(columns) == 1:
        sep = next((sep for sep in ";\t|," if sep != separator and sep in columns[0]), None)
        if sep is not None:
            rule = ("a CSV file here is separated by commas (with '.' as the decimal mark): convert it, or save it as "
                    "parquet" if separator == "," else "a .tsv or .tab file here is separated by tabs"
                    + (": rename a comma-separated file .csv" if sep == "," else ": convert it, or save it as parquet"))
            raise ValueError(f"{path}: the first line reads as one column holding {columns[0].count(sep)} {sep!r}: the "
                             f"file seems separated by {sep!r}; {rule}")
    written = header_of(path, separator) or list(columns)  # as written: the reader renames a repeated name
    values = [i for i, name in enumerate(written) if _VALUE.fullmatch(str(name).strip())]
    if values:
        at = ", ".join(map(str, values[:8])) + (f" and {len(values) - 8} more" if len(values) > 8 else "")
        raise ValueError(f"{path}: the first line has numbers or dates for column names (columns {at}; counted from 0):"
                         " the file seems to have no header line; add one that names each column (a name that is not"
                         " a number)")
    check_column_names(path, written)


def check_column_names(where, names) -> None:
    """ValueError naming ``where`` and the column when a name is empty or repeated.

    >>> check_column_names("cohort.csv", ["age", "sofa", "age"])
    Traceback (most recent call last):
    ...
    ValueError: cohort.csv: column 'age' comes 2 times in the header (columns 0, 2); give each column its own name
    """
    for i, name in enumerate(names):
        if not str(name).strip():
            index = (" (an unnamed first column is often a row index, as pandas' to_csv writes it without index=False:"
                     " leave it out)") if i == 0 else ""
            raise ValueError(f"{where}: column {i} (counted from 0) has an empty name in the header; name it{index}")
    seen: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        seen.setdefault(str(name), []).append(i)
    for name, at in seen.items():
        if len(at) > 1:
            raise ValueError(f"{where}: column {name!r} comes {len(at)} times in the header (columns "
                             f"{', '.join(map(str, at))}); give each column its own name")


