"""A user's table in the file kinds clinical research keeps it in: CSV, tab-separated text, either
gzip-compressed, a Stata data set and parquet, through the build (``flows.table``) and scoring
(``flows.predict --features``). Real data: lifelines' rossi, written by pandas' own writers."""

import gzip
import json

import numpy as np
import pandas as pd
import polars as pl
import pytest

from cet_model.dataset import load_dataset
from flows import table as table_flow
from flows.lib.ingest import write_follow_up_dataset
from flows.lib.modeling.predict import read_features
from flows.lib.table_files import read_table, table_columns

FEATURES = ["fin", "age", "race", "wexp", "mar", "paro", "prio"]
KW = dict(features=FEATURES, events={"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks")


@pytest.fixture(scope="module")
def rossi():
    from lifelines.datasets import load_rossi

    return load_rossi()


def _write(frame: pd.DataFrame, path) -> None:
    """``frame`` in the kind ``path``'s name says, by pandas' own writers."""
    name = str(path).lower()
    if name.endswith(".gz"):
        with gzip.open(path, "wt", newline="") as fh:
            frame.to_csv(fh, index=False, sep="\t" if ".tsv" in name else ",")
    elif name.endswith((".tsv", ".tab")):
        frame.to_csv(path, index=False, sep="\t")
    elif name.endswith(".dta"):
        frame.to_stata(path, write_index=False)
    elif name.endswith(".parquet"):
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)


def test_every_kind_of_table_file_gives_the_same_dataset(rossi, tmp_path):
    kinds = ["rossi.csv", "rossi.tsv", "rossi.tab", "rossi.csv.gz", "rossi.TSV.GZ", "rossi.dta", "rossi.parquet"]
    splits = []
    for name in kinds:
        _write(rossi, tmp_path / name)
        assert table_columns(tmp_path / name) == list(rossi.columns), name
        splits.append(load_dataset(write_follow_up_dataset(tmp_path / f"d-{name}", tmp_path / name, **KW)).train)
    for name, other in zip(kinds[1:], splits[1:], strict=True):
        for a, b in ((other.X, splits[0].X), (other.T, splits[0].T), (other.S, splits[0].S)):
            np.testing.assert_array_equal(a, b, err_msg=name)


def test_a_stata_file_s_value_labels_missing_values_and_dates(rossi, tmp_path):
    """A labelled status (Stata's value labels) is read as its labels, so ``status:arrest`` names
    the kind of event; a Stata missing value is a gap the build imputes; a date column is named as
    dates when it is among the features."""
    frame = rossi.copy()
    kind = np.where(frame["arrest"] == 0, "none", np.where(np.arange(len(frame)) % 3 == 0, "violation", "arrest"))
    frame["status"] = pd.Categorical(kind)
    frame["age"] = frame["age"].astype(float).where(np.arange(len(frame)) % 10 != 0)
    frame["released"] = pd.Timestamp("1970-01-01") + pd.to_timedelta(np.arange(len(frame)), unit="D")
    frame.drop(columns="arrest").to_stata(tmp_path / "s.dta", write_index=False)
    table = read_table(tmp_path / "s.dta")
    assert table["status"].dtype == pl.String and sorted(table["status"].unique()) == ["arrest", "none", "violation"]
    assert table["age"].null_count() == 44 and table["released"].dtype.is_temporal()
    events = {"arrest": ("week", "status:arrest"), "violation": ("week", "status:violation")}
    ds = load_dataset(write_follow_up_dataset(tmp_path / "d", tmp_path / "s.dta", FEATURES, events, name="s",
                                              time_unit="weeks", impute="median"))
    seen = np.concatenate([ds.train.S, ds.val.S, ds.test.S])
    assert seen.sum(0).tolist() == [77, 37] and not (seen.sum(1) > 1).any()
    with pytest.raises(ValueError, match=r"s\.dta: column 'released' has type Datetime.*it holds dates"):
        write_follow_up_dataset(None, tmp_path / "s.dta", [*FEATURES, "released"], events, name="s",
                                time_unit="weeks", impute="median")


def test_a_stata_file_whose_labels_repeat_is_read_by_its_codes(rossi, tmp_path):
    """pandas cannot make categories of a column whose value labels repeat: its codes are read, as
    numbers, and ``status:1`` names the kind."""
    frame = rossi[["week", "arrest", *FEATURES]].copy()
    path = tmp_path / "codes.dta"
    frame.to_stata(path, write_index=False, value_labels={"arrest": {0: "no", 1: "no"}})
    with pytest.raises(ValueError):  # what pandas does with such a file: the reason for the second read
        pd.read_stata(path)
    table = read_table(path)
    assert table["arrest"].dtype.is_numeric() and table["arrest"].sum() == 114
    ds = load_dataset(write_follow_up_dataset(tmp_path / "d", path, FEATURES, {"arrest": ("week", "arrest:1")},
                                              name="c", time_unit="weeks"))
    assert np.concatenate([ds.train.S, ds.val.S, ds.test.S]).sum() == 114


