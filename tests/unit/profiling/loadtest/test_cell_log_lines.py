"""Every cell (tier pass) leaves one line in the run's log with what it measured: requests,
errors, status, output tok/s and wall time. A real load test (``run_load``) of two tiers in
two rounds against a real local OpenAI-style server; the tok/s of each line is checked
against the records the sink received (output tokens of the pass over its first send → last
end, the rounds.csv figure)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterator

from tests.support.sse_server import serving, streaming
from trtbench.cluster.watch import CELL_LINE
from trtbench.profiling.loadtest.clients.grpc_client import (
    ModelInterface,
    RequestOptions,
)
from trtbench.profiling.loadtest.clients.health import Health
from trtbench.profiling.loadtest.clients.openai_client import CHAT
from trtbench.profiling.loadtest.clients.target import (
    API_CHAT,
    LoadSettings,
    LoadTarget,
)
from trtbench.profiling.loadtest.driver.runner import run_load
from trtbench.profiling.loadtest.driver.tier_pass import cell_figures
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.schedule import Tier

# vLLM's chat stream: a role chunk, then 3 tokens in two chunks, usage, [DONE]
REPLY = (
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"token_ids":[17]}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":" there!"},'
    b'"token_ids":[42,7],"finish_reason":"length"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}\n\n'
    b"data: [DONE]\n\n"
)
PASS_LINE = re.compile(
    r"^v (c\d) \(round (\d)\): (\d+) requests, (\d+) failed, (\w+); "
    r"([\d.]+) out tok/s, ([\d.]+) s wall$"
)


@contextlib.contextmanager
def server_thread() -> Iterator[str]:
    """The chat server on its own event loop and thread; yields its ``/v1`` URL."""
    loop = asyncio.new_event_loop()
    up, box = threading.Event(), {}

    async def main() -> None:
        async with serving(streaming([REPLY], gap_s=0.002)) as url:
            box["url"], box["stop"] = url, asyncio.Event()
            up.set()
            await box["stop"].wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),))
    thread.start()
    try:
        assert up.wait(30), "the local server did not start"
        yield box["url"]
    finally:
        loop.call_soon_threadsafe(box["stop"].set)
        thread.join(30)
        loop.close()


class Kept:
    """A record sink that keeps the request records."""

    def __init__(self) -> None:
        self.requests: list = []

    def add(self, request, responses, output=None) -> None:
        self.requests.append(request)


def test_each_pass_leaves_one_line_with_its_figures(caplog):
    sink = Kept()
    with server_thread() as url, caplog.at_level(logging.INFO):
        target = LoadTarget(
            url,
            ModelInterface("m", {}, ("output_ids",), True),
            CHAT,
            RequestOptions(),
            API_CHAT,
        )
        cpu = time.process_time()
        result = run_load(
            target,
            [Prompt("t", "Hello", 5, 3, "words")],
            [Tier(concurrency=1), Tier(concurrency=2)],
            LoadSettings(requests_per_tier=4, warmup_requests=0, repeats=2),
            "v",
            sink=sink,
            health=lambda: Health(),
        )
        cpu = time.process_time() - cpu
    # each tier's client CPU (its two passes) is a part of the process's over the run
    tier_cpu = [t.client_cpu_s for t in result.tiers]
    assert len(tier_cpu) == 2 and all(s > 0 for s in tier_cpu) and sum(tier_cpu) <= cpu
    lines = [r.getMessage() for r in caplog.records if r.name.endswith("tier_pass")]
    assert len(lines) == 4  # 2 tiers × 2 rounds: one line each
    seen = set()
    for line in lines:
        tier, rnd, n, failed, status, rate, wall = PASS_LINE.match(line).groups()
        assert (n, failed, status) == ("4", "0", "complete")
        mine = [r for r in sink.requests if r.tier == tier and r.repeat == int(rnd) - 1]
        span_s = (max(r.end_ns for r in mine) - min(r.sent_ns for r in mine)) / 1e9
        assert sum(r.output_tokens for r in mine) == 12  # 4 requests × 3 tokens
        assert float(rate) == round(12 / span_s, 1)
        assert float(wall) >= round(span_s, 2)  # the pass holds its requests
        assert CELL_LINE.search(f"tier_pass: {line}")  # the cluster watch counts it
        seen.add((tier, rnd))
    assert seen == {("c1", "1"), ("c1", "2"), ("c2", "1"), ("c2", "2")}


def test_a_pass_without_a_figure_says_so():
    assert cell_figures(None, 1.234) == "- out tok/s, 1.23 s wall"
    assert cell_figures(812.34, 4.1) == "812.3 out tok/s, 4.10 s wall"
