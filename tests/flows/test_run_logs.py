"""What a flow run says reaches its run log on the Prefect server (the UI), not only the terminal."""

import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prefect import get_client
from prefect.client.schemas.filters import LogFilter, LogFilterTimestamp

from tests.flows.test_pipeline import every_log

REPO = Path(__file__).resolve().parents[2]

# a flow run as an entry point runs one: the flows package imported first, then Prefect
FLOW = textwrap.dedent("""
    import logging, warnings
    import flows
    from prefect import flow, task

    @task(task_run_name="warn")
    def warn():
        warnings.warn("planted warning 7c1e: no observed time for event 1", UserWarning)
        logging.getLogger("cet_model").warning("planted log line 7c1e")

    @flow(name="warns")
    def warns():
        warn()

    warns()
""")


@pytest.mark.slow  # a process of its own that imports Prefect and runs a flow
def test_a_python_warning_in_a_flow_run_is_in_its_run_log():
    """A model's ``warnings.warn`` (an event no training row saw, a budget that ended early) is
    logged to ``py.warnings``, which the run's log handler takes like ``cet_model``'s lines: a
    served run shows it in the UI, not only on the worker's terminal."""
    started = datetime.now(UTC)
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if k != "PREFECT_LOGGING_EXTRA_LOGGERS"}
    env["PREFECT_API_URL"] = PREFECT_API_URL.value()  # the session's server (tests/flows/conftest.py)
    assert env["PREFECT_API_URL"].startswith("http://127.0.0.1:"), env["PREFECT_API_URL"]
    done = subprocess.run([sys.executable, "-c", FLOW], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "UserWarning: planted warning 7c1e" in done.stderr  # on the terminal too
    with get_client(sync_client=True) as client:
        logs = [e for e in every_log(client, LogFilter(timestamp=LogFilterTimestamp(after_=started)))
                if "7c1e" in e.message]
    said = {e.name: e.message for e in logs}
    assert said.get("cet_model") == "planted log line 7c1e", said
    assert "UserWarning: planted warning 7c1e: no observed time for event 1" in said.get("py.warnings", ""), said
    assert all(e.flow_run_id is not None for e in logs)
