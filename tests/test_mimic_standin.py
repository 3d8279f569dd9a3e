"""The MIMIC-III stand-in: the full release's exact layout, planted truth the build recovers."""

import csv
import gzip
import io
import json
import re

import numpy as np
import polars as pl
import pytest

from cet_model.dataset import load_dataset
from flows.lib.mimic.build import EVENTS, build
from flows.lib.mimic.schema import TABLES
from flows.lib.mimic.staging import stage_table
from flows.lib.standin import mimic as mimic_standin
from flows.lib.standin import mimic_rows as mimic_standin_rows
from flows.lib.standin.mimic_cohort import FACTOR_LABS
from flows.lib.standin.mimic_items import load_items

SCALE = 0.002  # 118 admissions, ~660k chart rows
TS = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    return mimic_standin.generate(tmp_path_factory.mktemp("standin") / "mimic", scale=SCALE, seed=3, progress=False)


@pytest.fixture(scope="module")
def built(standin, tmp_path_factory):
    root = tmp_path_factory.mktemp("built")
    return build(standin, root / "ds", root / "work")


FIELD = re.compile(r'(?:^|,)("(?:[^"]|"")*"|[^,"\n]*)')


def _raw_lines(path, n=2000):
    with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
        return [line for _, line in zip(range(n), fh, strict=False)]


@pytest.mark.slow
def test_every_table_is_in_the_full_release_dialect(standin):
    for table, columns in TABLES.items():
        path = standin / f"{table}.csv.gz"
        lines = _raw_lines(path)
        assert lines[0] == ",".join(f'"{c}"' for c, _ in columns) + "\n"  # upper-case, quoted, LF
        rows = list(csv.reader(io.StringIO("".join(lines[1:]))))
        assert rows, table
        for row, raw in zip(rows[:500], lines[1:501], strict=False):
            assert len(row) == len(columns), (table, raw)
        # raw fields: strings quoted, numbers and timestamps bare, NULL an empty unquoted field
        for line in lines[1:500]:
            fields = FIELD.findall(line.rstrip("\n"))
            assert len(fields) == len(columns), (table, line)
            for (name, typ), field in zip(columns, fields, strict=True):
                if field == "":
                    continue
                if typ == "VARCHAR":
                    assert field.startswith('"') and field.endswith('"'), (table, name, field)
                elif typ == "TIMESTAMP":
                    assert TS.match(field), (table, name, field)
                else:
                    float(field)  # a bare number


def test_chart_rows_mix_carevue_and_metavision_text_and_error_flags(standin):
    chart = pl.read_csv(standin / "CHARTEVENTS.csv.gz", infer_schema=False)
    mv = chart["ITEMID"].cast(pl.Int64) > 220000
    assert 0.1 < mv.mean() < 0.5  # the catalogue's share of MetaVision rows
    cv_error = chart.filter(~mv)["ERROR"]
    assert cv_error.is_null().all()  # CareVue: ERROR is NULL (a plain `<> 1` would drop these)
    mv_error = chart.filter(mv)["ERROR"].cast(pl.Int64)
    assert set(mv_error.unique().to_list()) == {0, 1} and mv_error.mean() < 0.01
    text = chart.filter(pl.col("VALUE").is_not_null() & pl.col("VALUENUM").is_null())
    assert text.height > 0.2 * chart.height  # the top CareVue items are text pick-lists
    assert text["VALUE"].str.contains(",").any() and text["VALUE"].str.contains('"').any()
    # numbers agree with their text
    num = chart.filter(pl.col("VALUENUM").is_not_null() & (pl.col("ERROR").is_null() | (pl.col("ERROR") == "0")))
    assert (num["VALUE"] == num["VALUENUM"]).all()


def test_row_counts_and_item_frequencies_follow_the_release(standin):
    man = json.loads((standin / "standin.json").read_text())
    full = mimic_standin.FULL_RELEASE
    for table in ("CHARTEVENTS", "LABEVENTS", "OUTPUTEVENTS"):
        assert man["rows"][table] == pytest.approx(full[table] * SCALE, rel=0.25), table
    assert man["rows"]["D_ITEMS"] == full["D_ITEMS"]
    chart = pl.read_csv(standin / "CHARTEVENTS.csv.gz", columns=["ITEMID"], schema_overrides={"ITEMID": pl.Int64})
    top = chart["ITEMID"].value_counts(sort=True)["ITEMID"].head(20).to_list()
    cat = load_items("chartevents")
    assert 211 in top[:3]  # CareVue heart rate, the release's most frequent chart item
    assert len(set(top) & set(cat.itemid[np.argsort(-cat.weight)[:30]].tolist())) >= 15
    sums = (standin / "SHA256SUMS.txt").read_text().splitlines()
    assert len(sums) == 8 and all(line.endswith(".csv.gz") for line in sums)


def test_staging_reads_every_row_of_the_multi_member_gzip(standin, tmp_path):
    man = json.loads((standin / "standin.json").read_text())
    for table in ("CHARTEVENTS", "LABEVENTS", "ADMISSIONS"):
        assert stage_table(standin, table, tmp_path).rows == man["rows"][table]


