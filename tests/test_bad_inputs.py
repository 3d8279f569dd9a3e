"""Bad inputs the other test files do not already cover (docs/reliability.md lists the whole catalogue).

Each case asserts a clear error naming the file, row or field, and that nothing was written.
"""

import gzip
import json

import numpy as np
import orjson
import polars as pl
import pytest

from cet_model import CETModel, load_model
from cet_model.dataset import load_dataset
from flows.lib.infra import registry
from flows.lib.infra.errors import InputError
from flows.lib.mimic.staging import stage_table
from flows.lib.modeling.predict import read_features
from flows.lib.reddit.cohort import pseudonym, scan_comments, scan_submissions
from flows.lib.reddit.pushshift import DumpError
from flows.lib.standin import synthetic
from flows.lib.standin.reddit import compressor

KEY = b"k"
pytestmark = pytest.mark.bad_input


def _zst(path, rows: list[bytes]):
    with open(path, "wb") as fh, compressor().stream_writer(fh, closefd=False) as w:
        w.write(b"\n".join(rows) + b"\n")
    return path


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_created_utc_neither_number_nor_numeric_string_fails_the_file(tmp_path):
    good = [orjson.dumps({"author": f"u{i}", "body": "hi", "created_utc": 1262304001 + i, "id": f"c{i}",
                          "subreddit": "pics"}) for i in range(50)]
    bad = [orjson.dumps({"author": "v", "body": "hi", "created_utc": "yesterday", "id": "b", "subreddit": "pics"}),
           orjson.dumps({"author": "w", "body": "hi", "created_utc": [1], "id": "b2", "subreddit": "pics"})]
    path = _zst(tmp_path / "RC_2010-01.zst", good + bad)
    out = tmp_path / "out"
    candidates = {pseudonym(u, KEY): 2**40 for u in ["v", "w", *(f"u{i}" for i in range(50))]}
    with pytest.raises(DumpError, match=r"RC_2010-01.zst: 2 malformed line\(s\) of 52 "
                                        r".* first at line\(s\) \[51, 52\]"):
        scan_comments(path, out / "c.parquet", KEY, candidates, end_utc=2**40, max_error_rate=0.01)
    assert _leftovers(out) == []


def test_json_line_that_is_not_an_object_fails_submissions_scan(tmp_path):
    rows = [orjson.dumps({"author": "a", "subreddit": "fitness", "created_utc": 1262304001})] * 10 + [b"[1, 2]"]
    path = _zst(tmp_path / "RS_2010-01.zst", rows)
    out = tmp_path / "out"
    with pytest.raises(DumpError, match=r"RS_2010-01.zst: 1 malformed line\(s\) of 11 .* line\(s\) \[11\]"):
        scan_submissions(path, out / "s.parquet", KEY, end_utc=2**40, max_error_rate=0.0)
    assert _leftovers(out) == []


def test_html_error_page_in_place_of_a_dump(tmp_path):
    path = tmp_path / "RS_2010-02.zst"
    path.write_bytes(b"<!DOCTYPE html><html><body>429 Too Many Requests</body></html>")
    with pytest.raises(DumpError, match=r"RS_2010-02.zst: cannot be decompressed"):
        scan_submissions(path, tmp_path / "out" / "s.parquet", KEY, end_utc=2**40)
    assert _leftovers(tmp_path / "out") == []


