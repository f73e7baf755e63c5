#!/usr/bin/env bash
# Set up (idempotent) and run the main job on the bundled example, CPU reference backend:
# build, deploy, load-test and report baseline / draft-target / Medusa / n-gram / EAGLE-3, then check
# the recommendation by serving the recommended config over the same tiers again
# (trtbench follow-up: exit 1 when it is significantly worse than the best fixed variant).
#   scripts/demo.sh [RUN_DIR]     (default runs/tiny-cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh reference,cpu-server
VENV=${TRTBENCH_VENV:-.venv}
OUT=${1:-runs/tiny-cpu}
printf '[demo] %s\n' "trtbench run examples/tiny-cpu.yaml --out $OUT"
"$VENV/bin/trtbench" run examples/tiny-cpu.yaml --out "$OUT"
printf '[demo] %s\n' "trtbench follow-up $OUT"
exec "$VENV/bin/trtbench" follow-up "$OUT"
