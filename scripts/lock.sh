#!/usr/bin/env bash
# Regenerate requirements.lock after a change of pyproject.toml's dependencies: resolve them in a
# scratch virtual environment (torch pinned first, so no CUDA packages enter), freeze it, and
# record every file's sha256 for the frozen versions (uv pip compile --no-deps --generate-hashes).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --upgrade pip uv
"$tmp/venv/bin/pip" install --quiet "torch==${CET_TORCH_VERSION:-2.13.0}"
"$tmp/venv/bin/pip" install --quiet -e ".[dev]"
"$tmp/venv/bin/pip" freeze --all --exclude-editable | grep -v -E "^(torch|uv|pip)==" > "$tmp/lock.in"
"$tmp/venv/bin/uv" pip compile "$tmp/lock.in" --no-deps --generate-hashes --python-version 3.11 --no-header --no-annotate \
    --quiet -o "$tmp/body"
{ sed -n 1,3p requirements.lock; cat "$tmp/body"; } > "$tmp/requirements.lock"
mv "$tmp/requirements.lock" requirements.lock
echo "requirements.lock: $(grep -c '^[A-Za-z0-9].*==' requirements.lock) packages"
