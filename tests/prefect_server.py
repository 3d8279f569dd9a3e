"""A real ``prefect server`` on a free 127.0.0.1 port, for tests that run flows in subprocesses."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

PREFECT = str(Path(sys.executable).with_name("prefect"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(check, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what}")


def _stop(proc: subprocess.Popen, timeout: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _start_server(home: Path, port: int) -> tuple[subprocess.Popen, dict]:
    """``prefect server start`` on 127.0.0.1:port with its database under ``home``; waits for health."""
    env = dict(os.environ, PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    env.pop("PREFECT_API_URL", None)
    log = open(home / "server.log", "a")
    proc = subprocess.Popen([PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port),
                             "--analytics-off", "--no-ui"], env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    url = f"http://127.0.0.1:{port}/api"

    def healthy():
        if proc.poll() is not None:
            raise RuntimeError(f"prefect server exited: {(home / 'server.log').read_text()[-2000:]}")
        try:
            return requests.get(f"{url}/health", timeout=2).ok
        except requests.ConnectionError:
            return False

    _wait(healthy, 120, "the Prefect server")
    return proc, {"url": url, "env": dict(env, PREFECT_API_URL=url), "home": home}
