"""Crash consistency: ``kill -9`` inside each stage, rerun, same bytes as an uninterrupted run.

``python -m flows.full_pipeline`` runs in a subprocess against a real Prefect server on
loopback. ``CET_CRASH_AT=<point>`` (flows/lib/infra/crash.py) makes it SIGKILL itself inside a
stage: no exception handler, no cleanup, as a power cut or the OOM killer would. The crashed
runs follow one another in the same folders, each resuming from what the previous one left;
the last run is not interrupted. Its outputs must hash the same as those of one uninterrupted
run in the same place, and after every crash nothing unfinished may sit under a finished name.
"""

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from flows.lib.infra.crash import POINTS
from tests.prefect_server import _free_port, _start_server, _stop

pytestmark = pytest.mark.slow  # kills the pipeline inside every stage, then reruns it (minutes)

REPO = Path(__file__).resolve().parents[1]
# the order the pipeline reaches them one stage at a time (--sequential): synthetic is trained before
# MIMIC is staged
ORDER = ("train", "promote", "staging", "sql", "scan", "embed", "report")
LEFTOVER = re.compile(r"\.(tmp|partial|old)-\d+(-[^-]+)?$|^\.incoming-")
# the registry's records carry wall-clock times by design: compared without them
TIMES = {"decision.json": ("time",), "history.jsonl": ("time",), "promoted.json": ("since",)}


def _env(root: Path, api_url: str, crash: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CET_")}
    env.update(
        CET_DATA_DIR=str(root / "data"),
        CET_MODELS_DIR=str(root / "models"),
        CET_REPORTS_DIR=str(root / "reports"),
        CET_SYNTHETIC_N="1000",
        CET_MAX_EPOCHS="3",
        CET_PATIENCE="3",
        CET_HIDDEN="16",
        CET_MIMIC_STANDIN_SCALE="0.001",
        CET_REDDIT_STANDIN_USERS="150",
        CET_EMBED_BLOCK="400",
        CET_PSEUDONYM_KEY="crash-test-key-7d793037a0760186574b0282f2f435e7",
        # fits in the flow's process: at this size a worker's start-up (importing torch) is most of a
        # fit, and eleven runs of three versions pay it; tests/test_side_by_side.py covers the workers
        CET_TRAIN_WORKERS="1",
        PREFECT_API_URL=api_url,
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PYTHONPATH=str(REPO),
    )
    if crash:
        env["CET_CRASH_AT"] = crash
    return env


def _pipeline(root: Path, api_url: str, crash: str | None = None, *args: str) -> subprocess.CompletedProcess:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"run-{crash or 'clean'}.log", "w") as log:
        return subprocess.run([sys.executable, "-m", "flows.full_pipeline", *args], cwd=root,
                              env=_env(root, api_url, crash), stdout=log, stderr=subprocess.STDOUT, timeout=600)


def _digest(path: Path) -> str:
    if path.name == "metrics.json":  # training seconds differ from run to run; everything else must not
        m = json.loads(path.read_text())
        m.pop("seconds", None)
        return hashlib.sha256(json.dumps(m, sort_keys=True).encode()).hexdigest()
    if path.name in TIMES:  # every record and line the same but for its time
        text = path.read_text()
        lines = [json.loads(line) for line in text.splitlines() if line.strip()] if path.suffix == ".jsonl" else [
            json.loads(text)]
        kept = [{k: v for k, v in r.items() if k not in TIMES[path.name]} for r in lines]
        return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _outputs(root: Path) -> dict[str, str]:
    """sha256 of every finished output: datasets, model versions and the registry's records,
    report and figures."""
    out = {}
    for top in ("data", "models", "reports"):
        for p in sorted((root / top).rglob("*")):
            rel = p.relative_to(root)
            if p.is_file() and not any(part.startswith(".") for part in rel.parts):
                out[str(rel)] = _digest(p)
    return out


def _log_tail(root: Path, crash: str | None) -> str:
    return (root / f"run-{crash or 'clean'}.log").read_text(errors="replace")[-3000:]


