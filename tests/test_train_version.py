"""What a registered version records about its training: the encoder-only stage's epochs too."""

import json

import numpy as np
import pytest

from cet_model.bootstrap import bootstrap_intervals
from cet_model.dataset import load_dataset
from cet_model.evaluation import model_inputs, ranking_inputs, rmst_horizons
from cet_model.models import load_model
from flows.lib.mimic.build import MimicParams, build
from flows.lib.modeling.train_eval import FitProgress, TrainParams, train_version
from flows.lib.standin import synthetic
from tests.mimic_fixture import write_fixture


@pytest.mark.filterwarnings("ignore:S. no observed time:UserWarning")  # a tiny fixture: events no row saw
def test_metrics_record_the_encoder_stage_epochs(tmp_path):
    raw = write_fixture(tmp_path / "mimic", n_admissions=40)
    ds_dir = build(raw, tmp_path / "ds", tmp_path / "work", MimicParams(n_chart=2, n_lab=1, n_output=1))
    kw = dict(models=("CET",), hidden=8, max_epochs=300, patience=2)
    fast = {"lr": 0.1}  # the few training rows are overfitted within some epochs: an early stop
    staged, _ = train_version(ds_dir, tmp_path / "models", "mimic", TrainParams(**kw, overrides={"CET": fast}))
    joint, _ = train_version(ds_dir, tmp_path / "models", "mimic",
                             TrainParams(**kw, overrides={"CET": {**fast, "encoder_stage": False}}))
    a = json.loads((staged / "metrics.json").read_text())
    b = json.loads((joint / "metrics.json").read_text())
    assert a["epochs"]["CET"] == b["epochs"]["CET"] < 300  # the same seeded joint stage, stopped early
    assert a["encoder_epochs"]["CET"] >= 1  # then the stage ran, and its epochs are counted
    assert b["encoder_epochs"]["CET"] == 0


@pytest.mark.filterwarnings("ignore:S. no observed time:UserWarning")  # a tiny fixture: events no row saw
def test_fit_progress_counts_models_whole_and_throttles_the_updates(tmp_path):
    """The epochs train_version reports (the encoder stage's continue the joint count) give a percent
    that never goes back, stays below 100 until every fit is done, and is sent when a model starts
    and then at most once per interval (here every 5th epoch: 0.5 s apart, 0.1 s an epoch)."""
    raw = write_fixture(tmp_path / "mimic", n_admissions=40)
    ds_dir = build(raw, tmp_path / "ds", tmp_path / "work", MimicParams(n_chart=2, n_lab=1, n_output=1))
    calls = []
    params = TrainParams(models=("CET", "ET"), hidden=8, max_epochs=60, patience=2,
                         overrides={"CET": {"lr": 0.05, "sigma": "net"}})  # a fit whose encoder stage runs
    version, _ = train_version(ds_dir, tmp_path / "models", "mimic", params,
                               progress=lambda model, epoch, hist: calls.append((model, epoch)))
    metrics = json.loads((version / "metrics.json").read_text())
    assert metrics["encoder_epochs"]["CET"] >= 1  # the stage ran, so its epochs are in the calls too
    assert len(calls) == sum(metrics["epochs"].values()) + metrics["encoder_epochs"]["CET"]
    ticks = iter(0.1 * i for i in range(len(calls))).__next__
    progress = FitProgress(params.models, interval=0.5, clock=ticks)
    sent = []
    for i, (model, epoch) in enumerate(calls):
        if i and calls[i - 1][0] != model:
            progress.fitted(calls[i - 1][0])  # one after another: a model ends as the next starts
        sent.append((model, progress.epoch(model, epoch)))
    values = [v for _, v in sent if v is not None]
    assert values == sorted(values) and values[-1] < 100.0 and progress.finish() == 100.0
    first_et = next(i for i, (model, _) in enumerate(sent) if model == "ET")
    assert sent[0][1] is not None and sent[first_et][1] is not None and sent[first_et][1] >= 50.0
    assert all(v < 50.0 for model, v in sent[:first_et] if v is not None)
    assert len(values) <= 2 + len(calls) // 5 + 1 < len(calls)


