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

from tests.support.timing import report_timing
from trtbench.core.export import records_to_frame
from trtbench.core.records import RequestRecord, ResponseRecord
from trtbench.profiling.loadtest.clients.grpc_client import Exchange, parse_response
from trtbench.profiling.loadtest.files.responses import RequestSlot, exchange_to_records
from trtbench.profiling.loadtest.records.client_timing import (
    add_loop_lag,
    arrival_limit_ms,
    client_warnings,
    dispatch_lag_limit_ms,
    itl_tolerance_ms,
    loop_lag_limit_ms,
    p50_tolerance_ms,
    tier_loop_lags,
    wall_minus_perf_ns,
)
from trtbench.profiling.loadtest.records.loop_lag import (
    LagHistogram,
    LagStats,
    sample_loop_lag,
)
from trtbench.profiling.loadtest.records.outcome import LoadResult, TierOutcome
from trtbench.profiling.loadtest.stats.metrics import request_metrics, summarize
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.schedule import Tier

MS = 1_000_000
BASE = 50_000 * MS


def ns(ms: float) -> int:
    return BASE + int(round(ms * MS))


def request(i, scheduled, ready, sent, first, last, arrival=None) -> RequestRecord:
    return RequestRecord(
        variant="v",
        tier="r10",
        concurrency=None,
        request_rate_per_s=10.0,
        request_id=f"v-r10-{i}",
        task_id="t",
        scheduled_ns=ns(scheduled),
        sent_ns=ns(sent),
        first_token_ns=ns(first),
        last_token_ns=ns(last),
        end_ns=ns(last),
        input_tokens=4,
        requested_output_tokens=4,
        output_tokens=4,
        token_responses=2,
        empty_responses=0,
        echoed_tokens=0,
        first_response_tokens=2,
        draft_tokens=None,
        accepted_draft_tokens=None,
        input_token_source="words",
        output_token_source="output_ids",
        request_index=i,
        ready_ns=None if ready is None else ns(ready),
        server_arrival_ns=None if arrival is None else ns(arrival),
        max_concurrency=1,
    )


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


def test_tolerance_of_a_p50_is_its_half_width_or_ten_percent():
    # TTFT p50 40 ms: the floor is 10 % = 4 ms
    assert p50_tolerance_ms(40.0, 30.0, 50.0) == pytest.approx(10.0)  # half-width 10
    assert p50_tolerance_ms(40.0, 39.0, 41.0) == pytest.approx(4.0)  # 1 < the floor
    assert p50_tolerance_ms(40.0) == pytest.approx(4.0)  # one pass: no interval
    assert np.isnan(p50_tolerance_ms(np.nan, 30.0, 50.0))


def test_itl_borrows_the_relative_half_width_of_tpot_mean():
    # TPOT mean 8 ms in [6, 10]: ±2 / 8 = 25 % → ITL p50 5 ms ± 1.25 (> floor 0.5)
    assert itl_tolerance_ms(5.0, 8.0, 6.0, 10.0) == pytest.approx(1.25)
    # [7.8, 8.2]: ±2.5 % → 0.125 < the floor 10 % of 5 = 0.5
    assert itl_tolerance_ms(5.0, 8.0, 7.8, 8.2) == pytest.approx(0.5)
    assert itl_tolerance_ms(5.0) == pytest.approx(0.5)  # no TPOT interval
    assert itl_tolerance_ms(5.0, 0.0, 0.0, 0.0) == pytest.approx(0.5)


def test_the_three_limits():
    assert dispatch_lag_limit_ms(40.0, 30.0, 50.0) == pytest.approx(10.0)
    assert arrival_limit_ms(40.0) == pytest.approx(20.0)  # half of TTFT p50
    # 1 ms of timer rounding + the smaller tolerance; NaNs are left out
    assert loop_lag_limit_ms(4.0, 1.25) == pytest.approx(2.25)
    assert loop_lag_limit_ms(np.nan, 0.5) == pytest.approx(1.5)
    assert np.isnan(loop_lag_limit_ms(np.nan, np.nan))


