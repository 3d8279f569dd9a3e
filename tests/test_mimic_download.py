"""The demo download, verified against its real SHA256SUMS.txt, from a loopback server."""

import gzip
import shutil

import pytest

from flows.lib.infra.download import DownloadError, sha256_file
from flows.lib.mimic.download import fetch_verified_folder
from flows.lib.mimic.staging import stage_table
from tests.demo import DEMO, requires_demo
from tests.http_server import FileServer

pytestmark = requires_demo
SMALL = ["ADMISSIONS.csv", "D_LABITEMS.csv", "PATIENTS.csv"]


@pytest.fixture(scope="module")
def physionet_like(tmp_path_factory):
    """The demo as PhysioNet publishes it: uncompressed CSVs, LICENSE.txt and SHA256SUMS.txt.

    The release's own SHA256SUMS.txt is served, except for CHARTEVENTS.csv: the shared copy
    of that table is a documented rebuild whose bytes differ, so its line carries the
    rebuild's hash. The other 25 files are checked against the release's hashes."""
    root = tmp_path_factory.mktemp("physionet")
    shutil.copy(DEMO / "LICENSE.txt", root / "LICENSE.txt")
    for gz in DEMO.glob("*.csv.gz"):
        with gzip.open(gz, "rb") as src, open(root / gz.name.removesuffix(".gz"), "wb") as dst:
            shutil.copyfileobj(src, dst)
    rebuilt = sha256_file(root / "CHARTEVENTS.csv")
    lines = [f"{rebuilt} CHARTEVENTS.csv" if line.endswith(" CHARTEVENTS.csv") else line
             for line in (DEMO / "SHA256SUMS.txt").read_text().splitlines()]
    (root / "SHA256SUMS.txt").write_text("\n".join(lines) + "\n")
    return root


def test_download_verifies_every_listed_file_and_stages(physionet_like, tmp_path):
    with FileServer(physionet_like) as srv:
        paths = fetch_verified_folder(srv.url + "/", tmp_path / "demo", progress=False)
    assert len(paths) == 27 and all(p.is_file() for p in paths)  # 26 tables + LICENSE.txt
    assert stage_table(tmp_path / "demo", "ADMISSIONS", tmp_path / "staged").rows == 129


def test_present_files_are_not_fetched_again(physionet_like, tmp_path):
    with FileServer(physionet_like) as srv:
        fetch_verified_folder(srv.url, tmp_path / "d", only=SMALL, progress=False)
        n = len(srv.requests)
        fetch_verified_folder(srv.url, tmp_path / "d", only=SMALL, progress=False)
        assert len(srv.requests) == n + 1  # only SHA256SUMS.txt again


@pytest.mark.bad_input
def test_a_tampered_file_is_refused_and_not_kept(physionet_like, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(physionet_like, bad)
    (bad / "PATIENTS.csv").write_text("row_id,subject_id\n1,2\n")
    with FileServer(bad) as srv, pytest.raises(DownloadError, match="PATIENTS.csv: sha256 .* does not match"):
        fetch_verified_folder(srv.url, tmp_path / "d", only=["PATIENTS.csv"], progress=False, backoff=0.01)
    assert not (tmp_path / "d" / "PATIENTS.csv").exists()
    with FileServer(physionet_like) as srv, pytest.raises(ValueError, match="does not list"):
        fetch_verified_folder(srv.url, tmp_path / "d", only=["NOPE.csv"], progress=False)
