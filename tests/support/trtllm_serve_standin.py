"""A scripted stand-in for ``trtllm-serve``'s HTTP endpoints: a contract test, not a run of
TensorRT-LLM (no TensorRT-LLM runs on this machine).

It serves what trtbench reads, in trtllm-serve's exact formats (NVIDIA/TensorRT-LLM):

* ``POST /v1/completions`` streaming: one SSE chunk per engine step with the step's new
  ``token_ids`` (vLLM's ``return_token_ids`` shape, which trtbench's client reads), a final
  usage chunk, ``[DONE]``.
* ``GET /prometheus/metrics``: the counters ``tensorrt_llm/metrics/collector.py`` registers,
  made with the same ``prometheus_client`` calls (names, the ``token_position`` label, the
  ``engine_type`` / ``model_name`` labels), so the exposition text is what that code emits:
  per request at its end, ``request_success_total`` (label ``finished_reason``) and
  ``spec_decode_drafted_tokens_total`` / ``spec_decode_accepted_tokens_total`` per position
  (``log_request_metrics_dict``; with ``late_s`` > 0 only that long after the request's
  ``data: [DONE]``, as a server that logs a request's metrics after its stream ends; with
  ``prefill_drafts`` the drafted counts also hold the prefill step's K dummy drafts, one at
  each position, none accepted: the per-request accumulator before TensorRT-LLM PR #17082),
  and per
  iteration ``spec_decode_num_draft_tokens_total`` / ``..._num_accepted_tokens_total``
  (``log_iteration_stats``).
* ``GET /metrics``: the queued iteration stats as a JSON list, emptied by the read
  (``openai_server.py``'s ``get_iteration_stats``), ``[]`` when they are off; the queue keeps
  at most ``queue`` entries and drops the oldest, as a bounded queue does. With
  ``stats_sequence`` (the default: the newest revision, ``tensorrt_llm/executor/
  iteration_stats.py`` ``_materialize_frame``) each row carries ``statsSequence`` (the frame's
  1-based number, advancing on every frame, lost or not) and ``statsDroppedFrames`` (frames the
  queue evicted so far, ``PyExecutor._append_stats_frame``); ``stalled`` lists frame numbers
  whose ``iter`` repeats the previous frame's (an iteration counter that did not advance).
* The server's own Prometheus collector (``collector``; ``_iteration_stats_collector_loop``,
  woken when a request finishes): ``""`` none (the iteration counters count every step as it
  ends, as the buffered revision's loop ends up doing, and ``GET /metrics`` keeps every
  iteration: TensorRT-LLM PR #13405's read buffer); ``"drains"``: it takes every stat before
  ``GET /metrics`` can (``[]``); ``"racing"``: it drains the queue when a request finishes,
  so ``GET /metrics`` gets only what was queued since (revisions with the loop but without
  the read buffer). ``latest_only``: the loop passes only the latest stat of each drain to
  ``log_iteration_stats`` (revisions the issue reports; the counters hold one iteration per
  drain).
* ``GET /version``: ``{"version": ...}`` (``OpenAIServer.version``).
* ``GET /perf_metrics`` (TensorRT-LLM PR #6985; ``openai_server.py``'s ``get_perf_metrics``
  and ``_extract_metrics``): one entry per finished request, queued in a
  ``deque(maxlen=perf_max)`` that the read hands over and replaces (each entry read once, the
  oldest dropped on overflow); ``[]`` when ``perf_max`` is 0 (``perf_metrics_max_requests``
  unset). An entry has ``speculative_decoding`` only when the request drafted, and never with
  ``perf_spec`` False (the PyTorch TorchSampler's zeroed counts before TensorRT-LLM PR #17082).

Every request decodes with K = 3 drafts per step; the steps accept :data:`PATTERN` drafts in
turn (the last step may be cut by ``max_tokens``; its accepted drafts still count, as the
server counts verification). One iteration per step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, generate_latest

from tests.support.sse_server import serving_app

K = 3
PATTERN = (2, 0, 3, 1)
LABELS = {"engine_type": "trtllm", "model_name": "tiny"}


def request_steps(max_tokens: int) -> list[tuple[int, int]]:
    """(tokens emitted, drafts accepted) of each verify step after the first token."""
    steps, emitted, i = [], 1, 0
    while emitted < max_tokens:
        accepted = PATTERN[i % len(PATTERN)]
        tokens = min(accepted + 1, max_tokens - emitted)
        steps.append((tokens, accepted))
        emitted += tokens
        i += 1
    return steps


@dataclass
class StandIn:
    """What the stand-in exposes (``per_position``: the per-request counters; ``iteration``:
    the iteration stats and their Prometheus counters; ``json_endpoint``: ``GET /metrics``;
    ``model``: the one name ``/v1/models`` lists; ``late_s``: the per-request counters are
    updated that long after the request's ``[DONE]``, 0: before it; ``collector``,
    ``latest_only``, ``prefill_drafts``, ``stats_sequence``, ``stalled``, ``version``: the
    revision played, module doc). The defaults play the newest revision read."""

    per_position: bool = True
    iteration: bool = True
    json_endpoint: bool = True
    queue: int = 1000
    model: str = "tiny"
    perf_max: int = 0
    perf_spec: bool = True
    late_s: float = 0.0
    collector: str = ""
    latest_only: bool = False
    prefill_drafts: bool = False
    stats_sequence: bool = True
    stalled: tuple[int, ...] = ()
    version: str = "1.4.0rc4"
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    stats: deque = field(default_factory=deque)
    perf: deque = field(default_factory=deque)
    iteration_number: int = 0
    request_number: int = 0
    frames: int = 0
    dropped_frames: int = 0

    def __post_init__(self) -> None:
        self.stats = deque(maxlen=self.queue)
        self.perf = deque(maxlen=max(self.perf_max, 1))
        pos = [*LABELS, "token_position"]
        self.success = Counter(
            "trtllm_request_success_total",
            "Count of successfully processed requests.",
            [*LABELS, "finished_reason"],
            registry=self.registry,
        )
        self.drafted = Counter(
            "trtllm_spec_decode_drafted_tokens_total",
            "Total drafted tokens per speculative decoding position.",
            pos,
            registry=self.registry,
        )
        self.accepted = Counter(
            "trtllm_spec_decode_accepted_tokens_total",
            "Total accepted tokens per speculative decoding position.",
            pos,
            registry=self.registry,
        )
        self.iter_draft = Counter(
            "trtllm_spec_decode_num_draft_tokens_total",
            "Total number of draft tokens in speculative decoding",
            list(LABELS),
            registry=self.registry,
        )
        self.iter_accepted = Counter(
            "trtllm_spec_decode_num_accepted_tokens_total",
            "Total number of accepted tokens in speculative decoding",
            list(LABELS),
            registry=self.registry,
        )

    def step_done(self, accepted: int) -> None:
        """One iteration of one request's verify step."""
        self.frames += 1
        if self.frames not in self.stalled:
            self.iteration_number += 1
        if not self.iteration:
            return
        row: dict = {
            "iter": self.iteration_number,
            "timestamp": "12-04-2026 12:00:00",
            "iterLatencyMS": 1.0,
            "numActiveRequests": 1,
            "specDecodingStats": {
                "numDraftTokens": K,
                "numAcceptedTokens": accepted,
                "numRequestsWithDraftTokens": 1,
                "acceptanceLength": 1.0 + accepted,
                "iterLatencyMS": 0.2,
                "draftOverhead": 0.2,
            },
        }
        if len(self.stats) == self.stats.maxlen:
            self.dropped_frames += 1  # the deque evicts the oldest frame
        if self.stats_sequence:
            row |= {
                "statsSequence": self.frames,
                "statsDroppedFrames": self.dropped_frames,
            }
        self.stats.append(row)
        if not self.collector:
            self.log_iteration_stats(row)

    def log_iteration_stats(self, row: dict) -> None:
        """``MetricsCollector.log_iteration_stats`` of one iteration's row."""
        spec = row["specDecodingStats"]
        if spec["numAcceptedTokens"]:
            self.iter_accepted.labels(**LABELS).inc(spec["numAcceptedTokens"])
        self.iter_draft.labels(**LABELS).inc(spec["numDraftTokens"])

    def collector_wakes(self) -> None:
        """The server's own collector, woken by a finished request, drains the queue and
        logs every stat, or only the latest (``latest_only``)."""
        if self.collector != "racing":
            return
        drained = list(self.stats)
        self.stats.clear()
        for row in drained[-1:] if self.latest_only else drained:
            self.log_iteration_stats(row)

    def request_done(self, steps: list[tuple[int, int]]) -> None:
        """The per-request, per-position counters, at the request's end (and the server's
        own collector, woken by it)."""
        self.collector_wakes()
        self.success.labels(**LABELS, finished_reason="length").inc()
        if not self.per_position or not steps:
            return
        for pos in range(K):
            labels = {**LABELS, "token_position": pos}
            self.drafted.labels(**labels).inc(len(steps) + self.prefill_drafts)
            hits = sum(1 for _, a in steps if a > pos)
            if hits:
                self.accepted.labels(**labels).inc(hits)

    def finished(self, steps: list[tuple[int, int]]) -> None:
        """What the server logs when a request finishes: its per-request counters and its
        ``/perf_metrics`` entry (completions: both before its ``[DONE]``)."""
        self.request_done(steps)
        self.perf_done(steps)

    def perf_done(self, steps: list[tuple[int, int]]) -> None:
        """The request's ``/perf_metrics`` entry, as ``get_perf_metrics`` serialises it."""
        self.request_number += 1
        if self.perf_max <= 0:
            return
        drafted = K * len(steps)
        accepted = sum(a for _, a in steps)
        metrics: dict = {
            "first_iter": self.iteration_number - len(steps),
            "last_iter": self.iteration_number,
            "timing_metrics": {
                "server_arrival_time": 100.0,
                "arrival_time": 100.0,
                "first_scheduled_time": 100.001,
                "first_token_time": 100.01,
                "server_first_token_time": 100.011,
                "last_token_time": 100.05,
            },
            "kv_cache_metrics": {
                "num_total_allocated_blocks": 1,
                "num_new_allocated_blocks": 1,
                "num_reused_blocks": 0,
                "num_missed_blocks": 1,
            },
        }
        if self.perf_spec and drafted > 0:
            metrics["speculative_decoding"] = {
                "acceptance_rate": accepted / drafted,
                "total_accepted_draft_tokens": accepted,
                "total_draft_tokens": drafted,
            }
        self.perf.append({"request_id": self.request_number, "perf_metrics": metrics})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        max_tokens = int(body.get("max_tokens", 16))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        token = 100

        async def chunk(n: int) -> None:
            nonlocal token
            ids = list(range(token, token + n))
            token += n
            data = {"choices": [{"index": 0, "text": "x" * n, "token_ids": ids}]}
            await resp.write(f"data: {json.dumps(data)}\n\n".encode())
            await asyncio.sleep(0.001)

        await chunk(1)
        steps = request_steps(max_tokens)
        for tokens, accepted in steps:
            self.step_done(accepted)
            await chunk(tokens)
        if self.late_s > 0:
            asyncio.get_running_loop().call_later(self.late_s, self.request_done, steps)
        else:
            self.request_done(steps)
        self.perf_done(steps)  # completions: queued before [DONE] (_extract_metrics)
        usage = {
            "choices": [],
            "usage": {"prompt_tokens": 8, "completion_tokens": max_tokens},
        }
        await resp.write(f"data: {json.dumps(usage)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def iteration_stats(self, _: web.Request) -> web.Response:
        drained = list(self.stats)
        self.stats.clear()
        return web.json_response(drained)

    async def version_info(self, _: web.Request) -> web.Response:
        return web.json_response({"version": self.version})

    async def perf_metrics(self, _: web.Request) -> web.Response:
        if self.perf_max <= 0:
            return web.json_response([])
        drained, self.perf = list(self.perf), deque(maxlen=self.perf_max)
        return web.json_response(drained)

    async def prometheus(self, _: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.registry), content_type="text/plain"
        )


