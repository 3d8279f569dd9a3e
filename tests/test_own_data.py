"""A user's own data, censored by follow-up alone: no true occurrence anywhere.

Real data (lifelines' rossi: 432 released prisoners, weeks to re-arrest, followed for a year)
through ``write_follow_up_dataset``, the contract, the evaluation API and the experiment harness.
"""

import logging

import numpy as np
import pandas as pd
import polars as pl
import pytest

from cet_model.dataset import load_dataset, write_dataset
from cet_model.evaluation import evaluate, rmst_horizons
from cet_model.metrics import concordance_index, occurrence_auc
from cet_model.presets import fit_preset, presets_for_truth
from flows.lib.ingest import write_follow_up_dataset

FEATURES = ["fin", "age", "race", "wexp", "mar", "paro", "prio"]
FAST = dict(hidden_sizes=(16,), device="cpu")  # automatic budget: a few seconds on 259 rows


@pytest.fixture(scope="module")
def rossi():
    from lifelines.datasets import load_rossi

    return load_rossi()


@pytest.fixture
def rossi_dir(rossi, tmp_path):
    return write_follow_up_dataset(tmp_path / "rossi", rossi, FEATURES, {"arrest": ("week", "arrest")},
                                   name="rossi", time_unit="weeks", seed=3)


