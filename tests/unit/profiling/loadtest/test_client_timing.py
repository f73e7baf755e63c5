"""Queue time, dispatch lag, queue-inclusive latency, client→server delay, event-loop lag.

Every expected value is worked out by hand from the times written in each test (ms after
an arbitrary perf_counter origin).
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pandas as pd
import pytest
from tritonclient.grpc import service_pb2

from trtbench.export import records_to_frame
from trtbench.profiling.loadtest.client_timing import (
    add_loop_lag,
    client_warnings,
    tier_loop_lags,
    wall_minus_perf_ns,
)
from trtbench.profiling.loadtest.grpc_client import Exchange, parse_response
from trtbench.profiling.loadtest.loop_lag import (
    LagHistogram,
    LagStats,
    sample_loop_lag,
)
from trtbench.profiling.loadtest.metrics import request_metrics, summarize
from trtbench.profiling.loadtest.outcome import LoadResult, TierOutcome
from trtbench.profiling.loadtest.prompts import Prompt
from trtbench.profiling.loadtest.responses import RequestSlot, exchange_to_records
from trtbench.profiling.loadtest.schedule import Tier
from trtbench.records import RequestRecord, ResponseRecord

MS = 1_000_000
BASE = 50_000 * MS


def ns(ms: float) -> int:
    return BASE + int(round(ms * MS))


def request(i, scheduled, ready, sent, first, last, arrival=None) -> RequestRecord:
    return RequestRecord(
        variant="v", tier="r10", concurrency=None, request_rate_per_s=10.0,
        request_id=f"v-r10-{i}", task_id="t", scheduled_ns=ns(scheduled),
        sent_ns=ns(sent), first_token_ns=ns(first), last_token_ns=ns(last),
        end_ns=ns(last), input_tokens=4, requested_output_tokens=4, output_tokens=4,
        token_responses=2, empty_responses=0, echoed_tokens=0, first_response_tokens=2,
        draft_tokens=None, accepted_draft_tokens=None, input_token_source="words",
        output_token_source="output_ids", request_index=i,
        ready_ns=None if ready is None else ns(ready),
        server_arrival_ns=None if arrival is None else ns(arrival), max_concurrency=1,
    )  # fmt: skip


def responses_of(r: RequestRecord) -> list[ResponseRecord]:
    return [
        ResponseRecord("v", "r10", r.request_id, 0, r.first_token_ns, 2, False),
        ResponseRecord("v", "r10", r.request_id, 1, r.last_token_ns, 2, True),
    ]


# A: waited 50 ms for its slot, sent 0.4 ms after, reached the server 0.6 ms later.
# B: no wait, sent 1 ms late, no server arrival. C: a file from before ready_ns (2 ms).
RECS = [
    request(0, 1000, 1050, 1050.4, 1100, 1200, arrival=1051.0),
    request(1, 2000, 2000, 2001, 2031, 2101),
    request(2, 3000, None, 3002, 3012, 3022),
]


def test_per_request_times_by_hand():
    m = request_metrics(records_to_frame(RECS)).set_index("request_id")
    got = m.loc[[r.request_id for r in RECS]]
    assert got["client_queue_time_ms"].tolist() == pytest.approx([50, 0, 0])
    assert got["dispatch_lag_ms"].tolist() == pytest.approx([0.4, 1, 2])
    assert got["time_to_first_token_with_queue_ms"].tolist() == pytest.approx(
        [100, 31, 12]
    )
    assert got["request_latency_with_queue_ms"].tolist() == pytest.approx(
        [200, 101, 22]
    )
    delay = got["client_to_server_delay_ms"].tolist()
    assert delay[0] == pytest.approx(0.6) and np.isnan(delay[1]) and np.isnan(delay[2])
    # TTFT stays measured from the send: 1100 − 1050.4
    assert got["time_to_first_token_ms"].iloc[0] == pytest.approx(49.6)


def test_summary_columns_by_hand():
    req = records_to_frame(RECS)
    resp = records_to_frame([x for r in RECS for x in responses_of(r)])
    row = summarize(req, resp).iloc[0]
    assert row["max_concurrency"] == 1
    assert row["dispatch_lag_mean_ms"] == pytest.approx((0.4 + 1 + 2) / 3)
    assert row["dispatch_lag_max_ms"] == pytest.approx(2)
    assert row["client_queue_time_max_ms"] == pytest.approx(50)
    assert row["request_latency_with_queue_p50_ms"] == pytest.approx(101)
    assert row["client_to_server_delay_count"] == 1
    assert row["client_to_server_delay_p99_ms"] == pytest.approx(0.6)


def test_warnings_name_the_tiers_and_the_limit_once_per_variant():
    summary = pd.DataFrame(
        [
            # TTFT p50 200 ms: dispatch limit min(5, 10) = 5 → 6 warns; arrival limit
            # max(5, 10) = 10 → 1 does not; loop 6 > 5 warns
            {"variant": "a", "tier": "r1", "time_to_first_token_p50_ms": 200.0,
             "dispatch_lag_p99_ms": 6.0, "client_to_server_delay_p99_ms": 1.0,
             "event_loop_lag_p99_ms": 6.0},
            # TTFT p50 20 ms: dispatch limit min(5, 1) = 1 → 1.5 warns; arrival limit
            # max(5, 1) = 5 → 7 warns; loop 4.9 does not
            {"variant": "a", "tier": "r2", "time_to_first_token_p50_ms": 20.0,
             "dispatch_lag_p99_ms": 1.5, "client_to_server_delay_p99_ms": 7.0,
             "event_loop_lag_p99_ms": 4.9},
            # not complete: not a measurement, no warning
            {"variant": "a", "tier": "r3", "tier_status": "interrupted",
             "time_to_first_token_p50_ms": 20.0, "dispatch_lag_p99_ms": 100.0,
             "client_to_server_delay_p99_ms": 100.0, "event_loop_lag_p99_ms": 100.0},
            {"variant": "other", "tier": "r1", "time_to_first_token_p50_ms": 20.0,
             "dispatch_lag_p99_ms": 100.0, "client_to_server_delay_p99_ms": 100.0,
             "event_loop_lag_p99_ms": 100.0},
        ]
    )  # fmt: skip
    summary.loc[summary["tier_status"].isna(), "tier_status"] = "complete"
    lines = client_warnings(summary, {"a"})
    assert len(lines) == 3
    assert lines[0].startswith("a: p99 dispatch lag (sent − ready) over 5 ms or 5 %")
    assert "at r1 6.00 ms > 5.00, r2 1.50 ms > 1.00:" in lines[0]
    assert lines[1].startswith("a: p99 send → model arrival over 5 ms and 5 %")
    assert "at r2 7.00 ms > 5.00:" in lines[1] and "not client lag" in lines[1]
    assert lines[2].startswith(
        "a: p99 event-loop lag of the client over 5 ms at r1 6.00"
    )
    assert all("r3" not in line and "\n" not in line for line in lines)


def test_loop_lag_columns_from_results_and_from_the_old_summary(tmp_path):
    first = TierOutcome("r1", loop_lag=LagStats(0.1, 0.8, 2.0, 50))
    second = TierOutcome("r1", loop_lag=LagStats(0.2, 0.5, 3.0, 50))  # a second pass
    lags = tier_loop_lags({"new": LoadResult(tiers=[first, second, TierOutcome("r2")])})
    assert lags == {("new", "r1"): (0.8, 3.0)}  # the larger of the passes
    old = tmp_path / "summary.csv"
    pd.DataFrame(
        {"variant": ["old"], "tier": ["c1"], "event_loop_lag_p99_ms": [1.5],
         "event_loop_lag_max_ms": [4.0]}
    ).to_csv(old, index=False)  # fmt: skip
    summary = pd.DataFrame(
        {"variant": ["old", "new", "new"], "tier": ["c1", "r1", "r2"]}
    )
    out = add_loop_lag(summary, lags, old)
    assert out["event_loop_lag_p99_ms"].tolist()[:2] == [1.5, 0.8]
    assert out["event_loop_lag_max_ms"].tolist()[:2] == [4.0, 3.0]
    assert np.isnan(out["event_loop_lag_p99_ms"].iloc[2])


def arrival_response(epoch_ns: int, ids: list[int] | None, final: bool):
    msg = service_pb2.ModelInferResponse(model_name="m", id="r")
    if ids is not None:
        msg.outputs.add(name="output_ids", datatype="INT32", shape=[1, len(ids)])
        msg.raw_output_contents.append(np.asarray(ids, dtype="<i4").tobytes())
    msg.outputs.add(name="arrival_time_ns", datatype="INT64", shape=[1, 1])
    msg.raw_output_contents.append(np.asarray([epoch_ns], dtype="<i8").tobytes())
    msg.parameters["triton_final_response"].bool_param = final
    return msg


@pytest.mark.parametrize("on_final", [False, True])  # reference model | TRT-LLM perf
def test_server_arrival_moves_onto_the_client_clock(on_final):
    epoch = 1_700_000_000_123_456_789
    offset = epoch - ns(1000.25)  # the server's clock read 1000.25 ms on ours
    first = service_pb2.ModelInferResponse(model_name="m", id="r")
    first.outputs.add(name="output_ids", datatype="INT32", shape=[1, 1])
    first.raw_output_contents.append(np.asarray([7], dtype="<i4").tobytes())
    stream = [arrival_response(epoch, None, True)] if on_final else []
    if not on_final:
        first = arrival_response(epoch, [7], False)
        stream = [service_pb2.ModelInferResponse(model_name="m", id="r")]
        stream[0].parameters["triton_final_response"].bool_param = True
    assert (
        parse_response(arrival_response(epoch, [7], False)).server_arrival_ns == epoch
    )
    times = [ns(1010), ns(1011)]
    exchange = Exchange(
        ns(1000), ns(1011), list(zip(times, [first, *stream], strict=True))
    )
    slot = RequestSlot("v", Tier(None, 10.0, 2), 0, ns(999), ready_ns=ns(999.5))
    prompt = Prompt("t", "hello", 1, 1, "words")
    rec, _ = exchange_to_records(exchange, prompt, slot, clock_offset_ns=offset)
    assert rec.server_arrival_ns == ns(1000.25)
    assert (rec.ready_ns, rec.max_concurrency) == (ns(999.5), 2)
    rec_no_clock, _ = exchange_to_records(exchange, prompt, slot)
    assert rec_no_clock.server_arrival_ns is None


def test_wall_minus_perf_matches_a_direct_reading():
    direct = time.time_ns() - time.perf_counter_ns()
    assert abs(wall_minus_perf_ns() - direct) < 1 * MS


def test_lag_histogram_percentiles_within_a_bin():
    h = LagHistogram()
    for us in range(1, 1001):  # 1 µs … 1000 µs
        h.add(us * 1000)
    s = h.stats()
    assert s is not None and s.samples == 1000
    assert 0.500 <= s.p50_ms <= 0.500 * 1.02  # the 500th sample, bin upper edge
    assert 0.990 <= s.p99_ms <= 1.0  # the 990th sample, capped at the max
    assert s.max_ms == 1.0
    assert h.pop_stats() == s and h.stats() is None


def test_the_sampler_sees_a_blocked_loop():
    async def scenario() -> LagStats | None:
        h = LagHistogram()
        task = asyncio.ensure_future(sample_loop_lag(h, 0.005))
        await asyncio.sleep(0.05)
        time.sleep(0.06)  # the loop is blocked for 60 ms
        await asyncio.sleep(0.05)
        task.cancel()
        return h.stats()

    stats = asyncio.run(scenario())
    assert stats is not None and stats.samples >= 5
    assert stats.max_ms >= 50  # the blocked wake came ≥ 55 ms late
    assert stats.p50_ms < 30  # the other wakes were not held up (a loaded box: loose)
