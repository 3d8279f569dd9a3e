#!/usr/bin/env bash
# Create .venv (once) and install the project with its dev extra, at the exact versions and
# sha256 of requirements.lock (pip --require-hashes). torch is installed on its own, pinned
# (CET_TORCH_VERSION, default 2.13.0): an unpinned torch pulls a multi-GB CUDA build.
# Re-running is cheap: the install is skipped while pyproject.toml and the lock are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.cet-installed
want=$(cat pyproject.toml requirements.lock | sha256sum | cut -c1-16)-${CET_TORCH_VERSION:-2.13.0}
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    started=$SECONDS
    echo "setup: installing the locked dependencies and torch into .venv (a few minutes, once)"
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet --require-hashes --no-deps -r requirements.lock
    .venv/bin/python -m pip install --quiet --no-deps "torch==${CET_TORCH_VERSION:-2.13.0}"
    # setuptools' notice that an editable install reads this folder is expected here: not shown
    PYTHONWARNINGS="ignore:Editable installation" .venv/bin/python -m pip install --quiet --no-deps -e .
    .venv/bin/python -m pip check   # the lock and the torch build together satisfy every requirement
    echo "$want" > "$stamp"
    echo "setup: done in $(( SECONDS - started )) s"
fi
