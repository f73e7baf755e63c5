#!/usr/bin/env bash
# Check `trtbench analyze nsys` on a real Nsight Systems export recorded on this GPU:
# scripts/nsys_workload.py (eager steps launched from two threads, then CUDA-graph replays) under
# `nsys profile --trace=cuda,nvtx --cuda-graph-trace=node`, exported to SQLite, analysed by the
# CLI (streaming) and by the in-memory path; the two sets of tables must be identical and
# steps.csv must show the workload's launch pattern.
#   scripts/gpu_nsys_check.sh [OUT]      (default runs/gpu-nsys-check; exit 0 all checks pass,
#                                         1 a check failed, 3 no nsys or no GPU)
# Python and wheels as scripts/gpu_proof.sh (the project's .venv, else python3 and .whl/).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/gpu-nsys-check}
if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=${PYTHON:-python3}; fi
if compgen -G ".whl/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/gpu-proof-site .whl/*.whl
    export PYTHONPATH=/tmp/gpu-proof-site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! "$PY" -c 'import trtbench.profiling.traces.nsys_stream' 2>/dev/null; then
    "$PY" -m pip install -q --no-deps --no-build-isolation --no-index --editable . >&2
fi
NSYS=$(command -v nsys || compgen -G "/opt/nvidia/nsight-systems*/*/bin/nsys" \
    || compgen -G "/usr/local/cuda*/bin/nsys" || true)
NSYS=${NSYS%%$'\n'*}
if [ -z "$NSYS" ]; then
    echo "[gpu-nsys-check] no nsys on PATH, under /opt/nvidia or /usr/local/cuda" >&2
    exit 3
fi
"$NSYS" --version
mkdir -p "$OUT"
"$NSYS" profile --trace=cuda,nvtx --cuda-graph-trace=node --force-overwrite=true \
    -o "$OUT/workload" "$PY" scripts/nsys_workload.py --expect "$OUT/expect.json"
"$NSYS" export --type sqlite --force-overwrite=true -o "$OUT/workload.sqlite" \
    "$OUT/workload.nsys-rep"
"$PY" -m trtbench.cli analyze nsys "$OUT/workload.sqlite" --out "$OUT/stream"
"$PY" - "$OUT" <<'PY'
import json, sys
from pathlib import Path

import pandas as pd

from trtbench.profiling.traces.nsys import NsysReport
from trtbench.profiling.traces.table_io import write_trace_tables

out = Path(sys.argv[1])
write_trace_tables(NsysReport(out / "workload.sqlite").analyze().tables(), out / "eager")
failed = 0
for name in ("kernel_launches.csv", "launch_summary.csv", "steps.csv"):
    same = (out / "stream" / name).read_bytes() == (out / "eager" / name).read_bytes()
    print(f"{'PASS' if same else 'FAIL'} streamed {name} identical to the in-memory one")
    failed += not same
expect = json.loads((out / "expect.json").read_text())
steps = pd.read_csv(out / "stream" / "steps.csv")
n = expect["eager_steps"]
print(f"steps: {len(steps)} (expected {n + expect['graph_steps']})")
failed += len(steps) != n + expect["graph_steps"]
for part, rows in (("eager", steps.iloc[:n]), ("graph", steps.iloc[n:])):
    for column, want in expect[part].items():
        got = sorted(set(rows[column].tolist()))
        ok = got == [want]
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {part} {column}: {got} (expected {want})")
print(steps.iloc[[i for i in (0, n) if i < len(steps)]].T.to_string())
sys.exit(1 if failed else 0)
PY
