#!/usr/bin/env bash
# Run scripts/gpu_proof.py with the project's .venv python, or python3 where there is none
# (a GPU machine, an NGC container); every argument is passed through (docs/gpu_proof.md).
#   scripts/gpu_proof.sh --device cuda --out runs/gpu-proof [--models DIR] ...
# Where trtbench is not installed, it is installed first without dependencies and offline
# (pip --no-deps --no-build-isolation --no-index); wheels of missing packages found in .whl/
# (pydantic and its three helpers on a plain PyTorch image) go to /tmp/gpu-site first
# (scripts/gpu_env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
GPU_ENV_LABEL=gpu-proof
GPU_ENV_IMPORTS="trtbench.profiling.traces, trtbench.builders.reference, trtbench.pipeline"
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
exec "$PY" scripts/gpu_proof.py "$@"
