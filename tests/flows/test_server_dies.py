"""The Prefect server dies while a build runs (docs/reliability.md, "Prefect server faults"):
once the dataset is complete and stamped, the command says so and exits 0, without tracebacks."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl

from tests.prefect_server import _free_port, _start_server

REPO = Path(__file__).resolve().parents[2]


def test_a_server_that_dies_after_the_stamp_leaves_a_dataset_the_command_reports(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc, server = _start_server(home, _free_port())
    table = tmp_path / "cohort.csv"
    pl.DataFrame({"age": [float(40 + i % 30) for i in range(200)], "days": [float(1 + i) for i in range(200)],
                  "died": [i % 3 == 0 for i in range(200)]}).with_columns(pl.col("died").cast(pl.Int8)).write_csv(table)
    out = tmp_path / "data" / "c"
    killed = threading.Event()

    def kill_at_the_stamp():  # the moment the dataset is stamped, the server goes, as a crash would take it
        end = time.monotonic() + 180
        while time.monotonic() < end and proc.poll() is None:
            if (out / ".stage.json").is_file():
                os.kill(proc.pid, signal.SIGKILL)
                killed.set()
                return
            time.sleep(0.002)

    watcher = threading.Thread(target=kill_at_the_stamp, daemon=True)
    watcher.start()
    try:
        env = dict(server["env"], PYTHONPATH=str(REPO), PREFECT_CLIENT_MAX_RETRIES="0",
                   CET_DATA_DIR=str(tmp_path / "data"))
        done = subprocess.run([sys.executable, "-m", "flows.table", "--table", str(table), "--name", "c", "--event",
                               "death=days,died", "--time-unit", "days"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
    finally:
        watcher.join(5)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert killed.is_set(), "the dataset was never stamped"
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert str(out) in done.stdout.splitlines()[-1]
    assert "the Prefect API went away during the run" in done.stderr and "is complete and stamped" in done.stderr
    assert "Traceback" not in done.stderr.split("warning: the Prefect API went away")[-1]
    assert {"manifest.json", "features.parquet", "events.parquet"} <= {p.name for p in out.iterdir()}