def test_on_models_names_only_the_presets_that_are_fitted(tmp_path):
    """Data without the true occurrence (lifelines' rossi): the oracle is left out, so the progress
    gets one share, not two."""
    from lifelines.datasets import load_rossi

    from flows.lib.ingest import write_follow_up_dataset

    ds_dir = write_follow_up_dataset(tmp_path / "rossi", load_rossi(), ["fin", "age", "prio"],
                                     {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks")
    params = TrainParams(models=("CET", "Oracle"), hidden=8, max_epochs=3, patience=2)
    progress = FitProgress(params.models, clock=lambda: 0.0)
    seen = []
    train_version(ds_dir, tmp_path / "models", "rossi", params, on_models=lambda m: (seen.append(m),
                                                                                    progress.fitting(m)))
    assert seen == [("CET",)]
    assert progress.epoch("CET", 99) == 50.0  # half of the one share (25.0 with the oracle counted)


def test_a_version_records_paired_test_intervals_that_its_saved_models_reproduce(tmp_path):
    """metrics.json's intervals: the estimates are the summary's test AUC and C, and the bootstrap
    recomputed from the saved models' test predictions (same seed) gives the same bounds."""
    ds_dir = synthetic.write(tmp_path / "syn", "independent", n=600, split_sizes=(360, 120, 120))
    params = TrainParams(models=("CET", "ET", "BC"), hidden=8, max_epochs=5, patience=2, seed=3)
    version, _ = train_version(ds_dir, tmp_path / "models", "synthetic", params)
    metrics = json.loads((version / "metrics.json").read_text())
    got = metrics["intervals"]["test"]
    assert set(got["metrics"]["auc"]) == {"CET", "ET", "BC"}
    assert set(got["metrics"]["ci"]) == set(got["metrics"]["ci_rmst"]) == set(got["metrics"]["auc_h"]) == {"CET", "ET"}
    for metric in ("auc", "ci", "ci_rmst"):
        for model, row in got["metrics"][metric].items():
            assert row["estimate"] == pytest.approx(metrics["summary"][model][f"test_{metric}"], abs=1e-9)
            assert row["low"] <= row["estimate"] <= row["high"]
    for model, row in got["metrics"]["auc_h"].items():  # the AUC at h recorded with the calibration
        by_event = [v["auc"] for v in metrics["calibration"]["test"][model].values()]
        assert (
            row["estimate"] == pytest.approx(np.mean(by_event), abs=1e-9)
            and row["low"] <= row["estimate"] <= row["high"]
        )
    assert set(got["differences"]["auc"]) == {"ET", "BC"} and got["seed"] == 3
    ds = load_dataset(ds_dir)
    x, horizons = model_inputs(ds.test), np.median(ds.train.T, axis=0)  # the calibration horizons
    again = bootstrap_intervals(ds.test, {m: ranking_inputs(m, load_model(version / m), x, horizons,
                                                            rmst_horizons(ds.train))
                                          for m in ("CET", "ET", "BC")}, seed=3, train=ds.train, horizons=horizons)
    assert _same(again, got)


def _same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a == pytest.approx(b, abs=1e-9, nan_ok=True)
    return a == b


KEY = b"test-row-key"


def _drifted(out, noise: float, seed: int, swap: bool = False, rename: dict | None = None, roll: int = 0,
             patients: dict | None = None):
    """A synthetic dataset (ids 0-899; rows 0-539 train, 540-719 validation); ``swap``: x1, x2 hold
    what x3, x4 hold in the generator and the other way round (the same names, another relation to
    the events); ``rename``: other feature names; ``roll``: the split column rolled by that many
    rows (the same rows split afresh, as a rebuild of a grown cohort does); ``patients``: split by
    patient, two rows each (ids 2k and 2k + 1 are patient k), except {row id: (new id, patient)}."""
    import polars as pl

    from cet_model.dataset import write_dataset

    features, events, manifest = synthetic.generate("independent", n=900, noise=noise, seed=seed,
                                                    split_sizes=(540, 180, 180))
    if roll:
        split = pl.Series("split", np.roll(features["split"].to_numpy(), roll))
        features, events = features.with_columns(split), events.with_columns(split)
    if patients is not None:
        old = features["id"].to_list()
        ids = pl.Series("id", [patients.get(i, (i, None))[0] for i in old])
        group = pl.Series("split_group", [patients.get(i, (None, i // 2))[1] for i in old]).cast(pl.String)
        features = features.with_columns(ids, group).select("id", "split", "split_group", *manifest["feature_names"])
        events, manifest = events.with_columns(ids), {**manifest, "split_by": "patient"}
    if swap:
        features = features.rename({"x1": "x3", "x2": "x4", "x3": "x1", "x4": "x2"}).select(features.columns)
    if rename:
        features = features.rename(rename)
        manifest = {**manifest, "feature_names": [rename.get(f, f) for f in manifest["feature_names"]]}
    return write_dataset(out, features, events, manifest)


@pytest.mark.slow  # trains four versions: CI runs it, the quick loop leaves it out
def test_promotion_compares_a_retrained_version_on_its_own_validation_rows(tmp_path):
    """Retrained on shifted data that are harder to predict, the new version's recorded validation
    AUC is below the old one's, which was recorded on the old data; on the new rows the old model
    is near chance. Compared by the recorded values the old model would be kept; the rule rescores
    it on the candidate's validation rows and promotes the new one. On the same data the recorded
    values are compared, with the difference's interval; rows split afresh leave out the promoted
    model's training rows; data with other feature names cannot be rescored, and the recorded
    values are compared, saying so."""
    from flows.lib.infra import registry
    from flows.lib.modeling.promotion import promoted_on_candidate_rows

    root = tmp_path / "models"
    params = TrainParams(models=("CET",), hidden=16, max_epochs=150, patience=10,
                         overrides={"CET": {"lr": 0.02, "sigma": "net"}})  # the fits this test was written with
    easy = _drifted(tmp_path / "easy", noise=0.05, seed=0)
    v1, _ = train_version(easy, root, "d", params, id_key=KEY)
    assert registry.decide(root, "d", v1, registry.Rule())["promoted"]
    assert promoted_on_candidate_rows(root, "d", v1, easy, "val_auc", KEY) is None  # the promoted version itself
    shifted = _drifted(tmp_path / "shifted", noise=0.3, seed=1, swap=True)
    v2, _ = train_version(shifted, root, "d", params, id_key=KEY)
    recorded = {v: registry.metric_value(v, "val_auc") for v in (v1, v2)}
    assert recorded[v2] < recorded[v1]  # by the recorded values v1 would stay
    rescored = promoted_on_candidate_rows(root, "d", v2, shifted, "val_auc", KEY)
    assert rescored["version"] == "v0001" and rescored["recorded"] == recorded[v1]
    assert (rescored["rows"], rescored["of"]) == (180, 180)  # v1 trained on ids 0-539, these are 540-719
    assert rescored["value"] < 0.6 < recorded[v2], (rescored, recorded)
    assert rescored["value"] == pytest.approx(_val_auc(v1, shifted))  # the saved model on those rows
    assert rescored["candidate_value"] == pytest.approx(recorded[v2])
    diff = rescored["difference"]  # candidate minus promoted on those rows, with its paired interval
    assert diff["estimate"] == pytest.approx(rescored["candidate_value"] - rescored["value"])
    assert 0 < diff["low"] < diff["estimate"] < diff["high"] and diff["level"] == 0.95
    assert (
        f"candidate minus v0001 {diff['estimate']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}]" in rescored["note"]
    )
    d = registry.decide(root, "d", v2, registry.Rule(), rescored=rescored)
    assert (
        d["promoted"] and "on v0002's validation rows" in d["reason"] and d["previous_recorded_value"] == recorded[v1]
    )
    assert d["difference"] == diff
    # the same data again (another seed): the recorded values are already on the same rows
    v3, _ = train_version(shifted, root, "d", TrainParams(**{**params.__dict__, "seed": 1}), id_key=KEY)
    same = promoted_on_candidate_rows(root, "d", v3, shifted, "val_auc", KEY)
    assert same["value"] is None and same["note"].startswith("the same data as v0002: the recorded values are compared")
    assert same["difference"]["estimate"] == pytest.approx(registry.metric_value(v3, "val_auc") - recorded[v2])
    assert promoted_on_candidate_rows(root, "d", v3, shifted, "val_mrae", KEY) is None  # no interval for MRAE
    # a promoted version from before val_ci_rmst was recorded: both are scored on the same rows
    record = json.loads((v2 / "metrics.json").read_text())
    kept = dict(record["summary"]["CET"])
    record["summary"]["CET"].pop("val_ci_rmst")
    (v2 / "metrics.json").write_text(json.dumps(record))
    old = promoted_on_candidate_rows(root, "d", v3, shifted, "val_ci_rmst", KEY)
    assert old["value"] == pytest.approx(kept["val_ci_rmst"]) and old["rows"] == 180
    assert old["candidate_value"] == pytest.approx(registry.metric_value(v3, "val_ci_rmst"))
    assert old["note"].startswith("the same data as v0002, which did not record val_ci_rmst: both scored on the 180 ")
    assert old["difference"]["estimate"] == pytest.approx(old["candidate_value"] - old["value"])
    record["summary"]["CET"] = kept
    (v2 / "metrics.json").write_text(json.dumps(record))
    d3 = registry.decide(root, "d", v3, registry.Rule(tolerance=1.0), rescored=same)  # promotes v3
    assert d3["previous_value"] == recorded[v2] and d3["difference"] == same["difference"]
    assert "validation rows" not in d3["reason"] and registry.promoted(root, "d") == v3
    renamed = _drifted(tmp_path / "renamed", noise=0.3, seed=2, rename={"x5": "age"})
    v4, _ = train_version(renamed, root, "d", params, id_key=KEY)
    other = promoted_on_candidate_rows(root, "d", v4, renamed, "val_auc", KEY)
    assert other["value"] is None and "other feature names" in other["note"]
    # the promoted v3's rows split afresh: the new validation rows are ids 450-629, and v3 was
    # trained on 0-539, so both are scored on 540-629 alone
    resplit = _drifted(tmp_path / "resplit", noise=0.3, seed=1, swap=True, roll=-90)
    v5, _ = train_version(resplit, root, "d", params, id_key=KEY)
    fresh = promoted_on_candidate_rows(root, "d", v5, resplit, "val_auc", KEY)
    assert (fresh["version"], fresh["rows"], fresh["of"]) == ("v0003", 90, 180)
    assert fresh["value"] == pytest.approx(_val_auc(v3, resplit, ids=range(540, 630)))
    assert fresh["candidate_value"] == pytest.approx(_val_auc(v5, resplit, ids=range(540, 630)))
    assert fresh["value"] != pytest.approx(_val_auc(v3, resplit))  # its training rows would count otherwise
    assert "the 90 of v0005's 180 validation rows that v0003 was not trained on" in fresh["note"]
    everything = _drifted(tmp_path / "everything", noise=0.3, seed=1, swap=True, roll=360)  # validation: 0-179
    v6, _ = train_version(everything, root, "d", params, id_key=KEY)
    none_left = promoted_on_candidate_rows(root, "d", v6, everything, "val_auc", KEY)
    assert (
        none_left["value"] is None and none_left["rows"] == 0 and "trained on every validation row" in none_left["note"]
    )
    other_key = promoted_on_candidate_rows(root, "d", v5, resplit, "val_auc", b"another key")
    assert other_key["value"] is None and "hashed with another key" in other_key["note"]
    unkeyed, _ = train_version(easy, root, "d", TrainParams(**{**params.__dict__, "seed": 2}))  # no key: no hashes
    assert not (unkeyed / "train_ids.npy").exists()
    assert registry.decide(root, "d", unkeyed, registry.Rule("always"))["promoted"]
    after = promoted_on_candidate_rows(root, "d", v5, resplit, "val_auc", KEY)
    assert after["value"] is None and "does not record which rows" in after["note"]
    # a damaged record is a clear error naming the file, not a silent comparison on the wrong rows
    registry.decide(root, "d", v5, registry.Rule("always"))
    (v5 / "train_ids.npy").write_bytes(b"not an array")
    with pytest.raises(ValueError, match=r"v0005/train_ids.npy: not a readable record of training-row hashes"):
        promoted_on_candidate_rows(root, "d", v6, everything, "val_auc", KEY)


def test_promotion_leaves_out_the_patients_the_promoted_model_was_trained_on(tmp_path):
    """Where the data are split by patient, a patient's new admission is not new to a model that
    was trained on the patient's earlier ones: the rescoring leaves it out too, and says so. A
    version from before the record of patients, or data split another way, fall back to rows."""
    from flows.lib.infra import registry
    from flows.lib.modeling.promotion import TRAIN_GROUPS, promoted_on_candidate_rows

    root = tmp_path / "models"
    params = TrainParams(models=("CET",), hidden=16, max_epochs=30, patience=5)
    v1, _ = train_version(_drifted(tmp_path / "a", noise=0.3, seed=1, patients={}), root, "d", params, id_key=KEY)
    assert (v1 / TRAIN_GROUPS).is_file() and len(np.load(v1 / TRAIN_GROUPS)) == 270  # patients 0-269
    assert json.loads((v1 / "data.json").read_text())["split_by"] == "patient"
    registry.decide(root, "d", v1, registry.Rule())
    # the cohort grows and is split afresh (validation: rows 450-629); v1 trained on rows 0-539. Of
    # the 90 validation rows it did not train on, 30 (new ids 1000-1029) are new admissions of the
    # patients of rows 450-479 (patients 225-239), whose earlier admissions it trained on
    readmitted = {540 + k: (1000 + k, (450 + k) // 2) for k in range(30)}
    grown = _drifted(tmp_path / "b", noise=0.3, seed=1, roll=-90, patients=readmitted)
    v2, _ = train_version(grown, root, "d", params, id_key=KEY)
    out = promoted_on_candidate_rows(root, "d", v2, grown, "val_auc", KEY)
    assert (out["rows"], out["of"], out["by_group"]) == (60, 180, 30)
    assert out["value"] == pytest.approx(_val_auc(v1, grown, ids=range(570, 630)))  # those 60 rows alone
    assert ("the 60 of v0002's 180 validation rows that v0001 was not trained on, 30 more left out as other rows of "
            "its training patients (val_auc") in out["note"]
    # a promoted version that does not record its patients: rows only, and the note says so
    (v1 / TRAIN_GROUPS).unlink()
    rows_only = promoted_on_candidate_rows(root, "d", v2, grown, "val_auc", KEY)
    assert (rows_only["rows"], rows_only["by_group"]) == (90, None)
    assert "v0001 does not record its training patients (a version from before train_groups.npy)" in rows_only["note"]
    # the candidate's data split by row: the promoted version's patients cannot be matched
    registry.decide(root, "d", v2, registry.Rule("always"))
    by_row = _drifted(tmp_path / "c", noise=0.3, seed=2, roll=-90)
    v3, _ = train_version(by_row, root, "d", params, id_key=KEY)
    unmatched = promoted_on_candidate_rows(root, "d", v3, by_row, "val_auc", KEY)
    assert unmatched["by_group"] is None and unmatched["value"] is not None
    assert "v0002's data were split by patient and v0003's by row, so only its training rows" in unmatched["note"]


def _val_auc(version, dataset_dir, ids=None):
    from cet_model.metrics import occurrence_auc

    va = load_dataset(dataset_dir).val
    if ids is not None:
        va = va.take(np.flatnonzero(np.isin(va.ids, list(ids))))
    p = load_model(version / "CET").predict_occurrence(model_inputs(va))
    return float(np.mean([occurrence_auc(va.C[:, j], p[:, j]) for j in range(p.shape[1])]))


def test_real_data_get_a_cox_reference_and_stand_ins_do_not(tmp_path):
    """Data without the true occurrence (lifelines' rossi, as a user's table): the version records a
    classical Cox fit's test and validation metrics beside the models', and CET minus it in the
    paired intervals; the summary prints its row. Stand-in data (the truth known) get the Oracle,
    not the reference."""
    from lifelines.datasets import load_rossi

    from cet_model.reference import REFERENCE
    from flows.lib.ingest import write_follow_up_dataset
    from flows.lib.modeling.version_text import summary_lines

    ds_dir = write_follow_up_dataset(tmp_path / "rossi", load_rossi(), ["fin", "age", "prio"],
                                     {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks")
    params = TrainParams(models=("CET",), hidden=8, max_epochs=3, patience=2)
    version, _ = train_version(ds_dir, tmp_path / "models", "rossi", params)
    metrics = json.loads((version / "metrics.json").read_text())
    for split in ("val", "test"):
        row = metrics[split][REFERENCE]["arrest"]
        assert set(row) == {"ci", "ci_rmst", "uno_c", "ibs"} and 0.5 < row["ci"] < 0.8, row
        assert row["ci_rmst"] == pytest.approx(row["ci"])  # proportional hazards: the RMST ranks as the risk
        assert metrics["summary"][REFERENCE][f"{split}_ci"] == pytest.approx(row["ci"])
    diff = metrics["intervals"]["test"]["differences"]["ci_rmst"][REFERENCE]
    assert diff["estimate"] == pytest.approx(metrics["summary"]["CET"]["test_ci_rmst"]
                                             - metrics["summary"][REFERENCE]["test_ci_rmst"])
    lines = summary_lines(version)
    assert any(line.strip().startswith(REFERENCE + "  ") for line in lines), lines
    assert sum(line.strip().startswith(REFERENCE) for line in lines) == 2  # its row and CET minus it
    assert "C (RMST) ranks every model by the event-free time, the like-for-like column" in "\n".join(lines)
    synth = synthetic.write(tmp_path / "synthetic", n=400, split_sizes=(240, 80, 80))
    version, _ = train_version(synth, tmp_path / "models", "synthetic", params)
    assert REFERENCE not in json.loads((version / "metrics.json").read_text())["test"]
    # asked for (--reference cox): on the stand-in too; --reference none: not even on real data
    version, _ = train_version(
        synth, tmp_path / "models", "synthetic", TrainParams(**{**vars(params), "reference": "cox"})
    )
    assert set(json.loads((version / "metrics.json").read_text())["test"][REFERENCE]) == {"T1", "T2"}
    version, _ = train_version(
        ds_dir, tmp_path / "models", "rossi", TrainParams(**{**vars(params), "reference": "none"})
    )
    assert REFERENCE not in json.loads((version / "metrics.json").read_text())["test"]
    with pytest.raises(ValueError, match="reference must be one of"):
        TrainParams(reference="lifelines")


def test_the_summary_shows_each_event_beside_its_observed_test_rows(tmp_path):
    """With more than one event the summary ends with a table per event: each model's headline
    figure for that event (AUC where the truth is known, else C (RMST)) and how many test rows
    observed it, as recorded in the version; one event gets no such table."""
    from lifelines.datasets import load_rossi

    from flows.lib.ingest import write_follow_up_dataset
    from flows.lib.modeling.version_text import summary_lines

    params = TrainParams(models=("CET", "BC"), hidden=8, max_epochs=3, patience=2)
    synth = synthetic.write(tmp_path / "synthetic", n=400, split_sizes=(240, 80, 80))
    version, _ = train_version(synth, tmp_path / "models", "synthetic", params)
    metrics, te = json.loads((version / "metrics.json").read_text()), load_dataset(synth).test
    assert metrics["observed"]["test"] == {"T1": int(te.S[:, 0].sum()), "T2": int(te.S[:, 1].sum())}
    lines = summary_lines(version)
    at = lines.index("test split, per event: AUC against the true occurrence (observed: test rows with the event "
                     "observed; [ ]: 95% paired bootstrap interval, the same resamples):")
    assert lines[at + 1].split() == ["event", "observed", "CET", "BC"]
    by_event = metrics["intervals"]["test"]["by_event"]["auc"]
    for j, event in enumerate(("T1", "T2")):
        cells = [event, str(int(te.S[:, j].sum()))]
        for model in ("CET", "BC"):
            bounds = by_event[model][j]
            assert bounds["estimate"] == pytest.approx(metrics["test"][model][event]["auc"])
            assert bounds["low"] <= bounds["estimate"] <= bounds["high"]
            cells += [f"{bounds['estimate']:.3f}", f"[{bounds['low']:.3f},", f"{bounds['high']:.3f}]"]
        assert lines[at + 2 + j].split() == cells
    # the last table, then only what is said of the follow-up's end (this synthetic data's is short)
    from flows.lib.modeling.version_text import beyond_lines, rising_lines

    end = beyond_lines(version) + rising_lines(version)
    assert end and lines[at + 4:] == end, lines[at + 4:]
    # the Prefect artifact's rows: the averages, then each event's interval
    from flows.lib.modeling.version_text import interval_rows

    rows = interval_rows(version)
    assert {r["event"] for r in rows} == {"average", "T1", "T2"}
    t2 = next(r for r in rows if r["what"] == "CET" and r["event"] == "T2" and r["metric"] == "auc")
    assert (t2["low"], t2["high"]) == (round(by_event["CET"][1]["low"], 4), round(by_event["CET"][1]["high"], 4))
    # without the truth: C (RMST), and BC (no time) has no column; two events from one real table
    rossi = load_rossi().assign(week2=lambda d: d["week"], arrest2=lambda d: 1 - d["arrest"])
    ds_dir = write_follow_up_dataset(tmp_path / "rossi2", rossi, ["fin", "age", "prio"],
                                     {"arrest": ("week", "arrest"), "other": ("week2", "arrest2")},
                                     name="rossi2", time_unit="weeks")
    version, _ = train_version(ds_dir, tmp_path / "models", "rossi2", params)
    lines = summary_lines(version)
    at = [i for i, line in enumerate(lines) if line.startswith("test split, per event: C (RMST)")]
    assert len(at) == 1 and lines[at[0] + 1].split() == ["event", "observed", "CET", "Cox", "(reference)"]
    one = write_follow_up_dataset(tmp_path / "rossi", load_rossi(), ["fin", "age", "prio"],
                                  {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks")
    version, _ = train_version(one, tmp_path / "models", "rossi", params)
    assert not any("per event" in line for line in summary_lines(version))


def test_the_summary_says_why_a_model_has_no_figure(tmp_path):
    """BC (a classifier of the observed indicator) is scored only against the true occurrence: on a
    user's table its row is empty, and a line under the table says why; with the truth it is not."""
    from lifelines.datasets import load_rossi

    from flows.lib.ingest import write_follow_up_dataset
    from flows.lib.modeling.version_text import summary_lines

    params = TrainParams(models=("CET", "BC"), hidden=8, max_epochs=3, patience=2, reference="none")
    ds_dir = write_follow_up_dataset(tmp_path / "rossi", load_rossi(), ["fin", "age", "prio"],
                                     {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks")
    lines = summary_lines(train_version(ds_dir, tmp_path / "models", "rossi", params)[0])
    row = next(i for i, line in enumerate(lines) if line.strip().startswith("BC "))
    assert set(lines[row].split()[1:]) == {"-"}
    assert lines[row + 1] == ("  BC: no figure on these data: scored only against the true "
                              "occurrence, which they do not have")
    synth = synthetic.write(tmp_path / "synthetic", n=400, split_sizes=(240, 80, 80))
    lines = summary_lines(train_version(synth, tmp_path / "models", "synthetic", params)[0])
    assert not any("no figure" in line for line in lines)


def test_the_summary_says_when_no_model_beats_chance_and_when_no_test_row_has_the_event(tmp_path):
    """Features that carry nothing (rossi's outcome beside seeded noise): a line says that no
    model's C (RMST) interval lies above 0.5. A rare event (rossi cut to 8 arrests) that no test row
    has: the Cox reference's empty row is explained by that, not by the true occurrence, and the
    event is named with its 0, for one event too."""
    from lifelines.datasets import load_rossi

    from flows.lib.ingest import write_follow_up_dataset
    from flows.lib.modeling.version_text import summary_lines

    params = TrainParams(models=("CET",), hidden=8, max_epochs=3, patience=2)
    rossi = load_rossi()
    noise = rossi.assign(**{f"z{i}": np.random.default_rng(i).standard_normal(len(rossi)) for i in range(3)})
    ds_dir = write_follow_up_dataset(tmp_path / "noise", noise, ["z0", "z1", "z2"], {"arrest": ("week", "arrest")},
                                     name="noise", time_unit="weeks")
    lines = summary_lines(train_version(ds_dir, tmp_path / "models", "noise", params)[0])
    assert ("  no model's C (RMST) interval lies above 0.5 (CET, Cox (reference)): on these 87 test rows none is shown "
            "to rank better than chance") in lines
    # a feature that tells early arrests apart (a planted one: rossi's own give intervals that hold 0.5 on 87 rows)
    telling = rossi.assign(early=rossi["arrest"] * (53 - rossi["week"]) / 52
                           + 0.3 * np.random.default_rng(9).standard_normal(len(rossi)))
    ds_dir = write_follow_up_dataset(tmp_path / "telling", telling, ["early", "age"], {"arrest": ("week", "arrest")},
                                     name="telling", time_unit="weeks")
    lines = summary_lines(train_version(ds_dir, tmp_path / "models", "telling", params)[0])
    assert not any("better than chance" in line for line in lines), lines
    rare = rossi.copy()
    rare.loc[rare.index[rare["arrest"] == 1][8:], "arrest"] = 0
    ds_dir = write_follow_up_dataset(tmp_path / "rare", rare, ["fin", "age", "prio"], {"arrest": ("week", "arrest")},
                                     name="rare", time_unit="weeks")
    assert int(load_dataset(ds_dir).test.S.sum()) == 0
    lines = summary_lines(train_version(ds_dir, tmp_path / "models", "rare", params)[0])
    assert ("  Cox (reference): no figure on these data: each of its measures needs the "
            "event observed in some test rows") in lines
    assert any(line.startswith("  observed in fewer than 10 test rows: arrest (0): a figure and its interval rest on "
                               "that many cases; with none, no concordance") for line in lines), lines
    # a promotion judged on those validation rows says how many cases it rests on
    from flows.lib.infra import registry
    from flows.lib.modeling.promotion import promoted_on_candidate_rows

    first = tmp_path / "models" / "rare" / "v0001"
    assert registry.decide(tmp_path / "models", "rare", first, registry.Rule(metric="val_ci_rmst"))["promoted"]
    second, _ = train_version(ds_dir, tmp_path / "models", "rare", TrainParams(**{**vars(params), "seed": 1}))
    seen = int(load_dataset(ds_dir).val.S.sum())
    assert 0 < seen < 10
    compared = promoted_on_candidate_rows(tmp_path / "models", "rare", second, ds_dir, "val_ci_rmst", KEY)
    assert compared["note"].endswith(f"; arrest observed in {seen} of these rows: the comparison rests on that many "
                                     "cases"), compared["note"]
    # four arrests, none in the validation rows (split seed 1): the concordance is undefined there,
    # and the rule says it cannot judge rather than that the candidate is worse
    rare.loc[rare.index[rare["arrest"] == 1][4:], "arrest"] = 0
    ds_dir = write_follow_up_dataset(tmp_path / "four", rare, ["fin", "age", "prio"], {"arrest": ("week", "arrest")},
                                     name="four", time_unit="weeks", seed=1)
    assert int(load_dataset(ds_dir).val.S.sum()) == 0
    first, _ = train_version(ds_dir, tmp_path / "models", "four", params)
    registry.decide(tmp_path / "models", "four", first, registry.Rule(metric="val_ci_rmst"))
    second, _ = train_version(ds_dir, tmp_path / "models", "four", TrainParams(**{**vars(params), "seed": 1}))
    compared = promoted_on_candidate_rows(tmp_path / "models", "four", second, ds_dir, "val_ci_rmst", KEY)
    assert compared["note"].startswith("the same data as v0001, whose val_ci_rmst is undefined there: both scored")
    assert compared["note"].endswith("; arrest observed in 0 of these rows: the comparison rests on that many cases")
    decision = registry.decide(tmp_path / "models", "four", second, registry.Rule(metric="val_ci_rmst"),
                               rescored=compared)
    assert not decision["promoted"] and "undefined for the candidate (a concordance needs the event observed in some " \
        "validation rows), so the rule cannot judge it: kept v0001" in decision["reason"]


def _cured_cohort(n: int, follow_up: float, seed: int = 0):
    """A cohort of ``n`` subjects, half of whom ever have the event (log-normal times, median 12),
    each followed for ``follow_up``, with one feature that tells nothing."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    t_true, c = rng.lognormal(np.log(12.0), 0.5, n), rng.random(n) < 0.5
    seen = c & (t_true <= follow_up)
    return pd.DataFrame({"id": np.arange(n), "x": rng.standard_normal(n),
                         "t": np.where(seen, t_true, follow_up), "s": seen.astype(int)})


@pytest.mark.slow  # two fits at the default budget: CI runs it, the quick loop leaves it out
@pytest.mark.parametrize("follow_up,beyond", [(10.0, True), (1000.0, False)])
def test_the_summary_and_scoring_say_how_much_of_p_ever_lies_after_the_follow_up(tmp_path, caplog, follow_up, beyond):
    """Followed to 10 while most events would come later (median 12): CET places much of P(ever)
    after every row's follow-up ended, on the log-normal tail alone; the version records how much,
    the summary names the event with the risk by the follow-up beside Kaplan-Meier's, and scoring
    new rows warns of it. Followed to 1000 (every event seen): nothing is said."""
    from flows.lib.ingest import write_follow_up_dataset
    from flows.lib.modeling.predict import score
    from flows.lib.modeling.version_text import summary_lines

    table = _cured_cohort(1000, follow_up)
    ds_dir = write_follow_up_dataset(tmp_path / "cured", table, ["x"], {"e": ("t", "s")}, name="cured",
                                     time_unit="days", id_column="id")
    params = TrainParams(models=("CET",), hidden=8)  # the default budget
    version, _ = train_version(ds_dir, tmp_path / "models", "cured", params)
    record = json.loads((version / "metrics.json").read_text())["beyond_follow_up"]["test"]["CET"]["e"]
    tr = load_dataset(ds_dir).train
    assert record["follow_up"] == pytest.approx(tr.T.max())  # half the rows are followed to the end
    assert record["km_by_follow_up"] == pytest.approx(tr.S.mean())  # all followed alike: KM is the observed share
    assert record["km_split_by_follow_up"] == pytest.approx(load_dataset(ds_dir).test.S.mean())
    assert record["by_follow_up"] == pytest.approx(record["km_by_follow_up"], abs=0.06)
    assert record["beyond"] == pytest.approx(record["p_ever"] - record["by_follow_up"])
    lines = "\n".join(summary_lines(version))
    said = ("CET places part of P(ever) after the training follow-up (the last time at least 10 training rows were "
            "still followed), where it rests on the log-normal tail")
    table.drop(columns=["t", "s"]).to_csv(tmp_path / "new.csv", index=False)
    with caplog.at_level("WARNING", logger="flows.predict"):
        score(tmp_path / "new.csv", version, tmp_path / "scores.parquet")
    warned = [r.getMessage() for r in caplog.records if "of P(ever)" in r.getMessage()]
    if beyond:
        assert 0.2 < record["share_beyond"] and record["p_ever"] > record["by_follow_up"] + 0.05, record
        assert (
            said in lines
            and f"    e: P(ever) {record['p_ever']:.3f} on average over the test rows, "
            f"{record['by_follow_up']:.3f} by {record['follow_up']:g} days (Kaplan-Meier "
            f"{record['km_split_by_follow_up']:.3f} on the test rows, {record['km_by_follow_up']:.3f} on the training "
            f"rows): {100 * record['share_beyond']:.0f} % after"
            in lines
        ), lines
        # and the Kaplan-Meier curve still rises at the end: how many ever will is not in the data
        printed = lines.splitlines()
        rising = [printed[i + 1] for i, ln in enumerate(printed) if "Kaplan-Meier risk still rises at the end" in ln]
        assert record["km_last_quarter"] >= 0.1 * record["km_by_follow_up"] > 0, record
        end = record["follow_up"]
        in_quarter = (tr.S[:, 0] > 0.5) & (tr.T[:, 0] > 0.75 * end) & (tr.T[:, 0] <= end)
        assert record["km_last_quarter_events"] == in_quarter.sum() > 4, record  # the interval rests on them
        low, high = record["km_last_quarter_ci"]
        assert 0 < low < record["km_last_quarter"] < high, record
        assert len(rising) == 1 and rising[0] == (
            f"    e: +{record['km_last_quarter']:.3f} [{low:.3f}, {high:.3f}], {in_quarter.sum()} events in the last "
            f"quarter, of {record['km_by_follow_up']:.3f} by the end"), lines
        assert len(warned) == 1 and warned[0].startswith("new.csv: p_e: ") and \
            f"by {record['follow_up']:g} days, the end of e's training follow-up: the last time at least 10 training " \
            "rows were still followed) is placed after it" in warned[0], warned
        # a version trained before the follow-up's end was recorded: scored all the same, and it says
        # that the check was not made instead of saying nothing
        data = json.loads((version / "data.json").read_text())
        for v in data["follow_up"].values():
            del v["followed_until"]
        (version / "data.json").write_text(json.dumps(data))
        caplog.clear()
        with caplog.at_level("INFO", logger="flows.predict"):
            score(tmp_path / "new.csv", version, tmp_path / "scores-old.parquet")
        messages = [r.getMessage() for r in caplog.records]
        assert not [m for m in messages if "is placed after it" in m], messages
        assert any(m.startswith("new.csv: this model version does not record the end of its training follow-up")
                   for m in messages), messages
    else:
        assert record["share_beyond"] < 0.05, record
        assert said not in lines and not warned
        assert record["km_last_quarter"] == 0.0 and "still rises" not in lines  # every event seen: a plateau
        assert record["km_last_quarter_ci"] == [None, None]  # no event in the last quarter: no interval


def test_a_stand_in_records_the_true_occurrence_beside_p_ever(tmp_path):
    """Where the data know who ever has the event (a stand-in), the record of P(ever) past the
    follow-up holds the true share of the test rows, so that the extrapolation can be checked."""
    synth = synthetic.write(tmp_path / "synthetic", n=400, split_sizes=(240, 80, 80))
    version, _ = train_version(synth, tmp_path / "models", "synthetic",
                               TrainParams(models=("CET", "BC"), hidden=8, max_epochs=3, patience=2))
    record = json.loads((version / "metrics.json").read_text())["beyond_follow_up"]["test"]
    te = load_dataset(synth).test
    assert set(record) == {"CET"}  # BC has no P(ever) of its own
    assert [record["CET"][e]["true_share"] for e in ("T1", "T2")] == pytest.approx(te.C.mean(axis=0))
    # and the share that has it by the follow-up's end: what the risk by it estimates
    tr = load_dataset(synth).train
    ends = [np.sort(tr.T[:, j])[-10] for j in range(2)]
    by_end = [np.mean((te.C[:, j] == 1) & (np.nan_to_num(te.T_true[:, j], nan=np.inf) <= ends[j])) for j in range(2)]
    assert [record["CET"][e]["true_by_follow_up"] for e in ("T1", "T2")] == pytest.approx(by_end)
    assert all(
        0 < b < s for b, s in zip(by_end, te.C.mean(axis=0), strict=True)
    )  # some of the truth lies after the end


def test_the_default_presets_follow_the_truth_and_leave_cet_paper_to_whoever_names_it(tmp_path):
    """With the true occurrence: CET, ET, BC and the Oracle; without it: CET and ET (BC, scored only
    against the truth, would have no figure). CET-paper (the paper's objective) trains when a run
    names it, and the paper-format comparison keeps it."""
    from cet_model.choices import PAPER_PRESETS
    from flows.lib.modeling.train_eval import default_presets

    synth = synthetic.write(tmp_path / "syn", n=400, split_sizes=(240, 80, 80))
    ds = load_dataset(synth)
    assert default_presets(ds.train, ds.val, ds.test) == ("CET", "ET", "BC", "Oracle")
    for split in (ds.val, ds.test):
        split.C[:] = np.nan
    assert default_presets(ds.train, ds.val, ds.test) == ("CET", "ET")
    assert "CET-paper" in PAPER_PRESETS
    version, _ = train_version(synth, tmp_path / "models", "syn",
                               TrainParams(models=("CET", "CET-paper"), hidden=4, max_epochs=1))
    assert list(json.loads((version / "metrics.json").read_text())["test"]) == ["CET", "CET-paper"]
