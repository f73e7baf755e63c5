#!/usr/bin/env bash
# Set up (idempotent) and run the main job on the bundled example, CPU reference backend:
# build, deploy, load-test and report baseline / draft-target / Medusa / n-gram / EAGLE-3 in
# interleaved rounds, then check the recommendation (trtbench follow-up): the recommended
# config served beside the run's best fixed variant of each tier, side by side in time.
#   scripts/demo.sh [RUN_DIR [SPEC]]     (defaults runs/tiny-cpu, examples/tiny-cpu.yaml)
# Exit status: 0 when both steps ran to a verdict, pass, fail or skipped (printed, and recorded in
# RUN_DIR/follow-up/check.json); else the failing step's (2: bad input, 1: a server died or a
# tier could not be checked, 128+N: stopped by signal N).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh reference,cpu-server
VENV=${TRTBENCH_VENV:-.venv}
OUT=${1:-runs/tiny-cpu}
SPEC=${2:-examples/tiny-cpu.yaml}
printf '[demo] %s\n' "trtbench run $SPEC --out $OUT"
"$VENV/bin/trtbench" run "$SPEC" --out "$OUT"
printf '[demo] %s\n' "trtbench follow-up $OUT"
status=0
"$VENV/bin/trtbench" follow-up "$OUT" || status=$?
check="$OUT/follow-up/check.json"
verdict=$([ -f "$check" ] && "$VENV/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["verdict"])' "$check" || echo none)
if [ "$status" = 0 ] && [ "$verdict" = skipped ]; then
    printf '[demo] follow-up: skipped. The recommended config is a variant the run measured as is; the run compared it side by side already (%s, Follow-up check).\n' "$OUT/report.md"
elif [ "$status" = 0 ]; then
    printf '[demo] follow-up: pass. Served side by side with the best fixed variant of each tier, the recommended config is not worse at any tier.\n'
elif [ "$status" = 1 ] && [ "$verdict" = fail ]; then
    printf '[demo] follow-up: fail. At the tiers named above the recommended config was measured worse than the best fixed variant, side by side and again in fresh rounds: the recommendation does not hold there (the demo itself worked; see the Follow-up check in %s).\n' "$OUT/report.md"
    status=0
fi
# The answer, last: what to serve and where the results are.
rec="$OUT/recommendation.json"
if [ -f "$rec" ]; then
    answer=$("$VENV/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["answer"])' "$rec" || echo "see $rec")
    printf '[demo] recommendation: %s
[demo] results: %s (report.md, recommendation.json, loadtest/*.csv, plots/)
[demo] page: %s (the report in a browser, offline)
' "$answer" "$OUT" "$OUT/report.html"
fi
exit "$status"
