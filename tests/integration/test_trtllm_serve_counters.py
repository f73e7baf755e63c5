"""``trtbench loadtest --api openai-completions`` against the trtllm-serve stand-in: each of
its counter endpoints fills the tier's acceptance figures, with the source named.

A contract test of trtllm-serve's formats (``tests/support/trtllm_serve_standin.py``), not a
run of TensorRT-LLM. Each request of 12 tokens decodes, after its first token, in verify
steps accepting 2, 0, 3, 1, 2 of K = 3 drafts (the last step cut to 1 token): 5 steps, 15
draft tokens, 8 accepted; steps that accepted ≥ 1, 2, 3 drafts: 4, 3, 1. A tier of 4
requests: 20 steps, 60 draft tokens, 32 accepted: acceptance length 1 + 32/20 = 2.6, draft
acceptance rate 32/60, per-position rates 16/20, 12/20, 4/20. ``/perf_metrics`` holds the
same requests' totals (15 drafted, 8 accepted each) but no verify steps: the draft acceptance
rate alone.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.support.trtllm_serve_standin import StandIn, standin_thread
from tests.support.vllm_serve import openai_loadtest

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("standin", "source", "length", "positions"),
    [
        (StandIn(), "trtllm_prometheus", 2.6, [16 / 20, 12 / 20, 4 / 20]),
        (StandIn(late_s=0.3), "trtllm_prometheus", 2.6, [16 / 20, 12 / 20, 4 / 20]),
        (StandIn(per_position=False), "trtllm_iteration_stats", 2.6, []),
        (
            StandIn(per_position=False, json_endpoint=False),
            "trtllm_prometheus",
            math.nan,
            [],
        ),
        (
            StandIn(per_position=False, iteration=False, perf_max=1000),
            "trtllm_perf_metrics",
            math.nan,
            [],
        ),
    ],
    ids=[
        "per-position-prometheus",
        "per-position-prometheus-counted-after-done",
        "iteration-stats-json",
        "iteration-prometheus",
        "perf-metrics",
    ],
)
def test_each_endpoint_fills_the_tier(
    standin, source, length, positions, tiny_models, tmp_path, capsys
):
    out = tmp_path / "run"
    standin.model = str(tiny_models["target"])
    with standin_thread(standin) as url:
        openai_loadtest(
            capsys,
            url,
            tiny_models["target"],
            out,
            variant="trtllm",
            concurrency="1",
            output_tokens=12,
        )
    summary = pd.read_csv(out / "loadtest" / "summary.csv").iloc[0]
    assert summary["spec_decode_counts_source"] == source
    assert summary["draft_acceptance_rate_ratio"] == pytest.approx(32 / 60)
    if math.isnan(length):
        assert pd.isna(summary["acceptance_length_tokens"])
    else:
        assert summary["acceptance_length_tokens"] == pytest.approx(length)
    acceptance = pd.read_csv(out / "loadtest" / "acceptance.csv")
    rows = acceptance[acceptance["kind"] == "position"]
    assert list(rows["value_ratio"]) == pytest.approx(positions)
    assert set(rows["source"]) <= {source}
