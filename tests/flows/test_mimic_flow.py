"""build-mimic-features end to end: the fixture, a generated stand-in, the demo over loopback, and
how retrain rebuilds a dataset (as it was built, never a stand-in over real tables)."""

import json

import pytest

from cet_model.dataset import load_dataset
from flows.lib.flow_params import MimicBuildParams
from flows.lib.infra import stage_cache
from flows.lib.infra.stage_cache import refuse_standin_over_real
from flows.mimic import build_mimic_features, main
from tests.demo import DEMO, requires_demo
from tests.mimic_fixture import write_fixture


def test_flow_builds_the_fixture_and_reports_completed(tmp_path):
    src = write_fixture(tmp_path / "mimic", n_admissions=6)
    params = MimicBuildParams(out=str(tmp_path / "ds"), mimic_dir=str(src), n_chart=2, n_lab=1, n_output=1)
    state = build_mimic_features(params, return_state=True)
    assert state.is_completed()
    ds = load_dataset(state.result())
    assert len(ds.train) + len(ds.val) + len(ds.test) == 6


@pytest.mark.slow
def test_tables_a_generator_wrote_are_recorded_as_a_standin_though_given_as_tables(tmp_path, capsys):
    """``flows.mimic generate`` then ``build --mimic-dir``: the report and the model card must not say "your data"."""
    fixture = write_fixture(tmp_path / "mimic", n_admissions=6)
    params = MimicBuildParams(out=str(tmp_path / "real"), mimic_dir=str(fixture), n_chart=2, n_lab=1, n_output=1)
    assert stage_cache.built_from(build_mimic_features(params)) == "your data"
    assert main(["generate", "--scale", "0.001", "--out", str(tmp_path / "generated")]) == 0
    assert main(["build", "--mimic-dir", str(tmp_path / "generated"), "--out", str(tmp_path / "ds")]) == 0
    assert stage_cache.built_from(tmp_path / "ds") == "generated stand-in"


