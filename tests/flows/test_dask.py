"""A mapped stage (per-table MIMIC staging) on a real Dask LocalCluster bound to 127.0.0.1."""

import pytest
from prefect.settings import PREFECT_API_URL

from cet_model.dataset import load_dataset
from flows.lib.flow_params import MimicBuildParams
from flows.lib.infra.runners import local_cluster_kwargs, task_runner, with_runner
from flows.mimic import build_mimic_features
from tests.mimic_fixture import write_fixture


def test_runner_setting_is_checked():
    from flows.lib.infra.settings import Settings

    with pytest.raises(ValueError, match="CET_TASK_RUNNER"):
        Settings(task_runner="ray")
    assert type(task_runner("threads")).__name__ == "ThreadPoolTaskRunner"
    assert task_runner("dask://127.0.0.1:8786").address == "tcp://127.0.0.1:8786"
    assert local_cluster_kwargs()["dashboard_address"] is None and local_cluster_kwargs()["host"] == "127.0.0.1"


def test_mimic_staging_maps_over_a_dask_local_cluster(tmp_path, monkeypatch):
    # Dask workers are separate processes: they must reach the harness's server, not start their own
    monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
    from distributed import LocalCluster

    src = write_fixture(tmp_path / "mimic", n_admissions=6)
    with LocalCluster(**local_cluster_kwargs(2)) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        flow = with_runner(build_mimic_features, "dask://" + cluster.scheduler_address.split("://")[1])
        assert type(flow.task_runner).__name__ == "DaskTaskRunner"
        params = MimicBuildParams(out=str(tmp_path / "ds"), mimic_dir=str(src), n_chart=2, n_lab=1, n_output=1)
        state = flow(params, return_state=True)
        ran = {k: v.state_counts["memory"] for k, v in cluster.scheduler.task_prefixes.items()}
    assert ran.get("stage") == 8, ran  # the 8 per-table staging tasks finished on the cluster's workers
    assert state.is_completed()
    ds = load_dataset(state.result())
    assert len(ds.train) + len(ds.val) + len(ds.test) == 6
    staged = sorted(p.name for p in (tmp_path / ".ds-work" / "staged").glob("*.parquet"))
    assert len(staged) == 8
