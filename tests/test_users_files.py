"""Users' files are sacred (docs/reliability.md, "Outputs"): a command replaces only what this
project wrote, never writes into or over its own inputs, follows a link to the folder it names,
and a kill between a registry decision and its promotion loses neither.

Each test runs the command or function a user would, on real files in ``tmp_path``.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from cet_model.atomic import MARKER, spreadsheet_safe, write_csv
from flows import mimic as mimic_cli
from flows import predict as predict_cli
from flows import synthetic as synthetic_cli
from flows import table as table_cli
from flows import train as train_cli
from flows.lib.infra import registry
from flows.lib.infra.folders import check_output_file
from flows.lib.modeling import explain
from flows.lib.modeling.scores_file import written_scores
from flows.lib.standin import synthetic
from tests.mimic_fixture import write_fixture

REPO = Path(__file__).resolve().parents[1]


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _usage_error(main, argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


@pytest.fixture
def users_folder(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "notes.txt").write_text("x")
    return keep


def _table(path: Path, n: int = 60) -> Path:
    pl.DataFrame({"age": [float(40 + i % 30) for i in range(n)], "days": [float(1 + i) for i in range(n)],
                  "died": [i % 3 == 0 for i in range(n)]}).with_columns(pl.col("died").cast(pl.Int8)).write_csv(path)
    return path


def test_synthetic_build_refuses_a_folder_the_user_owns(users_folder, capsys):
    err = _usage_error(synthetic_cli.main, ["--out", str(users_folder), "--n", "500"], capsys)
    assert "was not written by CET" in err and str(users_folder) in err
    assert _tree(users_folder) == {"notes.txt": b"x"}


def test_table_build_refuses_a_folder_the_user_owns_and_one_holding_the_table(tmp_path, users_folder, capsys):
    table = _table(tmp_path / "cohort.csv")
    argv = ["--table", str(table), "--name", "c", "--event", "death=days,died", "--time-unit", "days"]
    assert "was not written by CET" in _usage_error(table_cli.main, argv + ["--out", str(users_folder)], capsys)
    assert _tree(users_folder) == {"notes.txt": b"x"}
    err = _usage_error(table_cli.main, argv + ["--out", str(tmp_path)], capsys)
    assert "contains --table" in err and table.is_file()


@pytest.mark.parametrize("where", ["same", "inside", "containing"])
def test_mimic_build_refuses_an_out_that_overlaps_the_raw_tables(tmp_path, where, capsys):
    raw = write_fixture(tmp_path / "raw" / "mimic")  # MIMIC-III tables in their real layout (no demo needed)
    before = sorted(p.name for p in raw.iterdir())
    out = {"same": raw, "inside": raw / "features", "containing": tmp_path / "raw"}[where]
    err = _usage_error(mimic_cli.main, ["build", "--mimic-dir", str(raw), "--out", str(out)], capsys)
    word = {"same": "is --mimic-dir", "inside": "is inside --mimic-dir", "containing": "contains --mimic-dir"}[where]
    assert word in err
    assert sorted(p.name for p in raw.iterdir()) == before and not (raw / "features").exists()


def test_a_dataset_folder_is_replaced_only_while_it_holds_nothing_but_what_cet_wrote(tmp_path):
    out = tmp_path / "ds"
    synthetic.write(out, n=300, split_sizes=(180, 60, 60))
    assert json.loads((out / MARKER).read_text())["entries"] == ["events.parquet", "features.parquet",
                                                                 "manifest.json"]
    synthetic.write(out, n=400, split_sizes=(240, 80, 80))  # its own folder: replaced
    assert json.loads((out / "manifest.json").read_text())["n_rows"] == 400
    (out / "my-analysis.ipynb").write_text("{}")
    before = _tree(out)
    with pytest.raises(FileExistsError, match=r"holds 1 entry CET did not write \(my-analysis.ipynb\)"):
        synthetic.write(out, n=500, split_sizes=(300, 100, 100))
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no temporary left beside it


def test_a_dataset_folder_written_before_folders_were_marked_is_still_replaced(tmp_path):
    out = synthetic.write(tmp_path / "old", n=300, split_sizes=(180, 60, 60))
    (out / MARKER).unlink()  # as an earlier version left it: the contract's files only
    synthetic.write(out, n=400, split_sizes=(240, 80, 80))
    assert json.loads((out / "manifest.json").read_text())["n_rows"] == 400


def test_a_linked_output_folder_is_written_through_the_link(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "out"
    link.symlink_to(target)
    synthetic.write(link, n=300, split_sizes=(180, 60, 60))
    synthetic.write(link, n=400, split_sizes=(240, 80, 80))  # and replaced through it
    assert link.is_symlink() and json.loads((target / "manifest.json").read_text())["n_rows"] == 400
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "out"]  # no .old-* or .partial-* left
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "missing")
    with pytest.raises(FileExistsError, match="a symbolic link to .*missing, which does not exist"):
        synthetic.write(dangling, n=300, split_sizes=(180, 60, 60))
    assert not (tmp_path / "missing").exists()


def test_predict_refuses_to_write_over_its_input_a_dataset_or_the_registry(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CET_MODELS_DIR", str(tmp_path / "models"))
    features = _table(tmp_path / "new.csv")
    before = features.read_bytes()
    err = _usage_error(predict_cli.main, ["--dataset", "d", "--features", str(features), "--out", str(features)],
                       capsys)
    assert "is --features" in err and features.read_bytes() == before
    err = _usage_error(predict_cli.main, ["--dataset", "d", "--features", str(features), "--out",
                                          str(tmp_path / "s.txt")], capsys)
    assert "writes parquet or csv; give a file name ending in .parquet or .csv" in err
    same = tmp_path / "new.parquet"
    pl.read_csv(features).write_parquet(same)
    err = _usage_error(predict_cli.main, ["--dataset", "d", "--features", str(same), "--out", str(same)], capsys)
    assert "is --features" in err
    ds = synthetic.write(tmp_path / "data" / "d", n=300, split_sizes=(180, 60, 60))
    data_file = ds / "features.parquet"
    before = data_file.read_bytes()
    err = _usage_error(predict_cli.main, ["--dataset", "d", "--features", str(same), "--out", str(data_file)],
                       capsys)
    assert "a folder CET wrote whole" in err and data_file.read_bytes() == before
    err = _usage_error(predict_cli.main, ["--dataset", "d", "--features", str(same), "--out",
                                          str(tmp_path / "models" / "d" / "s.parquet")], capsys)
    assert "inside the model registry" in err
    theirs = tmp_path / "report.parquet"
    pl.DataFrame({"patient": [1], "note": ["x"]}).write_parquet(theirs)
    err = _usage_error(predict_cli.main, ["--dataset", "d", "--features", str(same), "--out", str(theirs)], capsys)
    assert "exists and was not written by this command" in err


def test_an_existing_scores_file_is_recognised_as_predicts_own(tmp_path):
    ours = tmp_path / "scores.parquet"
    pl.DataFrame({"id": [1], "p_death": [0.5]}).write_parquet(ours, metadata={"written_by": "cet", "kind": "scores"})
    assert written_scores(ours)
    check_output_file(ours, "--out", ".parquet", {}, ours=written_scores)
    older = tmp_path / "older.parquet"  # written before the mark: an id and score columns only
    pl.DataFrame({"id": [1], "p_death": [0.5], "t_q50_death": [3.0], "risk_30_death": [0.1]}).write_parquet(older)
    assert written_scores(older)
    assert not written_scores(tmp_path / "none.parquet") and not written_scores(_table(tmp_path / "t.csv"))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # a small net; not what is tested
def test_predict_writes_csv_scores_beside_a_users_files_and_replaces_only_its_own(tmp_path, monkeypatch, capsys):
    """``--out scores.csv``: the parquet's columns and values as CSV, the file recorded in the folder's
    marker before it is written (CSV has no metadata); a rerun replaces it, a user's CSV of another
    name in the same folder is refused and kept, and the folder is not taken for one CET wrote whole."""
    from lifelines.datasets import load_rossi

    from flows.lib.ingest import write_follow_up_dataset
    from flows.lib.modeling.train_eval import TrainParams, train_version

    monkeypatch.setenv("CET_MODELS_DIR", str(tmp_path / "models"))
    ds = write_follow_up_dataset(tmp_path / "data" / "rossi", load_rossi(), ["fin", "age", "prio"],
                                 {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks", seed=3)
    train_version(ds, tmp_path / "models", "rossi", TrainParams(models=("CET",), hidden=8, max_epochs=5,
                                                                device="cpu", reference="none"))
    rows = tmp_path / "new.csv"
    pl.read_parquet(ds / "features.parquet").head(12).drop("split").write_csv(rows)
    mine = tmp_path / "out" / "notes.csv"
    mine.parent.mkdir()
    mine.write_text("patient,note\n1,called back\n")
    common = ["--dataset", "rossi", "--model-version", "v0001", "--features", str(rows), "--horizons", "20"]
    assert predict_cli.main([*common, "--out", str(tmp_path / "out" / "scores.csv")]) == 0
    assert predict_cli.main([*common, "--out", str(tmp_path / "scores.parquet")]) == 0
    as_csv, as_parquet = pl.read_csv(tmp_path / "out" / "scores.csv"), pl.read_parquet(tmp_path / "scores.parquet")
    assert as_csv.columns == as_parquet.columns and as_csv.columns[:2] == ["id", "p_arrest"]
    assert as_csv.to_numpy() == pytest.approx(as_parquet.to_numpy().astype(float), abs=1e-6)
    assert json.loads((tmp_path / "out" / MARKER).read_text())["entries"] == ["scores.csv"]
    assert written_scores(tmp_path / "out" / "scores.csv") and not written_scores(mine)
    assert predict_cli.main([*common, "--out", str(tmp_path / "out" / "scores.csv")]) == 0  # its own: replaced
    err = _usage_error(predict_cli.main, [*common, "--out", str(mine)], capsys)
    assert "exists and was not written by this command" in err
    assert mine.read_text() == "patient,note\n1,called back\n"
    assert predict_cli.main([*common, "--out", str(tmp_path / "out" / "second.csv")]) == 0  # beside them
    assert json.loads((tmp_path / "out" / MARKER).read_text())["entries"] == ["scores.csv", "second.csv"]


def test_explain_writes_formula_like_cells_escaped_and_keeps_a_users_csv(tmp_path):
    out = tmp_path / "imp.csv"
    write_csv(pl.DataFrame({"input": ["@SUM(A1:A9)", "=1+1", "age", "-2"], "importance": [0.1, -0.2, 0.3, 0.0]}), out)
    rows = pl.read_csv(out)
    assert rows["input"].to_list() == ["'@SUM(A1:A9)", "'=1+1", "age", "'-2"]
    assert rows["importance"].to_list() == [0.1, -0.2, 0.3, 0.0]  # numbers stay numbers
    assert spreadsheet_safe("+cmd") == "'+cmd" and spreadsheet_safe(None) is None
    result = {"groups": [{"name": "@SUM(A1:A9)", "features": ["@SUM(A1:A9)"], "auc": {"mean": [0.1], "sd": [0.0]}}],
              "metrics": ["auc"], "events": ["death"], "baseline": {"auc": [0.7]}, "repeats": 1, "split": "val",
              "rows": 10, "observed": [3]}
    written = explain.write_csv(result, tmp_path / "e.csv")
    assert "@SUM" not in written.read_text().replace("'@SUM", "") and explain.written_csv(written)
    theirs = tmp_path / "theirs.csv"
    theirs.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="exists and was not written by this command"):
        check_output_file(theirs, "--out", ".csv", {}, ours=explain.written_csv)
    check_output_file(written, "--out", ".csv", {}, ours=explain.written_csv)


def _version(root, dataset, auc):
    tmp = registry.staging_dir(root, dataset)
    (tmp / "metrics.json").write_text(json.dumps({"summary": {"CET": {"val_auc": auc}}}))
    return registry.commit(root, dataset, tmp)


DECIDE = """
import sys
from pathlib import Path
from flows.lib.infra import registry
root = Path(sys.argv[1])
print(registry.decide(root, "d", root / "d" / sys.argv[2], registry.Rule())["reason"])
"""


@pytest.mark.slow  # trains versions in a killed process and again: CI runs it, the quick loop leaves it out
def test_a_kill_between_the_decision_and_the_promotion_keeps_both_on_the_rerun(tmp_path):
    v1 = _version(tmp_path, "d", 0.70)
    registry.decide(tmp_path, "d", v1, registry.Rule())
    v2 = _version(tmp_path, "d", 0.75)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CET_CRASH_AT": "promote"}
    killed = subprocess.run([sys.executable, "-c", DECIDE, str(tmp_path), v2.name], env=env, capture_output=True)
    assert killed.returncode == -signal.SIGKILL
    history = [json.loads(line) for line in (tmp_path / "d" / "history.jsonl").read_text().splitlines()]
    assert [h["candidate"] for h in history] == ["v0001", "v0002"]  # the audit line came first
    assert registry.promoted(tmp_path, "d") == v1
    env.pop("CET_CRASH_AT")
    rerun = subprocess.run([sys.executable, "-c", DECIDE, str(tmp_path), v2.name], env=env, capture_output=True,
                           text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert registry.promoted(tmp_path, "d") == v2  # finished from the recorded decision
    history = [json.loads(line) for line in (tmp_path / "d" / "history.jsonl").read_text().splitlines()]
    assert [h["candidate"] for h in history] == ["v0001", "v0002"]  # recorded once
    assert [r["decision"] for r in registry.version_rows(tmp_path, "d")][1] == history[1]["reason"]


def test_a_promotion_without_its_history_line_is_recorded_on_the_rerun(tmp_path):
    v1 = _version(tmp_path, "d", 0.70)
    registry.decide(tmp_path, "d", v1, registry.Rule())
    (tmp_path / "d" / "history.jsonl").unlink()  # as a kill left it before the audit line came first
    d = registry.decide(tmp_path, "d", v1, registry.Rule())
    assert d["reason"] == "already the promoted version"
    history = [json.loads(line) for line in (tmp_path / "d" / "history.jsonl").read_text().splitlines()]
    assert len(history) == 1 and history[0]["candidate"] == "v0001" and history[0]["reconciled"]
    registry.decide(tmp_path, "d", v1, registry.Rule())
    assert len((tmp_path / "d" / "history.jsonl").read_text().splitlines()) == 1


def test_a_weak_pseudonym_key_is_refused_and_its_fingerprint_is_slow(tmp_path, monkeypatch, capsys, caplog):
    from flows import reddit as reddit_cli
    from flows.lib.infra.keys import check_key, kept_key, key_digest, key_matches

    monkeypatch.setenv("CET_PSEUDONYM_KEY", "a")
    err = _usage_error(reddit_cli.main, ["build", "--out", str(tmp_path / "r")], capsys)
    assert "CET_PSEUDONYM_KEY: too weak" in err and "token_hex(32)" in err and not (tmp_path / "r").exists()
    from flows import train as train_cli  # retrain would rebuild the Reddit dataset with it: refused before too

    monkeypatch.setenv("CET_DATA_DIR", str(tmp_path / "data"))
    err = _usage_error(train_cli.main, ["retrain", "--dataset", "reddit"], capsys)
    assert "CET_PSEUDONYM_KEY: too weak" in err and not (tmp_path / "data").exists()
    for weak in ("change-me", "a" * 100, "ab" * 40, "correct horse battery staple"):
        with pytest.raises(ValueError, match="too weak"):
            check_key(weak)
    with pytest.raises(ValueError, match="too weak"):
        kept_key("hunter2", tmp_path / "k", "key")
    with caplog.at_level("WARNING", logger="flows"):
        made = kept_key(None, tmp_path / "pseudonym.key", "key")  # none given: 32 random bytes, kept mode 600
    assert len(made) == 64 and (tmp_path / "pseudonym.key").stat().st_mode & 0o777 == 0o600
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "pseudonym.key" in said and "keep that file" in said and made.decode() not in said
    assert "replaces every generated key" in said  # not "copy this file into the setting": another may exist
    caplog.clear()
    assert kept_key(None, tmp_path / "pseudonym.key", "key") == made and not caplog.records  # read again, quietly
    check_key(made.decode())
    digest = key_digest(made, "cet-pseudonym-key")
    assert digest.startswith("scrypt:") and made.decode() not in digest
    assert key_matches(digest, made, "cet-pseudonym-key") and not key_matches(digest, made, "cet-row-ids")
    import hashlib  # a record from before the KDF still matches its key
    assert key_matches(hashlib.sha256(b"cet-pseudonym-key:" + made).hexdigest()[:12], made, "cet-pseudonym-key")


def test_a_stand_in_written_before_folders_were_marked_is_still_replaced(tmp_path):
    from flows.lib.standin import reddit as reddit_standin

    months = reddit_standin.Months("2016-01", "2016-02", "2016-03")
    out = reddit_standin.generate(tmp_path / "s", n_users=20, seed=1, months=months, progress=False)
    (out / MARKER).unlink()  # as an earlier version left it
    again = reddit_standin.generate(out, n_users=20, seed=2, months=months, progress=False, overwrite=True)
    assert json.loads((again / "standin.json").read_text())["seed"] == 2
    (again / "mine.txt").write_text("x")
    with pytest.raises(FileExistsError, match=r"CET did not write \(mine.txt\)"):
        reddit_standin.generate(out, n_users=20, seed=3, months=months, progress=False, overwrite=True)


def test_the_dataset_report_never_replaces_a_users_files(tmp_path):
    from flows.lib.modeling.dataset_report import check_ours

    out = tmp_path / "reports" / "cohort"
    out.mkdir(parents=True)
    (out / "report.md").write_text("# my own notes\n")
    with pytest.raises(ValueError, match=r"report.md: not a report CET wrote for cohort"):
        check_ours(out, "cohort")
    assert (out / "report.md").read_text() == "# my own notes\n"
    (out / "report.md").unlink()
    (out / "survival.png").write_bytes(b"mine")
    with pytest.raises(ValueError, match=r"holds survival.png beside no report CET wrote"):
        check_ours(out, "cohort")
    (out / "survival.png").unlink()
    check_ours(out, "cohort")  # empty: nothing to protect
    (out / "report.md").write_text("# cohort: model version v0001\n")
    check_ours(out, "cohort")  # ours: replaced


def test_report_folders_keep_a_users_files_and_replace_only_what_cet_wrote(tmp_path, capsys):
    """The harness's --out, the pipeline's reports folder: a file of the same name that CET did not
    write there is refused before any work; CET's own (its marker, or a report written before
    folders were marked) is replaced; a dataset folder is never written into."""
    from cet_experiments import experiments
    from cet_experiments import real as real_cli
    from cet_model.atomic import claim_files
    from flows import full_pipeline
    from flows.lib.experiment.report import is_report_folder

    out = tmp_path / "bench"
    out.mkdir()
    (out / "table.md").write_text("# my table\n")
    with pytest.raises(SystemExit, match=r"bench/table.md: exists and was not written by CET"):
        real_cli.main(["--tables-only", "--out", str(out)])
    with pytest.raises(SystemExit, match=r"bench/table.md: exists and was not written by CET"):
        experiments.main(["dataset", "--data", str(tmp_path / "no-such-data"), "--out", str(out)])  # before loading
    assert _tree(out) == {"table.md": b"# my table\n"}
    (out / "table.md").unlink()
    (out / "mine").mkdir()
    (out / "mine" / "metrics.json").write_text('{"my": "record"}')  # not a cohort record: neither read nor replaced
    real_cli.main(["--tables-only", "--out", str(out)])
    assert json.loads((out / MARKER).read_text())["entries"] == ["table.md"]
    assert (out / "table.md").read_text().startswith("# Real-data benchmark\n")
    real_cli.main(["--tables-only", "--out", str(out)])  # its own: replaced
    assert (out / "mine" / "metrics.json").read_text() == '{"my": "record"}'

    old = tmp_path / "old-report"  # a report written before report folders were marked
    old.mkdir()
    (old / "metrics.json").write_text(json.dumps({"models": {}, "config": {}, "machine": {}}))
    (old / "table.md").write_text("# Dataset x\n")
    claim_files(old, ["metrics.json", "table.md"], legacy=is_report_folder)
    assert set(json.loads((old / MARKER).read_text())["entries"]) == {"metrics.json", "table.md"}
    data = synthetic.write(tmp_path / "ds", n=300, split_sizes=(180, 60, 60))
    with pytest.raises(FileExistsError, match="a folder CET wrote as a dataset"):
        claim_files(data, ["table.md"])
    (data / MARKER).unlink()  # as an earlier version left it
    with pytest.raises(FileExistsError, match="a dataset or stand-in folder CET wrote"):
        claim_files(data, ["table.md"])
    (tmp_path / "elsewhere.md").write_text("mine")
    (old / "fig2_auc_mrae.png").symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(FileExistsError, match="fig2_auc_mrae.png: exists and is not a plain file"):
        claim_files(old, ["fig2_auc_mrae.png"])
    assert (tmp_path / "elsewhere.md").read_text() == "mine"
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / MARKER).write_text("my own notes")  # a file of the marker's name that CET did not write
    with pytest.raises(FileExistsError, match="is not CET's record of its outputs"):
        claim_files(odd, ["table.md"])
    assert _tree(odd) == {MARKER: b"my own notes"}

    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "synthetic-auc.png").write_bytes(b"my figure")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CET_REPORTS_DIR", str(reports))
        with pytest.raises(SystemExit, match=r"synthetic-auc.png: exists and was not written by CET"):
            full_pipeline.main(["--datasets", "synthetic"])
    assert _tree(reports) == {"synthetic-auc.png": b"my figure"}
    from flows.lib.modeling.report import claim_report

    old_report = tmp_path / "old-reports"  # the pipeline's report from before report folders were marked
    old_report.mkdir()
    (old_report / "report.md").write_text("# CET pipeline report\n\nold\n")
    (old_report / "synthetic-auc.png").write_bytes(b"its figure")
    claim_report(old_report, ["synthetic"])
    assert "synthetic-auc.png" in json.loads((old_report / MARKER).read_text())["entries"]


def test_train_evaluate_refuses_a_users_report_folder_before_training(tmp_path, monkeypatch, capsys):
    data = synthetic.write(tmp_path / "cohort", n=300, split_sizes=(180, 60, 60))
    monkeypatch.setenv("CET_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("CET_MODELS_DIR", str(tmp_path / "models"))
    mine = tmp_path / "reports" / "synthetic-reference"  # the manifest's name
    mine.mkdir(parents=True)
    (mine / "table.md").write_text("# notes\n")
    err = _usage_error(train_cli.main, ["evaluate", "--data", str(data), "--runs", "1"], capsys)
    assert "table.md: exists and was not written by CET" in err
    (mine / "table.md").unlink()
    (mine / "report.md").write_text("# notes\n")
    err = _usage_error(train_cli.main, ["evaluate", "--data", str(data)], capsys)
    assert "report.md: not a report CET wrote for synthetic-reference" in err
    assert _tree(mine) == {"report.md": b"# notes\n"} and not (tmp_path / "models").exists()


def test_saving_a_model_replaces_only_a_model_cet_saved_and_a_torn_save_is_caught(tmp_path, small_survival):
    from cet_model import CETModel, load_model

    x, t, s, _ = small_survival
    model = CETModel(hidden_sizes=(8,), max_epochs=2, patience=2, batch_size=64, device="cpu").fit(x, t, s)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "config.json").write_text('{"my": "settings"}')
    with pytest.raises(FileExistsError, match=r"project/config.json: exists and is not a saved CET model's"):
        model.save(folder)
    assert _tree(folder) == {"config.json": b'{"my": "settings"}'}
    (folder / "config.json").unlink()
    (folder / "weights.safetensors").write_bytes(b"mine")
    with pytest.raises(FileExistsError, match="exists without a CET model's config.json beside it"):
        model.save(folder)
    (folder / "weights.safetensors").unlink()
    model.save(folder)
    first = (folder / "weights.safetensors").read_bytes()
    other = CETModel(hidden_sizes=(8,), max_epochs=2, patience=2, batch_size=64, device="cpu", seed=1)
    other.fit(x, t, s).save(folder)  # a model CET saved there: replaced
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "weights.safetensors"]  # no temporaries
    load_model(folder)
    (folder / "weights.safetensors").write_bytes(first)  # as a kill between the two renames would leave it
    with pytest.raises(ValueError, match="not the weights config.json was saved with"):
        load_model(folder)


def test_the_reddit_scan_writes_and_removes_only_the_files_it_claimed(tmp_path):
    from flows.lib.reddit.cohort import claim_scan_parts, remove_scan_parts

    work = tmp_path / "work"  # a work folder the user named, holding their own files
    (work / "rc").mkdir(parents=True)
    (work / "rc" / "my-cohort.parquet").write_bytes(b"mine")
    (work / "rc" / "2019-03.parquet").write_bytes(b"mine")  # named like a month the scan writes, not written by it
    (work / "notes.parquet").write_bytes(b"mine")
    with pytest.raises(FileExistsError, match=r"rc/2019-03\.parquet: exists and was not written by CET"):
        claim_scan_parts(work, ["2019-03.parquet"], [work / "rc" / "2019-03.parquet"])
    (work / "first.parquet").write_bytes(b"mine")
    with pytest.raises(FileExistsError, match=r"first\.parquet: exists and was not written by CET"):
        claim_scan_parts(work, ["2019-01.parquet"], [work / "rc" / "2019-01.parquet"])
    (work / "first.parquet").unlink()
    assert remove_scan_parts(work) == 0  # nothing claimed: nothing removed
    claim_scan_parts(work, ["2019-01.parquet"], [work / "rc" / "2019-01.parquet", work / "rc" / "2019-02.parquet"])
    for part in ("rs", "rc"):
        (work / part / "2019-01.parquet").write_bytes(b"scan")
    (work / "rc" / ".2019-02.parquet.tmp-12345").write_bytes(b"scan")  # a killed scan's temporary
    (work / "first.parquet").write_bytes(b"scan")
    claim_scan_parts(work, ["2019-01.parquet"], [work / "rc" / "2019-01.parquet"])  # a rerun replaces them
    assert remove_scan_parts(work) == 4
    assert _tree(work) == {"rc/my-cohort.parquet": b"mine", "rc/2019-03.parquet": b"mine", "notes.parquet": b"mine"}

    default = tmp_path / ".reddit-work"  # the work folder CET names itself: a scan's leftovers from before the marker
    (default / "rs").mkdir(parents=True)
    (default / "rs" / "2019-01.parquet").write_bytes(b"scan")
    (default / "first.parquet").write_bytes(b"scan")
    claim_scan_parts(default, ["2019-01.parquet"], [])
    assert remove_scan_parts(default) == 2 and _tree(default) == {}


@pytest.mark.slow  # spawns each benchmark
@pytest.mark.parametrize("script, option", [("bench_pipeline.py", "--keep"), ("reddit_at_scale.py", "--keep"),
                                            ("bounded_memory.py", "--keep"), ("bench_mimic_build.py", "--data-dir")])
def test_a_benchmark_keeps_its_scratch_only_in_a_folder_it_made(tmp_path, script, option):
    """The benchmarks that start cold by removing their build folders inside ``--keep DIR`` take an
    absent or empty folder, or one an earlier run of the same benchmark marked; a user's folder
    (even with folders of the very names it removes) is refused untouched, before any work."""
    from flows.lib.infra.folders import SCRATCH_MARKER, scratch_folder

    mine = tmp_path / "mine"
    for name in ("work-threads", "reddit-threads", "mimic-work", "work-0.05", "ds-0.05", "data"):
        (mine / name).mkdir(parents=True)
        (mine / name / "notes.txt").write_text("a user's")
    before = _tree(mine)
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), option, str(mine)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr  # a usage error
    assert "mine: exists, is not empty and was not made by " + script in run.stderr
    assert _tree(mine) == before

    kept = scratch_folder(tmp_path / "kept", script)  # what the benchmark's first run marks
    assert json.loads((kept / SCRATCH_MARKER).read_text()) == {"written_by": "cet", "scratch_of": script}
    (kept / "dumps").mkdir()
    assert scratch_folder(kept, script) == kept  # its own again: reused
    with pytest.raises(FileExistsError, match="was not made by other.py"):
        scratch_folder(kept, "other.py")  # another benchmark's
    (kept / SCRATCH_MARKER).unlink()
    (kept / SCRATCH_MARKER).symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text(json.dumps({"scratch_of": script}))
    with pytest.raises(FileExistsError):
        scratch_folder(kept, script)  # a marker that is a link is not one
