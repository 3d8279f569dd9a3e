#!/usr/bin/env bash
# A retrain on a grown cohort, split by patient: what the promotion rule compares (docs/pipeline.md,
# "Both on the same rows").
#
#   bash scripts/grown-cohort-example.sh [EVIDENCE]     # point (default), not-worse or better
#   SPLIT_METHOD=hash bash scripts/grown-cohort-example.sh   # patients keep their splits: nothing left out
#
# lifelines' rossi data (432 rows) as visits of patients: the first 300 rows are 100 patients;
# version 1 is trained on them. Then the whole table (44 more patients, and new visits of earlier
# ones) is rebuilt from the same file and retrained; the new version and the promoted one are
# scored on the new validation rows that version 1 was not trained on, leaving out the visits of
# the patients it was trained on. Prints the decision and the comparison. Everything is written
# under a temporary folder, removed at the end (KEEP=1 keeps it). Needs .venv (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
EVIDENCE=${1:-point}
SPLIT_METHOD=${SPLIT_METHOD:-random}
WORK=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT
export CET_DATA_DIR="$WORK/data" CET_MODELS_DIR="$WORK/models" PREFECT_HOME="$WORK/prefect"
"$PY" - "$WORK" <<'EOF'
import sys

from lifelines.datasets import load_rossi

rows = load_rossi()
rows["patient"] = [f"p{i % 100}" if i < 300 else f"p{i % 144}" for i in range(len(rows))]
rows["visit"] = range(len(rows))
rows.iloc[:300].to_csv(f"{sys.argv[1]}/cohort.csv", index=False)
rows.to_csv(f"{sys.argv[1]}/grown.csv", index=False)
EOF
"$PY" -m flows.table --table "$WORK/cohort.csv" --name cohort --event arrest=week,arrest --time-unit weeks \
  --id-column visit --group-column patient --split-method "$SPLIT_METHOD" > "$WORK/build.log" 2>&1
"$PY" -m flows.train evaluate --dataset cohort > "$WORK/v1.log" 2>&1
cp "$WORK/grown.csv" "$WORK/cohort.csv"  # the extract refreshed in place: retrain rebuilds from the same file
"$PY" -m flows.train retrain --dataset cohort --promote-evidence "$EVIDENCE" > "$WORK/v2.log" 2>&1
grep -A1 "/models/cohort/v0002: " "$WORK/v2.log"
