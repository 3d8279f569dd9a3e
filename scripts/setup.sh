#!/usr/bin/env bash
# Create .venv (once) and install the project with its dev extra.
# Re-running is cheap: the install is skipped while pyproject.toml is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.cet-installed
want=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    # torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
    .venv/bin/python -m pip install --quiet "torch==${CET_TORCH_VERSION:-2.13.0}"
    .venv/bin/python -m pip install --quiet -e ".[dev]"
    echo "$want" > "$stamp"
fi
