"""trtllm-serve's speculative counters, from payloads in its exact formats, hand-worked.

The Prometheus text is made by ``prometheus_client`` from counters registered as
TensorRT-LLM's ``tensorrt_llm/metrics/collector.py`` registers them
(``tests/support/trtllm_serve_standin.py``); the iteration stats are the JSON list its
``/metrics`` returns (``IterationStats``, ``cpp/include/tensorrt_llm/executor/types.h``).
"""

from __future__ import annotations

import json
import math

import pytest
from prometheus_client import generate_latest

from tests.support.trtllm_serve_standin import StandIn
from trtbench.profiling.loadtest.clients.server_counts import (
    position_rows,
    summary_values,
)
from trtbench.profiling.loadtest.records.spec_counters import (
    TRTLLM_ITERATION_STATS,
    TRTLLM_PROMETHEUS,
)
from trtbench.profiling.loadtest.records.trtllm_counters import (
    IterationTotals,
    iteration_entries,
    parse_prometheus,
    requests_counted,
)


def exposition(standin: StandIn) -> str:
    return generate_latest(standin.registry).decode()


def two_requests(standin: StandIn) -> None:
    """Request A: 5 verify steps accepting 3, 3, 1, 2, 0 of K = 3; request B: 3 steps
    accepting 2, 1, 0 (12 accepted). Steps that accepted ≥ 1, 2, 3: A 4, 3, 2; B 2, 1, 0."""
    for steps in ([3, 3, 1, 2, 0], [2, 1, 0]):
        for a in steps:
            standin.step_done(a)
        standin.request_done([(a + 1, a) for a in steps])


def test_per_position_counters_give_vllms_figures():
    """drafts = the 8 steps at position 0; draft tokens 24; accepted 12; acceptance length
    1 + 12/8 = 2.5; rate 12/24; per position 6/8, 4/8, 2/8."""
    standin = StandIn()
    two_requests(standin)
    counts = parse_prometheus(exposition(standin))
    assert counts is not None and counts.source == TRTLLM_PROMETHEUS
    assert (counts.drafts, counts.draft_tokens, counts.accepted) == (8, 24, 12)
    assert counts.accepted_per_pos == (6, 4, 2)
    f = counts.figures()
    assert f["acceptance_length_tokens"] == pytest.approx(2.5)
    assert f["draft_acceptance_rate_ratio"] == pytest.approx(12 / 24)
    rows = position_rows(("v", "c1"), counts)
    assert [(r["steps_count"], r["hits_count"]) for r in rows] == [
        (8, 6),
        (8, 4),
        (8, 2),
    ]
    assert {r["source"] for r in rows} == {TRTLLM_PROMETHEUS}
    assert summary_values(counts)["spec_decode_counts_source"] == TRTLLM_PROMETHEUS


def test_iteration_counters_alone_give_the_rate_but_no_length():
    standin = StandIn(per_position=False)
    two_requests(standin)
    counts = parse_prometheus(exposition(standin))
    assert counts is not None and math.isnan(counts.drafts)
    assert (counts.draft_tokens, counts.accepted) == (24, 12)
    values = summary_values(counts)
    assert values["draft_acceptance_rate_ratio"] == pytest.approx(12 / 24)
    assert math.isnan(values["acceptance_length_tokens"])
    assert position_rows(("v", "c1"), counts) == []


def test_declared_families_without_samples_read_as_zeros_and_absent_ones_as_none():
    """trtllm-serve registers its counters at start: before anything counted they have no
    samples, and a tier's first read must still be a reading (zeros)."""
    empty = exposition(StandIn())
    counts = parse_prometheus(empty, per_position=True)
    assert counts is not None
    assert (counts.drafts, counts.draft_tokens, counts.accepted) == (0, 0, 0)
    iteration = parse_prometheus(empty, per_position=False)
    assert iteration is not None and iteration.draft_tokens == 0
    assert math.isnan(iteration.drafts)
    other = "# HELP other x\n# TYPE other counter\nother_total 3\n"
    assert parse_prometheus(other) is None