def test_scoring_reads_new_rows_from_every_kind(rossi, tmp_path):
    """``flows.predict --features``: new rows as TSV, gzip-compressed CSV or Stata give the same
    matrix as a CSV, and a CSV's errors name its line."""
    new = rossi.head(20).reset_index(names="id")
    matrices = []
    for name in ("new.csv", "new.tsv", "new.csv.gz", "new.dta"):
        _write(new, tmp_path / name)
        ids, x = read_features(tmp_path / name, FEATURES)
        assert ids.tolist() == list(range(20)), name
        matrices.append(x)
    for x in matrices[1:]:
        np.testing.assert_array_equal(x, matrices[0])
    _write(new.assign(age=new["age"].astype(float).where(new.index != 4)), tmp_path / "gap.tsv.gz")
    with pytest.raises(ValueError, match=r"gap\.tsv\.gz: column 'age' row 4 \(line 6\): missing"):
        read_features(tmp_path / "gap.tsv.gz", FEATURES)


def test_the_command_builds_from_a_stata_file(rossi, tmp_path, monkeypatch):
    monkeypatch.setenv("CET_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    rossi.to_stata(tmp_path / "rossi.dta", write_index=False)
    assert table_flow.main(["--table", str(tmp_path / "rossi.dta"), "--name", "r", "--event", "arrest=week,arrest",
                            "--time-unit", "weeks"]) == 0
    manifest = json.loads((tmp_path / "data" / "r" / "manifest.json").read_text())
    assert manifest["feature_names"] == FEATURES and manifest["event_names"] == ["arrest"]


@pytest.mark.bad_input
@pytest.mark.parametrize("name, kind", [("cohort.sas7bdat", "a SAS data set"), ("cohort.xpt", "a SAS transport file"),
                                        ("cohort.sav", "an SPSS data file"), ("cohort.xlsx", "an Excel workbook"),
                                        ("cohort.rds", "an R object")])
def test_a_kind_not_read_here_is_named_with_how_to_export_it(tmp_path, name, kind):
    (tmp_path / name).write_bytes(b"\x00\x01 not read")
    with pytest.raises(ValueError, match=rf"{name}: {kind} is not read here: export it as CSV \(UTF-8\) or parquet; "
                                         r"a table is a \.csv or \.tsv file"):
        write_follow_up_dataset(None, tmp_path / name, **KW)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


@pytest.mark.bad_input
def test_bad_files_of_each_kind_are_named_without_their_content(rossi, tmp_path):
    (tmp_path / "plain.csv.gz").write_bytes(b"week,arrest\n1,0\n")  # named .gz, not compressed
    with pytest.raises(ValueError, match=r"plain\.csv\.gz: not a readable gzip file \(BadGzipFile\)"):
        write_follow_up_dataset(None, tmp_path / "plain.csv.gz", **KW)
    whole = gzip.compress(rossi.to_csv(index=False).encode())
    (tmp_path / "cut.csv.gz").write_bytes(whole[: len(whole) // 2])  # a download cut short
    with pytest.raises(ValueError, match=r"cut\.csv\.gz: not a readable gzip file \(EOFError\)"):
        write_follow_up_dataset(None, tmp_path / "cut.csv.gz", **KW)
    with gzip.open(tmp_path / "latin.csv.gz", "wb") as fh:
        fh.write("week,arrest,city\n1,0,Z\u00fcrich\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin\.csv\.gz: line 2 is not UTF-8 text"):
        write_follow_up_dataset(None, tmp_path / "latin.csv.gz", **KW)
    rossi.to_csv(tmp_path / "commas.tsv", index=False)  # comma-separated, named as tab-separated
    with pytest.raises(ValueError, match=r"commas\.tsv: the first line reads as one column holding 8 ',': .* a \.tsv "
                                         r"or \.tab file here is separated by tabs: rename a comma-separated file "
                                         r"\.csv"):
        write_follow_up_dataset(None, tmp_path / "commas.tsv", **KW)
    (tmp_path / "broken.dta").write_bytes(b"<stata_dta>Smith, J 1962" * 4)
    with pytest.raises(ValueError, match=r"broken\.dta: not a readable Stata file \(\w+\)$") as info:
        write_follow_up_dataset(None, tmp_path / "broken.dta", **KW)
    assert "Smith" not in str(info.value)
    (tmp_path / "cohort.json.gz").write_bytes(gzip.compress(b"{}"))
    with pytest.raises(ValueError, match=r"cohort\.json\.gz: a compressed table is read as \.csv\.gz or \.tsv\.gz"):
        write_follow_up_dataset(None, tmp_path / "cohort.json.gz", **KW)
    assert not any(p.is_dir() for p in tmp_path.iterdir())  # nothing written
