"""build-table-dataset: a user's own table (CSV or parquet) -> a dataset folder, under the Prefect harness.

Real data: lifelines' rossi (432 released prisoners, weeks to re-arrest), written as the CSV a
user would have.
"""

import json
import re

import numpy as np
import polars as pl
import pytest

from cet_model.dataset import load_dataset
from flows import table as table_flow
from flows.lib.flow_params import TableBuildParams
from flows.lib.ingest import write_follow_up_dataset

COLUMNS = ["fin", "age", "race", "wexp", "mar", "paro", "prio"]


@pytest.fixture
def rossi_csv(tmp_path, monkeypatch):
    from lifelines.datasets import load_rossi

    monkeypatch.setenv("CET_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "rossi.csv"
    load_rossi().to_csv(path, index=False)
    return path


def test_a_csv_becomes_the_dataset_the_library_writes_and_a_rerun_is_skipped(rossi_csv, tmp_path):
    argv = ["--table", str(rossi_csv), "--name", "rossi", "--event", "arrest=week,arrest", "--time-unit", "weeks",
            "--seed", "3"]
    assert table_flow.main(argv) == 0
    out = tmp_path / "data" / "rossi"  # default folder: $CET_DATA_DIR/<name>
    ds = load_dataset(out)
    assert ds.feature_names == COLUMNS  # every column but the event's two, in the table's order
    assert ds.manifest["time_unit"] == "weeks" and ds.manifest["censoring"]["kind"] == "follow-up"
    same = write_follow_up_dataset(tmp_path / "lib", pl.read_csv(rossi_csv), COLUMNS,
                                   {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks", seed=3)
    for name in ("features.parquet", "events.parquet"):
        assert pl.read_parquet(out / name).equals(pl.read_parquet(same / name)), name
    stamp = (out / ".stage.json").read_text()
    written = (out / "features.parquet").stat().st_mtime_ns
    assert table_flow.main(argv) == 0  # same table, same options: skipped
    assert (out / "features.parquet").stat().st_mtime_ns == written and (out / ".stage.json").read_text() == stamp
    assert table_flow.main([*argv[:-1], "4"]) == 0  # another split seed: built again
    assert json.loads((out / "manifest.json").read_text())["seeds"] == {"split": 4}
    assert (out / ".stage.json").read_text() != stamp


def test_without_a_prefect_server_the_command_builds_in_its_own_process(rossi_csv, tmp_path, monkeypatch):
    """With no Prefect server configured, ``flows.table`` builds in its own process, Prefect not even
    imported and no temporary server: no flow run, the same folder as the flow's build, and each
    skips a build the other made of the same table and options."""
    import time

    from tests.flows.own_process import flow_runs, the_flow_builds_the_same, without_server

    argv = ["--table", str(rossi_csv), "--name", "rossi", "--event", "arrest=week,arrest", "--time-unit", "weeks"]
    here, flown = tmp_path / "here", tmp_path / "flown"
    before = flow_runs("build-table-dataset")
    t0 = time.perf_counter()
    log = without_server("flows.table", argv, here, tmp_path, timeout=120)
    seconds = time.perf_counter() - t0
    assert re.search(r"\| INFO +\| flows\.table - rossi: 7 features", log)  # the build's log still shows
    assert seconds < 20, seconds  # under a second on a 2-core machine; with a temporary server, about 10 s
    assert flow_runs("build-table-dataset") == before
    the_flow_builds_the_same(table_flow.main, argv, here, flown, "build-table-dataset", before, monkeypatch)


def test_without_a_prefect_server_evaluate_trains_and_reports_in_its_own_process(rossi_csv, tmp_path, monkeypatch):
    """With no Prefect server configured, ``flows.train evaluate`` trains, registers, judges and
    reports in its own process, Prefect not even imported: no flow run. The flow, on the same
    data and options, reuses the version the command registered."""
    from prefect.settings import PREFECT_API_URL

    from flows import train as train_flow
    from flows.lib.infra import registry
    from tests.flows.own_process import flow_runs, run_without_server

    def evaluate_runs() -> int:
        return flow_runs("train-evaluate")

    for name, value in {"MODELS_DIR": tmp_path / "models", "REPORTS_DIR": tmp_path / "reports", "MAX_EPOCHS": 5,
                        "PATIENCE": 3, "HIDDEN": 8}.items():
        monkeypatch.setenv(f"CET_{name}", str(value))
    assert table_flow.main(["--table", str(rossi_csv), "--name", "rossi", "--event", "arrest=week,arrest",
                            "--time-unit", "weeks"]) == 0
    before = evaluate_runs()
    argv = ["evaluate", "--dataset", "rossi", "--models", "CET,ET"]
    out = run_without_server("flows.train", argv, tmp_path)
    assert re.search(r"\| INFO +\| flows\.train - rossi: registered \S+v0001$", out.stderr, flags=re.M)
    assert "v0001: the first version: nothing was promoted before" in out.stdout  # the decision, then the metrics
    assert re.search(r"^  CET +0\.\d{3} \[", out.stdout, flags=re.M)
    version = tmp_path / "models" / "rossi" / "v0001"
    assert registry.promoted(tmp_path / "models", "rossi") == version
    assert (version / "model_card.md").is_file() and (tmp_path / "reports" / "rossi" / "report.md").is_file()
    assert evaluate_runs() == before
    with monkeypatch.context() as served:  # the test harness's server named as a user names theirs: a flow run
        served.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
        assert train_flow.main(argv) == 0
    assert evaluate_runs() == before + 1
    assert registry.versions(tmp_path / "models", "rossi") == ["v0001"]  # reused, not trained again


def test_without_a_prefect_server_retrain_rebuilds_and_trains_in_its_own_process(rossi_csv, tmp_path, monkeypatch):
    """With no Prefect server configured, ``flows.train retrain`` rebuilds the dataset as it was built and
    trains in its own process, Prefect not even imported: no flow run. Unchanged, the build is skipped;
    with the file refreshed it is rebuilt and a new version judged against the promoted one. The flow,
    on the same data and options, skips the build and reuses that version."""
    from prefect.settings import PREFECT_API_URL

    from flows import train as train_flow
    from flows.lib.infra import registry
    from tests.flows.own_process import flow_runs, run_without_server

    def runs() -> tuple[int, int, int]:
        return flow_runs("retrain"), flow_runs("build-table-dataset"), flow_runs("train-evaluate")

    for name, value in {"MODELS_DIR": tmp_path / "models", "REPORTS_DIR": tmp_path / "reports", "MAX_EPOCHS": 3,
                        "PATIENCE": 3, "HIDDEN": 8}.items():
        monkeypatch.setenv(f"CET_{name}", str(value))
    assert table_flow.main(["--table", str(rossi_csv), "--name", "rossi", "--event", "arrest=week,arrest",
                            "--time-unit", "weeks", "--features", "fin,age,prio"]) == 0
    before = runs()
    argv = ["retrain", "--dataset", "rossi", "--promote-tolerance", "1.0", "--promote-evidence", "not-worse"]
    out = run_without_server("flows.train", argv, tmp_path)
    assert re.search(r"\| INFO +\| flows\.table - build-table-dataset: inputs, parameters and code unchanged: skipping",
                     out.stderr), out.stderr[-2000:]
    assert "v0001: the first version: nothing was promoted before" in out.stdout
    pl.read_csv(rossi_csv).head(400).write_csv(rossi_csv)  # the file refreshed: rebuilt from the same file
    out = run_without_server("flows.train", argv, tmp_path)
    assert re.search(r"\| INFO +\| flows\.table - rossi: 3 features \(fin, age, prio\)", out.stderr)
    assert re.search(r"v0002: val_ci_rmst \S+ vs \S+ for v0001 on (\d+ of )?v0002's (\d+ )?validation rows", out.stdout)
    assert sum(load_dataset(tmp_path / "data" / "rossi").manifest["split_sizes"].values()) == 400
    assert runs() == before
    with monkeypatch.context() as served:  # the test harness's server named as a user names theirs: a flow run
        served.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
        assert train_flow.main(argv) == 0
    assert runs() == tuple(n + 1 for n in before)  # retrain, its build and its train-evaluate as flow runs
    assert registry.versions(tmp_path / "models", "rossi") == ["v0001", "v0002"]  # skipped and reused


def test_named_features_id_and_split_columns(rossi_csv, tmp_path):
    frame = pl.read_csv(rossi_csv).with_row_index("subject").with_columns(
        part=pl.Series(["train"] * 300 + ["val"] * 66 + ["test"] * 66))
    frame.write_parquet(tmp_path / "rossi.parquet")
    out = table_flow.build_table_dataset(TableBuildParams(
        table=str(tmp_path / "rossi.parquet"), name="rossi2", events={"arrest": ("week", "arrest")},
        time_unit="weeks", id_column="subject", split_column="part"))
    ds = load_dataset(out)
    assert ds.feature_names == COLUMNS  # id and split columns are not features
    assert ds.manifest["split_sizes"] == {"train": 300, "val": 66, "test": 66}
    assert ds.train.ids.tolist() == list(range(300))
    picked = table_flow.build_table_dataset(TableBuildParams(
        table=str(rossi_csv), name="rossi3", events={"arrest": ("week", "arrest")}, time_unit="weeks",
        features=["age", "prio"]))
    assert load_dataset(picked).feature_names == ["age", "prio"]
    frame.with_columns(patient=pl.col("subject") // 2).write_csv(tmp_path / "pairs.csv")
    assert table_flow.main(["--table", str(tmp_path / "pairs.csv"), "--name", "pairs", "--event", "arrest=week,arrest",
                            "--time-unit", "weeks", "--features", "age,prio", "--group-column", "patient"]) == 0
    ds = load_dataset(tmp_path / "data" / "pairs")
    assert ds.manifest["split_by"] == "patient"
    for a, b in ((ds.train, ds.val), (ds.train, ds.test), (ds.val, ds.test)):
        assert not set((a.ids // 2).tolist()) & set((b.ids // 2).tolist())  # no patient in two splits


def test_missing_times_mask_from_the_command_line(rossi_csv, tmp_path, caplog):
    import logging

    frame = pl.read_csv(rossi_csv).with_row_index("i").with_columns(
        week2=pl.when(pl.col("i") % 5 == 0).then(None).otherwise(pl.col("week") * 1.5),
        arrest2=pl.when(pl.col("i") % 5 == 0).then(None).otherwise(pl.col("arrest"))).drop("i")
    frame.write_csv(tmp_path / "two.csv")
    with caplog.at_level(logging.INFO):
        assert table_flow.main(["--table", str(tmp_path / "two.csv"), "--name", "two", "--event", "arrest=week,arrest",
                                "--event", "second=week2,arrest2", "--time-unit", "weeks", "--missing-times",
                                "mask"]) == 0
    ds = load_dataset(tmp_path / "data" / "two")
    assert ds.feature_names == COLUMNS and sum(ds.manifest["censoring"]["masked"]["second"].values()) == 87
    assert "two: second left out where its time is missing: train" in caplog.text



def test_a_status_column_from_the_command_line(rossi_csv, tmp_path):
    """--event NAME=TIME,STATUS:CODE: one event per code of a status column, stratified on both."""
    frame = pl.read_csv(rossi_csv).with_row_index("i")
    status = pl.when(pl.col("arrest") == 0).then(pl.lit("none")).when(pl.col("i") % 3 == 0).then(pl.lit("violation"))
    frame.with_columns(status=status.otherwise(pl.lit("arrest"))).drop("i", "arrest").write_csv(tmp_path / "s.csv")
    assert table_flow.main(["--table", str(tmp_path / "s.csv"), "--name", "s", "--event", "arrest=week,status:arrest",
                            "--event", "violation=week,status:violation", "--time-unit", "weeks",
                            "--split-method", "stratified"]) == 0
    ds = load_dataset(tmp_path / "data" / "s")
    assert ds.feature_names == COLUMNS and ds.event_names == ["arrest", "violation"]
    seen = np.concatenate([ds.train.S, ds.val.S, ds.test.S])
    assert seen.sum(0).tolist() == [77, 37] and not (seen.sum(1) > 1).any()


def test_a_rare_event_is_counted_per_split_warned_of_and_stratified_on_request(rossi_csv, tmp_path, caplog):
    """Eight arrests in 432 rows: the random split (seed 0) leaves none in the test split, which the
    build says with the remedy; --split-method stratified spreads them."""
    import logging

    frame = pl.read_csv(rossi_csv).with_row_index("i")
    eighth = frame.filter(pl.col("arrest") == 1)["i"][7]
    frame.with_columns(arrest=pl.when(pl.col("i") > eighth).then(0).otherwise(pl.col("arrest"))).drop("i").write_csv(
        tmp_path / "rare.csv")
    argv = ["--table", str(tmp_path / "rare.csv"), "--event", "arrest=week,arrest", "--time-unit", "weeks"]
    with caplog.at_level(logging.INFO):
        assert table_flow.main([*argv, "--name", "rare"]) == 0
    assert "rare: rows with the event observed: arrest train 5, val 3, test 0" in caplog.text
    assert ("rare: arrest is observed in 3 validation and 0 test rows, fewer than 10: early stopping, promotion and "
            "the test figures rest on that many cases, and a split without one has no concordance") in caplog.text
    assert "--split-method stratified (split_method='stratified') at least spreads" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert table_flow.main([*argv, "--name", "strat", "--split-method", "stratified"]) == 0
    assert "strat: rows with the event observed: arrest train 5, val 2, test 1" in caplog.text
    assert "(the split is already stratified)" in caplog.text
    assert json.loads((tmp_path / "data" / "strat" / "manifest.json").read_text())["split_method"] == "stratified"

@pytest.mark.bad_input
def test_a_text_column_among_the_default_features_is_named_and_nothing_is_written(rossi_csv, tmp_path, capsys):
    """A bad value in the table is a usage error before any flow starts (no Prefect server, no
    traceback), naming the file, the column and the row with its line in the file."""
    frame = pl.read_csv(rossi_csv).with_columns(site=pl.lit("north"))
    frame.write_csv(tmp_path / "with_site.csv")
    with pytest.raises(SystemExit) as exit_:
        table_flow.main(["--table", str(tmp_path / "with_site.csv"), "--name", "site", "--event", "arrest=week,arrest",
                         "--time-unit", "weeks"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and re.search(
        r"error: \S+with_site\.csv: column 'site' has type String, expected numbers \(row 0 \(line 2\) is text that "
        r"is not a number\); name it as categorical .* or "
        r"encode it first or leave it out of the features", err), err
    assert not (tmp_path / "data" / "site").exists() and "Traceback" not in err
    frame.with_columns(pl.when(pl.int_range(pl.len()) == 5).then(0).otherwise(pl.col("week")).alias("week")).drop(
        "site").write_csv(tmp_path / "zero.csv")
    with pytest.raises(SystemExit):
        table_flow.main(["--table", str(tmp_path / "zero.csv"), "--name", "zero", "--event", "arrest=week,arrest",
                         "--time-unit", "weeks"])
    assert re.search(r"error: \S+zero\.csv: column 'week' row 5 \(line 7\) is 0; values must be finite and > 0",
                     capsys.readouterr().err)
    assert not (tmp_path / "data" / "zero").exists()


@pytest.mark.bad_input
@pytest.mark.parametrize("argv, message", [
    (["--event", "arrest=week"], "--event: 'arrest=week': expected NAME=TIME_COLUMN,INDICATOR_COLUMN"),
    (["--event", "week,arrest"], "expected NAME=TIME_COLUMN,INDICATOR_COLUMN"),
    (["--event", "a=week,arrest", "--event", "a=week,arrest"], "--event: an event name is given twice"),
    (["--event", "arrest=week,arrest", "--name", "my data"], "error: --name: String should match pattern "
                                                              "'^[A-Za-z0-9][A-Za-z0-9_.-]*$', got 'my data'\n"),
    (["--event", "arrest=week,arrest", "--table", "/no/such.csv"], "--table /no/such.csv: no such file"),
    (["--event", "arrest=week,arrest", "--id-column", ""], "error: --id-column: String should have at least 1 "
                                                           "character, got ''\n"),
])
def test_bad_options_are_usage_errors(rossi_csv, argv, message, capsys):
    base = {"--table": str(rossi_csv), "--name": "rossi", "--time-unit": "weeks"}
    for flag in ("--table", "--name"):
        if flag in argv:
            base.pop(flag)
    args = [x for kv in base.items() for x in kv] + argv
    with pytest.raises(SystemExit) as exc:
        table_flow.main(args)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_retrain_rebuilds_a_table_dataset_from_its_file_when_the_file_changes(rossi_csv, tmp_path, monkeypatch,
                                                                               capsys):
    """The scheduled retrain on a user's table: nothing changed -> the version is reused; the file
    refreshed (here: the last 32 subjects' rows withdrawn) -> rebuilt from the same file, retrained,
    and the promoted version compared with it on the new validation rows it did not train on."""
    from flows import train as train_flow
    from flows.lib.flow_params import RetrainParams
    from flows.lib.infra import registry

    for name, value in {"MODELS_DIR": tmp_path / "models", "MAX_EPOCHS": 3, "PATIENCE": 3, "HIDDEN": 16}.items():
        monkeypatch.setenv(f"CET_{name}", str(value))
    monkeypatch.chdir(tmp_path)  # the table given by a relative name ...
    assert table_flow.main(["--table", "rossi.csv", "--name", "rossi", "--event", "arrest=week,arrest",
                            "--time-unit", "weeks", "--features", "fin,age,prio"]) == 0
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # ... and retrain run from another folder
    first = train_flow.retrain(RetrainParams(dataset="rossi"))
    assert first["version"].endswith("v0001") and first["decision"]["metric"] == "val_ci_rmst"
    again = train_flow.retrain(RetrainParams(dataset="rossi"))
    assert again["reused"] and registry.versions(tmp_path / "models", "rossi") == ["v0001"]
    pl.read_csv(rossi_csv).head(400).write_csv(rossi_csv)
    capsys.readouterr()
    assert train_flow.main(["retrain", "--dataset", "rossi", "--promote-tolerance", "1.0", "--promote-evidence",
                            "not-worse"]) == 0
    out = capsys.readouterr().out
    assert registry.versions(tmp_path / "models", "rossi") == ["v0001", "v0002"]
    assert re.search(r"v0002: val_ci_rmst \S+ vs \S+ for v0001 on (\d+ of )?v0002's (\d+ )?validation rows", out), out
    assert re.search(r"\n  v0001 was trained on other data: both rescored on .* "
                     r"\(val_ci_rmst .*; candidate minus v0001 "
                     r"[+-]\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\], 95% paired bootstrap interval; v0001 "
                     r"recorded", out), out
    assert "(higher is better, tolerance 1.0, evidence not-worse): not shown worse (candidate minus v0001 " in out
    # built without --id-column: the ids are row numbers, and the note says what that assumes
    assert "the ids are the table's row numbers, so rows are matched by their place in the table" in out
    ds = load_dataset(tmp_path / "data" / "rossi")
    assert sum(ds.manifest["split_sizes"].values()) == 400 and ds.feature_names == ["fin", "age", "prio"]
    rossi_csv.rename(tmp_path / "moved.csv")  # the file moved: a usage error that says what to do
    with pytest.raises(SystemExit):
        train_flow.main(["retrain", "--dataset", "rossi"])
    assert (f"dataset rossi was built from {rossi_csv.resolve()} (--table), which no longer exists: build it once "
            "from its new place (python -m flows.table --table NEW ...") in capsys.readouterr().err


@pytest.mark.bad_input
@pytest.mark.parametrize("server", [True, False], ids=["flow", "own-process"])
def test_retrain_of_a_table_that_no_longer_builds_ends_with_one_line(rossi_csv, tmp_path, monkeypatch, capsys,
                                                                     server):
    """The user's file gained a row the build refuses (text in a numeric column): retrain, which
    finds it only when it rebuilds, ends with exit status 1 and one line naming the file, the column
    and the row, never the cell, as ``flows.table`` does before a build. It ended with a traceback.
    The dataset built before and the registry are left as they were."""
    from prefect.settings import PREFECT_API_URL

    from flows import train as train_flow

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("CET_MODELS_DIR", str(tmp_path / "models"))
    assert table_flow.main(["--table", str(rossi_csv), "--name", "rossi", "--event", "arrest=week,arrest",
                            "--time-unit", "weeks"]) == 0
    built = tmp_path / "data" / "rossi"
    before = {p.name: p.read_bytes() for p in built.iterdir() if p.is_file()}
    with open(rossi_csv, "a") as fh:
        fh.write("20,1,0,secret-value,0,0,0,0,3\n")  # the new row's age is text
    if server:
        monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
    with pytest.raises(SystemExit) as stop:
        train_flow.main(["retrain", "--dataset", "rossi"])
    err = capsys.readouterr().err
    assert stop.value.code == 1
    last = err.rstrip().splitlines()[-1]
    assert last.startswith(f"python -m flows.train: {rossi_csv}: column 'age' ") and "row 432 (line 434)" in last, last
    assert "secret-value" not in err
    assert server or "Traceback" not in err, err[-2000:]  # a flow run's log shows the failed task's traceback
    assert {p.name: p.read_bytes() for p in built.iterdir() if p.is_file()} == before
    assert not (tmp_path / "models" / "rossi").exists()


@pytest.mark.bad_input
def test_retrain_of_a_name_with_nothing_to_rebuild_from_is_a_usage_error(rossi_csv, tmp_path, capsys):
    from flows import train as train_flow

    with pytest.raises(SystemExit) as exc:
        train_flow.main(["retrain", "--dataset", "cohort"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "dataset cohort: not one of synthetic, mimic, reddit" in err
    assert str(tmp_path / "data" / "cohort") in err


def test_imputed_table_trains_and_new_rows_with_gaps_are_filled_as_the_build_did(rossi_csv, tmp_path, monkeypatch,
                                                                                    caplog, capsys):
    import logging

    import numpy as np

    from cet_model import load_model
    from flows import predict as predict_flow
    from flows import train as train_flow

    for name, value in {"MODELS_DIR": tmp_path / "models", "MAX_EPOCHS": 3, "PATIENCE": 3, "HIDDEN": 16}.items():
        monkeypatch.setenv(f"CET_{name}", str(value))
    frame = pl.read_csv(rossi_csv).with_columns(
        age=pl.when(pl.int_range(pl.len()) % 9 == 0).then(None).otherwise(pl.col("age")),
        site=pl.Series(["north", "south", "east"] * 144))
    frame.write_csv(tmp_path / "gaps.csv")  # 48 subjects without age: empty cells; a site as text
    build = ["--table", str(tmp_path / "gaps.csv"), "--event", "arrest=week,arrest", "--time-unit", "weeks",
             "--features", "fin,age,prio", "--categorical", "site"]
    with pytest.raises(SystemExit):  # a usage error before the flow, naming the file and its line
        table_flow.main([*build, "--name", "plain"])
    assert re.search(r"gaps\.csv: column 'age' row 0 \(line 2\) is missing \(null\)", capsys.readouterr().err)
    assert table_flow.main([*build, "--name", "gaps", "--impute", "median"]) == 0
    median = json.loads((tmp_path / "data" / "gaps" / "manifest.json").read_text())["featurization"]["medians"]["age"]
    capsys.readouterr()  # the builds' output
    with pytest.raises(SystemExit) as usage:  # a subgroup column the dataset lacks: refused before training
        train_flow.main(["evaluate", "--dataset", "gaps", "--subgroups", "site,sex"])
    assert usage.value.code == 2 and "subgroups: ['sex'] not among the dataset's categorical columns or features: " \
        "['site', 'fin', 'age', 'prio']" in capsys.readouterr().err
    assert not (tmp_path / "models" / "gaps").exists()
    with caplog.at_level(logging.INFO):
        assert train_flow.main(["evaluate", "--dataset", "gaps", "--models", "CET,ET", "--subgroups", "site,fin"]) == 0
    printed = capsys.readouterr().out.splitlines()
    version_dir = tmp_path / "models" / "gaps" / "v0001"
    summary = json.loads((version_dir / "metrics.json").read_text())["summary"]
    # a report for a dataset without the truth: every figure it links exists, and no AUC against the truth
    report = (tmp_path / "reports" / "gaps" / "report.md").read_text()
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", report)
    assert linked == ["survival.png", "calibration-horizon.png", "decision-curve.png", "p-ever.png"], linked
    for png in linked:
        assert (tmp_path / "reports" / "gaps" / png).read_bytes()[:4] == b"\x89PNG"
    assert "| arrest | " in report and "Against the true occurrence" not in report and "built from your data" in report
    # CET's mean P(ever) against the Kaplan-Meier risk where 10 test rows are still followed, with its interval
    assert re.search(r"\| arrest \| [0-9.]+ \| [0-9.]+ \| 0\.[0-9]{3} \(0\.[0-9]{3}-0\.[0-9]{3}\) \|", report), report
    # the cumulative incidence at the quartiles of the training follow-up, to three significant digits
    from cet_model.dataset import load_dataset
    from flows.lib.modeling.dataset_report import incidence_horizons
    horizons = incidence_horizons(load_dataset(tmp_path / "data" / "gaps").train.T[:, 0])
    assert horizons and all(len(f"{h:g}".replace(".", "")) <= 3 for h in horizons)
    for h in horizons:
        assert re.search(rf"\| arrest \| {h:g} \| 0\.[0-9]{{3}} \| 0\.[0-9]{{3}} \| 0\.[0-9]{{3}} \|", report), report
    assert "| model | event | MRAE | C (RMST) | Harrell's C | Uno's C | IBS |" in report  # the like-for-like C first
    assert re.search(rf"\| CET \| average \| [0-9.]+ \| {summary['CET']['test_ci_rmst']:.3f} \| "
                     rf"{summary['CET']['test_ci']:.3f} \|", report) and "C (RMST) ranks every model" in report
    card = (version_dir / "model_card.md").read_text()
    assert "built from your data" in card and "No true occurrence in these data" in card
    sizes = json.loads((version_dir / "data.json").read_text())["split_sizes"]
    assert (f"time in weeks; {sizes['train']} training, {sizes['val']} validation and {sizes['test']} test rows."
            in card) and re.search(r"- arrest: longest training follow-up \d+ weeks\n", card)
    assert "python -m flows.train evaluate --dataset gaps --models CET,ET" in card
    assert f"| CET | {summary['CET']['test_ci_rmst']:.3f} | {summary['CET']['test_ci']:.3f} |" in card
    assert printed[0].startswith(f"{version_dir}: the first version") and printed[1].startswith("test split, averages")
    assert printed[2].split() == ["model", "Harrell's", "C", "C", "(RMST)", "Uno's", "C", "IBS", "MRAE", "risk", "vs",
                                  "KM", "AUC", "at", "h"]  # no AUC/ECE against the truth: the AUC of the risk by h
    cells = printed[3].split()
    assert cells[0] == "CET" and cells[1] == f"{summary['CET']['test_ci']:.3f}" and printed[4].split()[0] == "ET"
    # with the paired bootstrap interval of C, and CET minus ET with its own interval
    bounds = json.loads((version_dir / "metrics.json").read_text())["intervals"]["test"]
    low, high = (bounds["metrics"]["ci"]["CET"][k] for k in ("low", "high"))
    assert cells[2:4] == [f"[{low:.3f},", f"{high:.3f}]"] and low < summary["CET"]["test_ci"] < high
    # no truth: the classical reference (a Cox fit per event) in the Oracle's place, no AUC at h or MRAE
    ref = printed[5].split()
    assert ref[:3] == ["Cox", "(reference)", f"{summary['Cox (reference)']['test_ci']:.3f}"] and ref[-3:] == ["-"] * 3
    assert printed[6].startswith("  Harrell's and Uno's C rank CET's time given that the event happens, Cox "
                                 "(reference)'s risk")
    printed = printed[:6] + printed[7:]  # the lines below are counted without that note
    assert printed[6].startswith("[ ]: 95% paired bootstrap interval (200 resamples of the 87 test rows")
    assert printed[7].split() == ["CET", "minus", "Harrell's", "C", "C", "(RMST)", "AUC", "at", "h"]
    assert printed[9].split()[:2] == ["Cox", "(reference)"] and printed[9].split()[-1] == "-"
    printed = printed[:5] + printed[6:]  # the lines below are counted without the reference row
    diff, diff_h = bounds["differences"]["ci"]["ET"], bounds["differences"]["auc_h"]["ET"]
    diff_r = bounds["differences"]["ci_rmst"]["ET"]
    assert cells[4] == f"{summary['CET']['test_ci_rmst']:.3f}"
    assert printed[7].split() == ["ET", f"{summary['CET']['test_ci'] - summary['ET']['test_ci']:+.3f}",
                                  f"[{diff['low']:+.3f},", f"{diff['high']:+.3f}]",
                                  f"{summary['CET']['test_ci_rmst'] - summary['ET']['test_ci_rmst']:+.3f}",
                                  f"[{diff_r['low']:+.3f},", f"{diff_r['high']:+.3f}]", f"{diff_h['estimate']:+.3f}",
                                  f"[{diff_h['low']:+.3f},", f"{diff_h['high']:+.3f}]"]
    # no truth anywhere: said once, not once per model and split; the log line shows the validation C
    assert caplog.text.count("the true occurrence is known for no validation or test row") == 1
    assert "the true occurrence is not known for" not in caplog.text
    assert re.search(r"gaps CET: \d+ epochs \(\+\d+ encoder-only\), [\d.]+s, scored in [\d.]+s, "
                     r"val C \(RMST\) 0\.\d{3}, validation risk by "
                     r"the median follow-up vs Kaplan-Meier by risk group: mean abs. difference 0\.\d{3}", caplog.text)
    caplog.clear()
    # calibration without truth: risk by the median training follow-up against Kaplan-Meier per risk group
    from cet_model.bootstrap import bootstrap_intervals
    from cet_model.dataset import load_dataset as load
    from cet_model.evaluation import ranking_inputs, rmst_horizons
    from cet_model.metrics import concordance_index, horizon_auc, horizon_calibration

    ds = load(tmp_path / "data" / "gaps")
    h = float(np.median(ds.train.T[:, 0]))
    model = load_model(tmp_path / "models" / "gaps" / "v0001" / "CET", device="cpu")
    # by subgroup: each site (from the raw table) and each value of fin, with sizes, events and CET's C
    groups = json.loads((version_dir / "subgroups.json").read_text())["rows"]
    assert [g["group"] for g in groups] == ["site=east", "site=north", "site=south", "site missing or unseen",
                                            "fin = 0", "fin = 1"]
    site = frame["site"].to_numpy()[ds.test.ids]  # ids are the table's row numbers
    for g in groups[:3]:
        rows = site == g["group"].removeprefix("site=")
        assert g["rows"] == rows.sum() and g["events"] == ds.test.S[rows, 0].sum() and g["rows"] >= 20
        expected_c = concordance_index(
            ds.test.T[rows, 0], model.predict_time(ds.test.X[rows])[:, 0], ds.test.S[rows, 0]
        )
        assert g["ci"] == pytest.approx(expected_c, rel=1e-6) and g["auc"] is None and g["auc_interval"] is None
        # the interval: the bootstrap over this group's rows, with the training seed (0)
        sub = ds.test.take(np.flatnonzero(rows))
        again = bootstrap_intervals(sub, {"CET": ranking_inputs("CET", model, sub.X)}, seed=0)["metrics"]["ci"]["CET"]
        assert (
            g["ci_interval"] == pytest.approx([again["low"], again["high"]]) and again["low"] < g["ci"] < again["high"]
        )
        rmst = model.predict_rmst(sub.X, rmst_horizons(ds.train))[:, 0]  # C (RMST), as train-evaluate scored it
        assert g["ci_rmst"] == pytest.approx(concordance_index(sub.T[:, 0], rmst, sub.S[:, 0]), rel=1e-6)
        assert g["ci_rmst_interval"][0] < g["ci_rmst"] < g["ci_rmst_interval"][1]
    assert groups[3]["rows"] == 0 and groups[3]["ci"] is None and groups[3]["events"] is None
    assert groups[4]["rows"] + groups[5]["rows"] == len(ds.test)
    head = ("CET by subgroup, test split (no metric under 20 rows; [ ]: 95% bootstrap "
            "interval over the group's rows):")
    sub_lines = printed[printed.index(head):]
    assert (
        sub_lines[1].split()
        == ["group", "rows", "events", "Harrell's", "C", "C", "(RMST)", "risk", "vs", "KM", "AUC", "at", "h"]
        and sub_lines[2].split()[0] == "site=east"
    )
    low, high = groups[0]["ci_interval"]
    assert f"{groups[0]['ci']:.3f} [{low:.3f}, {high:.3f}]" in sub_lines[2]
    expected = horizon_calibration(
        ds.test.T[:, 0], ds.test.S[:, 0], 1 - model.predict_survival(ds.test.X, [h])[:, 0, 0], h
    )
    recorded = json.loads((tmp_path / "models" / "gaps" / "v0001" / "metrics.json").read_text())["calibration"]
    assert recorded["test"]["CET"]["arrest"]["horizon"] == h
    assert recorded["test"]["CET"]["arrest"]["ece"] == pytest.approx(expected["ece"], rel=1e-5)
    # and the cumulative/dynamic AUC of that risk at h, censoring weights from the training rows
    risk_h = 1 - model.predict_survival(ds.test.X, [h])[:, 0, 0]
    auc_h = horizon_auc(ds.train.T[:, 0], ds.train.S[:, 0], ds.test.T[:, 0], ds.test.S[:, 0], risk_h, h)
    assert recorded["test"]["CET"]["arrest"]["auc"] == pytest.approx(auc_h, rel=1e-5) and 0 < auc_h < 1
    low_h, high_h = (bounds["metrics"]["auc_h"]["CET"][k] for k in ("low", "high"))
    assert cells[-3:] == [f"{auc_h:.3f}", f"[{low_h:.3f},", f"{high_h:.3f}]"]
    assert [g["n"] for g in recorded["test"]["CET"]["arrest"]["groups"]] == [g["n"] for g in expected["groups"]]
    new = frame.head(12).with_row_index("id").select("id", "fin", "age", "prio", "site")  # rows 0, 9 lack age
    new = new.with_columns(site=pl.when(pl.col("id") == 4).then(pl.lit("west")).otherwise(pl.col("site")))
    new.write_csv(tmp_path / "new.csv")  # site raw, as in the table; row 4 at a site training never saw
    with caplog.at_level(logging.INFO, logger="flows.predict"):
        assert predict_flow.main(["--dataset", "gaps", "--features", str(tmp_path / "new.csv"),
                                  "--out", str(tmp_path / "scores.parquet"), "--horizons", "52,10"]) == 0
    # said once: the command's check before scoring reads the file quietly
    assert caplog.text.count("new.csv: filled 2 missing values with the training medians (age 2)") == 1
    said = [r for r in caplog.records if "column 'site'" in r.getMessage()]
    assert [(r.levelname, r.getMessage().split(": ", 1)[1]) for r in said] == [
        ("WARNING", "column 'site': 0 rows missing and 1 row at a level not seen in training, encoded as no level")]
    cet = load_model(tmp_path / "models" / "gaps" / "v0001" / "CET", device="cpu")
    data = json.loads((tmp_path / "models" / "gaps" / "v0001" / "data.json").read_text())
    assert data["feature_names"] == ["fin", "age", "prio", "site=east", "site=north", "site=south"]
    x = (
        new.select(
            "fin", "age", "prio", *(pl.col("site").eq(s).cast(pl.Float64).alias(s) for s in ("east", "north", "south"))
        )
        .fill_null(median)
        .to_numpy()
        .astype(float)
    )
    scores = pl.read_parquet(tmp_path / "scores.parquet")
    p = cet.predict_occurrence(x)[:, 0]
    np.testing.assert_allclose(scores["p_arrest"].to_numpy(), p, rtol=1e-6)
    # risk by 10 and by 52 weeks: P(arrest by h) = p (1 - S(h | arrest happens)), rising in h, at most P(ever)
    assert scores.columns[-2:] == ["risk_10_arrest", "risk_52_arrest"]
    r10, r52 = scores["risk_10_arrest"].to_numpy(), scores["risk_52_arrest"].to_numpy()
    np.testing.assert_allclose(r52, 1 - cet.predict_survival(x, [52.0])[:, 0, 0], rtol=1e-6)
    assert (0 < r10).all() and (r10 < r52).all() and (r52 <= p + 1e-12).all()
    # the version records how far the training rows reach; a horizon beyond it is warned of, by name
    events = pl.read_parquet(tmp_path / "data" / "gaps" / "events.parquet").filter(pl.col("split") == "train")
    assert data["follow_up"] == {
        "arrest": {
            "longest": events["t_arrest"].max(),
            "longest_observed": events.filter(pl.col("s_arrest") == 1)["t_arrest"].max(),
            "followed_until": events["t_arrest"].sort()[-10],
        }
    }  # 10 rows followed
    assert "extrapolate" not in caplog.text  # 52 weeks: within the training follow-up
    with caplog.at_level(logging.INFO, logger="flows.predict"):
        assert predict_flow.main(["--dataset", "gaps", "--features", str(tmp_path / "new.csv"),
                                  "--out", str(tmp_path / "scores.parquet"), "--horizons", "104,10"]) == 0
    longest = f"{events['t_arrest'].max():g}"
    assert (f"horizon 104 weeks is beyond the longest follow-up in the training data of arrest ({longest} weeks): "
            "risk_104_arrest extrapolates the fitted time distribution") in caplog.text
    assert "horizon 10 weeks" not in caplog.text
    assert pl.read_parquet(tmp_path / "scores.parquet").columns[-2:] == ["risk_10_arrest", "risk_104_arrest"]
    assert "far outside the training rows" not in caplog.text
    # ages given in months by mistake, in rows 1-3: counted by column, scored all the same
    lo, hi = data["feature_ranges"]["age"]
    train_age = pl.read_parquet(tmp_path / "data" / "gaps" / "features.parquet").filter(pl.col("split") == "train")[
        "age"
    ]
    assert (lo, hi) == (
        pytest.approx(float(np.quantile(train_age, 0.01))),
        pytest.approx(float(np.quantile(train_age, 0.99))),
    )
    new.with_columns(age=pl.when(pl.col("id").is_in([1, 2, 3])).then(pl.col("age") * 12).otherwise(pl.col("age"))
                     ).write_csv(tmp_path / "months.csv")
    with caplog.at_level(logging.INFO, logger="flows.predict"):
        assert predict_flow.main(["--dataset", "gaps", "--features", str(tmp_path / "months.csv"),
                                  "--out", str(tmp_path / "months.parquet")]) == 0
    assert ("months.csv: values far outside the training rows (beyond their 1st-99th percentile range widened by its "
            "width on each side; check units and data entry), rows per "
            "column: age 3; scored all the same") in caplog.text
    assert pl.read_parquet(tmp_path / "months.parquet").height == 12
    # a horizon of the user's choice (26 weeks) for calibration and the AUC at h, subgroups included
    capsys.readouterr()
    assert train_flow.main(["evaluate", "--dataset", "gaps", "--models", "CET", "--horizon", "26",
                            "--subgroups", "fin"]) == 0
    printed = capsys.readouterr().out.splitlines()
    version_dir = tmp_path / "models" / "gaps" / "v0002"
    # the same data as v0001 (the horizon changes the records, not the weights): the difference on
    # the validation rows, printed under the decision
    assert printed[1].startswith("  the same data as v0001: the recorded values are compared; candidate minus v0001 on "
                                 "the 86 validation rows +0.000 [+0.000, +0.000], 95% paired bootstrap interval")
    assert printed[2].startswith("test split, averages over events (h = 26 weeks;")
    at_26 = json.loads((version_dir / "metrics.json").read_text())["calibration"]["test"]["CET"]["arrest"]
    model = load_model(version_dir / "CET", device="cpu")
    risk_26 = 1 - model.predict_survival(ds.test.X, [26.0])[:, 0, 0]
    assert at_26["horizon"] == 26.0 and at_26["auc"] == pytest.approx(
        horizon_auc(ds.train.T[:, 0], ds.train.S[:, 0], ds.test.T[:, 0], ds.test.S[:, 0], risk_26, 26.0), rel=1e-6)
    fin_1 = json.loads((version_dir / "subgroups.json").read_text())["rows"][1]
    rows = ds.test.X[:, 0] == 1
    assert fin_1["group"] == "fin = 1" and fin_1["auc_at_h"] == pytest.approx(
        horizon_auc(ds.train.T[:, 0], ds.train.S[:, 0], ds.test.T[rows, 0], ds.test.S[rows, 0], risk_26[rows], 26.0),
        rel=1e-6)


def test_new_rows_get_the_missingness_indicators_the_build_recorded(rossi_csv, tmp_path, caplog):
    """--impute median+indicator through the CLI; predict computes <column>_missing from the raw
    gaps of new rows before filling them, and takes the dataset's own encoded rows as they are."""
    import logging

    from flows.lib.modeling.predict import read_features

    frame = pl.read_csv(rossi_csv).with_columns(
        age=pl.when(pl.int_range(pl.len()) % 9 == 0).then(None).otherwise(pl.col("age")))
    frame.write_csv(tmp_path / "gaps.csv")
    with caplog.at_level(logging.INFO):
        assert table_flow.main(["--table", str(tmp_path / "gaps.csv"), "--event", "arrest=week,arrest",
                                "--time-unit", "weeks", "--features", "fin,age,prio", "--name", "gaps",
                                "--impute", "median+indicator"]) == 0
    assert "gaps: missingness indicator columns: age_missing" in caplog.text
    ds_dir = tmp_path / "data" / "gaps"
    record = json.loads((ds_dir / "manifest.json").read_text())["featurization"]
    names = json.loads((ds_dir / "manifest.json").read_text())["feature_names"]
    assert names == ["fin", "age", "age_missing", "prio"] and record["indicators"] == ["age"]
    new = frame.head(12).with_row_index("id").select("id", "fin", "age", "prio")  # rows 0 and 9 lack age
    new.write_csv(tmp_path / "new.csv")
    ids, x = read_features(tmp_path / "new.csv", names, record)
    gap = np.isin(ids, [0, 9])
    np.testing.assert_array_equal(x[:, 2], gap.astype(float))
    assert (x[gap, 1] == record["medians"]["age"]).all() and (x[~gap, 1] == new["age"].to_numpy()[~gap]).all()
    own = pl.read_parquet(ds_dir / "features.parquet")  # already encoded and filled: taken as given
    ids, x = read_features(ds_dir / "features.parquet", names, record)
    np.testing.assert_array_equal(x, own.select(names).to_numpy())


def test_new_rows_with_gaps_are_refused_by_a_model_built_without_imputation(rossi_csv, tmp_path, monkeypatch):
    from flows.lib.modeling.predict import read_features

    pl.read_csv(rossi_csv).with_row_index("id").with_columns(age=pl.lit(None, pl.Float64)).head(3).write_csv(
        tmp_path / "new.csv")
    with pytest.raises(ValueError, match=r"new.csv: column 'age' row 0 \(line 2\): missing or "
                                         r"non-finite value \(3 such rows\) "
                                         r"\(this model's dataset was built without imputation"):
        read_features(tmp_path / "new.csv", ["fin", "age", "prio"])
    ids, x = read_features(tmp_path / "new.csv", ["fin", "age", "prio"],
                           {"impute": "median", "medians": {"fin": 0.0, "age": 24.0, "prio": 2.0}})
    assert (x[:, 1] == 24.0).all() and ids.tolist() == [0, 1, 2]


def test_the_grown_cohort_example_leaves_out_the_patients_version_1_trained_on():
    """``scripts/grown-cohort-example.sh`` (docs/pipeline.md quotes it at its defaults): a table of
    patients' visits, grown and retrained through the CLI; the comparison leaves out the new visits
    of version 1's training patients, and ``not-worse`` lets the interval decide. Short fits on the
    session's Prefect server: the rows compared, checked to the number docs quote, are the split's
    doing, not the fits' (the script at its defaults took 355 s of a 1,879 s suite on a slow 2-core
    machine)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from prefect.settings import PREFECT_API_URL

    root = Path(__file__).resolve().parents[2]
    short = {
        "CET_MAX_EPOCHS": "40",
        "CET_PATIENCE": "5",
        "CET_HIDDEN": "16",
        "PREFECT_API_URL": PREFECT_API_URL.value(),
    }
    run = subprocess.run(["bash", str(root / "scripts" / "grown-cohort-example.sh"), "not-worse"], cwd=root,
                         env={**os.environ, "PY": sys.executable, **short}, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert re.search(r"v0002: val_ci_rmst \d\.\d{4} vs \d\.\d{4} for v0001 on (\d+) of v0002's \d+ validation rows "
                     r"\(higher is better, tolerance 0\.0, "
                     r"evidence not-worse\): not shown worse", run.stdout), run.stdout
    rows = re.search(r"both rescored on the (\d+) of v0002's \d+ validation rows that v0001 was not trained on, "
                     r"(\d+) more left out as other rows of its training patients", run.stdout)
    assert rows and (rows[1], rows[2]) == ("24", "16"), run.stdout  # the split's doing, not the fits': as quoted


def test_new_rows_may_carry_the_tables_own_id_column(rossi_csv, tmp_path, monkeypatch, capsys):
    """A table built with ``--id-column visit`` is scored from new rows that carry ``visit`` (not
    ``id``; ``visit`` wins over an unrelated ``id``) and its scores name their ids ``visit``; a file
    with neither is a usage error naming both, before any flow starts."""
    from flows import predict as predict_flow
    from flows import train as train_flow

    for name, value in {"MODELS_DIR": tmp_path / "models", "MAX_EPOCHS": 3, "PATIENCE": 3, "HIDDEN": 16}.items():
        monkeypatch.setenv(f"CET_{name}", str(value))
    table = pl.read_csv(rossi_csv).with_row_index("visit", offset=1000)
    table.write_csv(tmp_path / "visits.csv")
    assert table_flow.main(["--table", str(tmp_path / "visits.csv"), "--name", "visits", "--event",
                            "arrest=week,arrest", "--time-unit", "weeks", "--features", "fin,age,prio",
                            "--id-column", "visit"]) == 0
    assert load_dataset(tmp_path / "data" / "visits").manifest["id_column"] == "visit"
    assert train_flow.main(["evaluate", "--dataset", "visits", "--models", "CET"]) == 0
    new = table.head(7).select("visit", "fin", "age", "prio")
    new.write_csv(tmp_path / "new.csv")
    out = tmp_path / "scores.parquet"
    assert predict_flow.main(["--dataset", "visits", "--features", str(tmp_path / "new.csv"), "--out", str(out)]) == 0
    scores = pl.read_parquet(out)
    assert scores.columns[0] == "visit" and "id" not in scores.columns
    assert scores["visit"].to_list() == list(range(1000, 1007))
    new.with_columns(id=pl.Series(range(7))).write_csv(tmp_path / "both.csv")  # e.g. a row number of the export
    assert predict_flow.main(["--dataset", "visits", "--features", str(tmp_path / "both.csv"), "--out", str(out)]) == 0
    assert pl.read_parquet(out)["visit"].to_list() == list(range(1000, 1007))
    new.drop("visit").write_csv(tmp_path / "no-id.csv")
    capsys.readouterr()
    with pytest.raises(SystemExit):
        predict_flow.main(["--dataset", "visits", "--features", str(tmp_path / "no-id.csv"), "--out", str(out)])
    assert ("no-id.csv: missing columns [\"id (or 'visit', the training table's id column)\"] (visits v0001 needs an "
            "id and its features)") in capsys.readouterr().err
