#!/usr/bin/env bash
# The experiment tables of docs/results.md: search, then repeated runs, on every dataset.
#
#   bash scripts/run-experiments.sh [mimic-demo|synthetic-reference|synthetic-independent|mimic-standin|reddit-standin|mimic-standin-large ...]
#
# Writes docs/results/<name>/{table.md,metrics.json,fig*.png}; datasets go to data/experiments/
# (gitignored). With no argument it runs the first five, one after the other (several hours on 2
# cores: RUNS=3 FEWER_RUNS=3 for a quicker pass); mimic-standin-large (the MIMIC stand-in at four
# times the size: 20,739 training admissions, about 6 GB of generated CSV) only when named.
# The MIMIC demo is read from $CET_MIMIC_DEMO_DIR when set, else downloaded from PhysioNet.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=data/experiments
OUT=docs/results
SEARCH=${SEARCH:-0}          # random-search trials for CET-paper (0: the paper's setting)
SEARCH_EPOCHS=${SEARCH_EPOCHS:-15}
RUNS=${RUNS:-10}
MIMIC_SCALE=${MIMIC_SCALE:-0.15}     # >= 5,000 training admissions
MIMIC_LARGE_SCALE=${MIMIC_LARGE_SCALE:-0.6}  # four times that: does CET's lead grow with the data?
REDDIT_USERS=${REDDIT_USERS:-12000}  # >= 5,000 training users
ALL=(CET,CET-paper,CET-unconditioned,ET,BC,Oracle)
common=(--runs "$RUNS" --search "$SEARCH" --search-epochs "$SEARCH_EPOCHS" --models "${ALL[0]}")
# the stand-ins' costly rows (CET-paper: 100 Gumbel samples; CET-unconditioned: the ablation) get
# fewer runs when FEWER_RUNS is set, e.g. FEWER_RUNS=3
FEWER=()
[ -n "${FEWER_RUNS:-}" ] && FEWER=(--model-runs "CET-paper=$FEWER_RUNS,CET-unconditioned=$FEWER_RUNS")

run_one() {
  case "$1" in
    mimic-demo)
      if [ -n "${CET_MIMIC_DEMO_DIR:-}" ]; then src=(--mimic-dir "$CET_MIMIC_DEMO_DIR"); else src=(--download-demo); fi
      "$PY" -m flows.mimic build "${src[@]}" --out "$DATA/mimic-demo"
      "$PY" -m cet_experiments dataset --data "$DATA/mimic-demo" "${common[@]}" --out "$OUT/mimic-demo" ;;
    synthetic-reference|synthetic-independent)
      # the paper's n = 40,000 (24k / 8k / 8k); CET-bound is eq. 8 as printed
      "$PY" -m cet_experiments synthetic --mode "${1#synthetic-}" --n 40000 --runs "$RUNS" \
        --models CET,CET-paper,CET-bound,ET,BC,Oracle --out "$OUT/$1" ;;
    mimic-standin)
      "$PY" -m flows.mimic build --standin-scale "$MIMIC_SCALE" --out "$DATA/mimic-standin"
      "$PY" -m cet_experiments dataset --data "$DATA/mimic-standin" "${common[@]}" "${FEWER[@]}" --out "$OUT/mimic-standin" ;;
    mimic-standin-large)
      "$PY" -m flows.mimic build --standin-scale "$MIMIC_LARGE_SCALE" --out "$DATA/mimic-standin-$MIMIC_LARGE_SCALE"
      "$PY" -m cet_experiments dataset --data "$DATA/mimic-standin-$MIMIC_LARGE_SCALE" --runs "$RUNS" --search "$SEARCH" \
        --models CET,CET-paper,ET,BC,Oracle --model-runs "CET-paper=${FEWER_RUNS:-3}" --out "$OUT/mimic-standin-large" ;;
    reddit-standin)
      "$PY" -m flows.reddit build --standin-users "$REDDIT_USERS" --out "$DATA/reddit-standin"
      "$PY" -m cet_experiments dataset --data "$DATA/reddit-standin" "${common[@]}" "${FEWER[@]}" --out "$OUT/reddit-standin" ;;
    *) echo "unknown experiment $1" >&2; exit 2 ;;
  esac
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(mimic-demo synthetic-reference synthetic-independent mimic-standin reddit-standin)
for name in "${names[@]}"; do
  echo "== $name ($(date -u +%H:%M:%S))"
  run_one "$name"
done
