#!/usr/bin/env bash
# The main job: set up .venv if needed, then run it. Until the Prefect flows land this is the
# paper's synthetic experiment (Table 3); extra arguments go to the experiments CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
exec .venv/bin/python -m cet_model.experiments synthetic --mode reference --runs 10 \
    --out reports/synthetic-reference "$@"
