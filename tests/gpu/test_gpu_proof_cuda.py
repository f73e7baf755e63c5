"""``scripts/gpu_proof.py --device cuda`` at small settings: graphs are captured, the Kineto
analysis runs, NVML reads the device, speculation stays lossless on CUDA.

Expected values from definitions: a captured baseline decode step is one target forward,
so one ``cudaGraphLaunch`` per step (eager: none, and many more launch calls); each trace
holds exactly TRACE_STEPS decode steps.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
import torch

from tests.support.data import REPO_ROOT

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs a CUDA device: the GPU proof captures CUDA graphs and traces CUDA kernels",
    ),
]

TRACE_STEPS = 8


def test_gpu_proof_on_cuda(tiny_models, tmp_path):
    out = tmp_path / "out"
    argv = [
        sys.executable,
        str(REPO_ROOT / "scripts" / "gpu_proof.py"),
        "--device",
        "cuda",
        "--out",
        str(out),
        "--models",
        str(tiny_models["target"].parent),
        "--dtypes",
        "float32,bfloat16",
        "--batch-sizes",
        "1,8",
        "--max-tokens",
        "24",
        "--trace-steps",
        str(TRACE_STEPS),
        "--trace-dtypes",
        "bfloat16",
        "--quiet",
    ]
    done = subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["lossless"]["all"] is True
    for name in ("cuda_graphs", "kineto_launch_analysis", "torch_cuda_memory"):
        assert summary["cuda_only"][name]["status"] == "ok", summary["cuda_only"][name]
    timing = pd.read_csv(
        out / "decode_timing.csv", keep_default_na=False, na_values=[""]
    )
    graphs = timing[timing["graphs"] == "graphs"]
    assert (graphs["graphs_status"] == "captured").all()
    assert (timing["torch_max_allocated_bytes"] > 0).all()
    kineto = pd.read_csv(out / "kineto.csv", keep_default_na=False, na_values=[""])
    assert (kineto["analysis_status"] == "ok").all()
    assert (kineto["steps_analyzed"] == TRACE_STEPS).all()
    assert (kineto["decode_step_ranges"] == TRACE_STEPS).all()
    base = kineto[kineto["mode"] == "baseline"].set_index(["batch_size", "graphs"])
    for batch in (1, 8):
        assert base.loc[(batch, "graphs"), "graph_launches_per_step"] == 1.0
        assert base.loc[(batch, "eager"), "graph_launches_per_step"] == 0.0
        assert (
            base.loc[(batch, "graphs"), "launch_calls_per_step"]
            < base.loc[(batch, "eager"), "launch_calls_per_step"]
        )
    nvml = summary["cuda_only"]["nvml"]
    if nvml["status"] == "ok":
        memory = pd.read_csv(out / "memory.csv")
        assert (memory["source"] == "nvml").all()
        assert (memory["mem_used_bytes"] > 0).all()
