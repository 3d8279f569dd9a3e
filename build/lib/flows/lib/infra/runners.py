"""The task runner named by the ``task_runner`` setting.

- ``threads`` (default): Prefect's ThreadPoolTaskRunner.
- ``dask``: a temporary Dask LocalCluster bound to 127.0.0.1 with the dashboard off
  (``n_workers`` processes, one thread each).
- ``dask://HOST:PORT`` or ``tcp://HOST:PORT``: an existing Dask scheduler.

With Dask (or process pools) set ``PREFECT_API_URL`` to a running Prefect server: in
ephemeral mode every worker process starts its own temporary API server (slow, and
SQLite locks). Ray: ``pip install prefect-ray`` and ``flow.with_options(task_runner=
RayTaskRunner(address=...))``; not installed or tested here.
"""

from __future__ import annotations


def local_cluster_kwargs(n_workers: int = 2) -> dict:
    return {"n_workers": n_workers, "threads_per_worker": 1, "processes": True,
            "host": "127.0.0.1", "dashboard_address": None}


def task_runner(spec: str = "threads", n_workers: int = 2):
    if spec == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner()
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
