#!/usr/bin/env bash
# The README's experiment tables: search, then repeated runs, on every dataset.
#
#   bash scripts/run-experiments.sh [mimic-demo|synthetic-reference|synthetic-independent|mimic-standin|reddit-standin ...]
#
# Writes docs/results/<name>/{table.md,metrics.json,fig*.png}; datasets go to data/experiments/
# (gitignored). With no argument it runs all five, one after the other (about 1 h on 2 cores).
# The MIMIC demo is read from $CET_MIMIC_DEMO_DIR when set, else downloaded from PhysioNet.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=data/experiments
OUT=docs/results
SEARCH=${SEARCH:-4}          # random-search trials for CET (trial 0: the paper's setting)
SEARCH_EPOCHS=${SEARCH_EPOCHS:-15}
RUNS=${RUNS:-10}
ALL=(CET,CET-Gumbel,CET-ARM,CET-exact,CET-marginal,ET,BC,Oracle)
common=(--runs "$RUNS" --search "$SEARCH" --search-epochs "$SEARCH_EPOCHS" --models "${ALL[0]}")
# the estimator-comparison rows cost the most (2^M patterns for exact and marginal at M = 9 or 10,
# two decoder passes per sample for ARM): fewer runs for them
FEWER=(--model-runs CET-Gumbel=3,CET-ARM=3,CET-exact=3,CET-marginal=3)

run_one() {
  case "$1" in
    mimic-demo)
      if [ -n "${CET_MIMIC_DEMO_DIR:-}" ]; then src=(--mimic-dir "$CET_MIMIC_DEMO_DIR"); else src=(--download-demo); fi
      "$PY" -m flows.mimic build "${src[@]}" --out "$DATA/mimic-demo"
      "$PY" -m cet_model.experiments dataset --data "$DATA/mimic-demo" "${common[@]}" --out "$OUT/mimic-demo" ;;
    synthetic-reference|synthetic-independent)
      "$PY" -m cet_model.experiments synthetic --mode "${1#synthetic-}" --n 10000 "${common[@]}" "${FEWER[@]}" --out "$OUT/$1" ;;
    mimic-standin)
      "$PY" -m flows.mimic build --standin-scale 0.05 --out "$DATA/mimic-standin"
      "$PY" -m cet_model.experiments dataset --data "$DATA/mimic-standin" "${common[@]}" "${FEWER[@]}" --out "$OUT/mimic-standin" ;;
    reddit-standin)
      "$PY" -m flows.reddit build --standin-users 2000 --out "$DATA/reddit-standin"
      "$PY" -m cet_model.experiments dataset --data "$DATA/reddit-standin" "${common[@]}" "${FEWER[@]}" --out "$OUT/reddit-standin" ;;
    *) echo "unknown experiment $1" >&2; exit 2 ;;
  esac
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(mimic-demo synthetic-reference synthetic-independent mimic-standin reddit-standin)
for name in "${names[@]}"; do
  echo "== $name ($(date -u +%H:%M:%S))"
  run_one "$name"
done
