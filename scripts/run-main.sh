#!/usr/bin/env bash
# The main job: set up .venv if needed, then run the full pipeline on the embedded defaults
# (python -m flows.full_pipeline; extra arguments go to it, see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
exec .venv/bin/python -m flows.full_pipeline "$@"