@contextlib.asynccontextmanager
async def standing_in(standin: StandIn) -> AsyncIterator[str]:
    """Serve ``standin`` on 127.0.0.1 (a free port); yields its ``/v1`` base URL."""
    app = web.Application()
    app.router.add_post("/v1/completions", standin.completions)
    if standin.json_endpoint:
        app.router.add_get("/metrics", standin.iteration_stats)
    app.router.add_get("/prometheus/metrics", standin.prometheus)
    app.router.add_get("/perf_metrics", standin.perf_metrics)
    app.router.add_get("/version", standin.version_info)

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": standin.model}]})

    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    async with serving_app(app) as url:
        yield url


def standin_thread(standin: StandIn) -> contextlib.AbstractContextManager[str]:
    """:func:`standing_in` on its own event loop in a thread (for a CLI run, which has its
    own loop); yields the ``/v1`` base URL, stops the server on exit."""
    return serving_in_thread(lambda: standing_in(standin))


@contextlib.contextmanager
def serving_in_thread(
    serving: Callable[[], contextlib.AbstractAsyncContextManager[str]],
) -> Iterator[str]:
    """Enter ``serving()`` (an async context manager yielding a URL) on its own event loop
    in a thread; yields the URL, leaves it on exit."""
    ready: queue.Queue[str] = queue.Queue()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def serve() -> None:
        async with serving() as url:
            ready.put(url)
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),))
    thread.start()
    try:
        yield ready.get(timeout=30)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
        loop.close()
