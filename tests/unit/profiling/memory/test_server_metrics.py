"""Prometheus parsing of a real Triton /metrics capture, the pure views, and the scraper thread."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from tests.support.data import get_test_data_dir
from tests.support.faults import wait_for
from trtbench.profiling.memory.server_metrics import (
    SERVER_METRICS_SCHEMA,
    ServerMetricsScraper,
    metrics_frame,
    parse_metrics_text,
    read_server_metrics_csv,
    write_server_metrics_csv,
)
from trtbench.profiling.memory.server_metrics_views import (
    counter_deltas,
    gpu_memory,
    kv_cache_blocks,
    phase_summary,
    request_gauges,
)

CAPTURE = "metrics_kv_echo.txt"  # tritonserver 2.51 after requests of 100, 10, 100 ids


def capture_text() -> str:
    return (get_test_data_dir("server_metrics") / CAPTURE).read_text()


def value(frame: pd.DataFrame, sample: str, **labels: str) -> float:
    rows = frame[frame["sample"] == sample]
    for key, want in labels.items():
        rows = rows[
            rows["labels_json"].map(lambda t, k=key: json.loads(t).get(k)) == want
        ]
    assert len(rows) == 1, (sample, labels, len(rows))
    return float(rows["value"].iloc[0])


def test_real_capture_parses_every_sample_under_its_exposed_name():
    text = capture_text()
    frame = metrics_frame(parse_metrics_text(text, t_ns=7, variant="v", phase="p"))
    sample_lines = [
        line for line in text.splitlines() if line and not line.startswith("#")
    ]
    # 13 nv_inference_* (failure has 4 reasons) + 2 pinned pool + 3 nv_cpu_* + 6 KV + 5 request
    assert len(frame) == len(sample_lines) == 29
    # counters keep Triton's names (the parser's OpenMetrics "_total" is undone)
    assert not frame["sample"].str.endswith("_total").any()
    assert value(frame, "nv_inference_request_success") == 3  # three requests sent
    assert value(frame, "nv_inference_count") == 3
    assert value(frame, "nv_inference_request_failure", reason="BACKEND") == 0
    # model.py: last request had 100 ids → used = ceil(100/32) = 4 of 64 blocks
    assert (
        value(frame, "nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type="used")
        == 4
    )
    assert (
        value(
            frame, "nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type="fraction"
        )
        == 4 / 64
    )
    types = frame.groupby("family")["metric_type"].first()
    assert types["nv_inference_count"] == "counter"
    assert types["nv_inference_pending_request_count"] == "gauge"
    assert set(frame["model"]) == {"kv_echo", ""}  # nv_cpu_* have no model label
    assert set(frame["t_ns"]) == {7} and set(frame["phase"]) == {"p"}


def test_counter_already_named_total_and_histogram_samples():
    text = (
        "# TYPE jobs_total counter\njobs_total 5\n"
        "# TYPE nv_llm_output_token_len histogram\n"
        'nv_llm_output_token_len_bucket{le="10"} 1\n'
        'nv_llm_output_token_len_bucket{le="+Inf"} 3\n'
        "nv_llm_output_token_len_sum 42\nnv_llm_output_token_len_count 3\n"
    )
    frame = metrics_frame(parse_metrics_text(text))
    assert list(frame["family"].unique()) == ["jobs_total", "nv_llm_output_token_len"]
    assert list(frame["sample"])[:2] == ["jobs_total", "nv_llm_output_token_len_bucket"]
    assert json.loads(frame["labels_json"].iloc[2]) == {"le": "+Inf"}
    assert value(frame, "nv_llm_output_token_len_sum") == 42


def test_malformed_text_raises_value_error():
    with pytest.raises(ValueError):
        parse_metrics_text("nv_inference_count{model=kv} three\n")


def readings(*values: tuple[int, str, dict[str, float]]) -> pd.DataFrame:
    """Hand-made scrapes: (t_ns, phase, {sample: value}) for model m, Triton names."""
    kinds = {"nv_inference_pending_request_count": "gauge"}
    rows = []
    for t_ns, phase, samples in values:
        for sample, val in samples.items():
            labels = {"model": "m", "version": "1"}
            rows.append(
                (
                    t_ns,
                    "v",
                    phase,
                    sample,
                    kinds.get(sample, "counter"),
                    sample,
                    json.dumps(labels, sort_keys=True),
                    "m",
                    val,
                )
            )
    return pd.DataFrame(rows, columns=[c.name for c in SERVER_METRICS_SCHEMA])


def test_counter_deltas_end_at_the_next_phase_boundary_reading():
    frame = readings(
        (
            1,
            "tier:c1",
            {"nv_inference_request_success": 0, "nv_inference_request_duration_us": 0},
        ),
        (
            2,
            "tier:c1",
            {
                "nv_inference_request_success": 2,
                "nv_inference_request_duration_us": 900,
            },
        ),
        (
            3,
            "tier:c8",
            {
                "nv_inference_request_success": 5,
                "nv_inference_request_duration_us": 3000,
            },
        ),
        (
            4,
            "tier:c8",
            {
                "nv_inference_request_success": 9,
                "nv_inference_request_duration_us": 7000,
            },
        ),
    )
    deltas = counter_deltas(frame)
    success = deltas[deltas["sample"] == "nv_inference_request_success"]
    # tier:c1 ends at tier:c8's first reading: 5 − 0; tier:c8 ends at its last: 9 − 5
    assert list(success["phase"]) == ["tier:c1", "tier:c8"]
    assert list(success["delta"]) == [5, 4]
    assert list(success["end_t_ns"]) == [3, 4]
    summary = phase_summary(frame)
    # mean request time: 3000 µs / 5 requests and (7000 − 3000) / 4
    assert list(summary["mean_request_us"]) == [600, 1000]
    assert list(summary["requests_success"]) == [5, 4]


def test_kv_request_and_gpu_views_pivot_the_category_labels():
    frame = metrics_frame(
        parse_metrics_text(capture_text(), t_ns=1, variant="v", phase="x")
    )
    kv = kv_cache_blocks(frame).iloc[0]
    assert (kv["max_blocks"], kv["free_blocks"], kv["used_blocks"]) == (64, 60, 4)
    assert (kv["tokens_per_block"], kv["used_fraction"]) == (32, 0.0625)
    req = request_gauges(frame).iloc[0]
    assert (req["pending_requests"], req["active_requests"], req["max_requests"]) == (
        0,
        1,
        8,
    )
    assert gpu_memory(frame).empty  # a CPU server exposes no nv_gpu_* family
    gpu = [
        (
            1,
            "v",
            "x",
            "nv_gpu_memory_used_bytes",
            "gauge",
            "nv_gpu_memory_used_bytes",
            '{"gpu_uuid": "GPU-a"}',
            "",
            5e9,
        ),
        (
            1,
            "v",
            "x",
            "nv_gpu_memory_total_bytes",
            "gauge",
            "nv_gpu_memory_total_bytes",
            '{"gpu_uuid": "GPU-a"}',
            "",
            8e10,
        ),
    ]
    row = gpu_memory(pd.DataFrame(gpu, columns=frame.columns)).iloc[0]
    assert (
        row["gpu_uuid"],
        row["gpu_memory_used_bytes"],
        row["gpu_memory_total_bytes"],
    ) == ("GPU-a", 5e9, 8e10)


class _MetricsHandler(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802 - http.server API
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def metrics_url():
    handler = type("H", (_MetricsHandler,), {"body": capture_text().encode()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def test_scraper_scrapes_on_schedule_at_marks_and_at_stop(metrics_url, tmp_path: Path):
    with ServerMetricsScraper(
        metrics_url, variant="v", interval_ms=50, phase="warmup"
    ) as s:
        time.sleep(0.12)
        # a starved thread scrapes less often, never more: wait for the scrapes counted
        # (its first one and a tick before the mark, a tick after it)
        wait_for(lambda: s.scrapes >= 2, 60, "a scheduled scrape before the mark")
        s.mark("tier:c1")
        time.sleep(0.12)
        wait_for(lambda: s.scrapes >= 4, 60, "a scheduled scrape after the mark")
    frame = s.frame()
    scrapes = frame.groupby("t_ns")["phase"].first()
    assert len(frame) == 29 * s.scrapes and s.error_count == 0
    # 0.24 s at 50 ms: about 5 ticks + 1 mark + 1 stop reading
    assert 4 <= s.scrapes <= 9
    assert list(scrapes.unique()) == ["warmup", "tier:c1"]
    mark_t = s.marks[0].t_ns
    assert scrapes[scrapes.index >= mark_t].eq("tier:c1").all()
    back = read_server_metrics_csv(write_server_metrics_csv(frame, tmp_path / "sm.csv"))
    assert list(back.columns) == [c.name for c in SERVER_METRICS_SCHEMA]
    assert back["model"].eq("").sum() == frame["model"].eq("").sum()


def test_scraper_records_unreachable_endpoint_without_raising():
    with ServerMetricsScraper(
        "http://127.0.0.1:9/metrics", interval_ms=20, timeout_s=0.5
    ) as s:
        time.sleep(0.1)
    assert s.error_count >= 1 and s.scrapes == 0
    assert "URLError" in s.errors[0] or "ConnectionRefused" in s.errors[0]
    assert s.frame().empty and list(s.frame().columns) == [
        c.name for c in SERVER_METRICS_SCHEMA
    ]
