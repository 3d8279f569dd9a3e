"""The MIMIC build: a hand-made fixture checked by hand, and the real demo end to end."""

import json

import numpy as np
import polars as pl
import pytest

from cet_model.dataset import load_dataset
from flows.lib.infra.errors import InputError
from flows.lib.mimic.build import MimicParams, build, query, run_sql
from flows.lib.mimic.staging import stage_all
from tests.demo import DEMO, requires_demo
from tests.mimic_fixture import write_fixture

TINY = MimicParams(n_chart=2, n_lab=1, n_output=1)


@pytest.fixture
def tiny_sql(tmp_path):
    con = run_sql(stage_all(write_fixture(tmp_path / "mimic"), tmp_path / "staged"), tmp_path / "work", TINY)
    yield con
    con.close()


def _features(con, hadm) -> dict:
    """The raw (not yet imputed or scaled) features of one admission."""
    long = query(con, "SELECT * FROM mimic_features_long")
    return dict(long.filter(pl.col("hadm_id") == hadm).select("feature", "value").iter_rows())


def test_every_aggregate_equals_the_hand_computation(tiny_sql):
    f = _features(tiny_sql, 101)
    # chart item 1 in [0 h, 24 h]: 10, 20, 40 (999 has ERROR = 1; 30 is at 30 h)
    assert f["chart_1_count"] == 3 and f["chart_1_mean"] == pytest.approx(70 / 3)
    assert (f["chart_1_min"], f["chart_1_max"]) == (10, 40)
    # chart item 2 is text: its rows are counted, and it has no mean/min/max
    assert f["chart_2_count"] == 2 and "chart_2_mean" not in f
    # lab: creatinine 1.0 and 3.0 (SPECIMEN TYPE and the event lab are never features)
    assert (f["lab_50912_count"], f["lab_50912_mean"], f["lab_50912_min"], f["lab_50912_max"]) == (2, 2.0, 1.0, 3.0)
    assert not [k for k in f if k.startswith(("lab_50800", "lab_51003"))]
    # output 40055: 100 + 50 inside the window (70 at 25 h is outside)
    assert (f["output_40055_sum"], f["output_40055_count"]) == (150, 2)


def test_origin_and_event_times(tiny_sql):
    ev = query(tiny_sql, "SELECT * FROM mimic_events WHERE event = 'Troponin_T' ORDER BY hadm_id")
    hours = dict(ev.select("hadm_id", "hours_to_event").iter_rows())
    assert hours[101] == pytest.approx(10.0)  # origin = ADMITTIME
    assert hours[102] == pytest.approx(12.0)  # origin = the lab 2 h before ADMITTIME
    assert ev["occurred"].all()
    f = _features(tiny_sql, 102)
    assert f["lab_50912_count"] == 3 and f["lab_50912_max"] == 5.0  # the early lab is in 102's window
    other = query(tiny_sql, "SELECT * FROM mimic_events WHERE event = 'Lipase'")
    assert not other["occurred"].any() and other["hours_to_event"].is_null().all()


def test_items_are_chosen_on_training_admissions(tiny_sql):
    items = query(tiny_sql, "SELECT * FROM int_items_selected ORDER BY source, item_rank")
    assert items.select("source", "itemid").rows() == [("chart", 1), ("chart", 2), ("lab", 50912), ("output", 40055)]
    n_train = query(tiny_sql, "SELECT count(*) AS n FROM int_admissions_split WHERE split = 'train'")["n"][0]
    chart1 = items.filter(pl.col("itemid") == 1).row(0, named=True)
    assert chart1["train_rows"] == 3 * n_train and chart1["is_numeric"]
    assert not items.filter(pl.col("itemid") == 2)["is_numeric"][0]


def test_split_statistics_come_from_training_rows_only(tmp_path):
    ds = load_dataset(build(write_fixture(tmp_path / "m", n_admissions=10), tmp_path / "out", tmp_path / "w", TINY))
    x = ds.train.X
    varying = x.std(0) > 0
    np.testing.assert_allclose(x.mean(0), 0.0, atol=1e-9)
    np.testing.assert_allclose(x[:, varying].std(0, ddof=1), 1.0, atol=1e-9)
    # every cohort admission is in exactly one split
    assert set(np.concatenate([ds.train.ids, ds.val.ids, ds.test.ids])) == set(range(101, 111))


def test_a_hash_split_keeps_each_patient_in_its_split_when_the_cohort_grows(tmp_path):
    """``split_method="hash"``: rebuilt with 20 more patients, the first 40 keep their splits
    (the random split, the default, reshuffles them); the manifest says which split was drawn."""
    from dataclasses import replace

    def splits(n, method, name):
        params = replace(TINY, split_method=method)
        ds = load_dataset(build(write_fixture(tmp_path / f"m{n}", n_admissions=n), tmp_path / name,
                                tmp_path / f"w{name}", params))
        assert ds.manifest["split_method"] == method
        return {int(i): k for k in ("train", "val", "test") for i in getattr(ds, k).ids}

    before, after = splits(40, "hash", "a"), splits(60, "hash", "b")
    assert len(after) == 60 and {i: after[i] for i in before} == before
    random_before, random_after = splits(40, "random", "c"), splits(60, "random", "d")
    assert sum(random_after[i] != random_before[i] for i in random_before) >= 5  # 7 of 40 moved
    with pytest.raises(ValueError, match=r"split_method must be one of \('random', 'hash'\), got 'fixed'"):
        MimicParams(split_method="fixed")


