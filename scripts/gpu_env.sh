# Sourced by the GPU scripts (gpu_proof.sh, gpu_suite.sh) from the repository root: sets PY to
# the project's .venv python, or $PYTHON / python3 where there is none (a GPU machine, an NGC
# container); puts wheels found in .whl/ (pydantic and its helpers on a plain PyTorch image)
# on PYTHONPATH via /tmp/gpu-site; installs trtbench editable, without dependencies and
# offline, where the modules in GPU_ENV_IMPORTS do not import. Messages are prefixed with
# GPU_ENV_LABEL.
if [ -x .venv/bin/python ]; then
    PY=.venv/bin/python
else
    PY=${PYTHON:-python3}
fi
if compgen -G ".whl/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/gpu-site .whl/*.whl
    export PYTHONPATH=/tmp/gpu-site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! "$PY" -c "import ${GPU_ENV_IMPORTS:-trtbench.cli}" 2>/dev/null; then
    printf '[%s] installing trtbench (editable, no dependencies, offline)\n' "${GPU_ENV_LABEL:-gpu}" >&2
    "$PY" -m pip install -q --no-deps --no-build-isolation --no-index --editable . >&2
fi
export PYTHONUNBUFFERED=1
