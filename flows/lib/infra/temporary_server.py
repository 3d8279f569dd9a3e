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
"""

from __future__ import annotations

import functools
import signal
import subprocess


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
    popen = subprocess.Popen
    subprocess.Popen = functools.partial(popen, process_group=0)  # Prefect's own command, in a group of its own
    try:
        server.start()
    finally:
        subprocess.Popen = popen
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:  # exit through Python, whose exit stops the server
            signal.signal(sig, _exit)


def _exit(signum, frame) -> None:
    raise SystemExit(128 + signum)
