"""``trtbench run`` of a ``server: trtllm-serve`` variant end to end against the stand-in
``trtllm-serve`` executable (``tests/support/trtllm_serve_fake.py``): a contract test of the
serving path (build → start → OpenAI load test → the server's own counters → stop), not a
run of TensorRT-LLM (it cannot be installed on this machine).

Hand-worked from the stand-in (``tests/support/trtllm_serve_standin.py``): each request of 12
tokens decodes, after its first token, in verify steps accepting 2, 0, 3, 1, 2 of K = 3
drafts (the last step cut to 1 token): 5 steps, 15 draft tokens, 8 accepted. A tier of 4
requests: 20 steps, 60 draft tokens, 32 accepted: acceptance length 1 + 32/20 = 2.6, draft
acceptance rate 32/60, from the iteration stats on ``GET /metrics`` that the variant's
llm_api.yaml turned on (``enable_iter_perf_stats``; ``return_perf_metrics`` stays off, so
no Prometheus endpoint is mounted and nothing else drains them).
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.trtllm_serve_fake import install


def test_run_serves_measures_and_stops_a_trtllm_serve_variant(
    tmp_path, capsys, tiny_models
):
    exe = install(tmp_path / "bin")
    doc = {
        "name": "ts-run",
        "backend": "trtllm-pytorch",
        "trtllm_version": "1.2.1",
        "models": {"target": str(tiny_models["target"])},
        "deploy": {"trtllm_serve": str(exe), "ready_timeout_s": 60},
        "loadtest": {
            "concurrency": [1],
            "requests_per_tier": 4,
            "warmup_requests": 1,
            "input_len_mean": 16,
            "output_len_mean": 12,
        },
        "variants": [
            {"name": "ts", "mode": "ngram", "max_draft_len": 3},
        ],
    }
    doc["variants"][0]["server"] = "trtllm-serve"
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    run = tmp_path / "run"
    code, out, err = run_cli(["run", spec, "--out", run], capsys)
    assert code == 0, err
    summary = pd.read_csv(run / "loadtest" / "summary.csv").iloc[0]
    assert summary["variant"] == "ts"
    assert summary["spec_decode_counts_source"] == "trtllm_iteration_stats"
    assert summary["draft_acceptance_rate_ratio"] == pytest.approx(32 / 60)
    assert summary["acceptance_length_tokens"] == pytest.approx(2.6)
    log = (run / "server" / "ts.log").read_text()
    assert log.count("==== trtbench: trtllm-serve start ") == 1
    assert "--extra_llm_api_options" in log
