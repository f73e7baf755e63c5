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

Revisions (``docs/metrics.md``, "Which revision wrote the counters"): the default stand-in plays
the newest revision read (iteration rows with ``statsSequence``, which confirms the per-position
counters are after TensorRT-LLM PR #17082). The variants below play older ones and check that
trtbench gives the right figure or none with the reason in the log, never the old revision's
number read with the new one's meaning.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.support.trtllm_serve_standin import StandIn, standin_thread
from tests.support.vllm_serve import openai_loadtest

pytestmark = pytest.mark.integration


def run(standin: StandIn, tiny_models, tmp_path, capsys) -> tuple[pd.Series, str]:
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
    return summary, (out / "trtbench.log").read_text()


@pytest.mark.parametrize(
    ("standin", "source", "length", "positions"),
    [
        (StandIn(), "trtllm_prometheus", 2.6, [16 / 20, 12 / 20, 4 / 20]),
        (StandIn(late_s=0.3), "trtllm_prometheus", 2.6, [16 / 20, 12 / 20, 4 / 20]),
        (StandIn(per_position=False), "trtllm_iteration_stats", 2.6, []),
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
        "perf-metrics",
    ],
)
def test_each_endpoint_fills_the_tier(
    standin, source, length, positions, tiny_models, tmp_path, capsys
):
    summary, _ = run(standin, tiny_models, tmp_path, capsys)
    assert summary["spec_decode_counts_source"] == source
    assert summary["draft_acceptance_rate_ratio"] == pytest.approx(32 / 60)
    if math.isnan(length):
        assert pd.isna(summary["acceptance_length_tokens"])
    else:
        assert summary["acceptance_length_tokens"] == pytest.approx(length)
    acceptance = pd.read_csv(tmp_path / "run" / "loadtest" / "acceptance.csv")
    rows = acceptance[acceptance["kind"] == "position"]
    assert list(rows["value_ratio"]) == pytest.approx(positions)
    assert set(rows["source"]) <= {source}


@pytest.mark.parametrize(
    "prefill_drafts", [True, False], ids=["pre-17082", "unconfirmed"]
)
def test_per_position_counters_of_an_unconfirmed_revision_are_not_read(
    prefill_drafts, tiny_models, tmp_path, capsys
):
    """Without ``statsSequence`` in the iteration rows nothing shows that the per-position
    counters come after PR #17082. Before it (``prefill_drafts``) each request's drafted
    counts hold its prefill step's dummy drafts too: 24 steps at position 0 for the tier's
    20, an acceptance length of 1 + 32/24 = 2.33 instead of 2.6. trtbench refuses them,
    says why, and reads the iteration stats instead: 20 steps, 60 drafts, 32 accepted."""
    standin = StandIn(stats_sequence=False, prefill_drafts=prefill_drafts)
    summary, log = run(standin, tiny_models, tmp_path, capsys)
    assert summary["spec_decode_counts_source"] == "trtllm_iteration_stats"
    assert summary["acceptance_length_tokens"] == pytest.approx(2.6)
    assert summary["verify_steps_count"] == 20
    assert "PR #17082" in log and "per-position counters" in log


def test_iteration_counters_that_log_the_latest_stat_only_give_no_figure(
    tiny_models, tmp_path, capsys
):
    """The server's own collector drains the iteration stats when a request finishes
    (``GET /metrics`` answers ``[]``) and logs only the latest stat of each drain: the
    counters hold each request's last step, 3 drafts with 2 accepted, 12 and 8 over the
    tier: a draft acceptance rate of 8/12 = 0.67 where the tier's is 32/60 = 0.53. Nothing
    shows which kind of revision this is, so the counters are not read, and the log says
    why and what to set."""
    standin = StandIn(per_position=False, collector="racing", latest_only=True)
    summary, log = run(standin, tiny_models, tmp_path, capsys)
    assert pd.isna(summary["draft_acceptance_rate_ratio"])
    assert pd.isna(summary["spec_decode_counts_source"])
    assert "latest" in log and "not read" in log
    assert "enable_iter_perf_stats: true" in log
