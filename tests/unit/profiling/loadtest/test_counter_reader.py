"""Which counters a server keeps, found by probing, and read per tier with their semantics;
against real local HTTP servers: the trtllm-serve stand-in (a contract test of its formats,
``tests/support/trtllm_serve_standin.py``) and a vLLM-format ``/metrics``."""

from __future__ import annotations

import asyncio
import logging

import httpx
from aiohttp import web

from tests.support.sse_server import serving_app
from tests.support.trtllm_serve_standin import StandIn, standing_in
from trtbench.profiling.loadtest.clients import counter_reader
from trtbench.profiling.loadtest.clients.counter_reader import (
    NONE,
    TRTLLM_ITERATION_COUNTERS,
    TRTLLM_ITERATIONS,
    TRTLLM_PROMETHEUS,
    VLLM,
    CounterReader,
    server_root,
)
from trtbench.profiling.loadtest.records.spec_counters import (
    SERVER_PROMETHEUS,
    TRTLLM_ITERATION_STATS,
)
from trtbench.profiling.loadtest.records.trtllm_counters import (
    TRTLLM_PROMETHEUS as SOURCE_PROMETHEUS,
)


def test_server_root_drops_the_path():
    assert server_root("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000"


async def around(standin: StandIn, work) -> tuple[str, object, object, CounterReader]:
    """Read before and after ``work(standin)`` through a reader of the stand-in."""
    async with standing_in(standin) as url, httpx.AsyncClient() as client:
        reader = CounterReader(client, url)
        try:
            before = await reader.read()
            work(standin)
            after = await reader.read()
        finally:
            await reader.close()
        return reader.kind, before, after, reader


def steps(standin: StandIn, accepted=(2, 0, 3)) -> None:
    """One request of three verify steps accepting 2, 0, 3 of K = 3 drafts."""
    for a in accepted:
        standin.step_done(a)
    standin.request_done([(a + 1, a) for a in accepted])


def test_per_position_prometheus_is_preferred():
    """trtbench's probe request has finished before the first read (so the per-position
    counters have samples); the iteration stats are on too and lose to them."""
    standin = StandIn()
    steps(standin, (1,))  # the load test's probe request
    kind, before, after, _ = asyncio.run(around(standin, steps))
    assert kind == TRTLLM_PROMETHEUS
    tier = after.minus(before)
    assert tier.source == SOURCE_PROMETHEUS
    # 3 steps; accepted 5 of 9; steps that accepted ≥ 1, 2, 3: 2, 2, 1
    assert (tier.drafts, tier.draft_tokens, tier.accepted) == (3, 9, 5)
    assert tier.accepted_per_pos == (2, 2, 1)


def test_iteration_stats_are_drained_into_running_totals(monkeypatch):
    """What queued before the first read is not the tier's; the tier's iterations are read
    by the poller and the final read together."""
    monkeypatch.setattr(counter_reader, "POLL_S", 0.01)
    standin = StandIn(per_position=False)
    steps(standin, (1, 1))  # before trtbench looks: drained at the probe, not counted

    def work(s: StandIn) -> None:
        steps(s)

    kind, before, after, reader = asyncio.run(around(standin, work))
    assert kind == TRTLLM_ITERATIONS
    tier = after.minus(before)
    assert tier.source == TRTLLM_ITERATION_STATS
    assert (tier.drafts, tier.draft_tokens, tier.accepted) == (3, 9, 5)
    assert reader.totals.lost == 0


def test_a_queue_that_overflowed_between_reads_is_counted_as_lost(monkeypatch, caplog):
    """Iteration 1 read at the probe; then 5 iterations (2-6) into a queue of 2 before the
    next read: it finds 5 and 6, so 2-4 (3) are lost and the tier counts 2."""
    monkeypatch.setattr(counter_reader, "POLL_S", 3600.0)  # no background read
    caplog.set_level(logging.WARNING)
    standin = StandIn(per_position=False, queue=2)
    standin.step_done(3)

    def work(s: StandIn) -> None:
        for a in (1, 2, 3, 0, 2):
            s.step_done(a)

    kind, before, after, reader = asyncio.run(around(standin, work))
    tier = after.minus(before)
    assert (tier.drafts, tier.accepted) == (2, 0 + 2)
    assert reader.totals.lost == 3
    assert "dropped 3 iteration stats" in caplog.text


def test_iteration_counters_in_prometheus_when_the_json_is_off():
    """Without per-position counters and with /metrics answering ``[]`` forever (iteration
    stats off in the JSON, as trtllm-serve does without enable_iter_perf_stats) the JSON
    wins the probe: it is a list. With no JSON at all, Prometheus iteration counters."""

    async def go() -> tuple[str, object]:
        standin = StandIn(per_position=False)
        app = web.Application()
        app.router.add_get("/prometheus/metrics", standin.prometheus)
        async with serving_app(app) as url, httpx.AsyncClient() as client:
            reader = CounterReader(client, url)
            before = await reader.read()
            steps(standin)
            after = await reader.read()
            await reader.close()
            return reader.kind, after.minus(before)

    kind, tier = asyncio.run(go())
    assert kind == TRTLLM_ITERATION_COUNTERS
    assert (tier.draft_tokens, tier.accepted) == (9, 5)
    assert tier.drafts != tier.drafts  # NaN: steps not counted


VLLM_TEXT = """# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 4.0
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 16.0
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 6.0
"""


def serve_text(path: str, text: str):
    async def go(work) -> tuple[str, object]:
        async def answer(_: web.Request) -> web.Response:
            return web.Response(text=text)

        app = web.Application()
        app.router.add_get(path, answer)
        async with serving_app(app) as url, httpx.AsyncClient() as client:
            reader = CounterReader(client, url)
            got = await reader.read()
            await reader.close()
            return reader.kind, got

    return go


def test_vllm_counters_and_no_counters():
    kind, got = asyncio.run(serve_text("/metrics", VLLM_TEXT)(None))
    assert kind == VLLM and got.source == SERVER_PROMETHEUS and got.drafts == 4
    kind, got = asyncio.run(serve_text("/other", "x")(None))
    assert kind == NONE and got is None


def test_iteration_counters_win_over_stats_drained_by_the_servers_collector():
    """return_perf_metrics on, without per-position counters: trtllm-serve's own collector
    drains the iteration stats into its iteration counters, so GET /metrics answers [];
    the counters that counted the probe's drafts are read instead."""
    standin = StandIn(per_position=False, collector=True)
    steps(standin, (1,))  # the probe request drafted
    kind, before, after, _ = asyncio.run(around(standin, steps))
    assert kind == TRTLLM_ITERATION_COUNTERS
    tier = after.minus(before)
    assert (tier.draft_tokens, tier.accepted) == (9, 5)


def test_empty_iteration_stats_are_a_warning_naming_the_options(caplog):
    standin = StandIn(per_position=False, iteration=False)
    steps(standin, (1,))
    with caplog.at_level(logging.WARNING):
        kind, *_ = asyncio.run(around(standin, steps))
    assert kind == TRTLLM_ITERATIONS
    assert "/metrics answered [] after the probe and warm-up requests" in caplog.text
    assert "{enable_iter_perf_stats: true, return_perf_metrics: false}" in caplog.text
