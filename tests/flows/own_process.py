"""A flow's command run with no Prefect server configured, checked the same way for every command
that then works in its own process (``flows.table``, ``flows.synthetic``, ``flows.mimic build``)."""

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


def without_server(module: str, argv: list[str], out: Path, cwd: Path, timeout: int = 300) -> str:
    """``python -m module *argv --out out`` with no Prefect server configured: it prints ``out``, starts
    no temporary server and never imports Prefect. Returns its log (stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PYTHONPATH"] = str(REPO)
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", module, *argv, "--out", str(out)],
                         capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == str(out) and "temporary server" not in run.stderr
    assert not re.search(r"\|\s+prefect$", run.stderr, flags=re.M)  # Prefect is not even imported
    return run.stderr
