"""Prefect's temporary server, for a command that runs a flow with no server configured.

Prefect starts it on the first API call, as a child process in the command's process group. A
terminal's Ctrl-C reaches the whole group, so the server would stop first, and the command,
recording the runs it ends as crashed, would retry the dead server for minutes before printing
connection tracebacks. ``start`` starts the same server (Prefect's own ``SubprocessASGIServer``,
the instance its client then uses) in a process group of its own: Ctrl-C stops the command,
which records its runs and stops the server on exit, as Prefect does at every exit. A hangup or
SIGTERM ends the command the same way instead of leaving the server running without it: as
Ctrl-C (``cli.interruptible``, which every command runs in), or, where nothing handles them,
with ``SystemExit`` here.

A query of the server's cancelled as it stopped made
SQLAlchemy's pool log a traceback ("Exception during reset or similar") on the command's
terminal. The server runs with Prefect's logging configuration plus ``QUIET_LOGGERS`` (unless
``PREFECT_LOGGING_SETTINGS_PATH`` names one of the user's own), written to a temporary file it
reads at its start.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

# the server's loggers whose messages are noise of its shutdown, at the level they are kept from
QUIET_LOGGERS = {"sqlalchemy.pool": "CRITICAL"}


def start() -> None:
    """Start Prefect's temporary server in a process group of its own, unless a server is
    configured (``PREFECT_API_URL``), the temporary one is off, or it already runs."""
    from prefect.server.api import server as prefect_server
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return
    server = prefect_server.SubprocessASGIServer()  # the instance Prefect's client starts and uses
    if server.running:
        return
    popen, folder = subprocess.Popen, Path(tempfile.mkdtemp(prefix="cet-server-"))
    config = server_logging_config(folder)

    def in_own_group(*args, **kwargs):  # Prefect's own command, in a group of its own
        if config is not None and "PREFECT_LOGGING_SETTINGS_PATH" not in (kwargs.get("env") or {}):
            kwargs["env"] = {**(kwargs.get("env") or os.environ), "PREFECT_LOGGING_SETTINGS_PATH": str(config)}
        return popen(*args, process_group=0, **kwargs)
    subprocess.Popen = in_own_group
    try:
        server.start()  # returns once the server answers: it has read its logging configuration
    finally:
        subprocess.Popen = popen
        shutil.rmtree(folder, ignore_errors=True)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:  # exit through Python, whose exit stops the server
            signal.signal(sig, _exit)


def server_logging_config(folder: Path) -> Path | None:
    """Prefect's logging configuration with ``QUIET_LOGGERS`` added, written in ``folder`` for the
    server to read; None when the user names a configuration of their own (then it is theirs)."""
    import yaml
    from prefect.logging.configuration import DEFAULT_LOGGING_SETTINGS_PATH
    from prefect.settings import PREFECT_LOGGING_SETTINGS_PATH

    if os.environ.get("PREFECT_LOGGING_SETTINGS_PATH") or PREFECT_LOGGING_SETTINGS_PATH.value().exists():
        return None
    config = yaml.safe_load(DEFAULT_LOGGING_SETTINGS_PATH.read_text())  # ${...} templates stay for the server
    config.setdefault("loggers", {}).update({name: {"level": level} for name, level in QUIET_LOGGERS.items()})
    path = folder / "logging.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _exit(signum, frame) -> None:
    raise SystemExit(128 + signum)
