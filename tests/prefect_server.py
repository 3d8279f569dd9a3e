"""A real ``prefect server`` on a free 127.0.0.1 port, for tests that run flows in subprocesses."""

import base64
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


def _start_server(home: Path, port: int, auth: str | None = None) -> tuple[subprocess.Popen, dict]:
    """``prefect server start`` on 127.0.0.1:port with its database under ``home``; waits for health.
    ``auth``: the API's auth string (PREFECT_SERVER_API_AUTH_STRING); the returned client ``env``
    carries it as PREFECT_API_AUTH_STRING and ``headers`` as the Basic credentials."""
    env = dict(os.environ, PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    env.pop("PREFECT_API_URL", None)
    env.pop("PREFECT_API_AUTH_STRING", None)
    if auth:
        env["PREFECT_SERVER_API_AUTH_STRING"] = auth
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
    client = {k: v for k, v in env.items() if k != "PREFECT_SERVER_API_AUTH_STRING"}
    client |= {"PREFECT_API_URL": url} | ({"PREFECT_API_AUTH_STRING": auth} if auth else {})
    headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()} if auth else {}
    return proc, {"url": url, "env": client, "home": home, "headers": headers}
