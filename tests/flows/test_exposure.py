"""Services bind 127.0.0.1 and serve no dashboard by default (docs/reliability.md section 5)."""

import re
import socket
from pathlib import Path
from urllib.parse import urlparse

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]


def _outward_ip() -> str | None:
    """This machine's address on its default route (no packet is sent), or None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: only picks the route
        except OSError:
            return None
        ip = s.getsockname()[0]
    return None if ip.startswith("127.") else ip


def test_the_temporary_prefect_server_is_loopback_only_without_a_ui():
    """The main job, with PREFECT_API_URL unset, runs on Prefect's temporary server: the same
    kind this session's harness started. It must answer on 127.0.0.1, not on the machine's
    outward address, and serve the API only (no UI)."""
    from prefect.settings import PREFECT_API_URL

    url = urlparse(PREFECT_API_URL.value())
    assert url.hostname == "127.0.0.1", url.geturl()
    assert requests.get(f"{url.geturl()}/health", timeout=10).ok
    assert requests.get(f"{url.scheme}://{url.netloc}/", timeout=10).status_code == 404  # no UI at the root
    ip = _outward_ip()
    if ip is None:
        pytest.skip("no outward network interface to probe")
    with socket.socket() as s, pytest.raises(OSError):
        s.settimeout(3)
        s.connect((ip, url.port))


def test_every_documented_server_command_binds_loopback():
    """Every ``prefect server start`` users are told to run names --host 127.0.0.1."""
    commands = []
    for path in [REPO / "README.md", *REPO.glob("docs/*.md"), REPO / ".env.example",
                 *REPO.glob("flows/**/*.py"), *REPO.glob("scripts/*.sh")]:
        for line in path.read_text().splitlines():
            if re.search(r"^\s*(\S*/)?prefect server start", line):  # a command, not prose about one
                commands.append((path.name, line))
    assert commands
    unbound = [c for c in commands if "--host 127.0.0.1" not in c[1]]
    assert unbound == []