def test_a_follow_up_table_becomes_a_dataset_without_truth(rossi, rossi_dir):
    ds = load_dataset(rossi_dir)
    sizes = [len(ds.train), len(ds.val), len(ds.test)]
    assert sizes == [259, 86, 87] and ds.manifest["split_sizes"] == dict(
        zip(("train", "val", "test"), sizes, strict=True)
    )
    assert ds.manifest["censoring"]["artificial"] is False and ds.manifest["seeds"] == {"split": 3}
    rows = np.concatenate([ds.train.ids, ds.val.ids, ds.test.ids])
    assert sorted(rows.tolist()) == list(range(432))  # every row, once
    for split in (ds.train, ds.val, ds.test):
        np.testing.assert_array_equal(split.T[:, 0], rossi["week"].to_numpy()[split.ids])
        np.testing.assert_array_equal(split.S[:, 0], rossi["arrest"].to_numpy()[split.ids])
        np.testing.assert_array_equal(split.X, rossi[FEATURES].to_numpy(float)[split.ids])
        assert np.isnan(split.C).all() and np.isnan(split.T_true).all()
    again = write_follow_up_dataset(rossi_dir.parent / "again", pl.from_pandas(rossi), FEATURES,
                                    {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks", seed=3)
    assert load_dataset(again).manifest["source_fingerprints"] == ds.manifest["source_fingerprints"]
    by_column = write_follow_up_dataset(rossi_dir.parent / "given", rossi.assign(part=["train"] * 300 + ["val"] * 66
                                                                                 + ["test"] * 66),
                                        FEATURES, {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks",
                                        split_column="part")
    assert load_dataset(by_column).manifest["split_sizes"] == {"train": 300, "val": 66, "test": 66}


@pytest.mark.bad_input
@pytest.mark.parametrize("change,match", [
    (lambda d: d.assign(arrest=d["arrest"].where(d.index != 5, 2)), r"table: column 'arrest' row 5 is a number; "
                                                                    r"expected 0 or 1"),
    # a status coding the kind of event (0 = censored, 1, 2): one 0/1 column per kind is asked for (not for a fraction)
    (lambda d: d.assign(arrest=d["arrest"].where(d.index != 5, 2)),
     r"; 'arrest' seems to code the kind of event \(0 = censored, 1, 2, \.\.\.\): give each kind its own event "
     r"with the indicator 'arrest:CODE' \(e\.g\. --event arrest=week,arrest:1\), 1 where 'arrest' holds that code$"),
    # an indicator of text codes: the column:code form is offered
    (lambda d: d.assign(arrest=d["arrest"].map({0: "no", 1: "yes"})),
     r"table: column 'arrest' row 0 is text \(and 431 other rows\); expected 0 or 1 .*; for a column of text "
     r"codes give the indicator 'arrest:CODE' \(1 where it holds CODE, 0 elsewhere\), e\.g\. --event "
     r"arrest=week,arrest:CODE$"),
    (lambda d: d.assign(arrest=d["arrest"].where(d.index != 5, 0.5)),
     r"table: column 'arrest' row 5 is a number; expected 0 or 1 \(1 = event 'arrest' seen at 'week', 0 = follow-up "
     r"ended without it\)$"),
    (lambda d: d.assign(week=d["week"].where(d.index != 7, 0)), r"table: column 'week' row 7 is 0; values must be "
                                                                r"finite and > 0 \(a log-normal time must be > 0"),
    # every row that breaks the rule is counted, so that all are fixed in one go
    (lambda d: d.assign(week=d["week"].where(~d.index.isin([7, 40, 41]), 0)),
     r"table: column 'week' row 7 is 0 \(and 2 other rows\); values must be finite and > 0"),
    (lambda d: d.assign(arrest=d["arrest"].where(~d.index.isin([5, 6]), 2)),
     r"table: column 'arrest' row 5 is a number \(and 1 other row\); expected 0 or 1"),
    (lambda d: d.assign(age=d["age"].astype(float).where(d.index != 9, np.nan)),
     r"table: column 'age' row 9 is missing \(null\); values must be finite \(the models take no missing values: "
     r"impute them, e.g. impute='median'"),
    (lambda d: d.assign(age=d["age"].astype(float).where(d.index != 9, np.inf)),
     r"table: column 'age' row 9 is infinite; values must be finite"),
    (lambda d: d.drop(columns="prio"), r"table: missing columns \['prio'\]; the columns are week, arrest, fin, age, "
                                       r"race, wexp, mar, paro$"),
    (lambda d: d.rename(columns={"week": "Week", "age": "agee"}),  # another case, a typo: the close name is offered
     r"table: missing columns \['age', 'week'\]; did you mean 'agee' for 'age', 'Week' for 'week'\?$"),
    (lambda d: d.assign(race=d["race"].map({0: "other", 1: "black"})),
     r"table: column 'race' has type String, expected numbers \(row 0 is text that is not a number\); name it as "
     r"categorical \(one 0/1 "
     r"column per level\) or encode it first"),
    (lambda d: d.assign(race=d["race"].map({0: "other", 1: "black"}).astype("category")),
     r"table: column 'race' has type Categorical"),
    # several text columns: all are named at once, with the setting that takes them all
    (lambda d: d.assign(race=d["race"].map({0: "other", 1: "black"}), mar=d["mar"].map({0: "no", 1: "yes"})),
     r"table: column 'race' has type String, .*or encode it first\. Text features: race, mar; "
     r"categorical=\['race', 'mar'\] \(--categorical race,mar\) names them all$"),
    # dates where a number is expected: said so, with what to give instead
    (lambda d: d.assign(week=pd.Timestamp("2020-01-01") + pd.to_timedelta(d["week"] * 7, unit="D")),
     r"table: column 'week' has type Datetime\(.*\), expected a number: it holds "
     r"dates; give the time from each subject's start of follow-up instead"),
    (lambda d: d.assign(age=pd.Timestamp("1990-01-01") + pd.to_timedelta(d["age"], unit="D")),  # a date type
     r"table: column 'age' has type Datetime\(.*\), expected numbers: it holds dates; give what they "
     r"mean as a number \(an age, days since a reference date\) or leave it out of the features$"),
    (lambda d: d.assign(week=(pd.Timestamp("2020-01-01") + pd.to_timedelta(d["week"] * 7, unit="D"))
                        .dt.strftime("%Y-%m-%d")),
     r"table: column 'week' has type String, expected a number \(row 0 is text that is not a number\): it holds dates"),
    (lambda d: d.assign(age=(pd.Timestamp("1990-01-01") + pd.to_timedelta(d["age"], unit="D")).dt.strftime("%Y-%m-%d")),
     r"table: column 'age' has type String, expected numbers \(row 0 is text that is not a number\): it holds dates; "
     r"give what they "
     r"mean as a number \(an age, days since a reference date\) or leave it out of the features$"),
    # numbers written with a decimal comma or thousands separators: said so, with how to write them; a time column's
    # hint about times > 0 is not given for text
    (lambda d: d.assign(week=d["week"].map(lambda w: f"{w},5")),
     r"table: column 'week' has type String, expected a number \(row 0 is text that is not a number\): its numbers "
     r"are written with ',' \(a decimal comma or a thousands separator\); write them with '\.' as the decimal mark "
     r"and no separators$"),
    (lambda d: d.assign(age=d["age"].map(lambda a: f"{a * 1000:,}")),
     r"table: column 'age' has type String, expected numbers \(row 0 is text that is not a number\): its numbers are "
     r"written with ','.*no separators$"),
    # durations (pandas timedelta) where a number is expected: said so, not "dates"
    (lambda d: d.assign(week=pd.to_timedelta(d["week"] * 7, unit="D")),
     r"table: column 'week' has type Duration\(.*\), expected a number: it holds durations; give each as a number in "
     r"the dataset's time unit"),
    (lambda d: d.assign(age=pd.to_timedelta(d["age"] * 365, unit="D")),
     r"table: column 'age' has type Duration\(.*\), expected numbers: it holds durations; give each as a number"),
    (lambda d: d.assign(age=None), r"table: column 'age' is empty in every row: leave it out of the features$"),
])
def test_bad_follow_up_tables_name_the_column_and_row(rossi, tmp_path, change, match):
    with pytest.raises(ValueError, match=match):
        write_follow_up_dataset(tmp_path / "out", change(rossi.copy()), FEATURES, {"arrest": ("week", "arrest")},
                                name="rossi", time_unit="weeks")
    assert list(tmp_path.iterdir()) == []


def test_median_imputation_fills_gaps_from_training_rows_and_records_what_it_did(rossi, tmp_path):
    """impute='median': every gap gets its column's median over the training rows (never a value
    from validation or test), counted per split; the manifest keeps every feature's median for new rows."""
    gappy = rossi.copy().astype({"age": float, "prio": float})
    gappy.loc[gappy.index % 7 == 0, "age"] = np.nan  # 62 rows without age
    gappy.loc[gappy.index % 50 == 1, "prio"] = np.nan
    out = write_follow_up_dataset(tmp_path / "imputed", gappy, FEATURES, {"arrest": ("week", "arrest")},
                                  name="rossi", time_unit="weeks", seed=3, impute="median")
    ds = load_dataset(out)
    record = ds.manifest["featurization"]
    assert (
        record["source"] == "table" and record["impute"] == "median" and sorted(record["medians"]) == sorted(FEATURES)
    )
    split_of = {int(i): name for name, part in (("train", ds.train), ("val", ds.val), ("test", ds.test))
                for i in part.ids}
    for col in ("age", "prio"):
        gaps = gappy.index[gappy[col].isna()].to_numpy()
        median = float(np.median(gappy[col].to_numpy()[[i for i in range(len(gappy)) if split_of[i] == "train"
                                                        and not np.isnan(gappy[col].iloc[i])]]))
        assert record["medians"][col] == median
        assert record["imputed"][col] == {k: sum(split_of[int(i)] == k for i in gaps) for k in ("train", "val", "test")}
        j = FEATURES.index(col)
        for part in (ds.train, ds.val, ds.test):
            filled = np.isin(part.ids, gaps)
            assert (part.X[filled, j] == median).all()
            np.testing.assert_array_equal(part.X[~filled, j], gappy[col].to_numpy()[part.ids[~filled]])
    assert record["medians"]["fin"] == float(np.median(rossi["fin"].to_numpy()[ds.train.ids]))
    assert sorted(record["imputed"]) == ["age", "prio"]  # complete columns: nothing filled, nothing counted


def test_missingness_indicators_follow_each_column_with_a_training_gap(rossi, tmp_path):
    """impute='median+indicator': a 0/1 <column>_missing right after each column with a gap on a
    training row, 1 exactly where the value was missing (in every split); a column whose gaps are
    all outside training is filled but gets no indicator (nothing to learn it from)."""
    gappy = (
        rossi.copy().astype({"age": float, "prio": float}).assign(part=["train"] * 300 + ["val"] * 66 + ["test"] * 66)
    )
    gappy.loc[gappy.index % 7 == 0, "age"] = np.nan  # gaps in every split
    gappy.loc[[310, 420], "prio"] = np.nan  # gaps in validation and test rows only
    out = write_follow_up_dataset(tmp_path / "ind", gappy, FEATURES, {"arrest": ("week", "arrest")}, name="rossi",
                                  time_unit="weeks", split_column="part", impute="median+indicator")
    ds = load_dataset(out)
    assert ds.feature_names == ["fin", "age", "age_missing", "race", "wexp", "mar", "paro", "prio"]
    record = ds.manifest["featurization"]
    assert record["impute"] == "median+indicator" and record["indicators"] == ["age"]
    assert record["imputed"]["prio"] == {"train": 0, "val": 1, "test": 1}
    j_age, j_ind, j_prio = 1, 2, 7
    for part in (ds.train, ds.val, ds.test):
        gap = np.isnan(gappy["age"].to_numpy()[part.ids])
        np.testing.assert_array_equal(part.X[:, j_ind], gap.astype(float))
        assert (part.X[gap, j_age] == record["medians"]["age"]).all()
        assert (
            part.X[:, j_prio] == np.nan_to_num(gappy["prio"].to_numpy()[part.ids], nan=record["medians"]["prio"])
        ).all()
    clash = gappy.assign(age_missing=0.0)
    with pytest.raises(ValueError, match=r"table: feature columns \['age_missing'\] would be written twice"):
        write_follow_up_dataset(tmp_path / "clash", clash, [*FEATURES, "age_missing"], {"arrest": ("week", "arrest")},
                                name="rossi", time_unit="weeks", split_column="part", impute="median+indicator")
    assert not (tmp_path / "clash").exists()


@pytest.mark.bad_input
def test_imputation_needs_a_training_value_and_refuses_infinities(rossi, tmp_path):
    only_test = rossi.copy().astype({"age": float}).assign(part=["train"] * 300 + ["val"] * 66 + ["test"] * 66)
    only_test.loc[:365, "age"] = np.nan
    with pytest.raises(ValueError, match="table: column 'age' has no value on any training row"):
        write_follow_up_dataset(tmp_path / "a", only_test, FEATURES, {"arrest": ("week", "arrest")}, name="r",
                                time_unit="weeks", split_column="part", impute="median")
    with pytest.raises(ValueError, match="table: column 'age' row 6 is inf"):  # the table's row, gaps or not
        write_follow_up_dataset(tmp_path / "b", rossi.astype({"age": float}).assign(
            age=lambda d: d["age"].where(d.index != 5, np.nan).where(d.index != 6, np.inf)), FEATURES,
            {"arrest": ("week", "arrest")}, name="r", time_unit="weeks", impute="median")
    with pytest.raises(ValueError, match="impute: None .*, 'median' or 'median\\+indicator', got 'mean'"):
        write_follow_up_dataset(tmp_path / "c", rossi, FEATURES, {"arrest": ("week", "arrest")}, name="r",
                                time_unit="weeks", impute="mean")
    assert list(tmp_path.iterdir()) == []


def test_categorical_columns_become_one_column_per_training_level(rossi, tmp_path):
    """Levels come from the training rows only; a missing value or a level only validation or test
    rows have is all zeros, counted per split; the levels are recorded for new rows."""
    table = pl.from_pandas(rossi).with_columns(
        site=pl.Series(["north", "south", None, "east"] * 108),
        race=pl.col("race").replace_strict({0: "other", 1: "black"}, return_dtype=pl.String))
    table = table.with_columns(site=pl.when(pl.int_range(pl.len()) == 431).then(pl.lit("west"))
                               .otherwise(pl.col("site")))  # one row of a site
    split = pl.Series(["train"] * 300 + ["val"] * 66 + ["test"] * 66)
    out = write_follow_up_dataset(tmp_path / "cat", table.with_columns(part=split), ["age", "site", "race"],
                                  {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks",
                                  split_column="part", categorical=["site", "race"])
    ds = load_dataset(out)
    assert ds.feature_names == ["age", "site=east", "site=north", "site=south", "race=black", "race=other"]
    record = ds.manifest["featurization"]
    assert record["categorical"] == {"site": ["east", "north", "south"], "race": ["black", "other"]}
    assert record["categorical_counts"]["site"] == {"missing": {"train": 75, "val": 16, "test": 17},
                                                   "unseen": {"train": 0, "val": 0, "test": 1}}
    x = np.concatenate([ds.train.X, ds.val.X, ds.test.X])[np.argsort(np.concatenate(
        [ds.train.ids, ds.val.ids, ds.test.ids]))]
    site = table["site"].to_list()
    for j, level in enumerate(["east", "north", "south"], start=1):
        np.testing.assert_array_equal(x[:, j], [float(v == level) for v in site])
    assert (x[[i for i, v in enumerate(site) if v in (None, "west")], 1:4] == 0).all()
    np.testing.assert_array_equal(x[:, 4], (rossi["race"] == 1).to_numpy(float))
    assert record["impute"] is None and record["medians"] == {}


@pytest.mark.bad_input
def test_a_categorical_identifier_or_an_untrained_column_is_refused(rossi, tmp_path):
    with pytest.raises(ValueError, match=r"table: categorical column 'subject' has 259 levels on the training rows "
                                         r"\(at most 100\): an identifier or free text"):
        write_follow_up_dataset(tmp_path / "a", rossi.assign(subject=[f"s{i}" for i in range(432)]), ["age"],
                                {"arrest": ("week", "arrest")}, name="r", time_unit="weeks", categorical=["subject"])
    with pytest.raises(ValueError, match=r"table: categorical column 'site' has no value on any training row"):
        write_follow_up_dataset(
            tmp_path / "b",
            rossi.assign(site=None, part=["train"] * 300 + ["val"] * 66 + ["test"] * 66),
            ["age"],
            {"arrest": ("week", "arrest")},
            name="r",
            time_unit="weeks",
            split_column="part",
            categorical=["site"],
        )
    assert list(tmp_path.iterdir()) == []


def _two_events(rossi):
    """rossi with a second event whose follow-up is missing for every fifth subject."""
    r = pl.from_pandas(rossi).with_row_index("i")
    return r.with_columns(
        week2=pl.when(pl.col("i") % 5 == 0).then(None).otherwise(pl.col("week") * 1.5),
        arrest2=pl.when(pl.col("i") % 5 == 0).then(None).otherwise(pl.col("arrest")))


def test_a_status_column_coding_the_kind_of_event_gives_one_indicator_per_code(rossi, tmp_path):
    """``column:code`` as an event's indicator: 1 where the column holds the code, 0 where it holds
    another (censored, or the other kind of event, which ends this one's follow-up), missing where
    it is missing; the status column is no feature. Numbers and text codes alike."""
    r = pl.from_pandas(rossi).with_row_index("i")
    status = pl.when(pl.col("arrest") == 0).then(0).when(pl.col("i") % 3 == 0).then(2).otherwise(1)
    coded = r.with_columns(status=status).drop("arrest", "i")
    events = {"arrest": ("week", "status:1"), "parole_violation": ("week", "status:2")}
    ds = load_dataset(write_follow_up_dataset(tmp_path / "n", coded, None, events, name="r", time_unit="weeks"))
    assert ds.event_names == ["arrest", "parole_violation"] and "status" not in ds.feature_names
    code = coded["status"].to_numpy()
    for part in (ds.train, ds.val, ds.test):
        rows = part.ids.astype(int)  # row numbers of the table
        assert (part.S[:, 0] == (code[rows] == 1)).all() and (part.S[:, 1] == (code[rows] == 2)).all()
        assert (part.T[:, 0] == part.T[:, 1]).all()
    words = coded.with_columns(status=pl.col("status").replace_strict({0: "censored", 1: "arrest", 2: "violation"},
                                                                      return_dtype=pl.String))
    by_word = {"arrest": ("week", "status:arrest"), "parole_violation": ("week", "status: violation")}
    again = load_dataset(write_follow_up_dataset(tmp_path / "t", words, None, by_word, name="r", time_unit="weeks"))
    assert np.array_equal(again.train.S, ds.train.S) and again.feature_names == ds.feature_names
    # a missing status is a missing indicator: refused by row, as any
    gap = words.with_columns(status=pl.when(pl.int_range(pl.len()) == 4).then(None).otherwise(pl.col("status")))
    with pytest.raises(ValueError, match=r"table: column 'status:arrest' row 4 is missing; expected 0 or 1"):
        write_follow_up_dataset(tmp_path / "g", gap, None, by_word, name="r", time_unit="weeks")
    nan = coded.with_columns(status=pl.when(pl.int_range(pl.len()) == 6).then(float("nan")).otherwise(pl.col("status")))
    with pytest.raises(ValueError, match=r"table: column 'status:1' row 6 is missing; expected 0 or 1"):
        write_follow_up_dataset(tmp_path / "g", nan, None, events, name="r", time_unit="weeks")
    with pytest.raises(ValueError, match=r"table: event 'arrest': no row of column 'status' holds the code '3' of "
                                         r"indicator 'status:3'$"):
        write_follow_up_dataset(tmp_path / "x", coded, None, {"arrest": ("week", "status:3")}, name="r",
                                time_unit="weeks")
    with pytest.raises(ValueError, match=r"table: event 'arrest': indicator 'status:arrest' gives the code 'arrest', "
                                         r"but column 'status' holds numbers$"):
        write_follow_up_dataset(tmp_path / "y", coded, None, {"arrest": ("week", "status:arrest")}, name="r",
                                time_unit="weeks")
    with pytest.raises(ValueError, match=r"table: missing columns \['state:1'\]"):
        write_follow_up_dataset(tmp_path / "z", coded, None, {"arrest": ("week", "state:1")}, name="r",
                                time_unit="weeks")
    assert sorted(tmp_path.iterdir()) == [tmp_path / "n", tmp_path / "t"]


@pytest.mark.bad_input
@pytest.mark.parametrize("features, categorical, events, match", [
    ([*FEATURES, "arrest"], None, {"arrest": ("week", "arrest")}, "column 'arrest' is named as a feature and as the "
     "indicator of event 'arrest': what the model is to predict cannot be one of its inputs; leave it out of the "
     "features$"),
    (["week", *FEATURES], None, {"arrest": ("week", "arrest")},
     "column 'week' is named as a feature and as the time of event 'arrest'"),
    (FEATURES, ["status"], {"arrest": ("week", "status:1")}, "column 'status' is named as a feature and as the status "
     "column of event 'arrest'"),
])
def test_an_events_own_column_among_the_features_is_refused(rossi, tmp_path, features, categorical, events, match):
    """Named by hand, a feature that is an event's time, indicator or status column would hand the
    model the answer: refused by name (by default such columns are never features)."""
    table = rossi.assign(status=rossi["arrest"])
    with pytest.raises(ValueError, match=match):
        write_follow_up_dataset(tmp_path / "out", table, features, events, name="r", time_unit="weeks",
                                categorical=categorical)
    assert list(tmp_path.iterdir()) == []


def test_missing_follow_up_leaves_the_event_out_for_that_row_and_the_metrics_skip_it(rossi, tmp_path):
    table = _two_events(rossi)
    events = {"arrest": ("week", "arrest"), "second": ("week2", "arrest2")}
    with pytest.raises(ValueError, match=r"column 'week2' row 0 is missing \(null\).*missing_times='mask'"):
        write_follow_up_dataset(tmp_path / "a", table, FEATURES, events, name="r", time_unit="weeks")
    out = write_follow_up_dataset(tmp_path / "b", table, FEATURES, events, name="r", time_unit="weeks", seed=3,
                                  missing_times="mask")
    ds = load_dataset(out)
    masked = ds.manifest["censoring"]["masked"]
    assert list(masked) == ["second"] and sum(masked["second"].values()) == 87  # rows 0, 5, ..., 430
    for split_name, part in (("train", ds.train), ("val", ds.val), ("test", ds.test)):
        gone = part.ids % 5 == 0
        assert masked["second"][split_name] == gone.sum()
        np.testing.assert_array_equal(part.mask[:, 1], ~gone)
        assert (part.mask[:, 0] == 1).all()  # the first event is followed everywhere
        np.testing.assert_array_equal(part.T[~gone, 1], table["week2"].to_numpy()[part.ids[~gone]])
    # the masked cells take no part: Harrell's C of the second event is over the followed rows only
    model = fit_preset("CET", ds.train, ds.val, seed=0, max_epochs=50, **FAST)  # checks below hold for any fit
    row = evaluate("CET", model, ds.test, ds.event_names, train=ds.train)["second"]
    keep = ds.test.mask[:, 1] == 1
    te = ds.test
    assert row["ci"] == pytest.approx(concordance_index(te.T[keep, 1], model.predict_time(te.X[keep])[:, 1],
                                                        te.S[keep, 1]))
    # and P(ever) past the follow-up is averaged over the followed rows, its end taken from them
    from cet_model.evaluation import followed_until
    from cet_model.nonparametric import kaplan_meier_risk
    from flows.lib.modeling.version_facts import beyond_follow_up

    record = beyond_follow_up(model, te.X, ds.train, ds.event_names, te)["second"]
    followed = ds.train.mask[:, 1] == 1
    assert record["follow_up"] == followed_until(ds.train.T[followed, 1])
    assert record["p_ever"] == pytest.approx(model.predict_occurrence(te.X[keep])[:, 1].mean())
    assert record["km_split_by_follow_up"] == pytest.approx(kaplan_meier_risk(te.T[keep, 1], te.S[keep, 1],
                                                                              horizon=record["follow_up"]))


@pytest.mark.bad_input
def test_an_event_seen_without_its_time_is_not_masked(rossi, tmp_path):
    table = _two_events(rossi).with_columns(
        arrest2=pl.when(pl.col("i") == 10).then(1).otherwise(pl.col("arrest2")))
    with pytest.raises(ValueError, match=r"table: row 10 has 'arrest2' = 1 but no 'week2': an event seen without its "
                                         r"time cannot be left out"):
        write_follow_up_dataset(tmp_path / "a", table, FEATURES, {"second": ("week2", "arrest2")}, name="r",
                                time_unit="weeks", missing_times="mask")
    followed = _two_events(rossi).with_columns(  # a missing indicator beside a time is an error, not a 0
        arrest2=pl.when(pl.col("i") == 11).then(None).otherwise(pl.col("arrest2")))
    with pytest.raises(ValueError, match=r"table: column 'arrest2' row 11 is missing; expected 0 or 1"):
        write_follow_up_dataset(tmp_path / "b", followed, FEATURES, {"second": ("week2", "arrest2")}, name="r",
                                time_unit="weeks", missing_times="mask")
    text = _two_events(rossi).with_columns(week2=pl.col("week2").cast(pl.String))  # times as text: named, masked or not
    with pytest.raises(ValueError, match=r"table: column 'week2' has type String, expected a number \(every value "
                                         r"reads as a number: store the column as numbers\)"):
        write_follow_up_dataset(tmp_path / "t", text, FEATURES, {"second": ("week2", "arrest2")}, name="r",
                                time_unit="weeks", missing_times="mask")
    worded = text.with_columns(week2=pl.when(pl.col("i") == 4).then(pl.lit("52 weeks")).otherwise(pl.col("week2")))
    with pytest.raises(ValueError, match=r"table: column 'week2' has type String, expected a number \(row 4 is "
                                         r"text that is not a number\)$"):  # no hint about times > 0 for text
        write_follow_up_dataset(tmp_path / "w", worded, FEATURES, {"second": ("week2", "arrest2")}, name="r",
                                time_unit="weeks", missing_times="mask")
    with pytest.raises(ValueError, match=r"missing_times: 'refuse' or 'mask', got 'drop'"):
        write_follow_up_dataset(tmp_path / "c", followed, FEATURES, {"second": ("week2", "arrest2")}, name="r",
                                time_unit="weeks", missing_times="drop")
    assert list(tmp_path.iterdir()) == []


def test_a_group_column_keeps_each_group_in_one_split(rossi, tmp_path):
    """Several rows per patient (here: rossi's 432 rows as 144 'patients' of three rows): the seeded
    split draws patients, not rows; the group column is not a feature; one split source at a time."""
    table = rossi.assign(patient=[f"p{i // 3}" for i in range(432)])
    out = write_follow_up_dataset(tmp_path / "g", table, None, {"arrest": ("week", "arrest")}, name="r",
                                  time_unit="weeks", group_column="patient", seed=1)
    ds = load_dataset(out)
    assert ds.feature_names == FEATURES and ds.manifest["split_by"] == "patient"
    where = {}
    for split_name, part in (("train", ds.train), ("val", ds.val), ("test", ds.test)):
        for i in part.ids:
            where.setdefault(int(i) // 3, set()).add(split_name)
    assert len(where) == 144 and all(len(v) == 1 for v in where.values())
    for part in (ds.train, ds.val, ds.test):  # each row's group is kept (split_group), for promotion's comparison
        assert [f"p{int(i) // 3}" for i in part.ids] == list(part.groups)
    by_row = load_dataset(write_follow_up_dataset(tmp_path / "n", rossi, None, {"arrest": ("week", "arrest")},
                                                  name="r", time_unit="weeks"))
    assert by_row.train.groups is None and by_row.manifest["ids"] == "row numbers"  # no id column: said so
    with_ids = write_follow_up_dataset(tmp_path / "k", rossi.assign(rid=range(432)), None,
                                       {"arrest": ("week", "arrest")}, name="r", time_unit="weeks", id_column="rid")
    assert "ids" not in load_dataset(with_ids).manifest  # ...and not where there is one
    assert ds.manifest["split_sizes"] == {k: 3 * n for k, n in zip(("train", "val", "test"), (86, 29, 29), strict=True)}
    with pytest.raises(ValueError, match="group_column draws the split by groups; split_column gives it"):
        write_follow_up_dataset(tmp_path / "h", table.assign(part="train"), FEATURES, {"arrest": ("week", "arrest")},
                                name="r", time_unit="weeks", group_column="patient", split_column="part")
    with pytest.raises(ValueError, match=r"table: column 'patient' row 1 repeats row 0's id: ids must be unique "
                                         r"\(432 rows share an id\). Several rows per patient\? .*--group-column"):
        write_follow_up_dataset(tmp_path / "j", table, FEATURES, {"arrest": ("week", "arrest")}, name="r",
                                time_unit="weeks", id_column="patient")
    with pytest.raises(ValueError, match="table: column 'patient' row 4 is missing; every row needs its group"):
        write_follow_up_dataset(tmp_path / "i", table.assign(patient=[None if i == 4 else "p" for i in range(432)]),
                                FEATURES, {"arrest": ("week", "arrest")}, name="r", time_unit="weeks",
                                group_column="patient")


def test_the_contract_takes_an_unknown_occurrence_per_cell(tmp_path):
    """Null (or NaN) c = not known; it loads as NaN. Known cells are checked as before."""
    n = 6
    f = pl.DataFrame({"id": np.arange(n), "split": ["train", "train", "val", "val", "test", "test"],
                      "x": np.linspace(0, 1, n)})
    e = f.select("id", "split").with_columns(t_a=pl.lit(2.0), s_a=pl.Series([1, 0, 1, 0, 1, 0]),
                                             c_a=pl.Series([1.0, None, float("nan"), 0.0, None, 1.0]),
                                             t_true_a=pl.lit(None, pl.Float64))
    m = dict(name="t", feature_names=["x"], event_names=["a"], time_unit="days", censoring={}, seeds={},
             source_fingerprints={})
    ds = load_dataset(write_dataset(tmp_path / "d", f, e, m))
    np.testing.assert_array_equal(ds.train.C[:, 0], [1.0, np.nan])
    np.testing.assert_array_equal(ds.val.C[:, 0], [np.nan, 0.0])


def test_scores_without_truth_leave_auc_undefined_and_say_so(rossi_dir, caplog):
    ds = load_dataset(rossi_dir)
    model = fit_preset("CET", ds.train, ds.val, seed=0, **FAST)
    with caplog.at_level(logging.WARNING, logger="cet_model.evaluation"):
        row = evaluate("CET", model, ds.test, ds.event_names, train=ds.train, label="rossi test")["arrest"]
    assert np.isnan(row["auc"]) and np.isnan(row["ece"])
    te = ds.test  # the scores that need only the observed times are all there
    assert row["ci"] == pytest.approx(concordance_index(te.T[:, 0], model.predict_time(te.X)[:, 0], te.S[:, 0]))
    assert np.isfinite(row["uno_c"]) and np.isfinite(row["ibs"]) and np.isfinite(row["mrae"])
    # the survival ranking: C of the restricted mean event-free time up to the training follow-up's
    # 0.9 quantile (later or never ranks as lower risk), not of the time given that the event happens
    h = np.quantile(ds.train.T[:, 0], 0.9)
    assert rmst_horizons(ds.train) == pytest.approx([h])
    rmst = model.predict_rmst(te.X, h)[:, 0]
    assert row["ci_rmst"] == pytest.approx(concordance_index(te.T[:, 0], rmst, te.S[:, 0]))
    assert row["ci_rmst"] != pytest.approx(row["ci"], abs=1e-6)  # another ranking than the conditional time's
    assert "ci_rmst" not in evaluate("CET", model, ds.test, ds.event_names)["arrest"]  # needs the horizons
    assert "CET on rossi test: the true occurrence is not known for arrest (87 rows)" in caplog.text
    # where the truth is known for some rows (here: made up for the first 60), AUC and ECE are over those rows
    part = ds.test.take(np.arange(len(ds.test)))
    part.C = part.C.copy()
    part.C[:60, 0] = (np.arange(60) % 3 == 0)
    row = evaluate("CET", model, part, ds.event_names)["arrest"]
    assert row["auc"] == pytest.approx(occurrence_auc(part.C[:60, 0], model.predict_occurrence(part.X[:60])[:, 0]))
    # the rows without an arrest alone: the integrated Brier score is undefined, and the warning says why
    caplog.clear()
    quiet = ds.test.take(np.flatnonzero(ds.test.S[:, 0] == 0))
    with caplog.at_level(logging.WARNING, logger="cet_model.evaluation"):
        row = evaluate("CET", model, quiet, ds.event_names, train=ds.train, label="rossi test")["arrest"]
    assert np.isnan(row["ibs"]) and np.isfinite(row["mrae"])
    assert "CET on rossi test: integrated Brier score undefined for arrest (no event in the split)" in caplog.text


def test_the_oracle_is_left_out_where_it_has_nothing_to_learn(rossi_dir):
    ds = load_dataset(rossi_dir)
    kept, skipped = presets_for_truth(("CET", "ET", "BC", "Oracle"), ds.train, ds.val)
    assert kept == ("CET", "ET", "BC") and "259" not in skipped["Oracle"] and "345" in skipped["Oracle"]
    with pytest.raises(ValueError, match="Oracle: the true occurrence is not known for 345 training and validation"):
        fit_preset("Oracle", ds.train, ds.val, **FAST)


def test_the_experiment_harness_reports_what_it_left_out(rossi_dir, tmp_path):
    from cet_experiments import experiments
    from flows.lib.experiment.search import random_search

    ds = load_dataset(rossi_dir)
    result = experiments.run(ds, 1, ("CET", "Oracle"), hidden_sizes=(8,), max_epochs=20, patience=5, progress=False)
    # the Oracle left out, the classical Cox fit in its place (fitted once)
    assert list(result["models"]) == ["CET", "Cox (reference)"] and "Oracle" in result["skipped"]
    experiments.write_report(result, tmp_path / "report", "rossi")
    table = (tmp_path / "report" / "table.md").read_text()
    assert "Oracle left out: the true occurrence is not known" in table
    assert "Cox (reference): a Cox proportional hazards model per event" in table
    with pytest.raises(ValueError, match="the search tunes on validation AUC against the true occurrence"):
        random_search(ds, 1)


@pytest.mark.bad_input
def test_a_hash_split_keeps_each_id_and_patient_where_it_was_when_the_table_grows(rossi, tmp_path):
    """``split_method="hash"``: a table that grows and is reordered keeps every id's split (by
    ``id_column``), and every patient's (by ``group_column``); the random split reshuffles them."""
    events = {"arrest": ("week", "arrest")}
    table = rossi.assign(visit=[f"v{i}" for i in range(432)], patient=[f"p{i // 3}" for i in range(432)])
    first, grown = table.iloc[:300], table.iloc[::-1]  # 132 more rows (44 new patients), all rows reordered

    def splits(frame, name, **kw):
        ds = load_dataset(write_follow_up_dataset(tmp_path / name, frame, FEATURES, events, name=name,
                                                  time_unit="weeks", **kw))
        parts = {k: getattr(ds, k) for k in ("train", "val", "test")}  # key: the id, or the patient
        return ds, {key: k for k, part in parts.items()
                    for key in (part.ids if kw.get("id_column") else part.groups)}

    for kw in (dict(id_column="visit"), dict(group_column="patient")):
        ds, before = splits(first, "a", split_method="hash", **kw)
        assert ds.manifest["split_method"] == "hash"
        _, after = splits(grown, "b", split_method="hash", **kw)
        assert {v: after[v] for v in before} == before, kw
        sizes = {k: list(after.values()).count(k) / len(after) for k in ("train", "val", "test")}
        assert len(after) == (432 if "id_column" in kw else 144) and abs(sizes["train"] - 0.6) < 0.1, sizes
        _, random_before = splits(first, "c", **kw)
        _, random_after = splits(grown, "d", **kw)
        assert sum(random_after[v] != random_before[v] for v in random_before) > len(before) // 4  # reshuffled
    with pytest.raises(ValueError, match=r"split_method 'hash' draws the split; split_column gives it"):
        write_follow_up_dataset(tmp_path / "f", table.assign(part="train"), FEATURES, events, name="f",
                                time_unit="weeks", split_column="part", split_method="hash")
    with pytest.raises(ValueError, match=r"split_method: one of \('random', 'hash', 'stratified'\), got 'stable'"):
        write_follow_up_dataset(tmp_path / "e", table, FEATURES, events, name="e", time_unit="weeks",
                                split_method="stable")


def test_assign_splits_by_hash_and_at_random():
    """The one split rule of every build: the random split is a seeded permutation of the sorted
    keys with exact shares; the hash split depends on the seed and each key alone."""
    from cet_model.dataset import assign_splits

    keys = np.arange(20_000)
    labels = assign_splits(keys, seed=3, method="hash")
    shares = {k: float((labels == k).mean()) for k in ("train", "val", "test")}
    assert abs(shares["train"] - 0.6) < 0.015 and abs(shares["val"] - 0.2) < 0.015, shares
    assert (assign_splits(keys[::-1], seed=3, method="hash") == labels[::-1]).all()  # order does not matter
    assert (assign_splits(keys[:5000], seed=3, method="hash") == labels[:5000]).all()  # nor other keys
    assert (assign_splits(keys, seed=4, method="hash") != labels).mean() > 0.4  # the seed does
    assert (assign_splits(keys.astype(str), seed=3, method="hash") == labels).all()  # keys hash by their text
    random = assign_splits(keys, seed=3, fractions=(0.5, 0.25, 0.25))
    assert [int((random == k).sum()) for k in ("train", "val", "test")] == [10_000, 5_000, 5_000]
    assert (assign_splits(keys[::-1], seed=3, fractions=(0.5, 0.25, 0.25)) == random[::-1]).all()
    assert (assign_splits(keys[:-1], seed=3, fractions=(0.5, 0.25, 0.25)) != random[:-1]).sum() > 100
    with pytest.raises(ValueError, match=r"keys: 7 comes twice"):
        assign_splits(np.array([7, 1, 7]))
    with pytest.raises(ValueError, match=r"hash split of 3 keys left \['test'\] empty"):
        assign_splits(np.array(["a", "b", "c"]), method="hash")
    with pytest.raises(ValueError, match=r"fractions: three shares"):
        assign_splits(keys, fractions=(0.6, 0.6, 0.2))


def test_repeated_ids_and_a_bad_split_column_are_refused(rossi, tmp_path):
    with pytest.raises(ValueError, match=r"table: column 'prio' row 4 repeats row 0's id: ids must be unique"):
        write_follow_up_dataset(tmp_path / "p", rossi, FEATURES, {"arrest": ("week", "arrest")}, name="rossi",
                                time_unit="weeks", id_column="prio")  # prio (prior convictions) repeats
    part = ["train"] * 300 + ["dev"] + ["test"] * 131
    with pytest.raises(ValueError, match=r"table: column 'part' row 300 is not one of \('train', 'val', 'test'\): "
                                         r"every row names its split as train, val or test, in lower case$"):
        write_follow_up_dataset(tmp_path / "p", rossi.assign(part=part), FEATURES, {"arrest": ("week", "arrest")},
                                name="rossi", time_unit="weeks", split_column="part")
    part = ["train"] * 300 + ["Valid"] * 66 + ["test"] * 66  # every row of the kind is counted, to fix them at once
    with pytest.raises(ValueError, match=r"table: column 'part' row 300 is not one of \('train', 'val', 'test'\) "
                                         r"\(and 65 other rows\): every row"):
        write_follow_up_dataset(tmp_path / "p", rossi.assign(part=part), FEATURES, {"arrest": ("week", "arrest")},
                                name="rossi", time_unit="weeks", split_column="part")
    with pytest.raises(ValueError, match=r"fractions: three shares"):
        write_follow_up_dataset(tmp_path / "p", rossi, FEATURES, {"arrest": ("week", "arrest")}, name="rossi",
                                time_unit="weeks", fractions=(0.5, 0.5, 0.5))
    assert list(tmp_path.iterdir()) == []


def test_the_documented_example_writes_a_dataset(tmp_path, monkeypatch):
    """docs/datasets.md, "Your own data": the Python block runs as written (in a scratch folder)."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "datasets.md").read_text()
    section = page.split("## Your own data", 1)[1].split("\n## ", 1)[0]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(block, "docs/datasets.md", "exec"), scope)
    ds = load_dataset(scope["folder"])
    assert ds.event_names == ["arrest"] and len(ds.feature_names) == 7 and np.isnan(ds.test.C).all()


def test_boolean_columns_are_read_as_zero_and_one(rossi, tmp_path):
    table = rossi.assign(fin=rossi["fin"] == 1, arrest=rossi["arrest"] == 1)
    ds = load_dataset(write_follow_up_dataset(tmp_path / "b", table, FEATURES, {"arrest": ("week", "arrest")},
                                              name="rossi", time_unit="weeks"))
    np.testing.assert_array_equal(ds.train.X[:, 0], rossi["fin"].to_numpy(float)[ds.train.ids])
    np.testing.assert_array_equal(ds.train.S[:, 0], rossi["arrest"].to_numpy(float)[ds.train.ids])


def test_the_table_can_be_a_csv_or_parquet_file(rossi, tmp_path):
    """The same dataset from the frame, from a CSV file and from a parquet file."""
    import polars as pl

    rossi.to_csv(tmp_path / "rossi.csv", index=False)
    pl.from_pandas(rossi).write_parquet(tmp_path / "rossi.parquet")
    kw = dict(features=FEATURES, events={"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks")
    folders = [write_follow_up_dataset(tmp_path / f"d{i}", table, **kw)
               for i, table in enumerate([rossi, tmp_path / "rossi.csv", str(tmp_path / "rossi.parquet")])]
    splits = [load_dataset(f).train for f in folders]
    for other in splits[1:]:
        np.testing.assert_array_equal(other.X, splits[0].X)
        np.testing.assert_array_equal(other.T, splits[0].T)
        np.testing.assert_array_equal(other.S, splits[0].S)
    (tmp_path / "rossi.txt").write_text("x")
    with pytest.raises(ValueError, match=r"rossi.txt: not a readable parquet file"):
        write_follow_up_dataset(tmp_path / "bad", tmp_path / "rossi.txt", **kw)
    with pytest.raises(FileNotFoundError, match=r"nothing.csv: no such file"):
        write_follow_up_dataset(tmp_path / "bad", tmp_path / "nothing.csv", **kw)


@pytest.mark.bad_input
def test_a_bad_csv_file_is_named_with_the_line_and_checked_without_writing(rossi, tmp_path):
    """From a file, errors name the file and, for a CSV, the line (header = line 1); out_dir=None
    checks without writing (what flows.table does before its flow starts); a file separated by
    ';' is named as such, not as a table missing every column."""
    path = tmp_path / "cohort.csv"
    rossi.assign(arrest=rossi["arrest"].where(rossi.index != 5, 2)).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"cohort\.csv: column 'arrest' row 5 \(line 7\) is a number; expected 0 or 1"):
        write_follow_up_dataset(None, path, FEATURES, {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks")
    assert path.read_text().splitlines()[6].split(",")[1] == "2"  # line 7 of the file holds it
    rossi.assign(week=rossi["week"].where(rossi.index != 7, 0)).to_parquet(tmp_path / "cohort.parquet")
    with pytest.raises(ValueError, match=r"cohort\.parquet: column 'week' row 7 is 0; values must be"):
        write_follow_up_dataset(None, tmp_path / "cohort.parquet", FEATURES, {"arrest": ("week", "arrest")},
                                name="rossi", time_unit="weeks")
    rossi.to_csv(path, index=False)
    assert write_follow_up_dataset(None, path, FEATURES, {"arrest": ("week", "arrest")}, name="rossi",
                                   time_unit="weeks") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cohort.csv", "cohort.parquet"]  # nothing written
    rossi.to_csv(tmp_path / "semi.csv", index=False, sep=";")
    with pytest.raises(ValueError, match=r"semi\.csv: the first line reads as one column holding \d+ ';': the file "
                                         r"seems separated "
                                         r"by ';'; a CSV file here is separated by commas"):
        write_follow_up_dataset(None, tmp_path / "semi.csv", FEATURES, {"arrest": ("week", "arrest")}, name="rossi",
                                time_unit="weeks")
    rossi.to_csv(tmp_path / "tabs.txt", index=False, sep="\t")  # a name of no kind read here: read as parquet, and said
    with pytest.raises(ValueError, match=r"tabs\.txt: not a readable parquet file .*; a table is a \.csv or \.tsv "
                                         r"file .* and this one's name says none of them: rename it"):
        write_follow_up_dataset(None, tmp_path / "tabs.txt", FEATURES, {"arrest": ("week", "arrest")}, name="rossi",
                                time_unit="weeks")
    # with ',' as the decimal mark too, the rows have more fields than the header: said the same way
    rossi.assign(age=rossi["age"] + 0.5).to_csv(tmp_path / "semi.csv", index=False, sep=";", decimal=",")
    with pytest.raises(ValueError, match=r"semi\.csv: the first line reads as one column holding \d+ ';': the file "
                                         r"seems separated "
                                         r"by ';'"):
        write_follow_up_dataset(None, tmp_path / "semi.csv", FEATURES, {"arrest": ("week", "arrest")}, name="rossi",
                                time_unit="weeks")


def _rare(rossi, keep: int = 8):
    """rossi with only its first ``keep`` arrests kept as events (the others censored at their week)."""
    rare = rossi.copy()
    rare.loc[rare.index[rare["arrest"] == 1][keep:], "arrest"] = 0
    return rare


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_stratified_split_spreads_a_rare_events_rows_over_the_splits(rossi, tmp_path, seed):
    """Eight events in 432 rows: a random split can leave the test split without one (seed 0 does);
    the stratified one gives each split its share of them to within one, and of the rows."""
    def observed(ds):
        return [int(part.S.sum()) for part in (ds.train, ds.val, ds.test)]
    random = load_dataset(write_follow_up_dataset(tmp_path / "random", _rare(rossi), FEATURES,
                                                  {"arrest": ("week", "arrest")}, name="rare", time_unit="weeks",
                                                  seed=seed))
    ds = load_dataset(
        write_follow_up_dataset(
            tmp_path / "strat",
            _rare(rossi),
            FEATURES,
            {"arrest": ("week", "arrest")},
            name="rare",
            time_unit="weeks",
            seed=seed,
            split_method="stratified",
        )
    )
    if seed == 0:
        assert observed(random)[2] == 0
    assert observed(ds) in ([5, 2, 1], [5, 1, 2], [4, 2, 2])  # 4.8 / 1.6 / 1.6
    sizes = ds.manifest["split_sizes"]
    assert abs(sizes["train"] - 259.2) < 1.5 and abs(sizes["val"] - 86.4) < 1.5 and abs(sizes["test"] - 86.4) < 1.5
    assert ds.manifest["split_method"] == "stratified"
    # a seed draws its own split, with the same shares
    other = load_dataset(
        write_follow_up_dataset(
            tmp_path / "other",
            _rare(rossi),
            FEATURES,
            {"arrest": ("week", "arrest")},
            name="rare",
            time_unit="weeks",
            seed=seed + 10,
            split_method="stratified",
        )
    )
    assert not np.array_equal(np.sort(other.test.ids), np.sort(ds.test.ids))
    assert observed(other) in ([5, 2, 1], [5, 1, 2], [4, 2, 2])


def test_a_stratified_split_by_groups_keeps_each_group_whole_and_spreads_the_groups_with_an_event(rossi, tmp_path):
    rare = _rare(rossi, keep=12).assign(patient=np.arange(432) // 2)  # two rows per patient
    load_dataset(
        write_follow_up_dataset(
            tmp_path / "g",
            rare,
            FEATURES,
            {"arrest": ("week", "arrest")},
            name="rare",
            time_unit="weeks",
            group_column="patient",
            split_method="stratified",
        )
    )
    splits = pl.read_parquet(tmp_path / "g" / "features.parquet").select("id", "split")
    by_patient = splits.with_columns(patient=pl.col("id") // 2).group_by("patient").agg(pl.col("split").n_unique())
    assert by_patient["split"].max() == 1  # no patient in two splits
    with_event = rare.groupby("patient")["arrest"].max()
    patients = {
        k: np.unique(splits.filter(pl.col("split") == k)["id"].to_numpy() // 2) for k in ("train", "val", "test")
    }
    seen = {k: int(with_event.loc[p].sum()) for k, p in patients.items()}  # patients with an arrest, per split
    n_groups = int(with_event.sum())
    assert all(abs(seen[k] - n_groups * f) < 1.01 for k, f in (("train", 0.6), ("val", 0.2), ("test", 0.2))), seen


@pytest.mark.bad_input
def test_assign_splits_refuses_strata_that_do_not_fit():
    from cet_model.dataset import assign_splits

    with pytest.raises(ValueError, match="strata: a label per key with split_method 'stratified', and only with it"):
        assign_splits(np.arange(10), method="stratified")
    with pytest.raises(ValueError, match="strata: a label per key"):
        assign_splits(np.arange(10), strata=np.zeros(10))
    with pytest.raises(ValueError, match=r"strata: one label per key \(10\), got shape \(9,\)"):
        assign_splits(np.arange(10), method="stratified", strata=np.zeros(9))
    with pytest.raises(ValueError, match=r"stratified split of 2 keys left \['test'\] empty"):
        assign_splits(np.arange(2), method="stratified", strata=np.zeros(2))


def test_a_default_feature_that_looks_like_an_identifier_is_refused(rossi, tmp_path):
    """With no feature list, every column not named otherwise is a feature: a patient id or a row number
    there would be noise to fit (or a leak) with no error. It is refused, naming the column and the two
    ways out; a column is taken for one by its name and its values (rossi's columns are not)."""
    events = {"arrest": ("week", "arrest")}
    ids = np.random.default_rng(0).permutation(100_000)[:432]  # not consecutive: known by its name
    for column, values in (("pid", ids), ("PatientID", ids), ("record_no", ids), ("row", np.arange(432)),
                           ("Unnamed: 0", np.arange(432))):  # pandas' index, written and read back
        expected = (rf"^table: column '{column}' looks like an identifier \(named as one, with a different whole "
                    rf"number on every row\).*--id-column {column} \(id_column\), or list the features with --features")
        with pytest.raises(ValueError, match=expected):
            write_follow_up_dataset(tmp_path / column, rossi.assign(**{column: values}), None, events, name="r",
                                    time_unit="weeks")
    parquet = tmp_path / "rossi.parquet"
    rossi.reset_index().to_parquet(parquet)  # pandas' index kept as a column, "index"
    with pytest.raises(ValueError, match=r"column 'index' looks like an identifier"):
        write_follow_up_dataset(tmp_path / "from-file", parquet, None, events, name="r", time_unit="weeks")
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]
    unnamed = rossi.assign(visits=np.arange(432) + 1)  # running 1, 2, 3 but not named as an id: a feature
    assert load_dataset(write_follow_up_dataset(tmp_path / "visits", unnamed, None, events, name="r",
                                                time_unit="weeks")).feature_names == [*FEATURES, "visits"]
    with_id = rossi.assign(pid=ids)
    named = load_dataset(write_follow_up_dataset(tmp_path / "named", with_id, None, events, name="r",
                                                 time_unit="weeks", id_column="pid"))
    assert named.feature_names == FEATURES and sorted(named.train.ids.tolist() + named.val.ids.tolist()
                                                      + named.test.ids.tolist()) == sorted(ids.tolist())
    listed = load_dataset(write_follow_up_dataset(tmp_path / "listed", with_id, FEATURES + ["pid"], events,
                                                  name="r", time_unit="weeks"))
    assert listed.feature_names == FEATURES + ["pid"]  # a list given is the user's choice
    plain = load_dataset(write_follow_up_dataset(tmp_path / "plain", rossi, None, events, name="r", time_unit="weeks"))
    assert plain.feature_names == FEATURES