def test_the_build_recovers_the_planted_truth_exactly(standin, built):
    truth = pl.read_parquet(standin / "standin_truth.parquet")
    ds = load_dataset(built)
    ev = pl.read_parquet(built / "events.parquet").join(truth, left_on="id", right_on="hadm_id", suffix="_truth")
    assert ev.height == truth["in_cohort"].sum() == ds.manifest["cohort"]["cohort_admissions"]
    for e in EVENTS:
        assert (ev[f"c_{e}"] == ev[f"c_{e}_truth"]).all(), e
        occurred = ev.filter(pl.col(f"c_{e}") == 1)
        # the build's times are hours from the origin + 0.01 h; the truth's are from ADMITTIME
        np.testing.assert_allclose(occurred[f"t_true_{e}"] - 0.01, occurred[f"t_true_{e}_truth"], atol=1e-9)


def test_features_carry_the_planted_factors(standin, built):
    truth = pl.read_parquet(standin / "standin_truth.parquet")
    feats = pl.read_parquet(built / "features.parquet").join(truth, left_on="id", right_on="hadm_id")
    for k, lab in enumerate(FACTOR_LABS[:4]):
        r = np.corrcoef(feats[f"lab_{lab}_mean"], feats[f"z_{k}"])[0, 1]
        assert r > 0.5, (lab, r)
    man = json.loads((standin / "standin.json").read_text())
    for plan in man["events"].values():  # occurrence and timing are driven by different factors
        assert not set(plan["occurrence"]["factors"]) & set(plan["timing"]["factors"])
    assert all(v is None or v > 0.6 for v in man["oracle_auc"].values())


@pytest.mark.slow
def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = mimic_standin.generate(tmp_path / "a", scale=0.0005, seed=1, progress=False)
    b = mimic_standin.generate(tmp_path / "b", scale=0.0005, seed=1, progress=False)
    c = mimic_standin.generate(tmp_path / "c", scale=0.0005, seed=2, progress=False)
    assert (a / "SHA256SUMS.txt").read_text() == (b / "SHA256SUMS.txt").read_text()
    assert (a / "SHA256SUMS.txt").read_text() != (c / "SHA256SUMS.txt").read_text()


def test_the_pipelines_working_copy_is_level_1_and_decodes_to_the_same_bytes(tmp_path):
    kept = mimic_standin.generate(tmp_path / "kept", scale=0.0005, seed=1, progress=False)  # level 6
    work = mimic_standin.ensure(tmp_path / "work", scale=0.0005, seed=1, progress=False)
    assert json.loads((work / "standin.json").read_text())["compresslevel"] == 1
    names = sorted(p.name for p in kept.glob("*.csv.gz"))
    assert names == sorted(p.name for p in work.glob("*.csv.gz")) and len(names) == 8
    for name in names:
        assert (kept / name).read_bytes() != (work / name).read_bytes(), f"{name}: not recompressed"
        assert gzip.decompress((kept / name).read_bytes()) == gzip.decompress((work / name).read_bytes()), name
    assert mimic_standin.ensure(kept, scale=0.0005, seed=1) == kept  # reused whatever its level


@pytest.mark.slow
def test_existing_folder_is_kept_and_a_failure_leaves_nothing(tmp_path, monkeypatch):
    out = tmp_path / "m"
    mimic_standin.generate(out, scale=0.0005, progress=False)
    before = (out / "SHA256SUMS.txt").read_text()
    with pytest.raises(FileExistsError, match="not empty"):
        mimic_standin.generate(out, scale=0.0005, seed=9, progress=False)
    assert mimic_standin.existing(out, 0.0005, 0) and not mimic_standin.existing(out, 0.0005, 1)
    mtime = (out / "CHARTEVENTS.csv.gz").stat().st_mtime_ns
    mimic_standin.ensure(out, 0.0005, 0, progress=False)
    assert (out / "CHARTEVENTS.csv.gz").stat().st_mtime_ns == mtime  # reused, not rewritten

    def fail(*args, **kwargs):  # a crash in the middle of the row tables
        raise RuntimeError("disk full")

    monkeypatch.setattr(mimic_standin, "lab_chunk", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        mimic_standin.generate(out, scale=0.0005, seed=5, progress=False, overwrite=True)
    assert (out / "SHA256SUMS.txt").read_text() == before  # the old folder is untouched
    with pytest.raises(RuntimeError):
        mimic_standin.generate(tmp_path / "new", scale=0.0005, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no partial folder anywhere


def test_scale_is_checked():
    with pytest.raises(ValueError, match="scale must be in"):
        mimic_standin.generate("/nonexistent/x", scale=0)


def test_event_values_use_the_real_text_formats():
    rng = np.random.default_rng(0)
    v, vn = mimic_standin_rows._event_values("Intubated", 200, rng)
    assert set(v) == {"INTUBATED", "NOT INTUBATED"} and set(vn) == {None}
    v, vn = mimic_standin_rows._event_values("Urobilinogen", 400, rng)
    assert "NEG" in v and any(x is not None for x in vn)


@pytest.mark.slow
def test_rebuilding_the_same_input_gives_the_same_bytes(standin, built, tmp_path):
    """DuckDB's threads combine partial sums in varying order; the window means and sums add
    exact decimals so a rebuild is byte-identical (the double sums differed in their last bits)."""
    want = {p.name: p.read_bytes() for p in built.iterdir() if p.is_file()}
    for i in range(2):
        again = build(standin, tmp_path / f"ds{i}", tmp_path / f"work{i}")
        got = {p.name: p.read_bytes() for p in again.iterdir() if p.is_file()}
        assert got.keys() == want.keys()
        assert [n for n in want if got[n] != want[n]] == []
