#!/usr/bin/env bash
# Set up (idempotent) and run the test suite: scripts/test.sh [PYTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh reference,cpu-server,test
VENV=${TRTBENCH_VENV:-.venv}
# Two pytest workers (pytest-xdist; TRTBENCH_TEST_WORKERS, 0 = in this process): much of the
# suite waits on servers, so the two cores are kept busy. Each test file runs on one worker,
# the files sharing the session's vLLM servers on the same one, the slowest first
# (tests/support/xdist_schedule.py, installed by tests/conftest.py).
# --durations=25: the slowest tests are printed on every run (CI's log too), so a new slow
# one is seen when it appears (docs/testing.md: the budget).
ARGS=(-n "${TRTBENCH_TEST_WORKERS:-2}" --dist loadfile --durations=25)
printf '[test] %s\n' "python -m pytest ${ARGS[*]} $*"
exec "$VENV/bin/python" -m pytest "${ARGS[@]}" "$@"
