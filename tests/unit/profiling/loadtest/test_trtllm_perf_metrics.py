"""trtllm-serve's ``GET /perf_metrics``: the entries parsed and summed (pure), and read per
tier through the reader against the stand-in (a contract test of its format,
``tests/support/trtllm_serve_standin.py``, not a run of TensorRT-LLM).

Entries are hand-written as ``tensorrt_llm/serve/openai_server.py``'s ``get_perf_metrics``
serialises them (TensorRT-LLM PR #6985): ``{"request_id", "perf_metrics": {"first_iter",
"last_iter", "timing_metrics", "kv_cache_metrics"[, "speculative_decoding":
{"acceptance_rate", "total_accepted_draft_tokens", "total_draft_tokens"}]}}``, the last key
only when the request drafted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math

import httpx
import pytest

from tests.support.trtllm_serve_standin import StandIn, standing_in
from trtbench.profiling.loadtest.clients import counter_reader
from trtbench.profiling.loadtest.clients.counter_reader import (
    TRTLLM_ITERATIONS,
    TRTLLM_PERF,
    CounterReader,
)
from trtbench.profiling.loadtest.clients.server_counts import (
    summary_values,
    tier_counts,
)
from trtbench.profiling.loadtest.records.outcome import LoadResult, TierOutcome
from trtbench.profiling.loadtest.records.spec_counters import TRTLLM_PERF_METRICS
from trtbench.profiling.loadtest.records.trtllm_perf_metrics import (
    PerfMetricsTotals,
    entry_counts,
    perf_metrics_entries,
)


def entry(request_id: int, drafted: int | None, accepted: int = 0) -> dict:
    metrics: dict = {
        "first_iter": 3,
        "last_iter": 9,
        "timing_metrics": {"arrival_time": 1.0, "first_token_time": 1.5},
        "kv_cache_metrics": {"num_total_allocated_blocks": 1},
    }
    if drafted is not None:
        metrics["speculative_decoding"] = {
            "acceptance_rate": accepted / drafted,
            "total_accepted_draft_tokens": accepted,
            "total_draft_tokens": drafted,
        }
    return {"request_id": request_id, "perf_metrics": metrics}


def test_entries_are_summed_and_the_rate_is_not_read():
    """Two requests: 12 drafted / 5 accepted and 6 / 6; the entries' own acceptance_rate is
    ignored (a wrong one changes nothing): 18 drafted, 11 accepted, rate 11/18."""
    first = entry(1, 12, 5)
    first["perf_metrics"]["speculative_decoding"]["acceptance_rate"] = 0.99
    body = json.dumps([first, entry(2, 6, 6) | {"ctx_request_id": 7}])
    totals = PerfMetricsTotals()
    totals.add(perf_metrics_entries(body))
    counts = totals.counters(requests=2)
    assert counts.source == TRTLLM_PERF_METRICS
    assert (counts.draft_tokens, counts.accepted) == (18, 11)
    assert math.isnan(counts.drafts)  # no verify steps in the entries
    figures = counts.figures()
    assert figures["draft_acceptance_rate_ratio"] == pytest.approx(11 / 18)
    assert math.isnan(figures["acceptance_length_tokens"])


def test_an_entry_without_the_key_is_zero_drafts_only_where_the_server_counts():
    """Read first, before any entry had the key, it is unknown (the TorchSampler zeroed its
    counts before TensorRT-LLM PR #17082); after one had it, it is a request with 0 drafts."""
    unknown = PerfMetricsTotals()
    unknown.add([entry(1, None), entry(2, 9, 3)])
    assert (unknown.reported, unknown.unknown) == (1, 1)
    assert unknown.counters(requests=2).unmatched_requests == 1
    assert unknown.counters(requests=2).figures() == {}  # a partial count, refused
    known = PerfMetricsTotals(counts_known=True)
    known.add([entry(1, None), entry(2, 9, 3)])
    assert (known.reported, known.unknown, known.draft_tokens) == (2, 0, 9)
    assert known.counters(requests=2).figures()["draft_acceptance_rate_ratio"] == 3 / 9


@pytest.mark.parametrize(
    "body",
    [
        '{"perf_metrics": {}}',
        '[{"request_id": 1}]',
        "[1]",
        "not json",
    ],
)
def test_bodies_that_are_not_perf_metrics_raise(body):
    with pytest.raises(ValueError):
        perf_metrics_entries(body)


@pytest.mark.parametrize(
    "spec",
    [
        {"total_draft_tokens": 3, "total_accepted_draft_tokens": 4},
        {"total_draft_tokens": -1, "total_accepted_draft_tokens": 0},
        {"total_draft_tokens": 3.0, "total_accepted_draft_tokens": 1},
        {"total_accepted_draft_tokens": 1},
        [3, 1],
    ],
)
def test_counts_that_are_not_counts_raise(spec):
    with pytest.raises(ValueError):
        entry_counts({"perf_metrics": {"speculative_decoding": spec}})


def test_a_pass_whose_entries_miss_requests_is_refused_and_says_so():
    """4 requests finished, 3 entries read (one dropped by the bounded queue): no figures;
    run.json keeps both numbers."""
    totals = PerfMetricsTotals(counts_known=True)
    totals.add([entry(i, 15, 8) for i in range(3)])
    counts = totals.counters(requests=4)
    assert counts.unmatched_requests == 1
    assert summary_values(counts) == {}
    assert counts.as_json()["requests"] == 4 and counts.as_json()["reported"] == 3


def test_a_tier_with_one_partial_pass_is_left_out_even_if_another_evens_it_out():
    """Pass 1 lost an entry (4 requests, 3 entries), pass 2 counted a stranger's (4, 5):
    their sums match (8, 8), but each pass is a partial count: no counts for the tier."""
    lost = PerfMetricsTotals(counts_known=True)
    lost.add([entry(i, 15, 8) for i in range(3)])
    extra = PerfMetricsTotals(counts_known=True)
    extra.add([entry(i, 15, 8) for i in range(5)])
    whole = PerfMetricsTotals(counts_known=True)
    whole.add([entry(i, 15, 8) for i in range(4)])
    tiers = [
        TierOutcome("c1", spec_counts=(lost.counters(4), extra.counters(4))),
        TierOutcome("c2", spec_counts=(whole.counters(4),)),
    ]
    assert set(tier_counts({"v": LoadResult(tiers)})) == {("v", "c2")}


def test_pass_deltas_and_sums_carry_the_request_numbers():
    totals = PerfMetricsTotals(counts_known=True)
    totals.add([entry(1, 15, 8)])
    before = totals.counters(requests=1)
    totals.add([entry(2, 15, 8), entry(3, 6, 1)])
    after = totals.counters(requests=3)
    tier = after.minus(before)
    assert (tier.requests, tier.reported, tier.draft_tokens, tier.accepted) == (
        2,
        2,
        21,
        9,
    )
    both = tier.plus(tier)
    assert (both.requests, both.reported, both.draft_tokens) == (4, 4, 42)
    assert summary_values(tier)["draft_acceptance_rate_ratio"] == pytest.approx(9 / 21)


async def around(
    standin: StandIn, requests: list[list[tuple[int, int]]], warmup: int = 1
):
    """Read before and after ``requests`` (each its verify steps) through a reader whose
    client finished ``warmup`` requests before the first read and the others in between."""
    finished = {"n": 0}
    async with standing_in(standin) as url, httpx.AsyncClient() as client:
        reader = CounterReader(client, url, lambda: finished["n"])
        for _ in range(warmup):
            standin.finished([(1, 2)])
            finished["n"] += 1
        try:
            before = await reader.read()
            for steps in requests:
                standin.finished(steps)
                finished["n"] += 1
            after = await reader.read()
        finally:
            await reader.close()
        return reader, before, after


STEPS = [(3, 2), (1, 0), (4, 3)]  # 3 verify steps of K = 3: 9 drafted, 5 accepted


def test_perf_metrics_are_read_where_the_iteration_stats_answer_empty():
    """return_perf_metrics on: trtllm-serve's own collector empties the iteration stats, so
    /metrics answers [] (aibrix issue 2004); the per-request entries are read instead. The
    warm-up's entry, read at the probe, is not the tier's."""
    standin = StandIn(per_position=False, iteration=False, perf_max=100)
    reader, before, after = asyncio.run(around(standin, [STEPS, STEPS]))
    assert reader.kind == TRTLLM_PERF
    tier = after.minus(before)
    assert (tier.requests, tier.reported) == (2, 2)
    assert (tier.draft_tokens, tier.accepted) == (18, 10)


def test_iteration_stats_that_drafted_win_over_perf_metrics():
    """They count verify steps (the acceptance length); the entries do not."""
    standin = StandIn(per_position=False, perf_max=100)
    standin.step_done(2)  # the warm-up request's iteration
    reader, _, _ = asyncio.run(around(standin, [STEPS]))
    assert reader.kind == TRTLLM_ITERATIONS


def test_entries_without_speculative_decoding_are_not_chosen(caplog):
    """A TorchSampler before TensorRT-LLM PR #17082 (or no speculation): every entry lacks
    the key, so nothing says the server counts drafts."""
    caplog.set_level(logging.INFO)
    standin = StandIn(
        per_position=False, iteration=False, perf_max=100, perf_spec=False
    )
    reader, before, after = asyncio.run(around(standin, [STEPS]))
    assert reader.kind != TRTLLM_PERF
    assert "none with speculative_decoding" in caplog.text


def test_an_overflowed_queue_leaves_the_tier_without_figures(monkeypatch, caplog):
    """A queue of 2 and no background read: 3 requests finish before the read, the oldest
    entry is dropped; the reader waits its grace, then counts 1 request without an entry."""
    monkeypatch.setattr(counter_reader, "POLL_S", 3600.0)
    monkeypatch.setattr(counter_reader, "PERF_GRACE_S", 0.1)
    caplog.set_level(logging.WARNING)
    standin = StandIn(per_position=False, iteration=False, perf_max=2)
    reader, before, after = asyncio.run(around(standin, [STEPS, STEPS, STEPS]))
    tier = after.minus(before)
    assert (tier.requests, tier.reported) == (3, 2)
    assert tier.figures() == {}
    assert "no entry for 1 of 3 finished requests" in caplog.text


def test_entries_queued_after_the_read_started_are_waited_for(monkeypatch):
    """trtllm-serve queues a chat request's entry just after its data: [DONE]: the read
    drains again until every finished request has its entry."""
    monkeypatch.setattr(counter_reader, "POLL_S", 3600.0)
    monkeypatch.setattr(counter_reader, "PERF_SETTLE_S", 0.01)
    monkeypatch.setattr(
        counter_reader, "PERF_GRACE_S", 60.0
    )  # ends when the entry comes
    standin = StandIn(per_position=False, iteration=False, perf_max=100)

    async def go():
        finished = {"n": 1}
        async with standing_in(standin) as url, httpx.AsyncClient() as client:
            reader = CounterReader(client, url, lambda: finished["n"])
            standin.finished([(1, 2)])
            try:
                before = await reader.read()
                finished["n"] += 1  # the stream ended; its entry comes a moment later
                late = asyncio.get_running_loop().call_later(
                    0.05, standin.finished, STEPS
                )
                after = await reader.read()
                late.cancel()
            finally:
                await reader.close()
            return after.minus(before)

    tier = asyncio.run(go())
    assert (tier.requests, tier.reported, tier.draft_tokens) == (1, 1, 9)