def test_missing_or_foreign_tables_are_named_before_the_flow_and_by_the_flow(tmp_path, capsys):
    """Tables missing from --mimic-dir: a usage error listing them all before any flow starts; a
    header that is not the release's, naming file and columns. The flow itself, called with such a
    folder, fails with the missing table's own error (it used to fail at the stamp with a
    TypeError about None, the cause buried above it), and writes no dataset."""
    import re

    import pytest

    src = write_fixture(tmp_path / "mimic", n_admissions=6)
    for name in ("PATIENTS", "LABEVENTS"):
        next(src.glob(f"{name}.csv*")).unlink()
    with pytest.raises(SystemExit) as exit_:
        main(["build", "--mimic-dir", str(src), "--out", str(tmp_path / "ds")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and re.search(r"error: --mimic-dir MIMIC tables PATIENTS, LABEVENTS not found in "
                                               r"\S+mimic \(looked for NAME\.csv\.gz and NAME\.csv\)", err), err
    with pytest.raises(FileNotFoundError, match="MIMIC table (PATIENTS|LABEVENTS) not found in"):
        build_mimic_features(MimicBuildParams(out=str(tmp_path / "ds"), mimic_dir=str(src), n_chart=2, n_lab=1,
                                              n_output=1))
    assert not (tmp_path / "ds").exists()
    full = write_fixture(tmp_path / "other", n_admissions=6)
    next(full.glob("ICUSTAYS.csv*")).unlink()
    (full / "ICUSTAYS.csv").write_text("ICUSTAY_ID,WHATEVER\n1,2\n")
    with pytest.raises(SystemExit):
        main(["build", "--mimic-dir", str(full), "--out", str(tmp_path / "ds")])
    assert re.search(r"error: --mimic-dir \S+ICUSTAYS\.csv: table ICUSTAYS is missing column\(s\) \['ROW_ID'",
                     capsys.readouterr().err)


def test_flow_defaults_to_a_generated_standin(tmp_path, capsys):
    assert main(["build", "--out", str(tmp_path / "ds"), "--standin-scale", "0.001", "--split-method", "hash"]) == 0
    ds = load_dataset(capsys.readouterr().out.strip().splitlines()[-1])
    assert ds.manifest["split_method"] == "hash"  # the option reaches the build
    legacy = tmp_path / "ds" / stage_cache.STAMP  # a stamp from before builds recorded their source ...
    legacy.write_text(json.dumps({k: v for k, v in json.loads(legacy.read_text()).items() if k != "source"}))
    refuse_standin_over_real("build-mimic-features", str(tmp_path / "ds"), str(tmp_path / ".ds-work"), "t", "h")
    # ... is recognised as a stand-in by its fingerprints: nothing refused
    standin = tmp_path / ".ds-work" / "standin-0.001-seed0"
    assert (standin / "standin_truth.parquet").is_file()
    assert ds.manifest["source_fingerprints"]["CHARTEVENTS"] in (standin / "SHA256SUMS.txt").read_text()
    assert len(ds.train) + len(ds.val) + len(ds.test) == ds.manifest["cohort"]["cohort_admissions"] > 50


@requires_demo
@pytest.mark.parametrize("server", [True, False], ids=["flow", "own-process"])
def test_cli_downloads_the_demo_from_loopback_and_builds(tmp_path, capsys, monkeypatch, server):
    import gzip
    import shutil

    from flows.lib.infra.cli import without_server
    from flows.lib.infra.download import sha256_file
    from tests.http_server import FileServer

    root = tmp_path / "physionet"
    root.mkdir()
    names = ["ADMISSIONS", "PATIENTS", "ICUSTAYS", "CHARTEVENTS", "LABEVENTS", "OUTPUTEVENTS", "D_ITEMS", "D_LABITEMS"]
    for n in names:
        with gzip.open(DEMO / f"{n}.csv.gz", "rb") as a, open(root / f"{n}.csv", "wb") as b:
            shutil.copyfileobj(a, b)
    (root / "SHA256SUMS.txt").write_text("".join(f"{sha256_file(root / f'{n}.csv')}  {n}.csv\n" for n in names))
    from prefect.settings import PREFECT_API_URL

    if server:  # the test harness's server named as a user names theirs: a flow run
        monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
    else:  # no server configured: the command downloads and builds in its own process
        monkeypatch.delenv("PREFECT_API_URL", raising=False)
    assert without_server() is not server
    with FileServer(root) as srv:
        assert main(["build", "--download-demo", srv.url, "--out", str(tmp_path / "ds")]) == 0
    ds = load_dataset(capsys.readouterr().out.strip().splitlines()[-1])
    assert ds.manifest["cohort"]["cohort_admissions"] == 126


@pytest.mark.parametrize("server", [True, False], ids=["flow", "own-process"])
def test_a_download_that_cannot_succeed_ends_the_command_with_one_line(tmp_path, capsys, monkeypatch, server):
    """A demo URL that has no checksum list (404: no retry helps): the command ends at once, not
    after the download step's retries (5 s and 30 s), with exit status 1 and one line naming the
    URL and the cause, not a traceback, and no dataset."""
    import time

    from prefect.settings import PREFECT_API_URL

    from tests.http_server import FileServer

    if server:
        monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
    else:
        monkeypatch.delenv("PREFECT_API_URL", raising=False)
    (tmp_path / "empty").mkdir()
    with FileServer(tmp_path / "empty") as srv, pytest.raises(SystemExit) as stop:
        started = time.monotonic()
        try:
            main(["build", "--download-demo", srv.url, "--out", str(tmp_path / "ds")])
        finally:
            took = time.monotonic() - started
    err = capsys.readouterr().err
    assert stop.value.code == 1
    assert took < 5, f"{took:.1f} s: a 404 was tried again"
    assert "trying again" not in err and "Retrying" not in err, err[-2000:]
    assert err.rstrip().splitlines()[-1] == f"python -m flows.mimic: {srv.url.rstrip('/')}/SHA256SUMS.txt: HTTP 404"
    assert server or "Traceback" not in err, err[-2000:]  # a flow run's log shows the failed task's traceback
    assert not (tmp_path / "ds" / "manifest.json").exists()


@pytest.mark.bad_input
def test_a_table_that_cannot_be_staged_ends_the_command_with_one_line(tmp_path, capsys, monkeypatch):
    """A LABEVENTS value that is not a number: the build, which finds it while staging, ends with exit
    status 1 and one line naming the file, the line, the column and its type, never the value. It
    ended with a traceback."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    src = write_fixture(tmp_path / "mimic", n_admissions=6)
    lab = src / "LABEVENTS.csv"
    lines = lab.read_text().splitlines()
    lines[1] = lines[1].replace(",v,1.0,", ",v,secret-value,")  # VALUENUM of the first lab row
    lab.write_text("\n".join(lines) + "\n")
    with pytest.raises(SystemExit) as stop:
        main(["build", "--mimic-dir", str(src), "--out", str(tmp_path / "ds")])
    err = capsys.readouterr().err
    assert stop.value.code == 1 and "Traceback" not in err, err[-2000:]
    assert err.rstrip().splitlines()[-1] == (
        f"python -m flows.mimic: {lab}: table LABEVENTS could not be converted: "
        "Conversion Error: CSV Error on Line: 2 (column VALUENUM: expected DOUBLE)")
    assert "secret-value" not in err
    assert not (tmp_path / "ds" / "manifest.json").exists()


@pytest.mark.filterwarnings("ignore:S. no observed time:UserWarning")  # a tiny fixture: events no row saw
def test_retrain_rebuilds_as_built_and_never_swaps_real_tables_for_a_standin(tmp_path, monkeypatch, capsys):
    """A dataset built from MIMIC tables with non-default options is rebuilt by ``retrain`` from
    the same tables with the same options (the stamp's recipe); before, retrain called the build
    with its defaults and, without CET_MIMIC_DIR, replaced the real dataset with a generated
    stand-in. A build with no source over such a folder is refused, and the folder is kept."""
    import pytest

    from flows import train as train_flow
    from flows.train import build_flow

    for name, value in {"DATA_DIR": tmp_path / "data", "MODELS_DIR": tmp_path / "models", "MAX_EPOCHS": 2,
                        "PATIENCE": 2, "HIDDEN": 8}.items():
        monkeypatch.setenv(f"CET_{name}", str(value))
    monkeypatch.delenv("CET_MIMIC_DIR", raising=False)
    src = write_fixture(tmp_path / "mimic", n_admissions=12)
    assert main(["build", "--mimic-dir", str(src), "--window-hours", "12", "--split-seed", "3",
                 "--censor-seed", "3"]) == 0
    out = tmp_path / "data" / "mimic"
    manifest = (out / "manifest.json").read_bytes()
    build, recorded = build_flow("mimic")
    assert recorded is not None and (recorded.mimic_dir, recorded.window_hours, recorded.split_seed) == (
        str(src.resolve()), 12, 3)
    assert train_flow.main(["retrain", "--dataset", "mimic"]) == 0
    assert (out / "manifest.json").read_bytes() == manifest  # the same build: skipped, not redone with defaults
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["build"])
    assert (
        f"{out} holds a dataset built from MIMIC-III tables ({src.resolve()}); this build has no source (no "
        "--mimic-dir, CET_MIMIC_DIR unset) and would replace it with a generated stand-in"
    ) in capsys.readouterr().err
    with pytest.raises(ValueError, match="would replace it with a generated stand-in"):  # a deployment run too
        build_mimic_features(MimicBuildParams(out=str(out)))
    assert (out / "manifest.json").read_bytes() == manifest
    stamp = out / stage_cache.STAMP  # a real build stamped before sources were recorded: refused too
    stamp.write_text(json.dumps({k: v for k, v in json.loads(stamp.read_text()).items() if k != "source"}))
    with pytest.raises(
        ValueError,
        match=r"built before builds recorded their source, from files that are not a "
        r"stand-in generated in .*\.mimic-work; this build has no source",
    ):
        build_mimic_features(MimicBuildParams(out=str(out)))
    src.rename(tmp_path / "moved")  # the extract moved: a usage error that says what to do, before any flow
    capsys.readouterr()
    with pytest.raises(SystemExit):
        train_flow.main(["retrain", "--dataset", "mimic"])
    assert (
        f"dataset mimic was built from {src.resolve()} (--mimic-dir), which no longer exists: build it once "
        "from its new place (python -m flows.mimic build --mimic-dir NEW ..."
    ) in capsys.readouterr().err


def test_without_a_prefect_server_the_command_builds_in_its_own_process(tmp_path, monkeypatch):
    """With no Prefect server configured, ``flows.mimic build`` builds in its own process, Prefect not
    even imported and no temporary server, its tables staged in threads: no flow run, the same dataset as
    the flow's build, and each skips a build the other made of the same tables and options."""
    import re

    from tests.flows.own_process import flow_runs, run_without_server, the_flow_builds_the_same, without_server

    generated = run_without_server("flows.mimic", ["generate", "--scale", "0.0005", "--out", str(tmp_path / "g")],
                                   tmp_path)  # the generator never needs Prefect either
    assert generated.stdout.strip() == str(tmp_path / "g") and (tmp_path / "g" / "standin.json").is_file()
    src = write_fixture(tmp_path / "mimic", n_admissions=6)
    argv = ["build", "--mimic-dir", str(src), "--n-chart", "2", "--n-lab", "1", "--n-output", "1"]
    here, flown = tmp_path / "here", tmp_path / "flown"
    before = flow_runs("build-mimic-features")
    log = without_server("flows.mimic", argv, here, tmp_path)
    assert re.search(r"\| INFO +\| flows\.mimic - CHARTEVENTS: \d+ rows \(converted\)", log)
    assert re.search(r"\| INFO +\| flows\.mimic - dataset written to ", log)
    assert flow_runs("build-mimic-features") == before
    the_flow_builds_the_same(main, argv, here, flown, "build-mimic-features", before, monkeypatch)
