"""The thread runner is bounded: Prefect's default pool has sys.maxsize threads, so a mapped task
ran every item at once (the Reddit build at 50,000 users was killed under a 4 GiB cap)."""

import threading
import time

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
