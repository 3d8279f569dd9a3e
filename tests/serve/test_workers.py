"""prefect.yaml as a user deploys it: a real ``prefect server`` on a loopback port, a process work
pool, ``prefect deploy --all`` from the repository, and a worker that runs a deployment."""

import base64
import subprocess
from pathlib import Path

import pytest
import requests
import yaml

from tests.prefect_server import PREFECT, _free_port, _start_server, _stop

REPO = Path(__file__).resolve().parents[2]
AUTH = "worker-test-auth-string-9e107d9d372bb6826bd81d3542a419d6"
HEADERS = {"Authorization": "Basic " + base64.b64encode(AUTH.encode()).decode()}
FLOWS = ["build-synthetic", "build-mimic-features", "build-reddit-features", "build-table-dataset", "train-evaluate",
         "retrain", "predict", "full-pipeline"]


def test_prefect_yaml_deploys_every_flow_the_server_serves():
    """The same deployments as ``python -m flows.serve``, each on the cet pool, its entrypoint a flow."""
    import importlib

    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    names = [d["name"] for d in spec["deployments"]]
    assert names == FLOWS
    for d in spec["deployments"]:
        path, func = d["entrypoint"].split(":")
        module = path.removesuffix(".py").replace("/", ".")
        assert getattr(importlib.import_module(module), func).name == d["name"], d
        assert d["work_pool"]["name"] == "cet"
    retrain = next(d for d in spec["deployments"] if d["name"] == "retrain")
    assert retrain["schedules"][0]["cron"] == "0 3 * * 1"
    from flows.serve import ONE_AT_A_TIME, deployments

    limits = {d["name"]: d.get("concurrency_limit") for d in spec["deployments"]}
    assert limits == {n: None if n == "predict" else ONE_AT_A_TIME for n in FLOWS}  # scoring runs may overlap
    served = {d.name: d for d in deployments()}  # python -m flows.serve: the same limits
    assert list(served) == FLOWS
    for name, limit in limits.items():
        d = served[name]
        got = None if d.concurrency_limit is None else {
            "limit": d.concurrency_limit, "collision_strategy": d.concurrency_options.collision_strategy.value}
        assert got == limit, name


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc, info = _start_server(tmp_path_factory.mktemp("prefect-server"), _free_port(), auth=AUTH)
    yield info
    _stop(proc)


@pytest.mark.slow
def test_a_worker_runs_a_deployment_from_prefect_yaml(server, tmp_path):
    env = dict(server["env"], CET_DATA_DIR=str(tmp_path / "data"), CET_MODELS_DIR=str(tmp_path / "models"),
               CET_REPORTS_DIR=str(tmp_path / "reports"), CET_SYNTHETIC_N="1000", PYTHONPATH=str(REPO))

    def prefect(*args, cwd=tmp_path, timeout=300):
        done = subprocess.run([PREFECT, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    prefect("work-pool", "create", "cet", "--type", "process")
    prefect("--no-prompt", "deploy", "--all", cwd=REPO)
    url = server["url"]
    for name in FLOWS:
        r = requests.get(f"{url}/deployments/name/{name}/{name}", timeout=10, headers=HEADERS)
        assert r.ok and r.json()["work_pool_name"] == "cet", (name, r.text[:300])
    retrain = requests.get(f"{url}/deployments/name/retrain/retrain", timeout=10, headers=HEADERS).json()
    assert [s["schedule"]["cron"] for s in retrain["schedules"]] == ["0 3 * * 1"]
    log = open(tmp_path / "worker.log", "w")
    worker = subprocess.Popen([PREFECT, "worker", "start", "--pool", "cet", "--type", "process"],
                              env=dict(env, PREFECT_WORKER_QUERY_SECONDS="2"), cwd=tmp_path, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        out = prefect("deployment", "run", "build-synthetic/build-synthetic", "--watch", "--watch-timeout", "240")
        assert "Completed" in out, out[-2000:]
    finally:
        _stop(worker)
        log.close()
    assert (tmp_path / "data" / "synthetic" / "manifest.json").is_file()  # the worker's settings, this checkout
