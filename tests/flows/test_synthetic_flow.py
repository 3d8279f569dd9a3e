"""build-synthetic as a flow run and as a command with no Prefect server configured."""

import json
import re

import polars as pl

from flows import synthetic as synthetic_cli
from tests.flows.own_process import flow_runs, without_server


def test_without_a_prefect_server_the_command_builds_in_its_own_process(tmp_path, monkeypatch):
    """With no Prefect server configured, ``flows.synthetic`` builds in its own process, Prefect not even
    imported and no temporary server: no flow run, the same folder as the flow's build, and each skips a
    build the other made with the same options."""
    from prefect.settings import PREFECT_API_URL

    argv = ["--n", "2000", "--seed", "3"]
    here, flown = tmp_path / "here", tmp_path / "flown"
    before = flow_runs("build-synthetic")
    log = without_server("flows.synthetic", argv, here, tmp_path)
    assert re.search(r"\| INFO +\| flows\.synthetic - synthetic \(reference, n=2000, seed 3\) written to ", log)
    assert flow_runs("build-synthetic") == before
    with monkeypatch.context() as served:  # the test harness's server named as a user names theirs: a flow run
        served.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
        assert synthetic_cli.main([*argv, "--out", str(flown)]) == 0
        assert flow_runs("build-synthetic") == before + 1
        stamp = (here / ".stage.json").read_text()
        assert synthetic_cli.main([*argv, "--out", str(here)]) == 0  # built without Prefect: the flow skips it
        assert (here / ".stage.json").read_text() == stamp
    for name in ("features.parquet", "events.parquet"):
        assert pl.read_parquet(here / name).equals(pl.read_parquet(flown / name)), name
    assert json.loads(stamp)["key"] == json.loads((flown / ".stage.json").read_text())["key"]
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    stamp = (flown / ".stage.json").read_text()
    assert synthetic_cli.main([*argv, "--out", str(flown)]) == 0  # and the command skips the flow's build
    assert (flown / ".stage.json").read_text() == stamp and flow_runs("build-synthetic") == before + 2
