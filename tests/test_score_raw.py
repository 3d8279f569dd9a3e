"""Scoring new raw MIMIC-III tables with a registered model: same inputs as the training build."""

import csv
import json
import shutil
import warnings

import numpy as np
import polars as pl
import pytest

from cet_model.dataset import load_dataset
from flows.lib.mimic.build import MimicParams, build
from flows.lib.mimic.featurize import featurize
from flows.lib.modeling.predict import score, score_mimic_raw
from flows.lib.modeling.train_eval import TrainParams, train_version
from tests.demo import DEMO, requires_demo
from tests.mimic_fixture import write_fixture

TINY = MimicParams(n_chart=2, n_lab=1, n_output=1)
FAST = TrainParams(models=("CET",), hidden=8, max_epochs=3)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("raw")
    raw = write_fixture(root / "mimic", n_admissions=12)
    ds_dir = build(raw, root / "ds", root / "work", TINY)
    with warnings.catch_warnings():  # a tiny fixture: events no row saw, whichever test fits it first
        warnings.filterwarnings("ignore", "S: no observed time", UserWarning)
        version, _ = train_version(ds_dir, root / "models", "mimic", FAST)
    return root, raw, ds_dir, version


def _drop_rows(path, keep):
    """Rewrite a fixture CSV keeping the rows for which keep(row) is true."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows([rows[0]] + [r for r in rows[1:] if keep(dict(zip(rows[0], r, strict=True)))])


def test_raw_tables_score_like_the_training_build(trained, tmp_path):
    root, raw, ds_dir, version = trained
    ds = load_dataset(ds_dir)
    feats = pl.read_parquet(ds_dir / "features.parquet")
    from_dataset = score(ds_dir / "features.parquet", version, tmp_path / "a.parquet", horizons=(24.0, 240.0))
    from_raw, counts = score_mimic_raw(raw, version, tmp_path / "b.parquet", tmp_path / "w", horizons=(240.0, 24.0))
    a = pl.read_parquet(from_dataset).sort("id")
    b = pl.read_parquet(from_raw).sort("id")
    assert counts == {"admissions": 12, "scored": 12, "left_out_no_chart_or_lab_rows": 0}
    assert a["id"].to_list() == b["id"].to_list() == sorted(feats["id"].to_list())
    for e in ds.event_names:
        np.testing.assert_allclose(b[f"p_{e}"].to_numpy(), a[f"p_{e}"].to_numpy(), atol=1e-5, rtol=0)
        np.testing.assert_allclose(b[f"t_q50_{e}"].to_numpy(), a[f"t_q50_{e}"].to_numpy(), rtol=1e-5)
        for h in (24, 240):  # P(event by h hours): the same from raw tables, at most P(ever)
            np.testing.assert_allclose(b[f"risk_{h}_{e}"].to_numpy(), a[f"risk_{h}_{e}"].to_numpy(), atol=1e-5)
            assert (a[f"risk_{h}_{e}"] <= a[f"p_{e}"] + 1e-9).all()
        assert (a[f"risk_24_{e}"] <= a[f"risk_240_{e}"]).all()
    # the features themselves, not only the scores
    data = json.loads((version / "data.json").read_text())
    x, _ = featurize(raw, data["featurization"], data["feature_names"], tmp_path / "w2")
    np.testing.assert_allclose(x.sort("id").select(data["feature_names"]).to_numpy(),
                               feats.sort("id").select(data["feature_names"]).to_numpy(), atol=1e-9)


def test_new_admissions_use_training_statistics_not_their_own(trained, tmp_path):
    """Three new admissions alone: nothing is refitted on them (their own medians/means would
    standardise each column to mean 0); an item they lack is filled as training filled it."""
    root, raw, ds_dir, version = trained
    new = tmp_path / "new"
    shutil.copytree(raw, new)
    keep_ids = {"101", "102", "103"}
    for table in ("ADMISSIONS", "CHARTEVENTS", "LABEVENTS", "OUTPUTEVENTS"):
        _drop_rows(new / f"{table}.csv", lambda r: r["hadm_id"] in keep_ids)
    # admission 103 has no chart row of item 1 at all: count 0, the rest take the training medians
    _drop_rows(new / "CHARTEVENTS.csv", lambda r: not (r["hadm_id"] == "103" and r["itemid"] == "1"))
    data = json.loads((version / "data.json").read_text())
    prep = data["featurization"]["preprocessing"]
    x, counts = featurize(new, data["featurization"], data["feature_names"], tmp_path / "w")
    assert counts["scored"] == 3
    row = x.filter(pl.col("id") == 103).row(0, named=True)
    for n in data["feature_names"]:
        if n.startswith("chart_1_"):
            raw_value = 0.0 if n.endswith("_count") else prep["fill"][n]
            assert row[n] == pytest.approx((raw_value - prep["mean"][n]) / prep["sd"][n])
    full = pl.read_parquet(ds_dir / "features.parquet")
    same = x.filter(pl.col("id") == 101).select(data["feature_names"]).to_numpy()
    np.testing.assert_allclose(same, full.filter(pl.col("id") == 101).select(data["feature_names"]).to_numpy(),
                               atol=1e-9)


@pytest.mark.bad_input
def test_admissions_without_chart_or_lab_rows_are_counted(trained, tmp_path):
    root, raw, ds_dir, version = trained
    new = tmp_path / "new"
    shutil.copytree(raw, new)
    _drop_rows(new / "LABEVENTS.csv", lambda r: r["hadm_id"] not in {"104", "105"})
    out, counts = score_mimic_raw(new, version, tmp_path / "s.parquet", tmp_path / "w")
    assert counts == {"admissions": 12, "scored": 10, "left_out_no_chart_or_lab_rows": 2}
    assert pl.read_parquet(out).height == 10


@pytest.mark.bad_input
def test_missing_column_is_named_and_nothing_is_written(trained, tmp_path):
    root, raw, ds_dir, version = trained
    new = tmp_path / "new"
    shutil.copytree(raw, new)
    with open(new / "LABEVENTS.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    drop = rows[0].index("valuenum")
    with open(new / "LABEVENTS.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([r[:drop] + r[drop + 1:] for r in rows])
    with pytest.raises(ValueError, match=r"LABEVENTS\.csv.*missing column\(s\) \['VALUENUM'\]"):
        score_mimic_raw(new, version, tmp_path / "s.parquet", tmp_path / "w")
    assert not (tmp_path / "s.parquet").exists()


@pytest.mark.bad_input
def test_a_model_without_a_featurisation_record_is_refused(trained, tmp_path):
    root, raw, ds_dir, version = trained
    old = tmp_path / "v0001"
    shutil.copytree(version, old)
    data = json.loads((old / "data.json").read_text())
    data.pop("featurization")
    (old / "data.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="no MIMIC featurisation record.*rebuild the dataset and retrain"):
        score_mimic_raw(raw, old, tmp_path / "s.parquet", tmp_path / "w")


@requires_demo
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:S. no observed time:UserWarning")  # the demo's 77 training rows never see one
def test_real_demo_admissions_score_like_their_rows(tmp_path):
    ds_dir = build(DEMO, tmp_path / "ds", tmp_path / "work")
    version, _ = train_version(ds_dir, tmp_path / "models", "mimic", FAST)
    a = pl.read_parquet(score(ds_dir / "features.parquet", version, tmp_path / "a.parquet")).sort("id")
    b_path, counts = score_mimic_raw(DEMO, version, tmp_path / "b.parquet", tmp_path / "w")
    b = pl.read_parquet(b_path).sort("id")
    assert counts["scored"] == 126 and counts["left_out_no_chart_or_lab_rows"] == 3
    assert a["id"].to_list() == b["id"].to_list()
    for c in a.columns[1:]:
        np.testing.assert_allclose(b[c].to_numpy(), a[c].to_numpy(), atol=1e-5, rtol=1e-5)


def test_rmst_columns_are_the_models_restricted_means_and_need_horizons(trained, tmp_path):
    """``rmst=True`` adds rmst_<h>_<event>, CETModel.predict_rmst up to each horizon (at most h, larger
    when the event is later or never), from raw tables as from the dataset's rows; without horizons
    it is refused by the function and by the flow's parameters."""
    from cet_model.evaluation import model_inputs
    from cet_model.models import load_model
    from flows.lib.flow_params import PredictParams

    root, raw, ds_dir, version = trained
    ds = load_dataset(ds_dir)
    out = pl.read_parquet(score(ds_dir / "features.parquet", version, tmp_path / "a.parquet", horizons=(24.0, 240.0),
                                rmst=True))
    raw_out = pl.read_parquet(score_mimic_raw(raw, version, tmp_path / "b.parquet", tmp_path / "w",
                                              horizons=(24.0, 240.0), rmst=True)[0])
    rows = pl.read_parquet(ds_dir / "features.parquet")["id"].to_list()
    everyone = np.concatenate([model_inputs(s) for s in (ds.train, ds.val, ds.test)])
    ids = np.concatenate([s.ids for s in (ds.train, ds.val, ds.test)])
    order = np.argsort(ids)
    for h in (24, 240):
        means = load_model(version / "CET").predict_rmst(everyone, float(h))[order]
        for j, e in enumerate(ds.event_names):
            got = out.sort("id")[f"rmst_{h}_{e}"].to_numpy()
            np.testing.assert_allclose(got, means[:, j], rtol=1e-5)
            np.testing.assert_allclose(raw_out.sort("id")[f"rmst_{h}_{e}"].to_numpy(), got, rtol=1e-4)
            assert (got <= h + 1e-6).all() and (got > 0).all()
    assert sorted(rows) == sorted(ids.tolist())
    assert out.columns[-4:] == ["risk_24_" + ds.event_names[-1], "risk_240_" + ds.event_names[-1],
                                "rmst_24_" + ds.event_names[-1], "rmst_240_" + ds.event_names[-1]]
    with pytest.raises(ValueError, match="rmst needs horizons"):
        score(ds_dir / "features.parquet", version, tmp_path / "c.parquet", rmst=True)
    assert not (tmp_path / "c.parquet").exists()
    with pytest.raises(ValueError, match="rmst needs horizons"):
        PredictParams(out="s.parquet", features="f.parquet", rmst=True)
    from flows import predict as predict_flow

    with pytest.raises(SystemExit) as exit_:  # the CLI says so before anything is read
        predict_flow.main(["--features", str(ds_dir / "features.parquet"), "--out", str(tmp_path / "d.parquet"),
                           "--rmst"])
    assert exit_.value.code == 2 and not (tmp_path / "d.parquet").exists()


