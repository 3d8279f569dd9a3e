"""Prefect's temporary server as CET starts it (``flows.lib.infra.temporary_server``): with Prefect's
logging configuration plus the loggers whose messages are noise of its shutdown, kept quiet. The
process group and the exit on a signal are checked by the main job's interrupt tests
(tests/test_crash_consistency.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.lib.infra import temporary_server

REPO = Path(__file__).resolve().parents[1]


def test_the_servers_logging_is_prefects_with_the_pool_quiet(tmp_path, monkeypatch):
    """The written configuration, read as the server reads it, is Prefect's own but for SQLAlchemy's
    pool (the server process applies it: the next test)."""
    from prefect.logging.configuration import DEFAULT_LOGGING_SETTINGS_PATH, load_logging_config

    monkeypatch.delenv("PREFECT_LOGGING_SETTINGS_PATH", raising=False)
    path = temporary_server.server_logging_config(tmp_path)
    config, default = load_logging_config(path), load_logging_config(DEFAULT_LOGGING_SETTINGS_PATH)
    assert config["loggers"].pop("sqlalchemy.pool") == {"level": "CRITICAL"}
    assert config == default


def test_a_logging_configuration_of_the_users_own_is_left_to_them(tmp_path, monkeypatch):
    own = tmp_path / "mine.yml"
    own.write_text("version: 1\n")
    monkeypatch.setenv("PREFECT_LOGGING_SETTINGS_PATH", str(own))
    assert temporary_server.server_logging_config(tmp_path / "x") is None


@pytest.mark.slow  # starts a Prefect server
def test_the_started_server_reads_that_configuration_and_it_is_removed(tmp_path):
    """The server process gets ``PREFECT_LOGGING_SETTINGS_PATH`` of the written file (its
    environment, read from /proc) in a process group of its own; once it answers, the file is gone.
    Applied as the server applies it, the configuration keeps the pool's "Exception during reset"
    traceback (logged at ERROR when the server stops mid-query) from the terminal, not the server's errors."""
    code = (
        "import os\n"
        "from prefect.server.api import server\n"
        "from flows.lib.infra import temporary_server\n"
        "temporary_server.start()\n"
        "p = server.SubprocessASGIServer().server_process\n"
        "env = dict(v.split('=', 1) for v in open(f'/proc/{p.pid}/environ').read().split('\\0') if '=' in v)\n"
        "print(env.get('PREFECT_LOGGING_SETTINGS_PATH'), os.getpgid(p.pid) == p.pid, flush=True)\n"
        "import logging, logging.config, pathlib, tempfile\n"
        "from prefect.logging.configuration import load_logging_config\n"
        "path = temporary_server.server_logging_config(pathlib.Path(tempfile.mkdtemp()))\n"
        "logging.config.dictConfig(load_logging_config(path))\n"
        "names = ('sqlalchemy.pool.impl.AsyncAdaptedQueuePool', 'prefect.server.api', 'sqlalchemy.engine')\n"
        "print(*(logging.getLogger(n).isEnabledFor(logging.ERROR) for n in names))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "PREFECT_LOGGING_SETTINGS"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PYTHONPATH=str(REPO), TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    path, own_group, pool, server, engine = done.stdout.split()
    assert Path(path).name == "logging.yml" and Path(path).parent.name.startswith("cet-server-"), path
    assert Path(path).parent.parent == tmp_path and not Path(path).parent.exists()
    assert own_group == "True"
    assert (pool, server, engine) == ("False", "True", "True")
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