def test_iteration_stats_summed_over_reads_with_lost_iterations_counted():
    """Reads of iterations 1-3, then 4-5, then 8-9 (6 and 7 dropped by the server's queue):
    9 - 2 = 7 iterations seen, 2 lost; each entry one request with 3 drafts. The first five
    give TensorRT-LLM's acceptance length; the seven, having lost two, give none."""
    standin = StandIn(per_position=False)
    accepted = [2, 0, 3, 1, 2, 3, 3, 0, 1]
    for a in accepted:
        standin.step_done(a)
    entries = list(standin.stats)
    totals = IterationTotals()
    assert totals.add(entries[0:3]) == 0
    # the executor may hand each entry over as a JSON string
    body = json.dumps([json.dumps(e) for e in entries[3:5]])
    assert totals.add(iteration_entries(body)) == 0
    # TensorRT-LLM's own tests: (accepted + requests) / requests
    assert totals.counters().figures()["acceptance_length_tokens"] == pytest.approx(
        (sum(accepted[:5]) + 5) / 5
    )
    assert totals.add(entries[7:9]) == 2
    seen = [a for i, a in enumerate(accepted) if i not in (5, 6)]
    counts = totals.counters()
    assert counts.source == TRTLLM_ITERATION_STATS
    assert (counts.drafts, counts.draft_tokens, counts.accepted) == (7, 21, sum(seen))
    assert (totals.iterations, totals.lost, counts.lost) == (7, 2, 2)
    assert counts.figures() == {}


def test_an_empty_read_and_stats_without_speculation_add_nothing():
    totals = IterationTotals()
    totals.add(iteration_entries("[]"))
    totals.add([{"iter": 1, "iterLatencyMS": 3.0}])
    assert totals.counters().figures() == {}


@pytest.mark.parametrize(
    "body",
    ['{"iter": 1}', "[1, 2]", '[{"specDecodingStats": {"numDraftTokens": -1}}]'],
)
def test_bad_iteration_stats_are_refused(body):
    with pytest.raises(ValueError):
        IterationTotals().add(iteration_entries(body))


def test_requests_counted_sums_the_finished_reasons():
    """trtllm_request_success_total as TensorRT-LLM documents its exposition (one sample
    per finished_reason; prometheus_client adds a _created sample, not a count)."""
    text = (
        "# HELP trtllm_request_success_total Count of successfully processed requests.\n"
        "# TYPE trtllm_request_success_total counter\n"
        'trtllm_request_success_total{model_name="m",engine_type="trtllm",'
        'finished_reason="stop"} 150.0\n'
        'trtllm_request_success_total{model_name="m",engine_type="trtllm",'
        'finished_reason="length"} 5.0\n'
        'trtllm_request_success_created{model_name="m",engine_type="trtllm",'
        'finished_reason="stop"} 1.7e9\n'
    )
    assert requests_counted(text) == 155.0
    assert requests_counted("# TYPE other_total counter\nother_total 3.0\n") is None


def _dp_row(number: int, rank: int, drafted: int, accepted: int) -> dict:
    """One iteration-stats row as TensorRT-LLM writes it per attention-DP rank
    (tensorrt_llm/executor/iteration_stats.py: ``row["attentionDpRank"] = payload.rank``,
    specDecodingStats copied from rank 0's)."""
    return {
        "iter": number,
        "attentionDpRank": rank,
        "specDecodingStats": {
            "numDraftTokens": drafted,
            "numAcceptedTokens": accepted,
            "numRequestsWithDraftTokens": 1,
            "acceptanceLength": 1.0 + accepted,
        },
    }


def test_attention_dp_rows_count_rank_0_once():
    """Iteration 1 on 3 ranks (3 drafted, 2 accepted, copied to ranks 1 and 2), iteration 2
    on 2 ranks (3 drafted, 1 accepted), then iteration 4 on rank 0 alone: 3 rows counted,
    3 copies skipped, iteration 3 lost (a gap in rank 0's iter, not in the copies)."""
    totals = IterationTotals()
    first = [_dp_row(1, r, 3, 2) for r in (0, 1, 2)] + [
        _dp_row(2, r, 3, 1) for r in (0, 1)
    ]
    assert totals.add(first) == 0
    assert totals.add([_dp_row(4, 0, 3, 3)]) == 1
    assert (totals.drafts, totals.draft_tokens, totals.accepted) == (3, 9, 6)
    assert (totals.iterations, totals.dp_copies, totals.lost) == (3, 3, 1)
