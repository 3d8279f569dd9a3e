"""The thread runner is bounded: Prefect's default pool has sys.maxsize threads, so a mapped task
ran every item at once (the Reddit build at 50,000 users was killed under a 4 GiB cap)."""

import threading
import time
import traceback

import pytest
from prefect import flow, task

from flows.lib.infra.runners import THREADS_VARIABLE, default_threads, thread_runner


def test_every_flow_declares_the_bounded_thread_runner(monkeypatch):
    from flows.full_pipeline import full_pipeline
    from flows.mimic import build_mimic_features
    from flows.predict import predict
    from flows.reddit import build_reddit_features
    from flows.synthetic import build_synthetic
    from flows.train import retrain, train_evaluate

    for f in (full_pipeline, build_mimic_features, predict, build_reddit_features, build_synthetic,
              retrain, train_evaluate):
        assert type(f.task_runner).__name__ == "ThreadPoolTaskRunner", f.name
        assert 1 <= f.task_runner._max_workers <= 1024, (f.name, f.task_runner._max_workers)
    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    assert default_threads() >= 2
    monkeypatch.setenv(THREADS_VARIABLE, "0")
    with pytest.raises(ValueError, match=THREADS_VARIABLE):
        default_threads()


def test_a_mapped_task_runs_at_most_the_bound_at_once(monkeypatch):
    monkeypatch.setenv(THREADS_VARIABLE, "3")
    lock, running, peak = threading.Lock(), [0], [0]

    @task
    def work(i: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.3)
        with lock:
            running[0] -= 1
        return i

    @flow(task_runner=thread_runner())
    def mapped() -> list[int]:
        return [f.result() for f in work.map(range(9))]

    assert mapped() == list(range(9))
    assert peak[0] == 3


def test_every_task_names_its_runs_by_what_they_do():
    """Prefect names a task run ``<task>-<3 hex digits>`` unless the task says otherwise: each
    task of the flows names its runs (a table, a month, a dataset), so the UI reads as the work."""
    import importlib

    from prefect.tasks import Task

    found = {}
    for module in ("common", "full_pipeline", "mimic", "predict", "reddit", "synthetic", "table", "train"):
        mod = importlib.import_module(f"flows.{module}")
        found.update({f"{module}.{k}": v for k, v in vars(mod).items() if isinstance(v, Task)})
    assert len(found) >= 25, sorted(found)
    unnamed = sorted(k for k, t in found.items() if t.task_run_name is None)
    assert not unnamed, unnamed


SLOW_SQL = "SELECT count(*) AS n FROM range(100000000000) t(x) WHERE hash(x) % 7 = 3"  # minutes on any machine


@task(name="slow-sql")
def _slow_sql(i: int, folder: str) -> str:
    from pathlib import Path

    from flows.lib.infra.sql_runner import run_sql_file
    from flows.lib.mimic.staging import connect

    con = connect(threads=1)
    try:
        return run_sql_file(con, Path(folder) / "marts" / "mart_slow.sql")
    except BaseException as exc:  # as the build does: no frame Prefect keeps holds the connection to the exit
        con.close()
        del con
        traceback.clear_frames(exc.__traceback__)
        raise


def test_ctrl_c_ends_the_statements_of_a_flows_task_threads_which_crash_without_a_traceback(tmp_path, caplog):
    """The runner waits for its running tasks before a flow ends: Ctrl-C (``interrupts.stop_all``, what the
    commands' SIGINT handler calls) interrupts their DuckDB statements, and Prefect records each task as
    crashed by an interrupt, in one line, as it records the flow."""
    from prefect import get_client

    from flows.lib.infra import interrupts

    (tmp_path / "marts").mkdir()
    (tmp_path / "marts" / "mart_slow.sql").write_text(SLOW_SQL)

    @flow(name="interrupted-statements", task_runner=thread_runner(2))
    def statements() -> list:
        running = _slow_sql.map([0, 1], str(tmp_path))
        threading.Timer(1.0, interrupts.stop_all).start()  # Ctrl-C a second into the statements
        return [f.result() for f in running]

    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt), caplog.at_level("INFO"):
            statements()
    finally:
        interrupts.reset()
    assert time.monotonic() - started < 60, "the flow waited for its statements"
    with get_client(sync_client=True) as client:
        runs = [r for r in client.read_task_runs() if r.name.startswith("slow-sql")]
    assert len(runs) >= 2 and {r.state.type.value for r in runs} == {"CRASHED"}, [r.state for r in runs]
    assert all(r.state.message == "Execution was aborted by an interrupt signal." for r in runs)
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