def _nothing_unfinished_is_taken_as_finished(root: Path, point: str) -> None:
    data, models, reports = root / "data", root / "models", root / "reports"
    if point == "train":  # inside synthetic training: its dataset is done, no model version exists
        assert (data / "synthetic" / "manifest.json").is_file()
        assert not list((models / "synthetic").glob("v*")), "a version was registered by a killed training"
    if point == "promote":  # synthetic's first version judged and recorded, its promotion not yet written
        assert (models / "synthetic" / "history.jsonl").is_file() and not (
            models / "synthetic" / "promoted.json"
        ).exists()
    if point == "staging":  # a table's parquet was written under a temporary name only
        staged = data / ".mimic-work" / "staged"
        assert list(staged.glob(".*.parquet.tmp-*")), "the kill did not land inside staging"
        for tmp in staged.glob(".*.parquet.tmp-*"):
            table = tmp.name[1:].split(".parquet")[0]
            assert not (staged / f"{table}.json").exists(), f"{table}: recorded as staged by a killed run"
    if point in ("staging", "sql"):
        assert not (data / "mimic").exists(), "a MIMIC dataset appeared from a killed build"
    if point in ("scan", "embed"):
        assert not (data / "reddit").exists(), "a Reddit dataset appeared from a killed build"
    if point == "scan":
        assert list((data / ".reddit-work" / "rc").glob(".*.tmp-*")), "the kill did not land inside the scan"
    if point == "embed":
        shards = list((data / ".reddit-work" / "embeddings").rglob("shard-*.npz"))
        assert shards, "the kill did not land after the first saved block"
    if point == "report":
        assert not (reports / "report.md").exists(), "a report was written by a killed run"
        assert (models / "reddit" / "v0001").is_dir()
    for name in ("synthetic", "mimic", "reddit"):
        d = data / name
        if d.exists():  # a dataset folder under its real name is always complete
            assert {"manifest.json", "features.parquet", "events.parquet"} <= {p.name for p in d.iterdir()}


def _rerun_gives_the_same_bytes(root: Path, api_url: str, want: dict) -> None:
    done = _pipeline(root, api_url)
    assert done.returncode == 0, _log_tail(root, None)
    got = _outputs(root)
    assert sorted(got) == sorted(want), "different files after the crashes"
    differ = [k for k in want if got[k] != want[k]]
    assert differ == [], f"outputs differ from the uninterrupted run: {differ}"
    # the killed runs' temporaries were swept once their stage ran again
    left = [str(p.relative_to(root)) for p in root.rglob(".*") if LEFTOVER.search(p.name)]
    assert left == [], left


@pytest.mark.slow
def test_kill_9_inside_each_stage_then_rerun_gives_the_same_bytes(tmp_path):
    assert sorted(ORDER) == sorted(POINTS)
    home = tmp_path / "prefect-home"
    home.mkdir()
    proc, server = _start_server(home, _free_port())
    try:
        root = tmp_path / "run"  # the same absolute path for both, as model folders record it
        done = _pipeline(root, server["url"])
        assert done.returncode == 0, _log_tail(root, None)
        want = _outputs(root)
        assert any(k.endswith("sequences.npy") for k in want) and "reports/report.md" in want
        root.rename(tmp_path / "uninterrupted")  # kept for a look when this fails

        for point in ORDER:  # one stage at a time, so that each point is reached in this order
            crashed = _pipeline(root, server["url"], point, "--sequential")
            assert crashed.returncode == -signal.SIGKILL, (
                f"{point}: exit {crashed.returncode}\n{_log_tail(root, point)}"
            )
            _nothing_unfinished_is_taken_as_finished(root, point)
        _rerun_gives_the_same_bytes(root, server["url"], want)
        root.rename(tmp_path / "one-stage-at-a-time")

        # the default: the MIMIC build runs while the synthetic fits do, and the kill lands in both
        crashed = _pipeline(root, server["url"], "train")
        assert crashed.returncode == -signal.SIGKILL, f"train: exit {crashed.returncode}\n{_log_tail(root, 'train')}"
        _nothing_unfinished_is_taken_as_finished(root, "train")
        _rerun_gives_the_same_bytes(root, server["url"], want)
    finally:
        _stop(proc)


