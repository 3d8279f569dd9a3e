"""CET installs as a package: the wheel carries every module, the SQL and the data files, and
the installed package builds the MIMIC demo from a folder outside the repository."""

import json
import os
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from tests.demo import DEMO, requires_demo

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    """Every module folder, and every folder of data files (setuptools warns at install about a
    folder it can import but is not told of)."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for top in ("cet_model", "cet_experiments", "flows")
             for p in (ROOT / top).rglob("__init__.py")}
    data = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "flows").rglob("*.csv")}
    sql = {".".join(("cet_sql", *p.relative_to(ROOT / "sql").parts)) for p in (ROOT / "sql").rglob("*")
           if p.is_dir() and p.name != "__pycache__"}
    assert found | data | sql | {"cet_sql"} == listed


@pytest.mark.slow
@requires_demo
def test_the_installed_wheel_builds_the_demo_outside_the_repository(tmp_path):
    # build from a copy of the tracked files: setuptools leaves build/ beside the sources
    src = tmp_path / "src"
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for rel in tracked.split():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(src)], check=True, timeout=300)
    wheel = next(wheels.glob("cet-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    sql = sorted(p.relative_to(ROOT / "sql").as_posix() for p in (ROOT / "sql").rglob("*.sql"))
    assert {f"cet_sql/{s}" for s in sql} <= names and "flows/data/mimic_item_frequencies.csv" in names
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    # the dependencies come from the test's environment (a path on sys.path, not its .pth files, so
    # the editable install of the repository is not seen); the project itself only from the wheel
    deps = [p for p in sys.path if p.endswith("site-packages")]
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "cet-test-deps.pth").write_text("\n".join(deps) + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], check=True,
                   timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CET_", "PREFECT_", "PYTHON"))}
    env |= {"PREFECT_HOME": str(tmp_path / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    where = subprocess.run([str(py), "-c", "import flows, cet_sql; print(flows.__file__); print(cet_sql.__file__)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert all(str(site) in w for w in where), where  # the installed copy, not the repository
    run = subprocess.run([str(py), "-m", "flows.mimic", "build", "--mimic-dir", str(DEMO), "--out", "mimic-demo"],
                         cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    manifest = json.loads((elsewhere / "mimic-demo" / "manifest.json").read_text())
    assert sum(manifest["split_sizes"].values()) == 126  # the demo's cohort, as from the clone
    assert "Traceback" not in run.stderr
