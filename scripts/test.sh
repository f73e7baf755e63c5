#!/usr/bin/env bash
# Set up (idempotent) and run the test suite: scripts/test.sh [PYTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh reference,cpu-server,test
VENV=${TRTBENCH_VENV:-.venv}
printf '[test] %s\n' "python -m pytest $*"
exec "$VENV/bin/python" -m pytest "$@"
