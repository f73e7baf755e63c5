#!/usr/bin/env bash
# The test command on a busy host: a fresh clone of this checkout's HEAD, then
# `bash scripts/test.sh` once per argument, each with that many CPU burners
# (`python3 -c 'while True: pass'`, the house's standard noise) running throughout.
#   scripts/test_busy.sh [CLONE_DIR] [BURNERS...]   (defaults: /tmp/trtbench-busy 1 1 1 1 1 2)
# Prints one line per run (burners, exit status, wall seconds, pytest's last line) and
# keeps each run's output in CLONE_DIR.runN.log; exits 1 unless every run passed.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
DIR=/tmp/trtbench-busy
if [ $# -gt 0 ] && ! [[ $1 =~ ^[0-9]+$ ]]; then DIR=$1; shift; fi
RUNS=("$@")
[ ${#RUNS[@]} -eq 0 ] && RUNS=(1 1 1 1 1 2)
rm -rf "$DIR"
git clone -q "$SRC" "$DIR"
[ -d "$SRC/../shared" ] && [ ! -e "$DIR/../shared" ] && echo "note: $SRC/../shared is not beside $DIR"
cd "$DIR"
echo "commit $(git rev-parse --short HEAD)"
failed=0
i=0
for burners in "${RUNS[@]}"; do
    i=$((i + 1))
    pids=()
    for _ in $(seq "$burners"); do python3 -c 'while True: pass' & pids+=($!); done
    start=$(date +%s)
    bash scripts/test.sh > "$DIR.run$i.log" 2>&1
    rc=$?
    end=$(date +%s)
    kill "${pids[@]}" 2>/dev/null
    wait "${pids[@]}" 2>/dev/null
    [ "$rc" = 0 ] || failed=1
    echo "run $i: burners $burners, exit $rc, wall $((end - start)) s, $(grep -E 'passed|failed' "$DIR.run$i.log" | tail -1)"
done
exit "$failed"
