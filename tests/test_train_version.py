"""What a registered version records about its training: the encoder-only stage's epochs too."""

import json

from flows.lib.mimic.build import MimicParams, build
from flows.lib.modeling.train_eval import TrainParams, train_version
from tests.mimic_fixture import write_fixture


def test_metrics_record_the_encoder_stage_epochs(tmp_path):
    raw = write_fixture(tmp_path / "mimic", n_admissions=40)
    ds_dir = build(raw, tmp_path / "ds", tmp_path / "work", MimicParams(n_chart=2, n_lab=1, n_output=1))
    kw = dict(models=("CET",), hidden=8, max_epochs=80, patience=2)
    fast = {"lr": 0.05}  # the few training rows are overfitted within some epochs: an early stop
    staged, _ = train_version(ds_dir, tmp_path / "models", "mimic", TrainParams(**kw, overrides={"CET": fast}))
    joint, _ = train_version(ds_dir, tmp_path / "models", "mimic",
                             TrainParams(**kw, overrides={"CET": {**fast, "encoder_stage": False}}))
    a = json.loads((staged / "metrics.json").read_text())
    b = json.loads((joint / "metrics.json").read_text())
    assert a["epochs"]["CET"] == b["epochs"]["CET"] < 80  # the same seeded joint stage, stopped early
    assert a["encoder_epochs"]["CET"] >= 1  # then the stage ran, and its epochs are counted
    assert b["encoder_epochs"]["CET"] == 0