@requires_demo
def test_real_demo_builds_end_to_end(tmp_path):
    path = build(DEMO, tmp_path / "mimic", tmp_path / "work")
    ds = load_dataset(path)
    m = ds.manifest
    assert m["cohort"]["admissions"] == 129 and m["cohort"]["cohort_admissions"] == 126
    assert sum(m["split_sizes"].values()) == 126
    assert len(ds.event_names) == 10
    counts = {e: v["admissions_with_event"] for e, v in m["events"].items()}
    assert counts == {"WBC_CSF": 6, "Troponin_T": 74, "Intubated": 68, "WBC_Pleural": 6, "TSH": 43,
                      "D_Dimer": 14, "Urobilinogen": 102, "ANA": 1, "Ammonia": 7, "Lipase": 51}
    n_numeric = sum(i["is_numeric"] for i in m["items"] if i["source"] == "chart")
    assert len(ds.feature_names) == 4 * n_numeric + (80 - n_numeric) + 4 * 30 + 2 * 10
    for split in (ds.train, ds.val, ds.test):
        assert np.isfinite(split.X).all()
        assert ((split.S == 1) <= (split.C == 1)).all()
        occurred = split.C == 1
        assert (split.T[occurred] <= split.T_true[occurred] + 1e-12).all()
    # each admission keeps its patient (the unit of the split; promotion leaves a patient's new admissions out)
    admissions = pl.read_csv(DEMO / "ADMISSIONS.csv.gz", columns=["subject_id", "hadm_id"])
    patient = dict(zip(admissions["hadm_id"].to_list(), admissions["subject_id"].to_list(), strict=True))
    assert m["split_by"] == "subject_id"
    for split in (ds.train, ds.val, ds.test):
        assert [str(patient[int(i)]) for i in split.ids] == list(split.groups)
    assert len(set(ds.train.groups)) < len(ds.train)  # some patients have several admissions
    text = json.dumps(m)
    assert "VALUENUM" not in text and len(text) < 200_000  # metadata only, no rows


@pytest.mark.bad_input
def test_empty_cohort_is_a_clear_error_and_writes_nothing(tmp_path):
    src = write_fixture(tmp_path / "m")
    header = (src / "LABEVENTS.csv").read_text().splitlines()[0]
    (src / "LABEVENTS.csv").write_text(header + "\n")  # no lab rows: no admission qualifies
    with pytest.raises(InputError, match="empty cohort"):  # a command's one line
        build(src, tmp_path / "out", tmp_path / "w", TINY)
    assert not (tmp_path / "out").exists()


def test_full_release_layout_gives_identical_features(tmp_path):
    from tests.test_mimic_staging import to_full_release

    demo_layout = write_fixture(tmp_path / "demo", n_admissions=8)
    full_layout = tmp_path / "full"
    full_layout.mkdir()
    for csv_path in demo_layout.iterdir():
        to_full_release(csv_path, full_layout)
    a = build(demo_layout, tmp_path / "a", tmp_path / "wa", TINY)
    b = build(full_layout, tmp_path / "b", tmp_path / "wb", TINY)
    for name in ("features.parquet", "events.parquet"):
        assert pl.read_parquet(a / name).equals(pl.read_parquet(b / name))


@pytest.mark.parametrize("policy", ["keep", "mask"])
def test_events_inside_the_feature_window(tmp_path, policy):
    params = MimicParams(n_chart=2, n_lab=1, n_output=1, window_events=policy)
    ds = load_dataset(build(write_fixture(tmp_path / "m", n_admissions=6), tmp_path / "o", tmp_path / "w", params))
    j = ds.event_names.index("Troponin_T")  # collected at 10-12 h, inside the 24 h window
    assert ds.manifest["events_in_feature_window"]["Troponin_T"] == 6
    if policy == "keep":
        assert ds.train.mask is None
    else:
        assert (ds.train.mask[:, j] == 0).all() and (ds.train.mask[:, ds.event_names.index("Lipase")] == 1).all()
    with pytest.raises(ValueError, match="window_events must be"):
        MimicParams(window_events="drop")


@pytest.mark.filterwarnings("ignore:S. no observed time:UserWarning")  # a tiny fixture: events no row saw
def test_experiments_run_on_a_masked_mimic_dataset(tmp_path):
    from cet_experiments import experiments

    params = MimicParams(n_chart=2, n_lab=1, n_output=1, window_events="mask")
    ds = load_dataset(build(write_fixture(tmp_path / "m", n_admissions=10), tmp_path / "o", tmp_path / "w", params))
    res = experiments.run(ds, runs=1, models=("CET", "ET"), hidden_sizes=(4,), max_epochs=1, progress=False)
    assert set(res["models"]["CET"]["tasks"]) == set(ds.event_names)
