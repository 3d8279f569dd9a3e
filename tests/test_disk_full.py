"""Disk full during a write: a clear error naming the file, nothing partial left, and the rerun
after space is freed completes with the same outputs as an undisturbed build.

The full disk is a file-size limit (RLIMIT_FSIZE, set in a child process before the build):
every write past it fails with EFBIG, in Python, Polars and DuckDB alike, as on a full device.
"""

import hashlib
import subprocess
import sys

import pytest

from flows.lib.mimic.build import build
from flows.lib.mimic.staging import stage_all
from flows.lib.standin import mimic as mimic_standin

pytestmark = [pytest.mark.slow, pytest.mark.bad_input]

CHILD = """
import resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from flows.lib.mimic.build import build
build(sys.argv[2], sys.argv[3], sys.argv[4])
"""


def build_limited(limit: int, src, out, work) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, str(limit), str(src), str(out), str(work)],
                          capture_output=True, text=True, timeout=600)


def leftovers(*folders) -> list[str]:
    return sorted(p.name for d in folders if d.exists() for p in d.iterdir()
                  if ".tmp" in p.name or ".partial" in p.name or p.name.startswith(".mimic."))


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return mimic_standin.generate(tmp_path_factory.mktemp("src") / "mimic", scale=0.001, seed=0, progress=False)


def test_a_full_disk_is_named_leaves_nothing_partial_and_the_rerun_completes(source, tmp_path):
    out, work = tmp_path / "mimic", tmp_path / "work"
    staged = work / "staged"
    # 1. full while staging CHARTEVENTS (the small tables fit)
    run = build_limited(300_000, source, out, work)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert f"{staged / 'CHARTEVENTS.parquet'}: could not be written: no space left on the device or the " \
           "file-size limit reached" in last and "nothing partial was kept" in last, last
    assert leftovers(staged, tmp_path) == [] and not out.exists()
    assert not (staged / "CHARTEVENTS.parquet").exists() and not (staged / "CHARTEVENTS.json").exists()
    # 2. space freed for staging; full again while writing the dataset itself
    stage_all(source, staged)
    run = build_limited(50_000, source, out, work)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert f"{out / 'features.parquet'}: could not be written: no space left" in last, last
    assert leftovers(staged, tmp_path) == [] and not out.exists()
    # 3. the rerun with space completes, and equals a build that never met a full disk
    build(source, out, work)
    clean = build(source, tmp_path / "clean", tmp_path / "clean-work")
    for name in ("features.parquet", "events.parquet", "manifest.json"):
        assert sha(out / name) == sha(clean / name), name
    assert leftovers(staged, tmp_path) == []
