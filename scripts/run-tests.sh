#!/usr/bin/env bash
# The test suite: set up .venv if needed, then run pytest (extra arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
exec .venv/bin/python -m pytest "$@"
