"""The task runner named by the ``task_runner`` setting.

- ``threads`` (default): Prefect's ThreadPoolTaskRunner with a bounded pool: every flow here
  declares ``task_runner=thread_runner()``. Prefect's own default pool is unbounded
  (``sys.maxsize`` threads), so a mapped task ran every item at once: the Reddit build at 62,000
  generated users ran its 35 comment scans together and was killed under a 4 GiB cap. The bound is
  ``PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS`` when set, else the cores this process may use
  (at least 2); the scans, staging and training are CPU-bound, so more threads gain nothing.
- ``dask``: a temporary Dask LocalCluster bound to 127.0.0.1 with the dashboard off
  (``n_workers`` processes, one thread each).
- ``dask://HOST:PORT`` or ``tcp://HOST:PORT``: an existing Dask scheduler.

With Dask (or process pools) set ``PREFECT_API_URL`` to a running Prefect server: in
ephemeral mode every worker process starts its own temporary API server (slow, and
SQLite locks). Ray: ``pip install prefect-ray`` and ``flow.with_options(task_runner=
RayTaskRunner(address=...))``; not installed or tested here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from cet_model.threads import usable_cpus, whole_number

THREADS_VARIABLE = "PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS"


def default_threads() -> int:
    """Tasks run at once by the thread runner: ``$PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS``,
    else the cores this process may use, at least 2."""
    value = os.environ.get(THREADS_VARIABLE, "").strip()
    if value:
        return whole_number(THREADS_VARIABLE, value)
    return max(2, usable_cpus())


def in_threads(fn: Callable, *args, name: str = "task") -> list:
    """``fn`` over the items of its list arguments (the others passed to every call, as a Prefect
    task's ``map`` takes them), ``default_threads()`` at a time, as the thread runner maps a task;
    the results in the items' order. A failed call or Ctrl-C starts no call not yet started, waits
    for the running ones and raises its error.

    >>> in_threads(lambda a, b: a + b, [1, 2, 3], 10)
    [11, 12, 13]
    """
    lengths = {len(a) for a in args if isinstance(a, list)}
    if len(lengths) != 1:
        raise ValueError(f"in_threads: the mapped arguments must be lists of one length, got lengths {sorted(lengths)}")
    n = lengths.pop()
    calls = [[a[i] if isinstance(a, list) else a for a in args] for i in range(n)]
    pool = ThreadPoolExecutor(max_workers=default_threads(), thread_name_prefix=name)
    try:
        futures = [pool.submit(fn, *call) for call in calls]
        return [f.result() for f in futures]
    except BaseException:  # a failed item or Ctrl-C: the items not yet started are not started
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)


def thread_runner(max_workers: int | None = None):
    """Prefect's ThreadPoolTaskRunner with at most ``max_workers`` (default ``default_threads()``)
    tasks at once."""
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=max_workers or default_threads())


def local_cluster_kwargs(n_workers: int = 2) -> dict:
    return {"n_workers": n_workers, "threads_per_worker": 1, "processes": True,
            "host": "127.0.0.1", "dashboard_address": None}


def task_runner(spec: str = "threads", n_workers: int = 2):
    if spec == "threads":
        return thread_runner()
    from prefect_dask import DaskTaskRunner

    if spec == "dask":
        return DaskTaskRunner(cluster_class="distributed.LocalCluster", cluster_kwargs=local_cluster_kwargs(n_workers))
    if spec.startswith(("dask://", "tcp://")):
        return DaskTaskRunner(address="tcp://" + spec.split("://", 1)[1])
    raise ValueError(f"task runner {spec!r}: expected threads, dask or dask://HOST:PORT")


def with_runner(flow_obj, spec: str = "threads", n_workers: int = 2):
    """``flow_obj`` with the chosen runner (threads: unchanged)."""
    if spec == "threads":
        return flow_obj
    return flow_obj.with_options(task_runner=task_runner(spec, n_workers))
