"""A batch of new rows unlike the training rows is said when it is scored (flows.predict)."""

import json
import logging

import polars as pl
import pytest
from lifelines.datasets import load_rossi

from flows.lib.ingest import write_follow_up_dataset
from flows.lib.modeling.predict import score
from flows.lib.modeling.train_eval import TrainParams, train_version


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # a small net; not what is tested
def test_a_batch_whose_means_moved_is_warned_of_and_scored(tmp_path, caplog):
    ds_dir = write_follow_up_dataset(tmp_path / "rossi", load_rossi(), ["fin", "age", "prio"],
                                     {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks", seed=3)
    version, _ = train_version(ds_dir, tmp_path / "models", "rossi",
                               TrainParams(models=("CET",), hidden=8, max_epochs=20, device="cpu", reference="none"))
    data = json.loads((version / "data.json").read_text())
    features = pl.read_parquet(ds_dir / "features.parquet")
    train = features.filter(pl.col("split") == "train")
    assert data["feature_moments"]["age"] == [pytest.approx(train["age"].mean(), abs=1e-6),
                                              pytest.approx(train["age"].std(), abs=1e-6)]
    rows = features.filter(pl.col("split") != "train").drop("split")  # 173 rows like the training rows
    rows.write_csv(tmp_path / "same.csv")
    older = rows.with_columns(age=pl.col("age") + 2 * train["age"].std())  # a cohort twenty years older
    older.write_csv(tmp_path / "older.csv")
    with caplog.at_level(logging.INFO, logger="flows.predict"):
        score(tmp_path / "same.csv", version, tmp_path / "same.parquet", device="cpu")
        assert "unlike the training rows" not in caplog.text
        score(tmp_path / "older.csv", version, tmp_path / "older.parquet", device="cpu")
    shift = (older["age"].mean() - data["feature_moments"]["age"][0]) / data["feature_moments"]["age"][1]
    assert (f"older.csv: these 173 rows are unlike the training rows: the mean of 1 of 3 features lies 0.5 or more "
            f"training standard deviations from the training mean (age {shift:+.2f} SD)") in caplog.text
    assert pl.read_parquet(tmp_path / "older.parquet").height == 173
    rows.head(40).with_columns(age=pl.col("age") + 50).write_csv(tmp_path / "few.csv")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="flows.predict"):
        score(tmp_path / "few.csv", version, tmp_path / "few.parquet", device="cpu")
    assert "unlike the training rows" not in caplog.text  # 40 rows: too few to judge a mean by
    assert "far outside the training rows" in caplog.text  # each row is still checked