def row(tier, **values):
    """A complete tier with TTFT p50 40 ms in [30, 50] (tolerance 10 ms) and ITL p50 5 ms
    with TPOT mean 8 ms in [6, 10] (tolerance 1.25 ms): loop limit 1 + 1.25 = 2.25 ms,
    arrival limit 20 ms. Delays default to nothing worth a line; rare ones (p99) are
    large on purpose: they move no p50."""
    base = {
        "variant": "a",
        "tier": tier,
        "tier_status": "complete",
        "time_to_first_token_p50_ms": 40.0,
        "time_to_first_token_p50_ms_ci95_low": 30.0,
        "time_to_first_token_p50_ms_ci95_high": 50.0,
        "inter_token_latency_p50_ms": 5.0,
        "time_per_output_token_mean_ms": 8.0,
        "time_per_output_token_mean_ms_ci95_low": 6.0,
        "time_per_output_token_mean_ms_ci95_high": 10.0,
        "dispatch_lag_p50_ms": 0.1,
        "dispatch_lag_p99_ms": 100.0,
        "client_to_server_delay_p50_ms": 1.0,
        "client_to_server_delay_p99_ms": 100.0,
        "event_loop_lag_p50_ms": 0.3,
        "event_loop_lag_p99_ms": 100.0,
        "event_loop_lag_max_ms": 500.0,
    }
    return base | values


def test_a_quiet_tier_gives_no_line_whatever_its_rare_delays():
    assert client_warnings(pd.DataFrame([row("c1")])) == []


@pytest.mark.parametrize(
    ("column", "over", "under", "start", "limit"),
    [
        (
            "dispatch_lag_p50_ms",
            10.5,
            9.5,
            "a: p50 dispatch lag (sent − ready) over TTFT p50's uncertainty",
            "10.00",
        ),
        (
            "client_to_server_delay_p50_ms",
            21.0,
            19.0,
            "a: server-side: p50 send → model arrival over half of TTFT p50",
            "20.00",
        ),
        (
            "event_loop_lag_p50_ms",
            2.3,
            2.2,
            "a: p50 event-loop lag of the client over 1 ms timer rounding",
            "2.25",
        ),
    ],
)
def test_each_check_fires_just_over_its_limit_and_not_under(
    column, over, under, start, limit
):
    summary = pd.DataFrame([row("c1", **{column: over}), row("c2", **{column: under})])
    lines = client_warnings(summary)
    assert len(lines) == 1 and lines[0].startswith(start)
    assert f" at c1 {over:.2f} ms > {limit}: " in lines[0] and "c2" not in lines[0]


def test_without_an_interval_the_floor_is_ten_percent():
    # TTFT p50 40 ms, no interval → 4 ms; ITL p50 5 ms, no TPOT interval → 0.5 ms, so the
    # loop limit is 1 + min(4, 0.5) = 1.5 ms
    plain = {
        "time_to_first_token_p50_ms_ci95_low": np.nan,
        "time_to_first_token_p50_ms_ci95_high": np.nan,
        "time_per_output_token_mean_ms_ci95_low": np.nan,
        "time_per_output_token_mean_ms_ci95_high": np.nan,
    }
    summary = pd.DataFrame(
        [
            row("c1", **plain, dispatch_lag_p50_ms=4.1, event_loop_lag_p50_ms=1.6),
            row("c2", **plain, dispatch_lag_p50_ms=3.9, event_loop_lag_p50_ms=1.4),
        ]
    )
    lines = client_warnings(summary)
    assert len(lines) == 2
    assert "at c1 4.10 ms > 4.00: " in lines[0] and "c2" not in lines[0]
    assert "at c1 1.60 ms > 1.50: " in lines[1] and "c2" not in lines[1]