def test_truncated_gzip_table_names_the_file(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    body = "row_id,itemid,label,fluid,category,loinc_code\n" + "".join(
        f"{i},{50000 + i},L{i},BLOOD,Chemistry,\n" for i in range(5000))
    data = gzip.compress(body.encode())
    (src / "D_LABITEMS.csv.gz").write_bytes(data[: len(data) // 2])  # a download cut short
    with pytest.raises(InputError, match=r"D_LABITEMS.csv.gz: (cannot be read|table "
                                         r"D_LABITEMS could not be converted)"):  # a command's one line
        stage_table(src, "D_LABITEMS", out)
    assert _leftovers(out) == []


def test_dotenv_with_a_wrong_type_names_the_setting(tmp_path, monkeypatch):
    from flows.lib.infra.settings import Settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CET_PATIENCE", raising=False)
    (tmp_path / ".env").write_text("CET_PATIENCE=soon\n")
    with pytest.raises(ValueError, match=r"CET_PATIENCE"):
        Settings()


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("ds") / "syn"
    return synthetic.write(path, "independent", n=300, split_sizes=(180, 60, 60))


def test_sequences_with_the_wrong_row_count(tmp_path, small_dataset):
    import shutil

    ds = tmp_path / "ds"
    shutil.copytree(small_dataset, ds)
    np.save(ds / "sequences.npy", np.zeros((299, 20, 4), np.float32))
    with pytest.raises(ValueError, match=r"sequences.npy.*(299|rows)"):
        load_dataset(ds)


def test_manifest_that_is_not_json(tmp_path, small_dataset):
    import shutil

    ds = tmp_path / "ds"
    shutil.copytree(small_dataset, ds)
    (ds / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"manifest.json"):
        load_dataset(ds)


def test_truncated_weights_file_names_the_file(tmp_path):
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((60, 2)), rng.exponential(size=(60, 2)) + 0.1
    s = (rng.random((60, 2)) < 0.5).astype(float)
    folder = CETModel(hidden_sizes=(4,), max_epochs=1, device="cpu").fit(x, t, s).save(tmp_path / "m")
    weights = folder / "weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"weights.safetensors"):
        load_model(folder)


def test_corrupt_promotion_record_names_the_file(tmp_path):
    (tmp_path / "mimic").mkdir()
    (tmp_path / "mimic" / "promoted.json").write_text('{"version": ')
    with pytest.raises(ValueError, match=r"promoted.json"):
        registry.promoted(tmp_path, "mimic")


def test_text_feature_column_for_prediction(tmp_path):
    path = tmp_path / "new.parquet"
    pl.DataFrame({"id": ["a", "b"], "x1": [0.1, 0.2], "x2": ["1.0", "high"]}).write_parquet(path)
    with pytest.raises(ValueError, match=r"new.parquet: column 'x2' has type String, expected numbers \(row 1 is text "
                                         r"that is not a number\)$"):
        read_features(path, ["x1", "x2"])
    pl.DataFrame({"id": ["a", "b"], "x1": [0.1, 0.2], "x2": ["1.0", "2,5"]}).write_parquet(path)  # a decimal comma
    with pytest.raises(ValueError, match=r"new.parquet: column 'x2' has type String, expected numbers \(row 1 is text "
                                         r"that is not a number\): its numbers are written with ','.*no separators$"):
        read_features(path, ["x1", "x2"])
    csv = tmp_path / "new.csv"  # the same from a CSV file, where an empty cell is a missing value
    csv.write_text("id,x1,x2\na,0.1,1.0\nb,,2.0\n")
    with pytest.raises(ValueError, match=r"new.csv: column 'x1' row 1 \(line 3\): missing or "
                                         r"non-finite value \(1 such rows\)"):
        read_features(csv, ["x1", "x2"])
    csv.write_text("id,x1\na,0.1\n")
    with pytest.raises(ValueError, match=r"new.csv: missing columns \['x2'\]"):
        read_features(csv, ["x1", "x2"])
    # lists in a parquet file, as a feature or as the ids: named by their type, not a traceback from a cast
    pl.DataFrame({"id": ["a", "b"], "x1": [[0.1, 7.5], [0.2, 7.5]]}).write_parquet(path)
    with pytest.raises(ValueError, match=r"new.parquet: column 'x1' has type List\(Float64\), expected numbers$"):
        read_features(path, ["x1"])
    pl.DataFrame({"id": [[1, 2], [1, 2]], "x1": [0.1, 0.2]}).write_parquet(path)
    with pytest.raises(ValueError, match=r"new.parquet: column 'id' has type List\(Int64\): ids are numbers or text$"):
        read_features(path, ["x1"])


def test_new_rows_without_ids_are_numbered_only_for_a_model_whose_table_had_none(tmp_path):
    """A table built without an id column numbered its rows 0, 1, ...: new rows for its model may
    come without ids and are numbered the same way, in the file's order. A model trained on ids
    still needs them."""
    csv = tmp_path / "new.csv"
    csv.write_text("x1,x2\n0.1,1.0\n0.3,2.0\n0.2,5.0\n")
    ids, x = read_features(csv, ["x2", "x1"], row_numbers=True)
    assert ids.tolist() == [0, 1, 2] and x.tolist() == [[1.0, 0.1], [2.0, 0.3], [5.0, 0.2]]
    with pytest.raises(ValueError, match=r"new.csv: missing columns \['id'\]"):
        read_features(csv, ["x1", "x2"])
    csv.write_text("id,x1,x2\n7,0.1,1.0\n9,0.3,2.0\n")  # ids given: they are kept
    assert read_features(csv, ["x1", "x2"], row_numbers=True)[0].tolist() == [7, 9]


def test_unknown_model_in_a_saved_config(tmp_path):
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((60, 2)), rng.exponential(size=(60, 2)) + 0.1
    s = (rng.random((60, 2)) < 0.5).astype(float)
    folder = CETModel(hidden_sizes=(4,), max_epochs=1, device="cpu").fit(x, t, s).save(tmp_path / "m")
    config = json.loads((folder / "config.json").read_text())
    config["class"] = "XGBModel"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"config.json.*XGBModel"):
        load_model(folder)


def test_an_event_the_manifest_does_not_name_is_refused(tmp_path, small_dataset):
    import shutil

    ds = tmp_path / "ds"
    shutil.copytree(small_dataset, ds)
    events = pl.read_parquet(ds / "events.parquet")
    ghost = events.with_columns(t_Ghost=pl.lit(1.0), s_Ghost=pl.lit(1), c_Ghost=pl.lit(1), t_true_Ghost=pl.lit(1.0))
    ghost.write_parquet(ds / "events.parquet")
    with pytest.raises(ValueError, match=r"events.parquet: columns for events \['Ghost'\]"):
        load_dataset(ds)
    # and nothing is written when a build hands such frames to write_dataset
    from cet_model.dataset import write_dataset

    manifest = json.loads((ds / "manifest.json").read_text())
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"Ghost"):
        write_dataset(out, pl.read_parquet(ds / "features.parquet"), ghost, manifest)
    assert _leftovers(tmp_path) == ["ds"]


class _Payload:
    """Unpickling this creates a file: the proof that a loader ran pickle."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_models_and_sequences_load_without_pickle(tmp_path, small_dataset):
    import pickle
    import shutil

    import torch

    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((60, 2)), rng.exponential(size=(60, 2)) + 0.1
    s = (rng.random((60, 2)) < 0.5).astype(float)
    folder = CETModel(hidden_sizes=(4,), max_epochs=1, device="cpu").fit(x, t, s).save(tmp_path / "m")
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "weights.safetensors"]
    marker = tmp_path / "unpickled"
    torch.save({"payload": _Payload(marker)}, folder / "weights.safetensors")  # a pickle under the real name
    with pytest.raises(ValueError, match=r"weights.safetensors"):
        load_model(folder)
    assert not marker.exists()

    ds = tmp_path / "ds"
    shutil.copytree(small_dataset, ds)
    seq = np.empty((300, 20, 4), dtype=object)
    seq[0, 0, 0] = _Payload(marker)
    np.save(ds / "sequences.npy", seq, allow_pickle=True)
    with pytest.raises(ValueError, match=r"sequences.npy"):
        load_dataset(ds)
    assert not marker.exists()
    # control: the payload is real, unpickling it does create the marker
    pickle.loads(pickle.dumps(_Payload(tmp_path / "control"))).close()
    assert (tmp_path / "control").exists()


@pytest.mark.parametrize("select, value, kind", [
    ("SELECT CAST(v AS INTEGER) AS x FROM (VALUES ('7731-SECRET')) t(v)", "7731",
     "Conversion Error: a value does not convert to INT32"),
    ("SELECT CAST(v AS DECIMAL(38, 9)) AS x FROM (VALUES (7731e35)) t(v)", "7731",
     "Conversion Error: a value does not convert to DECIMAL(38,9)"),
    ("SELECT v + 1 AS x FROM (VALUES (CAST(2147483647 AS INTEGER))) t(v)", "2147483647",
     "Out of Range Error: a value does not fit INT32"),
])
def test_a_value_that_breaks_a_sql_stage_is_never_quoted(tmp_path, select, value, kind):
    """DuckDB quotes the value in a conversion or overflow error (``Could not convert string 'x'``):
    a MIMIC cell. The build's error names the SQL file, the kind and the type, not the value."""
    import duckdb

    from flows.lib.infra.sql_runner import run_sql_file

    path = tmp_path / "marts" / "mart_x.sql"
    path.parent.mkdir()
    path.write_text(select)
    with pytest.raises(RuntimeError) as info:
        run_sql_file(duckdb.connect(), path)
    assert str(info.value) == f"{path}: {kind} (the value is not shown)"
    assert value not in str(info.value).replace(str(path), "")
