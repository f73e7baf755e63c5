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
    next read: it finds 5 and 6, so 2-4 (3) are lost, all evicted by the queue
    (statsDroppedFrames 0 → 3); the tier's counts (2 read) give no figures."""
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
    assert tier.lost == 3 and tier.figures() == {}
    assert "lost 3 iteration stats" in caplog.text
    assert "evicted 3" in caplog.text


def test_iteration_counters_of_an_unconfirmed_revision_are_not_read(caplog):
    """Without per-position counters and without ``GET /metrics`` nothing shows which
    revision wrote the iteration counters: some log only the latest stat of each drain
    (docs/metrics.md), so they are not read, and the log says why and what to set."""

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
            return reader.kind, (before, after)

    with caplog.at_level(logging.WARNING):
        kind, read = asyncio.run(go())
    assert kind == NONE and read == (None, None)
    assert "trtllm-iteration-counters-unconfirmed" in caplog.text
    assert "enable_iter_perf_stats: true" in caplog.text


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


def test_a_vllm_without_num_drafts_says_why_it_has_no_figures(caplog):
    """Draft tokens counted but no vllm:spec_decode_num_drafts (before vLLM PR #16665):
    no verify steps, so no figures, and the log says why."""
    text = "\n".join(VLLM_TEXT.splitlines()[2:]) + "\n"
    with caplog.at_level(logging.WARNING):
        kind, got = asyncio.run(serve_text("/metrics", text)(None))
    assert kind == VLLM and got.figures() == {}
    assert "vLLM PR #16665" in caplog.text and "not read" in caplog.text


def test_vllm_counters_and_no_counters():
    kind, got = asyncio.run(serve_text("/metrics", VLLM_TEXT)(None))
    assert kind == VLLM and got.source == SERVER_PROMETHEUS and got.drafts == 4
    kind, got = asyncio.run(serve_text("/other", "x")(None))
    assert kind == NONE and got is None


def test_stats_drained_by_the_servers_collector_leave_no_source(caplog):
    """return_perf_metrics on, without per-position counters: trtllm-serve's own collector
    drains the iteration stats when a request finishes, so GET /metrics answers []; its
    iteration counters counted the probe's drafts, but whether every stat or only the
    latest is not shown: neither is read, and the log says so and what to set."""
    standin = StandIn(per_position=False, collector="racing")
    steps(standin, (1,))  # the probe request drafted
    with caplog.at_level(logging.WARNING):
        kind, before, after, _ = asyncio.run(around(standin, steps))
    assert kind == TRTLLM_ITERATIONS
    assert after.minus(before).figures() == {}
    assert "latest drained stat" in caplog.text and "not read" in caplog.text
    assert "/metrics answered []" in caplog.text


def test_empty_iteration_stats_are_a_warning_naming_the_options(caplog):
    standin = StandIn(per_position=False, iteration=False)
    steps(standin, (1,))
    with caplog.at_level(logging.WARNING):
        kind, *_ = asyncio.run(around(standin, steps))
    assert kind == TRTLLM_ITERATIONS
    assert "/metrics answered [] after the probe and warm-up requests" in caplog.text
    assert "{enable_iter_perf_stats: true, return_perf_metrics: false}" in caplog.text


def test_iterations_the_servers_collector_took_leave_the_tier_without_figures(
    monkeypatch, caplog
):
    """A revision with the server's own collector but without the read buffer (before
    TensorRT-LLM PR #13405): the collector drains the queue each time a request finishes.
    Iteration 1 is queued at the probe (a request in flight). Then iterations 2-3 of that
    request, which finishes (the collector takes 2-3), and iteration 4 of the next: the
    read finds 4 only. 2 iterations lost; what was read (one step accepting 3) would give
    an acceptance length of 4.0 where the tier's three steps give 1 + 5/3: no figures."""
    monkeypatch.setattr(counter_reader, "POLL_S", 3600.0)  # no background read
    caplog.set_level(logging.WARNING)
    standin = StandIn(per_position=False, collector="racing", stats_sequence=False)
    standin.step_done(1)

    def work(s: StandIn) -> None:
        s.step_done(2)
        s.step_done(0)
        s.request_done([(2, 1), (3, 2), (1, 0)])
        s.step_done(3)

    kind, before, after, reader = asyncio.run(around(standin, work))
    assert kind == TRTLLM_ITERATIONS
    tier = after.minus(before)
    assert tier.figures() == {}  # not 4.0 from the one step read
    assert tier.lost == 2
    assert "PR #13405" in caplog.text


def test_stats_sequence_counts_lost_iterations_exactly(monkeypatch, caplog):
    """Rows with statsSequence (the frame's number) and statsDroppedFrames (frames the
    queue evicted so far). Frame 1 is read at the probe; frames 2-5 go into a queue of 2,
    frame 3's iteration number repeats frame 2's (a counter that did not advance): the read
    finds frames 4 and 5 with iter 3 and 4. From ``iter`` one iteration (2) seems lost; the
    sequence says two frames (2 and 3), and statsDroppedFrames (0 → 2) that the queue
    evicted both. The tier gets no figures."""
    monkeypatch.setattr(counter_reader, "POLL_S", 3600.0)
    caplog.set_level(logging.WARNING)
    standin = StandIn(per_position=False, queue=2, stalled=(3,))
    standin.step_done(3)

    def work(s: StandIn) -> None:
        for a in (1, 2, 3, 0):
            s.step_done(a)

    kind, before, after, reader = asyncio.run(around(standin, work))
    assert kind == TRTLLM_ITERATIONS
    assert reader.totals.lost == 2  # not 1, as the iteration numbers say
    assert after.minus(before).figures() == {}
    assert "lost 2 iteration stats" in caplog.text
    assert "evicted 2" in caplog.text


def test_the_server_version_is_asked_and_kept(monkeypatch):
    standin = StandIn(version="1.3.0rc9")
    steps(standin, (1,))
    _, _, _, reader = asyncio.run(around(standin, steps))
    assert reader.version == "1.3.0rc9"
