"""Downloads against a real HTTP server on loopback (tests/http_server.py)."""

import hashlib
import os

import pytest

from flows.lib.infra.download import DownloadError, download, parse_sha256sums, safe_name
from tests.http_server import FileServer

PAYLOAD = os.urandom(3_000_000)
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()
FAST = dict(backoff=0.01, progress=False, chunk_size=64 * 1024)


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "remote"
    root.mkdir()
    (root / "RC_2015-01.zst").write_bytes(PAYLOAD)
    with FileServer(root) as srv:
        yield srv


def _leftovers(d):
    return sorted(p.name for p in d.iterdir())


@pytest.mark.parametrize("ranges", [True, False])
def test_dropped_connection_resumes_to_the_right_sha256(server, tmp_path, ranges):
    server.ranges = ranges
    server.drop_after["RC_2015-01.zst"] = 1_000_000
    out = download(f"{server.url}/RC_2015-01.zst", tmp_path / "dl" / "RC_2015-01.zst", sha256=DIGEST, **FAST)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == DIGEST
    resumed_at = int(server.requests[1][1].removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at <= 1_000_000  # the client asks to resume from what it kept ...
    assert _leftovers(tmp_path / "dl") == ["RC_2015-01.zst"]  # ... and keeps only the whole file


def test_5xx_is_retried_then_succeeds(server, tmp_path):
    server.fail_first["RC_2015-01.zst"] = 3
    out = download(f"{server.url}/RC_2015-01.zst", tmp_path / "f", sha256=DIGEST, **FAST)
    assert out.read_bytes() == PAYLOAD and len(server.requests) == 4


def test_persistent_5xx_gives_up_with_a_clear_error(server, tmp_path):
    server.fail_first["RC_2015-01.zst"] = 99
    with pytest.raises(DownloadError, match=r"RC_2015-01.zst: failed after 2 retries \(HTTP 503\)"):
        download(f"{server.url}/RC_2015-01.zst", tmp_path / "f", retries=2, **FAST)
    assert not (tmp_path / "f").exists()


@pytest.mark.bad_input
def test_404_is_not_retried(server, tmp_path):
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(f"{server.url}/missing.zst", tmp_path / "f", **FAST)
    assert len(server.requests) == 1


def test_stalled_connection_times_out_and_is_retried(server, tmp_path):
    server.stall["RC_2015-01.zst"] = 3.0
    out = download(f"{server.url}/RC_2015-01.zst", tmp_path / "f", sha256=DIGEST, timeout=(2, 0.5), **FAST)
    assert out.read_bytes() == PAYLOAD and len(server.requests) == 2


@pytest.mark.bad_input
def test_checksum_mismatch_fetches_again_and_never_keeps_a_bad_file(server, tmp_path):
    server.corrupt["RC_2015-01.zst"] = 1
    out = download(f"{server.url}/RC_2015-01.zst", tmp_path / "f", sha256=DIGEST, **FAST)
    assert out.read_bytes() == PAYLOAD
    server.corrupt["RC_2015-01.zst"] = 2
    with pytest.raises(DownloadError, match="does not match"):
        download(f"{server.url}/RC_2015-01.zst", tmp_path / "g", sha256=DIGEST, **FAST)
    assert _leftovers(tmp_path) == ["f", "remote"]


def test_finished_part_is_accepted_on_416(server, tmp_path):
    (tmp_path / "f.part").write_bytes(PAYLOAD)
    out = download(f"{server.url}/RC_2015-01.zst", tmp_path / "f", sha256=DIGEST, **FAST)
    assert out.read_bytes() == PAYLOAD


@pytest.mark.bad_input
@pytest.mark.parametrize("name", ["../etc/passwd", "/abs", "a/b", "..", "", ".hidden", "x\x00y", "a b"])
def test_unsafe_remote_names_are_refused(name):
    with pytest.raises(ValueError, match="unsafe file name"):
        safe_name(name)


def test_parse_sha256sums():
    h = "a" * 64
    assert parse_sha256sums(f"{h}  ADMISSIONS.csv\n{h} *PATIENTS.csv\n") == {"ADMISSIONS.csv": h, "PATIENTS.csv": h}
    with pytest.raises(ValueError, match="unsafe"):
        parse_sha256sums(f"{h}  ../../x\n")
    with pytest.raises(ValueError, match="line 1"):
        parse_sha256sums("nothex  a\n")


def test_a_remote_listing_is_retried_as_a_download_is_and_fails_naming_its_url(server, tmp_path):
    """A Reddit base URL's checksum list and index answer 503 a few times (a busy mirror): read after
    retries. A mirror that is down is a ``DownloadError`` naming the URL, after the same retries; it
    was an HTTP library's traceback at once."""
    import socket

    from flows.lib.reddit.download import remote_listing

    (server.root / "sha256sums.txt").write_text(f"{DIGEST}  RC_2015-01.zst\n")
    server.fail_first.update({"sha256sums.txt": 2})
    assert remote_listing(server.url, backoff=0.01) == (["RC_2015-01.zst"], {"RC_2015-01.zst": DIGEST})
    assert [n for n, _ in server.requests].count("sha256sums.txt") == 3
    (server.root / "sha256sums.txt").unlink()
    server.fail_first.update({"": 2})  # no checksum list: the index itself
    assert remote_listing(server.url, backoff=0.01) == (["RC_2015-01.zst"], {})
    with pytest.raises(DownloadError, match=r"sha256sums\.txt: failed after 2 retries \(HTTP 503\)"):
        server.fail_first.update({"sha256sums.txt": 3})
        remote_listing(server.url, retries=2, backoff=0.01)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DownloadError, match=rf"http://127\.0\.0\.1:{port}/sha256sums\.txt: failed after 1 retries "
                                            r"\(ConnectionError\)"):
        remote_listing(f"http://127.0.0.1:{port}", retries=1, backoff=0.01)
    with pytest.raises(DownloadError, match=r"/none/: HTTP 404"):  # a base URL that is not there: at once
        remote_listing(f"{server.url}/none")


def test_a_download_failure_is_found_inside_an_exception_group():
    from flows.lib.infra.cli import failure_line

    assert failure_line(ExceptionGroup("tasks", [ValueError("x"), DownloadError("u: HTTP 404")])) == "u: HTTP 404"
    assert failure_line(ValueError("u: HTTP 404")) is None


@pytest.mark.bad_input
def test_a_download_step_is_tried_again_after_a_failure_but_not_after_a_404(server, tmp_path, monkeypatch):
    """``with_retries`` (a download step run without Prefect, as the flows' download tasks retry):
    a mirror still failing after the download's own retries gets the step tried again; a 404 ends
    it at once, as no retry changes it (before, it was tried again after 5 s and 30 s)."""
    from flows.lib.infra import download as dl

    monkeypatch.setattr(dl, "RETRY_DELAYS", (0, 0))
    server.fail_first["RC_2015-01.zst"] = 3  # two tries of a download with one retry each, then a good one
    out = dl.with_retries(lambda: download(f"{server.url}/RC_2015-01.zst", tmp_path / "f", retries=1, **FAST))
    assert out.read_bytes() == PAYLOAD and len(server.requests) == 4
    server.requests.clear()
    with pytest.raises(dl.PermanentDownloadError, match="missing.zst: HTTP 404"):
        dl.with_retries(lambda: download(f"{server.url}/missing.zst", tmp_path / "g", **FAST))
    assert len(server.requests) == 1