def _interrupt(argv: list[str], env: dict, cwd: Path, ready: str, log: Path,
               sig: signal.Signals = signal.SIGINT) -> tuple[int, str]:
    """Run ``python argv`` in a session of its own and, once its output (stdout and stderr,
    unbuffered) matches ``ready``, send the whole group SIGINT (a terminal's Ctrl-C), or the
    command alone ``sig`` (``kill``); its exit status and output, once every process of the group
    (the command's workers, multiprocessing's resource tracker) has ended."""
    import time

    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, *argv], stdout=err, stderr=subprocess.STDOUT,
                                env={**env, "PYTHONUNBUFFERED": "1"}, cwd=cwd, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not re.search(ready, log.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.1)
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
        status = proc.wait(30)  # not the end of the runs under way: they are stopped
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while True:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "a process of the command's group is still running"
        time.sleep(0.2)
    return status, log.read_text()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_ctrl_c_stops_an_evaluate_cleanly(tmp_path, sig):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it), or ``kill`` (SIGTERM to
    the command alone, as a scheduler stops a job) while ``flows.train evaluate`` fits side by
    side: one line and exit status 130 (143), no traceback or warning, no version and no
    half-written one, and no worker process left behind. On ``kill`` the command died at once,
    leaving its half-written version and multiprocessing's "leaked semaphore" warning."""
    import polars as pl
    from lifelines.datasets import load_rossi

    from flows.lib.ingest import write_follow_up_dataset

    data = write_follow_up_dataset(tmp_path / "data" / "rossi", pl.from_pandas(load_rossi()),
                                   ["fin", "age", "prio"], {"arrest": ("week", "arrest")}, name="rossi",
                                   time_unit="weeks", seed=0)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CET_", "PREFECT_API"))}
    env.update(CET_MODELS_DIR=str(tmp_path / "models"), CET_REPORTS_DIR=str(tmp_path / "reports"),
               CET_TRAIN_WORKERS="2", CET_MAX_EPOCHS="100000", PYTHONPATH=str(REPO))
    status, text = _interrupt(["-m", "flows.train", "evaluate", "--data", str(data), "--models", "CET,ET"], env,
                              tmp_path, r"rossi CET epoch \d+", tmp_path / "stderr.txt", sig)  # both workers fitting
    assert status == 128 + sig
    word = "interrupted" if sig == signal.SIGINT else "terminated"
    assert text.rstrip().splitlines()[-1] == f"python -m flows.train: {word}", text[-2000:]
    assert "Traceback" not in text and "leaked" not in text, text[-3000:]
    models = tmp_path / "models" / "rossi"
    assert not models.exists() or not [p.name for p in models.iterdir()], list(models.iterdir())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_ctrl_c_stops_the_real_data_benchmark_at_once(tmp_path, sig):
    """Ctrl-C (or ``kill`` of the command alone) while ``cet_experiments real`` runs two cohorts in
    two processes: one line and exit status 130 (143) at once, not when the cohorts under way end
    (the command's wait wakes to hear it), and no worker left. On ``kill`` the workers ran on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CET_")}
    env["PYTHONPATH"] = str(REPO)
    status, text = _interrupt(["-m", "cet_experiments", "real", "--out", str(tmp_path / "real"), "--cohorts",
                               "lymph_node,bmt", "--jobs", "2"], env, tmp_path, r"bmt: a seed 0 .*AUC",
                              tmp_path / "stderr.txt", sig)
    assert status == 128 + sig
    word = "interrupted" if sig == signal.SIGINT else "terminated"
    assert text.rstrip().splitlines()[-1] == f"python -m cet_experiments: {word}", text[-2000:]
    assert "Traceback" not in text and "leaked" not in text, text[-3000:]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_the_main_job_stops_at_once_and_stops_its_temporary_server(tmp_path, sig):
    """Ctrl-C (or ``kill``) while the main job trains on Prefect's temporary server: the runs are
    recorded as crashed and the command ends at once, exit status 130 (143), without tracebacks,
    and the temporary server ends with it. The server, in the command's process group, stopped
    first on Ctrl-C, and the command retried it for minutes; on ``kill`` it was left running."""
    import requests

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CET_", "PREFECT_API"))}
    env.update(CET_DATA_DIR=str(tmp_path / "data"), CET_MODELS_DIR=str(tmp_path / "models"),
               CET_REPORTS_DIR=str(tmp_path / "reports"), CET_SYNTHETIC_N="2000", CET_MAX_EPOCHS="100000",
               PREFECT_HOME=str(tmp_path / "prefect"), PYTHONPATH=str(REPO))
    status, text = _interrupt(["-m", "flows.full_pipeline", "--datasets", "synthetic"], env, tmp_path,
                              r"synthetic CET epoch \d+", tmp_path / "out.txt", sig)
    assert status == 128 + sig, text[-3000:]
    assert "Traceback" not in text and "Error logging to API" not in text, text[-3000:]
    assert "Finished in state Crashed(" in text, text[-3000:]
    if sig == signal.SIGINT:
        assert "python -m flows.full_pipeline: interrupted" in text.splitlines(), text[-2000:]
    url = re.search(r"Starting temporary server on (http://127\.0\.0\.1:\d+)", text)[1]
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{url}/api/health", timeout=5)
