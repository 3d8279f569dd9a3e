"""build-synthetic as a flow run and as a command with no Prefect server configured."""

import re

from flows import synthetic as synthetic_cli
from tests.flows.own_process import flow_runs, the_flow_builds_the_same, without_server


def test_without_a_prefect_server_the_command_builds_in_its_own_process(tmp_path, monkeypatch):
    """With no Prefect server configured, ``flows.synthetic`` builds in its own process, Prefect not even
    imported and no temporary server: no flow run, the same folder as the flow's build, and each skips a
    build the other made with the same options."""

    argv = ["--n", "2000", "--seed", "3"]
    here, flown = tmp_path / "here", tmp_path / "flown"
    before = flow_runs("build-synthetic")
    log = without_server("flows.synthetic", argv, here, tmp_path)
    assert re.search(r"\| INFO +\| flows\.synthetic - synthetic \(reference, n=2000, seed 3\) written to ", log)
    assert flow_runs("build-synthetic") == before
    the_flow_builds_the_same(synthetic_cli.main, argv, here, flown, "build-synthetic", before, monkeypatch)
