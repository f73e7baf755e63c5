"""``trtbench run`` with ``profile.nsys`` on a real GPU: the reference baseline served on CUDA under
an nsys session, the second tier recorded, its export analyzed into the launch CSVs and shown
in the report."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

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


def test_run_records_the_chosen_tier_under_nsys(tiny_models, tmp_path):
    try:
        find_nsys()
    except NotAvailableError as exc:
        pytest.skip(f"needs Nsight Systems: {exc}")
    spec = {
        "name": "nsys-run",
        "models": {"target": str(tiny_models["target"])},
        "variants": [
            {
                "name": "base",
                "mode": "baseline",
                "max_input_len": 64,
                "max_seq_len": 128,
            }
        ],
        "deploy": {"ready_timeout_s": 300, "reference_device": "cuda"},
        "loadtest": {
            "concurrency": [1, 2],
            "requests_per_tier": 4,
            "warmup_requests": 1,
            "input_len_mean": 16,
            "output_len_mean": 12,
        },
        "profile": {"nsys": True, "nsys_tier": 1},
    }
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    main(["run", str(spec_path), "--out", str(out)])
    traces = out / "traces" / "base"
    assert (traces / "c2.nsys-rep").is_file() and (traces / "c2.sqlite").is_file()
    assert not (traces / "c1.sqlite").exists()  # only the chosen tier is recorded
    kernels = pd.read_csv(traces / "kernel_launches.csv")
    # 4 requests x 12 tokens of a Llama on CUDA: many kernels, each with its launch call.
    assert len(kernels) > 100
    assert len(pd.read_csv(traces / "steps.csv")) >= 1
    run = json.loads((out / "run.json").read_text())
    assert str(traces / "c2.sqlite") in run["run"]["variants"]["base"]["nsys_files"]
    assert (out / "plots" / "launch_overhead.png").is_file()