def test_lines_per_variant_skip_incomplete_tiers_other_variants_and_old_files():
    summary = pd.DataFrame(
        [
            row("c1", dispatch_lag_p50_ms=11.0),
            row("c2", dispatch_lag_p50_ms=12.0),
            # not complete: not a measurement, no warning
            row("c3", tier_status="interrupted", dispatch_lag_p50_ms=100.0),
            row("c1", variant="other", dispatch_lag_p50_ms=100.0),
        ]
    )
    lines = client_warnings(summary, {"a"})
    assert len(lines) == 1 and "\n" not in lines[0]
    assert "at c1 11.00 ms > 10.00, c2 12.00 ms > 10.00: " in lines[0]
    assert "--workers N" in lines[0] and "c3" not in lines[0]
    # a summary from before event_loop_lag_p50_ms: its p99 and max are not judged
    old = pd.DataFrame([row("c1")]).drop(columns=["event_loop_lag_p50_ms"])
    assert client_warnings(old) == []


def test_warnings_on_a_summary_computed_from_records():
    # RECS at one pass: TTFT 49.6, 30, 10 → p50 30, tolerance 10 % = 3 ms; dispatch lag
    # p50 1 ms; ITL: gaps 100, 70, 10 ms before 2-token responses → samples 50, 50, 35,
    # 35, 5, 5 → p50 35, tolerance 3.5 ms; loop limit 1 + min(3, 3.5) = 4 ms
    req = records_to_frame(RECS)
    resp = records_to_frame([x for r in RECS for x in responses_of(r)])
    summary = summarize(req, resp)
    assert summary["inter_token_latency_p50_ms"].iloc[0] == pytest.approx(35)
    lags = {("v", "r10"): (5.0, 9.0, 9.0)}
    lines = client_warnings(add_loop_lag(summary, lags))
    assert len(lines) == 1 and "at r10 5.00 ms > 4.00: " in lines[0]
    assert client_warnings(add_loop_lag(summary, {("v", "r10"): (3.9, 9.0, 9.0)})) == []


def test_loop_lag_columns_from_results_and_from_the_old_summary(tmp_path):
    first = TierOutcome("r1", loop_lag=LagStats(0.1, 0.8, 2.0, 50))
    second = TierOutcome("r1", loop_lag=LagStats(0.2, 0.5, 3.0, 50))  # a second pass
    lags = tier_loop_lags({"new": LoadResult(tiers=[first, second, TierOutcome("r2")])})
    assert lags == {("new", "r1"): (0.2, 0.8, 3.0)}  # the larger of the passes
    old = tmp_path / "summary.csv"
    pd.DataFrame(  # written before event_loop_lag_p50_ms
        {
            "variant": ["old"],
            "tier": ["c1"],
            "event_loop_lag_p99_ms": [1.5],
            "event_loop_lag_max_ms": [4.0],
        }
    ).to_csv(old, index=False)
    summary = pd.DataFrame(
        {"variant": ["old", "new", "new"], "tier": ["c1", "r1", "r2"]}
    )
    out = add_loop_lag(summary, lags, old)
    assert np.isnan(out["event_loop_lag_p50_ms"].iloc[0])
    assert out["event_loop_lag_p50_ms"].iloc[1] == 0.2
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
    # a reading the scheduler did not cut in two: the wall clock read between two
    # perf_counter readings 0.1 ms apart at most (a preemption between the two clocks
    # would shift a plain time_ns() - perf_counter_ns() by as long as it lasted)
    deadline = time.monotonic() + 60
    while True:
        before = time.perf_counter_ns()
        wall = time.time_ns()
        after = time.perf_counter_ns()
        if after - before <= MS // 10:
            break
        assert time.monotonic() < deadline, "no undisturbed clock reading in 60 s"
    direct = wall - (before + after) // 2
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
        deadline = time.monotonic() + 60  # a starved loop wakes less often, never more
        while (s := h.stats()) is None or s.samples < 5:
            assert time.monotonic() < deadline, "fewer than 5 lag samples in 60 s"
            await asyncio.sleep(0.005)
        task.cancel()
        return h.stats()

    stats = asyncio.run(scenario())
    assert stats is not None and stats.samples >= 5
    assert stats.max_ms >= 50  # the blocked wake came ≥ 55 ms late
    assert stats.p50_ms < stats.max_ms / 2  # the median wake is not the held-up one
    report_timing(
        "event-loop lag sampler: p50 of unblocked wakes", stats.p50_ms, 30, "ms"
    )
