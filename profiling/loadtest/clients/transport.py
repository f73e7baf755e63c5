"""How the runner reaches the server: one transport per API, opened around the tiers.

A :class:`Transport` is opened once per event loop (all tiers and the warmup), sends one
prompt and returns its :class:`~trtbench.profiling.loadtest.clients.response_parse.Exchange`, gives the
watcher a readiness check (:mod:`trtbench.profiling.loadtest.clients.health`) and, where the server
exposes them, the speculative-decoding counters before and after a tier. Two transports:
Triton gRPC (:class:`GrpcTransport`, ``grpc_client.py``) and OpenAI HTTP + SSE
(:class:`~trtbench.profiling.loadtest.clients.openai_client.OpenAITransport`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import grpc
from tritonclient.grpc import service_pb2_grpc

from trtbench.core.errors import LoadTestError
from trtbench.profiling.loadtest.clients.grpc_client import ENDPOINTS, build_request
from trtbench.profiling.loadtest.clients.health import Health, grpc_ready_check
from trtbench.profiling.loadtest.clients.lean_stream import lean_stub
from trtbench.profiling.loadtest.clients.openai_client import OpenAITransport
from trtbench.profiling.loadtest.clients.response_parse import (  # noqa: F401 (re-exported)
    UNAVAILABLE,
    Exchange,
)
from trtbench.profiling.loadtest.clients.target import API_GRPC, LoadTarget
from trtbench.profiling.loadtest.records.spec_counters import SpecCounters
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.schedule import Tier


class Transport(Protocol):
    """One API's client, opened around the tiers of one event loop."""

    async def open(self) -> None:
        """Connect (inside the running loop)."""

    async def close(self) -> None:
        """Release connections."""

    async def send(self, prompt: Prompt, request_id: str, timeout_s: float) -> Exchange:
        """Send one prompt; every response stamped on receipt (``perf_counter_ns``).

        Never raises for a failed request: the exchange's ``error`` says why (a refused
        connection starts with :data:`UNAVAILABLE`). Cancellation propagates.
        """
        ...

    def ready_check(self) -> Callable[[], Awaitable[Health]]:
        """An async readiness check for the watcher (never fatal)."""
        ...

    async def spec_counters(self) -> SpecCounters | None:
        """The server's speculative-decoding counters now (scraped right before and after
        each tier pass; :mod:`~trtbench.profiling.loadtest.clients.server_counts`); None when the
        server exports none or the scrape failed. Never raises but for cancellation."""
        ...


CLOSE_GRACE_S = 1.0


class GrpcTransport:
    """Triton gRPC: a ``grpc.aio`` channel, requests built by ``grpc_client.build_request``
    and sent by ``ENDPOINTS[target.endpoint]``."""

    def __init__(self, target: LoadTarget):
        if target.endpoint not in ENDPOINTS:
            raise LoadTestError(
                f"unknown endpoint kind {target.endpoint!r}; use {', '.join(ENDPOINTS)}"
            )
        self.target = target
        self.call = ENDPOINTS[target.endpoint]
        self.channel: grpc.aio.Channel | None = None
        self.stub: service_pb2_grpc.GRPCInferenceServiceStub | None = None

    async def open(self) -> None:
        self.channel = grpc.aio.insecure_channel(self.target.url)
        self.stub = lean_stub(self.channel)  # streamed outputs parsed once per layout

    async def close(self) -> None:
        """Close the channel once its calls have ended (a stream whose final response came
        ends at once; at most :data:`CLOSE_GRACE_S`): a call cancelled by the close ends in
        gRPC's poller after the event loop has closed (``Event loop is closed``)."""
        if self.channel is not None:
            await self.channel.close(grace=CLOSE_GRACE_S)
        self.channel = self.stub = None

    async def send(self, prompt: Prompt, request_id: str, timeout_s: float) -> Exchange:
        t = self.target
        request = build_request(
            t.interface, prompt.text, prompt.output_tokens, request_id, t.options
        )
        assert self.stub is not None, "open() the transport first"
        return await self.call(self.stub, request, timeout_s)

    def ready_check(self) -> Callable[[], Awaitable[Health]]:
        assert self.stub is not None, "open() the transport first"
        return grpc_ready_check(self.stub, self.target.url)

    async def spec_counters(self) -> SpecCounters | None:
        """None: Triton's counts come with the responses (per step or request totals)."""
        return None


def pool_size(tiers: Sequence[Tier]) -> int | None:
    """Connections one client process may need at once: the largest closed-loop
    concurrency or open-loop ``max_concurrency`` (the warmup's is capped by the largest
    concurrency); None when an open-loop tier is uncapped (no limit)."""
    sizes = []
    for tier in tiers:
        size = tier.concurrency or tier.max_concurrency
        if size is None:
            return None
        sizes.append(size)
    return max([1, *sizes])


def make_transport(target: LoadTarget, tiers: Sequence[Tier]) -> Transport:
    """The transport of ``target.api``, its connection pool sized for ``tiers``.

    Raises:
        LoadTestError: an unknown gRPC endpoint kind.
    """
    if target.api == API_GRPC:
        return GrpcTransport(target)
    return OpenAITransport(target, pool_size(tiers))
