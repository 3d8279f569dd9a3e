"""A flow's command run with no Prefect server configured, checked the same way for every command
that then works in its own process (``flows.table``, ``flows.synthetic``, ``flows.mimic build``,
``flows.reddit build``)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def flow_runs(name: str) -> int:
    """How many runs of flow ``name`` the test harness's server holds."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    with get_client(sync_client=True) as client:
        return len(client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[name]))))


def run_without_server(module: str, argv: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python -m module *argv`` with no Prefect server configured: it succeeds, starts no temporary
    server and never imports Prefect. Returns the finished process (text output)."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PYTHONPATH"] = str(REPO)
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", module, *argv],
                         capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "temporary server" not in run.stderr
    assert not re.search(r"\|\s+prefect$", run.stderr, flags=re.M)  # Prefect is not even imported
    return run


def without_server(module: str, argv: list[str], out: Path, cwd: Path, timeout: int = 300) -> str:
    """``python -m module *argv --out out`` with no Prefect server configured (``run_without_server``):
    it prints ``out``. Returns its log (stderr)."""
    run = run_without_server(module, [*argv, "--out", str(out)], cwd, timeout)
    assert run.stdout.strip() == str(out)
    return run.stderr


def the_flow_builds_the_same(main, argv: list[str], here: Path, flown: Path, flow: str, runs_before: int,
                             monkeypatch) -> None:
    """After ``here`` was built with no server configured (``without_server``): with the test harness's
    server named as a user names theirs, the command ``main(argv)`` builds ``flown`` as one run of flow
    ``flow`` and skips ``here``; both hold the same dataset (its parquet files, any sequences, the
    manifest) and the same stage key and source; with no server configured again, the command skips
    the flow's build, no flow run."""
    import numpy as np
    import polars as pl
    from prefect.settings import PREFECT_API_URL

    with monkeypatch.context() as served:
        served.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
        assert main([*argv, "--out", str(flown)]) == 0
        assert flow_runs(flow) == runs_before + 1
        stamp = (here / ".stage.json").read_text()
        assert main([*argv, "--out", str(here)]) == 0  # built without Prefect: the flow skips it
        assert (here / ".stage.json").read_text() == stamp and flow_runs(flow) == runs_before + 2
    for name in ("features.parquet", "events.parquet"):
        assert pl.read_parquet(here / name).equals(pl.read_parquet(flown / name)), name
    assert (here / "sequences.npy").exists() == (flown / "sequences.npy").exists()
    if (here / "sequences.npy").exists():
        assert np.array_equal(np.load(here / "sequences.npy"), np.load(flown / "sequences.npy"))
    manifests = [json.loads((d / "manifest.json").read_text()) for d in (here, flown)]
    assert manifests[0] == manifests[1]
    stamps = [json.loads((d / ".stage.json").read_text()) for d in (here, flown)]
    assert stamps[0]["key"] == stamps[1]["key"] and stamps[0].get("source") == stamps[1].get("source")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    stamp = (flown / ".stage.json").read_text()
    assert main([*argv, "--out", str(flown)]) == 0  # and the command skips the flow's build
    assert (flown / ".stage.json").read_text() == stamp and flow_runs(flow) == runs_before + 2