def test_values_far_outside_training_name_the_item_and_count_the_columns_beyond_ten(trained, tmp_path, caplog):
    """The version records its items' D_ITEMS / D_LABITEMS labels; the warning of values far
    outside the training rows names an item by its label, the most affected columns first, and
    counts the columns it does not name (a real MIMIC-III extract can flag hundreds)."""
    import logging

    root, raw, ds_dir, version = trained
    data = json.loads((version / "data.json").read_text())
    assert data["item_labels"] == {"chart_1": "Heart Rate", "chart_2": "Heart Rhythm", "lab_50912": "Creatinine",
                                   "output_40055": "Urine Out Foley"}
    values = pl.read_parquet(ds_dir / "features.parquet").select(data["feature_names"]).row(0)
    names = data["feature_names"]
    assert len(names) == 11
    # ranges as a version trained on 200 or more rows records them, here set so that every value is
    # far outside (the fixture's 12 admissions are too few to record any)
    data["feature_ranges"] = {n: [v + 10.0, v + 11.0] for n, v in zip(names, values, strict=True)}
    copy = tmp_path / "v0001"
    shutil.copytree(version, copy)
    (copy / "data.json").write_text(json.dumps(data))
    with caplog.at_level(logging.INFO, logger="flows.predict"):
        score_mimic_raw(raw, copy, tmp_path / "s.parquet", tmp_path / "w")
    message = next(r.getMessage() for r in caplog.records if "far outside the training rows" in r.getMessage())
    listed = message.split("rows per column: ")[1]
    assert listed.startswith("chart_1_count (Heart Rate) 12, ")
    assert "lab_50912_mean (Creatinine) 12" in listed
    assert listed.count(" 12") == 10 and listed.endswith(", and 1 more column; scored all the same")
