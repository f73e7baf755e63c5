"""The terminal's results table names the statistic under each header: a tiny tier built by
hand, where each median differs from the mean, goes through the real summary and the table.

Three requests of variant ``v`` at tier c1, all sent at 0 ms; each answers one token at its
TTFT and one more ``d`` ms later (the last response):

    TTFT  10, 20, 60 ms   → p50 20, mean 30
    d      2,  4, 12 ms   → TPOT = (E2E − TTFT) / (2 − 1) = d: mean 6, p50 4;
                            ITL samples (one gap of one token each): p50 4, mean 6
    output tokens 2 × 3 = 6 over max end − min send = 72 ms → 83.3 out tok/s
"""

from __future__ import annotations

import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from trtbench.commands.followup import CHECK_COLUMNS
from trtbench.commands.terminal import TABLE_COLUMNS, comparison_table
from trtbench.core.export import records_to_frame
from trtbench.profiling.loadtest.clients.grpc_client import Exchange
from trtbench.profiling.loadtest.files.responses import RequestSlot, exchange_to_records
from trtbench.profiling.loadtest.stats.metrics import summarize
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.schedule import Tier
from trtbench.profiling.report.followup_check import CHECK_HEADER

MS = 1_000_000
BASE = 10_000 * MS  # an arbitrary perf_counter origin


def token(i: int, final: bool) -> service_pb2.ModelInferResponse:
    """A Triton response carrying one output id."""
    msg = service_pb2.ModelInferResponse(model_name="m", id="r")
    msg.outputs.add(name="output_ids", datatype="INT32", shape=[1, 1])
    msg.raw_output_contents.append(np.asarray([i], dtype="<i4").tobytes())
    msg.parameters["triton_final_response"].bool_param = final
    return msg


def one_request(index: int, ttft_ms: float, gap_ms: float):
    first, last = BASE + int(ttft_ms * MS), BASE + int((ttft_ms + gap_ms) * MS)
    exchange = Exchange(
        sent_ns=BASE,
        end_ns=last,
        responses=[(first, token(5, False)), (last, token(6, True))],
    )
    slot = RequestSlot("v", Tier(concurrency=1), index, BASE)
    return exchange_to_records(exchange, Prompt("t", "hello", 1, 2, "words"), slot)


@pytest.fixture(scope="module")
def printed() -> dict[str, str]:
    """Header → the value printed under it, for the tier above."""
    recs = [
        one_request(i, t, d) for i, (t, d) in enumerate([(10, 2), (20, 4), (60, 12)])
    ]
    requests = records_to_frame([r for r, _ in recs])
    responses = records_to_frame([x for _, rs in recs for x in rs])
    table = comparison_table(summarize(requests, responses))
    return {c.header: next(iter(c.cells)) for c in table.columns}


def test_ttft_is_the_median_and_tpot_the_mean(printed):
    assert printed["TTFT\np50 ms"] == "20.0"  # the mean would read 30.0
    assert printed["TPOT\nmean ms"] == "6.00"  # the median would read 4.00
    assert printed["ITL\np50 ms"] == "4.00"  # the mean would read 6.00
    assert printed["out\ntok/s"] == "83.3"
    assert printed["requests"] == "3" and printed["errors"] == "0"


STATISTICS = {"_p50_": "p50", "_mean_": "mean"}
UNITS = {"_ms": "ms", "_tokens_per_s": "tok/s", "_per_s": "/s"}
SPEEDUP_OF = {  # profiling/loadtest/stats/speedups.py: the figures the speedups divide
    "tpot_speedup_text": "time_per_output_token_mean_ms",
    "output_token_throughput_speedup_text": "output_token_throughput_tokens_per_s",
}


@pytest.mark.parametrize(("column", "header"), [(c, h) for c, h, _ in TABLE_COLUMNS])
def test_every_header_names_its_columns_statistic_and_unit(column, header):
    headers = {c: h for c, h, _ in TABLE_COLUMNS}
    if column in SPEEDUP_OF:  # "<figure> <statistic>" of the figure, then what it is
        figure = " ".join(headers[SPEEDUP_OF[column]].split())
        figure = figure.removesuffix(" ms")  # a ratio has no unit
        assert header == f"{figure}\nspeedup [≥ 95 % CI]"
        return
    for part, stat in STATISTICS.items():
        assert (part in column) == (stat in header.split()), (column, header)
    unit = next((u for suffix, u in UNITS.items() if column.endswith(suffix)), None)
    assert unit is None or header.endswith(unit), (column, header)


def test_the_check_table_has_a_terminal_header_for_each_column():
    assert len(CHECK_COLUMNS) == len(CHECK_HEADER)
