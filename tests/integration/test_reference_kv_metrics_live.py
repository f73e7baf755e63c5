"""A reference server under a small KV budget publishes TensorRT-LLM's KV and request gauges.

A medusa variant of the tiny models is built with ``kv_cache_max_tokens`` 256 in blocks of
16 tokens (16 blocks; one request at max_seq_len 128 needs 8) and 6 batch slots, served by a
real tritonserver, and sent twelve concurrent streams of 100 tokens, more than the pool and
the slots hold at once: at least six wait for a slot until the first six end, long enough for
a 50 ms scrape to see them on a busy host (with six streams a burner once spread the starts so
that no scrape caught a waiting request). The scraper
(``ServerMetricsScraper``, what ``trtbench run`` uses) must record
``nv_trt_llm_kv_cache_block_metrics`` with max 16 / tokens_per 16, used blocks that rose
above 0 and never past 16, free = max − used, requests that waited, and the memory breakdown
must fill its KV pool columns from them; ``kv_pressure`` must see the queueing and a share
of block-steps spent on the tree. Every stream must still get all its tokens.
"""

from __future__ import annotations

import queue
import threading
import time
import urllib.request

import pandas as pd
import pytest

from tests.support.run_specs import deployed_reference_run
from tests.support.serving import stream_infer
from trtbench.pipeline.deploy import serve
from trtbench.profiling.memory.breakdown import VariantMemoryInputs, memory_breakdown
from trtbench.profiling.memory.kv_pressure import (
    kv_pressure,
    largest_unqueued_concurrency,
)
from trtbench.profiling.memory.server_metrics import ServerMetricsScraper
from trtbench.profiling.memory.server_metrics_views import (
    kv_cache_blocks,
    request_gauges,
)
from trtbench.spec.bench import VariantSpec

pytestmark = pytest.mark.integration

TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]
MAX_TOKENS = 100  # long enough that the streams overlap even when they start apart
STREAMS = 12


def stream_count(url: str, prompt: str, out: queue.Queue) -> None:
    """Stream one request; put the number of tokens received."""
    responses = stream_infer(
        url,
        "ensemble",
        {"text_input": prompt, "max_tokens": MAX_TOKENS, "end_id": -1, "stream": True},
        timeout_s=120,
    )
    out.put(sum(len(r.ids or []) for r in responses))


def assert_torn_at_most(value: pd.Series, used: pd.Series) -> None:
    """``value`` equals ``used`` at most readings, and every reading is a block count the
    pool can hold (a whole number in [0, 16]).

    The model publishes one snapshot every 100 ms, one gauge after the other (each an IPC
    call to the Triton process), so a scrape can fall between two of them and read one gauge
    from a newer snapshot than the other. That older value need not appear at a neighbouring
    reading: on a loaded host the scrapes drift apart and a snapshot can pass between two of
    them unseen (CI read fraction·16 = 9 beside used 16 and neighbours of 16).
    """
    assert ((value - value.round()).abs() < 1e-9).all(), value
    assert value.between(0, 16).all(), value
    assert ((value - used).abs() < 1e-9).mean() > 0.5, (value, used)


def test_kv_gauges_fill_server_metrics_and_the_breakdown(tiny_models, tmp_path):
    run_dir = deployed_reference_run(
        tmp_path / "run",
        "kv-it",
        tiny_models,
        [
            VariantSpec(
                name="medusa",
                mode="medusa",
                medusa_choices=TREE,
                max_seq_len=128,
                max_input_len=64,
                max_batch_size=6,
                tokens_per_block=16,
                kv_cache_max_tokens=256,
            )
        ],
    )
    counts: queue.Queue = queue.Queue()
    with serve(run_dir, "medusa") as server:
        text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
        assert 'kv_cache_block_type="tokens_per"' in text
        assert 'request_type="waiting"' in text
        with ServerMetricsScraper(
            server.metrics_url, variant="medusa", interval_ms=50
        ) as scraper:
            scraper.mark("tier:c12")
            threads = [
                threading.Thread(
                    target=stream_count,
                    args=(server.grpc_url, f"def f{i}(x):\n    return x", counts),
                )
                for i in range(STREAMS)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
            # The last streams' blocks are freed one gauge after the other: scrape until
            # both show them freed, so that a reading torn between the two updates has a
            # reading after it (on a busy host the gap between the updates is long enough
            # for the stop's own scrape to fall in it: free 16, used still 7).
            deadline = time.monotonic() + 60
            while True:
                scraper.mark("tier:c12")
                last = kv_cache_blocks(scraper.frame()).iloc[-1]
                if last["used_blocks"] == 0 and last["free_blocks"] == 16:
                    break
                assert time.monotonic() < deadline, last
                time.sleep(0.05)
        metrics = scraper.frame()
    assert [counts.get_nowait() for _ in range(STREAMS)] == [MAX_TOKENS] * STREAMS
    kv = kv_cache_blocks(metrics)
    tier = kv[kv["phase"] == "tier:c12"]
    assert set(tier["max_blocks"]) == {16} and set(tier["tokens_per_block"]) == {16}
    assert tier["used_blocks"].max() > 0 and tier["used_blocks"].max() <= 16
    # The model sets its gauges one after another, so a scrape can fall between two
    # updates (see assert_torn_at_most).
    used = tier["used_blocks"].reset_index(drop=True)
    assert_torn_at_most(16 - tier["free_blocks"].reset_index(drop=True), used)
    assert_torn_at_most(tier["used_fraction"].reset_index(drop=True) * 16, used)
    requests = request_gauges(metrics)
    requests = requests[requests["phase"] == "tier:c12"]
    assert set(requests["max_requests"].dropna()) == {6}
    assert requests["waiting_requests"].max() > 0  # the pool made some wait
    pressure = kv_pressure(metrics).iloc[0]
    assert pressure["concurrency"] == 12 and pressure["max_waiting_requests"] > 0
    assert pressure["kv_waits"] > 0  # requests were held back for blocks
    assert 0 < pressure["speculative_block_share"] < 1  # the tree's blocks, counted
    assert pressure["max_kv_used_blocks"] <= pressure["kv_max_blocks"] == 16
    assert pd.isna(largest_unqueued_concurrency(pd.DataFrame([pressure]))["medusa"])
    row = memory_breakdown(
        [
            VariantMemoryInputs(
                "medusa",
                "medusa",
                {"target": 1},
                kv_bytes_per_token={"target": 1000},
                server_metrics=metrics,
            )
        ]
    ).iloc[0]
    assert row["target_kv_max_blocks"] == 16 and row["kv_tokens_per_block"] == 16
    assert row["target_kv_pool_bytes"] == 16 * 16 * 1000
