#!/usr/bin/env bash
# The test suite: set up .venv if needed, then run pytest (extra arguments go to pytest) with
# pytest-xdist workers, one per core up to four (CET_TEST_WORKERS overrides; 0 runs in this
# process). tests/conftest.py gives each worker one torch thread.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
# the cores this process may use (Python's own count: nproc is not on every system)
cores=$(.venv/bin/python -c 'import os; print(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)')
workers=${CET_TEST_WORKERS:-$(( cores < 4 ? cores : 4 ))}
exec .venv/bin/python -m pytest -n "$workers" "$@"
