#!/usr/bin/env bash
# Two events from one real table: the AIDS Clinical Trials Group study 320 (scikit-survival's
# load_aids: 1,151 patients; time to an AIDS-defining event or death, and time to death) as a
# user's CSV, built with flows.table and trained with flows.train evaluate. Prints the summary,
# whose last table gives each event on its own (docs/pipeline.md, "Training from the command line"),
# then which inputs the promoted CET relies on for each event (flows.train explain).
#
#   bash scripts/two-event-example.sh
#
# Everything is written under a temporary folder, removed at the end (KEEP=1 keeps it). Needs .venv
# (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORK=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT
export CET_DATA_DIR="$WORK/data" CET_MODELS_DIR="$WORK/models" PREFECT_HOME="$WORK/prefect"
"$PY" - "$WORK" <<'PYEOF'
import sys

from sksurv.datasets import load_aids

features, aids = load_aids(endpoint="aids")
_, death = load_aids(endpoint="death")
table = features.assign(patient=range(len(features)), time=aids["time"], aids=aids["censor"].astype(int),
                        time_d=death["time_d"], death=death["censor_d"].astype(int))
table.to_csv(f"{sys.argv[1]}/actg.csv", index=False)
PYEOF
"$PY" -m flows.table --table "$WORK/actg.csv" --name actg --id-column patient --event aids=time,aids \
  --event death=time_d,death --time-unit days --categorical raceth,txgrp,strat2,ivdrug > "$WORK/build.log" 2>&1
"$PY" -m flows.train evaluate --dataset actg 2> "$WORK/train.log"
"$PY" -m flows.train explain --dataset actg --top 8 2>> "$WORK/train.log"
[ -z "${KEEP:-}" ] || echo "kept: $WORK (dataset folder $WORK/data/actg)" >&2
