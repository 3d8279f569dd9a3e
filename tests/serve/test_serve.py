"""One real ``prefect server`` on a free loopback port, ``python -m flows.serve``, and
deployments triggered with the CLI, as the README tells users to do."""

import base64
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import requests

from tests.prefect_server import PREFECT, _free_port, _start_server, _stop, _wait

REPO = Path(__file__).resolve().parents[2]
AUTH = "serve-test-auth-string-5f4dcc3b5aa765d61d8327deb882cf99"
HEADERS = {"Authorization": "Basic " + base64.b64encode(AUTH.encode()).decode()}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc, info = _start_server(tmp_path_factory.mktemp("prefect-server"), _free_port(), auth=AUTH)
    yield info
    _stop(proc)


def _serve(server, workdir: Path, cron: str = "*/5 * * * *") -> subprocess.Popen:
    env = dict(server["env"], CET_DATA_DIR=str(workdir / "data"), CET_MODELS_DIR=str(workdir / "models"),
               CET_SYNTHETIC_N="1000", CET_MAX_EPOCHS="2", CET_HIDDEN="16", CET_RETRAIN_CRON=cron,
               CET_RETRAIN_DATASET="synthetic", PREFECT_RUNNER_POLL_FREQUENCY="2", PYTHONPATH=str(REPO))
    log = open(workdir / "serve.log", "a")
    return subprocess.Popen([sys.executable, "-m", "flows.serve"], cwd=workdir, env=env, stdout=log,
                            stderr=subprocess.STDOUT)


def _deployment(url: str, name: str) -> dict | None:
    r = requests.get(f"{url}/deployments/name/{name}", timeout=10, headers=HEADERS)
    return r.json() if r.ok else None


