"""A large file is scored part by part, with a line of progress and the time left after each part
(flows.predict), and gives the values of one call."""

import logging

import numpy as np
import polars as pl
import pytest
from lifelines.datasets import load_rossi

from flows.lib.ingest import write_follow_up_dataset
from flows.lib.modeling import predict
from flows.lib.modeling.train_eval import TrainParams, train_version


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # a small net; not what is tested
def test_a_file_of_several_parts_says_its_progress_and_scores_as_one(tmp_path, caplog, monkeypatch):
    ds_dir = write_follow_up_dataset(tmp_path / "rossi", load_rossi(), ["fin", "age", "prio"],
                                     {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks", seed=3)
    version, _ = train_version(ds_dir, tmp_path / "models", "rossi",
                               TrainParams(models=("CET",), hidden=8, max_epochs=20, device="cpu", reference="none"))
    rows = pl.read_parquet(ds_dir / "features.parquet").drop("split")  # 432 rows
    rows.write_csv(tmp_path / "new.csv")
    args = dict(device="cpu", horizons=[10.0, 52.0], rmst=True)
    with caplog.at_level(logging.INFO, logger="flows.predict"):
        predict.score(tmp_path / "new.csv", version, tmp_path / "whole.parquet", **args)
    assert not [r for r in caplog.records if "rows (" in r.getMessage()]  # one part: no progress lines
    caplog.clear()
    monkeypatch.setattr(predict, "PART_ROWS", 100)
    with caplog.at_level(logging.INFO, logger="flows.predict"):
        predict.score(tmp_path / "new.csv", version, tmp_path / "parts.parquet", **args)
    said = [r.getMessage() for r in caplog.records if "rows (" in r.getMessage()]
    assert [line.split(", ")[0] for line in said] == [
        f"new.csv: scored {k} of 432 rows ({100 * k // 432} %)" for k in (100, 200, 300, 400, 432)]
    assert all(line.endswith(" left") for line in said[:-1]) and said[-1].endswith(", done"), said
    whole, parts = pl.read_parquet(tmp_path / "whole.parquet"), pl.read_parquet(tmp_path / "parts.parquet")
    assert parts.columns == whole.columns and parts["id"].to_list() == rows["id"].to_list()
    for column in whole.columns[1:]:  # p, time quantiles, risk and restricted means by each horizon
        np.testing.assert_allclose(parts[column].to_numpy(), whole[column].to_numpy(), rtol=1e-6, err_msg=column)


def test_comment_embeddings_are_scored_part_by_part_from_disk(tmp_path, caplog):
    """Reddit's inputs: each part reads its rows of the embeddings file, and the parts join into the
    values of one call."""
    from cet_model import CETModel
    from cet_model.comments import CommentInputs, NpyRows, flatten_inputs

    rng = np.random.default_rng(0)
    n, length, dim = 90, 4, 6
    aux, seq = rng.standard_normal((n, 2)), rng.standard_normal((n, length, dim)).astype(np.float32)
    t, s = rng.exponential(size=(n, 2)) + 0.1, (rng.random((n, 2)) < 0.5).astype(float)
    spec = {"n_aux": 2, "length": length, "dim": dim, "width": 5}
    model = CETModel(hidden_sizes=(8,), comment_encoder=spec, max_epochs=2, device="cpu").fit(
        flatten_inputs(aux, seq), t, s)
    np.save(tmp_path / "seq.npy", seq)
    x = CommentInputs(aux, NpyRows(tmp_path / "seq.npy"))
    kw = dict(quantiles=(0.5,), times=[1.0], rmst_horizons=(2.0,), risk_by=[1.0, 2.0])
    with caplog.at_level(logging.INFO, logger="flows.predict"):
        parts = predict.predict_in_parts(model, x, "seq.npy", part_rows=40, **kw)
    assert len([r for r in caplog.records if "rows (" in r.getMessage()]) == 3  # 40 + 40 + 10
    whole = model.predict_all(x, **kw)
    for key in ("occurrence", "survival", "risk_by"):
        np.testing.assert_allclose(parts[key], whole[key], rtol=1e-6, err_msg=key)
    np.testing.assert_allclose(parts["time"][0.5], whole["time"][0.5], rtol=1e-6)
    np.testing.assert_allclose(parts["rmst"][2.0], whole["rmst"][2.0], rtol=1e-6)
