"""`trtbench profile nsys` + `trtbench analyze nsys` on a real GPU: a decode-like loop run eagerly
and replayed from a CUDA graph, one NVTX range per step; the graph steps are attributed to one
cudaGraphLaunch each and cost less host launch time than the eager steps."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from trtbench.cli import main
from trtbench.core.errors import NotAvailableError
from trtbench.profiling.traces.nsys_profile import find_nsys

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device and torch"
    ),
]

LAYERS, STEPS = 16, 6
WORKLOAD = f"""
import torch
x = torch.randn(64, 256, device="cuda")
ws = [torch.randn(256, 256, device="cuda") for _ in range({LAYERS})]
def step():
    y = x
    for w in ws:
        y = torch.relu(y @ w)  # 2 kernels per layer
    return y
step(); torch.cuda.synchronize()
graph = torch.cuda.CUDAGraph()
stream = torch.cuda.Stream()
with torch.cuda.stream(stream):
    step()
    with torch.cuda.graph(graph):
        out = step()
torch.cuda.synchronize()
for i in range({STEPS}):
    torch.cuda.nvtx.range_push(f"decode_step#{{i}}")
    if i < {STEPS} // 2:
        step()
    else:
        graph.replay()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
"""


def test_profile_and_analyze_graph_steps(tmp_path: Path) -> None:
    try:
        find_nsys()
    except NotAvailableError as exc:
        pytest.skip(f"needs Nsight Systems: {exc}")
    main(
        [
            "profile",
            "nsys",
            "--out",
            str(tmp_path),
            "--",
            sys.executable,
            "-c",
            WORKLOAD,
        ]
    )
    main(["analyze", "nsys", str(tmp_path / "report.sqlite"), "--out", str(tmp_path)])
    steps = pd.read_csv(tmp_path / "steps.csv")
    assert len(steps) == STEPS
    eager, graph = steps.iloc[: STEPS // 2], steps.iloc[STEPS // 2 :]
    assert (eager["graph_launches"] == 0).all()
    assert (eager["kernels"] >= 2 * LAYERS).all()
    assert (graph["graph_launches"] == 1).all()
    assert (
        graph["graph_kernels"] >= 2 * LAYERS
    ).all()  # node tracing: every kernel attributed
    assert graph["launch_overhead_ns"].median() < eager["launch_overhead_ns"].median()
