#!/usr/bin/env bash
# Run scripts/gpu_proof.py with the project's .venv python, or python3 where there is none
# (a GPU machine, an NGC container); every argument is passed through (docs/gpu_proof.md).
#   scripts/gpu_proof.sh --device cuda --out runs/gpu-proof [--models DIR] ...
# Where trtbench is not installed, it is installed first without dependencies and offline
# (pip --no-deps --no-build-isolation --no-index); wheels of missing packages found in .whl/
# (pydantic and its three helpers on a plain PyTorch image) go to /tmp/gpu-proof-site first.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/python ]; then
    PY=.venv/bin/python
else
    PY=${PYTHON:-python3}
fi
if compgen -G ".whl/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/gpu-proof-site .whl/*.whl
    export PYTHONPATH=/tmp/gpu-proof-site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! "$PY" -c 'import trtbench.profiling.traces, trtbench.builders.reference, trtbench.pipeline' 2>/dev/null; then
    printf '[gpu-proof] installing trtbench (editable, no dependencies, offline)\n' >&2
    "$PY" -m pip install -q --no-deps --no-build-isolation --no-index --editable . >&2
fi
export PYTHONUNBUFFERED=1
exec "$PY" scripts/gpu_proof.py "$@"
