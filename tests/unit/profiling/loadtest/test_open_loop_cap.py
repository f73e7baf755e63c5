"""The capped open loop (``--request-rate R --max-concurrency C``) against a stub send.

The runner's own ``open_loop`` runs with its gRPC send replaced by an async function that
holds each request for a fixed service time and counts what is in flight. With a constant
arrival at 100 requests/s (intended sends exactly 10 ms apart) and 30 ms of service, one
slot can serve one request every 30 ms, so the k-th request waits about 20·k ms for its
slot. By definition its ready time is max(intended time, end of the request that held
the slot before it): with one slot, exactly max(scheduled_k, end_{k−1}).
"""

from __future__ import annotations

import asyncio
import time
from itertools import pairwise

import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from trtbench.profiling.loadtest.clients.grpc_client import Exchange, ModelInterface
from trtbench.profiling.loadtest.clients.target import LoadSettings, LoadTarget
from trtbench.profiling.loadtest.driver.runner import TierRunner
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.schedule import Tier
from trtbench.profiling.loadtest.workload.slots import OpenLoopGate, SlotPool

MS = 1_000_000
SERVICE_S = 0.030


def response(ids: list[int]) -> service_pb2.ModelInferResponse:
    """A final response carrying ``ids`` as output_ids (INT32)."""
    msg = service_pb2.ModelInferResponse(model_name="m", id="r")
    msg.outputs.add(name="output_ids", datatype="INT32", shape=[1, len(ids)])
    msg.raw_output_contents.append(np.asarray(ids, dtype="<i4").tobytes())
    msg.parameters["triton_final_response"].bool_param = True
    return msg


class ListSink:
    def __init__(self) -> None:
        self.requests: list = []

    def add(self, request, responses, output=None) -> None:
        self.requests.append(request)


class StubServer:
    """Holds each request ``SERVICE_S``; remembers the most requests in flight at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0

    async def send(self, prompt, request_id, timeout_s) -> Exchange:
        sent = time.perf_counter_ns()
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(SERVICE_S)
        self.in_flight -= 1
        end = time.perf_counter_ns()
        return Exchange(sent, end, [(end, response([1, 2, 3, 4]))])


def run_open_loop(rate: float, cap: int | None, n: int) -> tuple[list, StubServer]:
    interface = ModelInterface(
        "m",
        {"text_input": ("BYTES", (1, 1)), "max_tokens": ("INT32", (1, 1))},
        ("output_ids",),
        True,
    )
    sink, server = ListSink(), StubServer()
    settings = LoadSettings(requests_per_tier=n, warmup_requests=0, arrival="constant")
    runner = TierRunner(
        LoadTarget("127.0.0.1:1", interface, "stream"),
        [Prompt("t", "hello", 1, 4, "words")],
        settings,
        None,
        None,
        sink,
    )
    runner.transport = server  # type: ignore[assignment]
    asyncio.run(runner.open_loop("v", Tier(None, rate, cap), 0))
    return sorted(sink.requests, key=lambda r: r.scheduled_ns), server


def test_one_slot_keeps_intended_times_and_queues():
    recs, server = run_open_loop(100.0, 1, 6)
    assert [r.error for r in recs] == [None] * 6
    sched = [r.scheduled_ns for r in recs]
    # intended times come from the arrival process, never shifted by the queue
    assert [b - a for a, b in pairwise(sched)] == [10 * MS] * 5
    # never more than one in flight: seen by the server and in the records
    assert server.most == 1
    assert all(b.sent_ns >= a.end_ns for a, b in pairwise(recs))
    # ready = max(scheduled, end of the request that held the slot)
    assert recs[0].ready_ns == recs[0].scheduled_ns
    for prev, cur in pairwise(recs):
        assert cur.ready_ns == max(cur.scheduled_ns, prev.end_ns)
    queue = [(r.ready_ns - r.scheduled_ns) / MS for r in recs]
    # each request waits ~20 ms longer than the one before (30 ms service, 10 ms apart)
    assert queue[0] == 0
    assert all(b - a > 15 for a, b in pairwise(queue)), queue
    # the client's own lag stays small (a loaded 2-core machine: generous bound)
    assert max((r.sent_ns - r.ready_ns) / MS for r in recs) < 10
    assert {r.max_concurrency for r in recs} == {1}
    assert {r.tier for r in recs} == {"r100"}


def test_two_slots_fill_both_and_no_more():
    recs, server = run_open_loop(100.0, 2, 8)
    assert server.most == 2
    events = sorted([(r.sent_ns, 1) for r in recs] + [(r.end_ns, -1) for r in recs])
    level = most = 0
    for _, step in events:  # an end sorts before a send at the same ns
        level += step
        most = max(most, level)
    assert most == 2


def test_without_a_cap_ready_is_scheduled_and_requests_overlap():
    recs, server = run_open_loop(100.0, None, 6)
    assert server.most >= 3  # 30 ms service (or a bit more), a request every 10 ms
    assert all(r.ready_ns == r.scheduled_ns for r in recs)
    assert {r.max_concurrency for r in recs} == {None}


def test_a_stop_while_waiting_for_a_slot_takes_nothing():
    async def scenario() -> tuple[int | None, int | None]:
        pool, stop = SlotPool(1), asyncio.Event()
        first = await pool.take(5, stop)
        waiting = asyncio.ensure_future(pool.take(7, stop))
        await asyncio.sleep(0.01)
        stop.set()
        return first, await waiting

    assert asyncio.run(scenario()) == (5, None)


def test_the_deadline_passing_during_the_wait_gives_the_slot_back():
    async def scenario() -> tuple[bool, int]:
        gate, stop = OpenLoopGate(1), asyncio.Event()
        now = time.perf_counter_ns()
        held = await gate.enter(now, stop)
        assert held is not None
        asyncio.get_running_loop().call_later(0.02, held.release)
        late = await gate.enter(now, stop, deadline_ns=now + 5 * MS)
        assert gate.pool is not None
        return late is None, gate.pool.in_flight

    assert asyncio.run(scenario()) == (True, 0)


def test_a_cap_below_one_is_refused():
    with pytest.raises(ValueError, match="≥ 1"):
        SlotPool(0)