def _run(server, name: str, *params: str) -> subprocess.CompletedProcess:
    args = [PREFECT, "deployment", "run", name, "--watch", "--watch-timeout", "240"]
    for p in params:
        args += ["--param", p]
    return subprocess.run(args, env=server["env"], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_serve_runs_deployments_and_keeps_the_schedule_across_a_restart(server, tmp_path):
    url = server["url"]
    serve = _serve(server, tmp_path)
    try:
        names = ["build-synthetic", "build-mimic-features", "build-reddit-features", "build-table-dataset",
                 "train-evaluate", "retrain",
                 "predict", "full-pipeline"]
        _wait(lambda: all(_deployment(url, f"{n}/{n}") for n in names), 90, "the served deployments")
        done = _run(server, "build-synthetic/build-synthetic")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Completed" in done.stdout
        assert (tmp_path / "data" / "synthetic" / "manifest.json").is_file()

        # no credentials, no run; with them, a path outside the configured folders is refused by name
        dep = _deployment(url, "build-synthetic/build-synthetic")
        keep = tmp_path / "outside" / "keep"
        keep.mkdir(parents=True)
        (keep / "notes.txt").write_text("x")
        anyone = requests.post(f"{url}/deployments/{dep['id']}/create_flow_run", timeout=10,
                               json={"parameters": {"params": {"out": str(keep)}}})
        assert anyone.status_code == 401
        refused = _run(server, "build-synthetic/build-synthetic", f'params={{"out": "{keep}"}}')
        assert refused.returncode != 0 and "Completed" not in refused.stdout
        runs = requests.post(
            f"{url}/flow_runs/filter",
            timeout=10,
            headers=HEADERS,
            json={"deployments": {"id": {"any_": [dep["id"]]}}, "flow_runs": {"state": {"type": {"any_": ["FAILED"]}}}},
        ).json()
        assert runs and "parameter 'out'" in runs[0]["state"]["message"] + refused.stdout
        assert sorted(p.name for p in keep.iterdir()) == ["notes.txt"]

        retrain = _deployment(url, "retrain/retrain")
        assert not retrain["paused"]
        assert [(s["schedule"]["cron"], s["active"]) for s in retrain["schedules"]] == [("*/5 * * * *", True)]

        _stop(serve)
        assert serve.returncode is not None
        retrain = _deployment(url, "retrain/retrain")
        assert not retrain["paused"] and retrain["schedules"][0]["active"], "stopping serve paused the schedule"

        serve = _serve(server, tmp_path)
        _wait(lambda: (tmp_path / "serve.log").read_text().count("Your deployments are being served") >= 2,
              90, "the restarted serve process")
        retrain = _deployment(url, "retrain/retrain")
        assert not retrain["paused"] and retrain["schedules"][0]["active"]
        done = _run(server, "train-evaluate/train-evaluate", 'params={"dataset": "synthetic"}')
        assert done.returncode == 0, done.stdout + done.stderr
        assert (tmp_path / "models" / "synthetic" / "v0001" / "CET" / "weights.safetensors").is_file()

        # the server's scheduler creates the cron's future runs for the restarted deployment
        def scheduled():
            r = requests.post(f"{url}/flow_runs/filter", timeout=10, headers=HEADERS, json={
                "deployments": {"id": {"any_": [retrain["id"]]}},
                "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}}})
            return r.ok and len(r.json()) > 0

        _wait(scheduled, 120, "scheduled retrain runs")
    finally:
        _stop(serve)


@pytest.mark.slow
def test_serve_refuses_an_api_that_lets_anyone_in(server, tmp_path):
    home = tmp_path / "open"
    home.mkdir()
    proc, open_server = _start_server(home, _free_port())  # no auth string: anyone may call it
    try:
        def serve(env, *args):
            return subprocess.run([sys.executable, "-m", "flows.serve", *args], cwd=tmp_path, capture_output=True,
                                  text=True, timeout=120, env=dict(env, PYTHONPATH=str(REPO)))

        done = serve(dict(open_server["env"], PREFECT_API_AUTH_STRING=AUTH))
        assert done.returncode == 2 and "answered a request without credentials (HTTP 200)" in done.stderr
        done = serve(open_server["env"])
        assert done.returncode == 2 and "PREFECT_API_AUTH_STRING is unset" in done.stderr
        done = serve(dict(server["env"], PREFECT_API_AUTH_STRING="a"))
        assert done.returncode == 2 and "PREFECT_API_AUTH_STRING: too weak" in done.stderr
        wrong = serve(dict(server["env"], PREFECT_API_AUTH_STRING=AUTH.replace("5f4", "000")))
        assert wrong.returncode == 2 and "refused PREFECT_API_AUTH_STRING" in wrong.stderr
    finally:
        _stop(proc)


def test_a_served_run_names_only_configured_folders(tmp_path, monkeypatch):
    from flows.lib.flow_params import PredictParams, SyntheticParams, TableBuildParams
    from flows.lib.infra.served import confine
    from flows.lib.infra.settings import Settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CET_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CET_SOURCE_ROOTS", str(tmp_path / "sources"))
    s = Settings()
    confine(SyntheticParams(out=str(tmp_path / "data" / "x")), s, force=True)
    confine(TableBuildParams(table=str(tmp_path / "sources" / "t.csv"), name="t", events={"d": ("a", "b")},
                             time_unit="days"), s, force=True)
    with pytest.raises(ValueError, match=r"parameter 'table': /etc/passwd lies outside the folders a served run"):
        confine(TableBuildParams(table="/etc/passwd", name="t", events={"d": ("a", "b")}, time_unit="days"), s,
                force=True)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "link").symlink_to("/etc")  # a link inside is followed to where it leads
    with pytest.raises(ValueError, match="parameter 'features'"):
        confine(
            PredictParams(
                features=str(tmp_path / "data" / "link" / "passwd"), out=str(tmp_path / "data" / "s.parquet")
            ),
            s,
            force=True,
        )
    confine(SyntheticParams(out="/anywhere"), s)  # a command run by hand (no deployment) names what it is given


OUTAGE_SECONDS = 20


def _tail(path: Path, n: int = 4000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else "(missing)"


@pytest.mark.slow
def test_a_scheduled_run_still_happens_after_the_server_restarts(tmp_path):
    """Stop the Prefect server while retrain is scheduled every minute, start it again on the same
    database and port: a scheduled retrain run due after the restart completes, and its model
    version is registered."""
    home, port = tmp_path / "home", _free_port()
    home.mkdir()
    proc, server = _start_server(home, port, auth=AUTH)
    serve = None
    try:
        serve = _serve(server, tmp_path, cron="* * * * *")
        url = server["url"]
        _wait(lambda: _deployment(url, "retrain/retrain"), 90, "the retrain deployment")
        _stop(proc)  # the server goes away for longer than Prefect's runner tolerates (3 polls of 2 s)
        time.sleep(OUTAGE_SECONDS)
        restarted = time.time()
        proc, server = _start_server(home, port, auth=AUTH)
        retrain = _deployment(url, "retrain/retrain")
        assert retrain and not retrain["paused"] and retrain["schedules"][0]["active"]

        def completed_after_restart():
            r = requests.post(f"{url}/flow_runs/filter", timeout=10, headers=HEADERS, json={
                "deployments": {"id": {"any_": [retrain["id"]]}},
                "flow_runs": {"state": {"type": {"any_": ["COMPLETED"]}}}})
            runs = r.json() if r.ok else []
            return [x for x in runs if x["expected_start_time"] and
                    datetime.fromisoformat(x["expected_start_time"]).timestamp() >= restarted]

        try:
            runs = _wait(completed_after_restart, 240, "a scheduled retrain run after the restart")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n--- serve.log ---\n{_tail(tmp_path / 'serve.log')}"
                                 f"\n--- server.log ---\n{_tail(home / 'server.log')}") from exc
        assert runs[0]["auto_scheduled"]
        assert serve.poll() is None, "serve exited during the outage"
        assert (tmp_path / "models" / "synthetic" / "v0001" / "CET" / "weights.safetensors").is_file()
    finally:
        if serve is not None:
            _stop(serve)
        _stop(proc)


def test_only_an_unreachable_api_counts_as_an_outage():
    """serve waits out an outage but re-raises anything else (a bug must not loop forever)."""
    import httpx

    from flows.serve import api_outage

    threshold = ExceptionGroup("poller", [RuntimeError("Service exceeded error threshold.")])
    assert api_outage(threshold)
    assert api_outage(httpx.ConnectError("refused"))
    try:
        try:
            raise httpx.ConnectError("refused")
        except httpx.ConnectError as inner:
            raise RuntimeError("create deployment failed") from inner
    except RuntimeError as wrapped:
        assert api_outage(wrapped)
    assert not api_outage(ValueError("bad parameter"))
    assert not api_outage(ExceptionGroup("poller", [RuntimeError("something else")]))
    request = httpx.Request("GET", "http://127.0.0.1/api/health")
    assert api_outage(httpx.HTTPStatusError("503", request=request, response=httpx.Response(503, request=request)))
    assert not api_outage(httpx.HTTPStatusError("404", request=request, response=httpx.Response(404, request=request)))
    # the runner's events websocket, reconnecting while a restarted server is still starting: serve exited
    from websockets.datastructures import Headers
    from websockets.exceptions import InvalidMessage, InvalidStatus
    from websockets.http11 import Response

    try:
        try:
            try:
                raise EOFError("stream ends after 0 bytes, before end of line")
            except EOFError as eof:
                raise InvalidMessage("did not receive a valid HTTP response") from eof
        except InvalidMessage as handshake:
            raise RuntimeError("Runner failed to start: event_emitter — did not receive a valid HTTP response") \
                from handshake
    except RuntimeError as starting:
        assert api_outage(starting)
    assert not api_outage(RuntimeError("Runner failed to start: a bug"))
    assert api_outage(InvalidStatus(Response(503, "Service Unavailable", Headers())))
    assert not api_outage(InvalidStatus(Response(401, "Unauthorized", Headers())))  # wrong credentials: not waited out
    assert api_outage(ConnectionRefusedError(111, "Connection refused"))


class _DownApi:
    """A loopback stand-in for a Prefect API that is up (``/health`` answers 200) but answers
    every other request with ``status``: 503 is an outage, 404 is not."""

    def __init__(self, status: int):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.paths: list[str] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                api.paths.append(self.path)
                health = self.path.rstrip("/").endswith("/health")
                body = b"true" if health else b'{"detail": "unavailable"}'
                self.send_response(200 if health else status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/api"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.mark.parametrize("status", [503, 404])
def test_max_outages_ends_serve_on_the_next_outage_and_other_errors_at_once(status, tmp_path):
    api = _DownApi(status)
    try:
        env = dict(PATH="/usr/bin:/bin", HOME=str(tmp_path), PREFECT_HOME=str(tmp_path / "prefect"),
                   PREFECT_API_URL=api.url, PREFECT_CLIENT_MAX_RETRIES="0", PREFECT_SERVER_ANALYTICS_ENABLED="false",
                   DO_NOT_TRACK="1", PYTHONPATH=str(REPO))
        done = subprocess.run([sys.executable, "-m", "flows.serve", "--single-user", "--max-outages", "1",
                               "--retry-seconds", "0.2"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        api.httpd.shutdown()
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    if status == 503:  # the first outage is waited out (health checked, served again), the second ends it
        assert "outage 1" in out and "outage 2" not in out, out
        assert out.count("answers again") == 1, out
        assert any(p.rstrip("/").endswith("/health") for p in api.paths)
        assert "503" in done.stderr.strip().splitlines()[-1]
    else:  # not an outage: no waiting, the error ends serve at once
        assert "unreachable" not in out and not any(p.endswith("/health") for p in api.paths), out
        assert "404" in out
