#!/usr/bin/env bash
# On a machine with a CUDA device: the tests that need one (`gpu`-marked, in tests/test_gpu.py and
# tests/test_models.py: CPU and GPU compute the same, a model trained on a GPU predicts the same on
# a CPU), then the training benchmark against the same
# machine's CPU (benchmarks/bench_gpu.py train). Usage: bash scripts/gpu-check.sh [RESULTS_DIR]
# (default benchmarks/results); PYTHON picks the interpreter (default: .venv's, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
RESULTS=${1:-benchmarks/results}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: nothing to check')"
"$PY" -c "import torch; print('torch', torch.__version__, 'on', torch.cuda.get_device_name(0))"
"$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py tests/test_models.py
"$PY" benchmarks/bench_gpu.py train --out "$RESULTS/gpu_train.json"
