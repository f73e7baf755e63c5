"""The load-test runner: tiers of requests over gRPC streaming, recorded per request/response.

Per tier: a request count or a duration; closed loop (concurrency) or open loop (request
rate, send times from :mod:`trtbench.profiling.loadtest.schedule`). Warmup requests go first against
the server and are not recorded. Every request ends as a :class:`RequestRecord` — a
timeout or server error is a row with ``error`` set. Ctrl-C (SIGINT) stops sending, marks
the requests in flight as interrupted and returns what was measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import grpc
import numpy as np
from tritonclient.grpc import service_pb2_grpc

from trtbench.errors import LoadTestError
from trtbench.profiling.loadtest.grpc_client import (
    ENDPOINTS,
    Exchange,
    ModelInterface,
    RequestOptions,
    build_request,
)
from trtbench.profiling.loadtest.prompts import Prompt, TextTokenizer
from trtbench.profiling.loadtest.responses import RequestSlot, exchange_to_records
from trtbench.profiling.loadtest.schedule import Tier, iter_send_offsets_ns
from trtbench.records import RequestRecord, ResponseRecord

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted by the user (Ctrl-C)"
GIL_SWITCH_S = 0.001


@dataclass(frozen=True)
class LoadTarget:
    """Where and how to send: gRPC ``url``, the probed model, the endpoint kind."""

    url: str
    interface: ModelInterface
    endpoint: str
    options: RequestOptions = field(default_factory=RequestOptions)


@dataclass(frozen=True)
class LoadSettings:
    """Per-tier size and timing. Exactly one of ``requests_per_tier`` / ``duration_s``.

    ``ramp_up_s``: in concurrency mode, worker k of N sends its first request
    ``k · ramp_up_s / N`` after the tier starts (0: all at once — the closed-loop start
    burst, which queues N prefills together).
    """

    requests_per_tier: int | None = 32
    duration_s: float | None = None
    warmup_requests: int = 2
    request_timeout_s: float = 120.0
    arrival: str = "poisson"
    burstiness: float = 1.0
    ramp_up_s: float = 0.0


class Progress(Protocol):
    """Receives tier progress (a rich progress bar in the CLI)."""

    def tier_started(self, variant: str, tier: Tier, total: int | None) -> None: ...
    def request_done(self, ok: bool) -> None: ...
    def tier_ended(self) -> None: ...


@dataclass
class LoadResult:
    """Records of every measured request and response; which tiers finished."""

    requests: list[RequestRecord] = field(default_factory=list)
    responses: list[ResponseRecord] = field(default_factory=list)
    tiers_done: list[str] = field(default_factory=list)
    interrupted: bool = False


class TierRunner:
    """One event loop's worth of state: the channel, the stop flag, the records so far."""

    def __init__(
        self,
        target: LoadTarget,
        prompts: Sequence[Prompt],
        settings: LoadSettings,
        tokenizer: TextTokenizer | None,
        progress: Progress | None,
    ):
        self.target, self.prompts, self.settings = target, prompts, settings
        self.tokenizer, self.progress = tokenizer, progress
        self.send = ENDPOINTS[target.endpoint]
        self.stop = asyncio.Event()
        self.result = LoadResult()
        self.stub: service_pb2_grpc.GRPCInferenceServiceStub | None = None
        self.exchanges: list[tuple[RequestSlot, Exchange]] = []
        self.echo_possible = "exclude_input_in_output" not in target.interface.inputs

    def prompt_of(self, slot: RequestSlot) -> Prompt:
        """The prompt of request ``slot.index`` (prompts cycle)."""
        return self.prompts[slot.index % len(self.prompts)]

    def records_of(
        self, slot: RequestSlot, exchange: Exchange
    ) -> tuple[RequestRecord, list[ResponseRecord]]:
        """The records of one request's exchange."""
        return exchange_to_records(
            exchange, self.prompt_of(slot), slot, self.tokenizer, self.echo_possible
        )

    async def one(self, slot: RequestSlot, record: bool = True) -> Exchange:
        """Send one request; keep its raw exchange (records are made after the tier)."""
        prompt = self.prompt_of(slot)
        request = build_request(
            self.target.interface,
            prompt.text,
            prompt.output_tokens,
            slot.request_id,
            self.target.options,
        )
        assert self.stub is not None
        try:
            exchange = await self.send(
                self.stub, request, self.settings.request_timeout_s
            )
        except asyncio.CancelledError:
            t = time.perf_counter_ns()
            exchange = Exchange(t, t, [], INTERRUPTED)
        if record:
            self.exchanges.append((slot, exchange))
            if self.progress is not None and exchange.error != INTERRUPTED:
                self.progress.request_done(exchange.error is None)
        return exchange

    def to_records(self) -> None:
        """Turn the exchanges kept so far into records (outside the timed sends)."""
        for slot, exchange in self.exchanges:
            req, responses = self.records_of(slot, exchange)
            self.result.requests.append(req)
            self.result.responses.extend(responses)
        self.exchanges.clear()

    def tier_line(self, tier: Tier) -> str:
        """``N requests, F failed, S s`` over the records of ``tier`` (for the run log)."""
        rows = [r for r in self.result.requests if r.tier == tier.label]
        failed = sum(r.error is not None for r in rows)
        span_ns = max((r.end_ns for r in rows), default=0) - min(
            (r.sent_ns for r in rows), default=0
        )
        return f"{len(rows)} requests, {failed} failed, {span_ns / 1e9:.1f} s"

    def more(self, issued: int, deadline_ns: int | None) -> bool:
        n = self.settings.requests_per_tier
        if self.stop.is_set() or (n is not None and issued >= n):
            return False
        return deadline_ns is None or time.perf_counter_ns() < deadline_ns

    async def closed_loop(self, variant: str, tier: Tier) -> None:
        issued = 0
        deadline = self._deadline()
        workers = tier.concurrency or 1

        async def worker(k: int) -> None:
            nonlocal issued
            delay = k * self.settings.ramp_up_s / workers
            if delay > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), delay)
            while self.more(issued, deadline):
                slot = RequestSlot(variant, tier, issued, time.perf_counter_ns())
                issued += 1
                await self.one(slot)

        await self._gather([worker(k) for k in range(workers)])

    async def open_loop(self, variant: str, tier: Tier, rng_seed: int) -> None:
        rng = np.random.default_rng(rng_seed)
        offsets = iter_send_offsets_ns(
            tier.request_rate_per_s or 1.0,
            self.settings.arrival,
            rng,  # type: ignore[arg-type]
            self.settings.burstiness,
        )
        start, deadline = time.perf_counter_ns(), self._deadline()
        tasks: list[asyncio.Task[Exchange]] = []
        for issued, offset in enumerate(offsets):
            scheduled = start + offset
            if not self.more(issued, deadline) or (deadline and scheduled > deadline):
                break
            delay = (scheduled - time.perf_counter_ns()) / 1e9
            if delay > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), delay)
                if self.stop.is_set():
                    break
            slot = RequestSlot(variant, tier, issued, scheduled)
            tasks.append(asyncio.create_task(self.one(slot)))
        await self._gather(tasks)

    def _deadline(self) -> int | None:
        d = self.settings.duration_s
        return None if d is None else time.perf_counter_ns() + int(d * 1e9)

    async def _gather(self, aws: Sequence) -> None:
        """Run ``aws``; on stop, cancel them (each records itself as interrupted)."""
        tasks = [
            a if isinstance(a, asyncio.Task) else asyncio.ensure_future(a) for a in aws
        ]
        stopper = asyncio.ensure_future(self.stop.wait())
        pending = set(tasks)
        while pending and not self.stop.is_set():
            _, pending = await asyncio.wait(
                pending | {stopper}, return_when=asyncio.FIRST_COMPLETED
            )
            pending.discard(stopper)
        for t in pending:
            t.cancel()
        stopper.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for t in tasks:
            if not t.cancelled() and t.exception() is not None:
                raise t.exception()  # type: ignore[misc]


async def _warmup(runner: TierRunner, variant: str, tiers: Sequence[Tier]) -> None:
    """``warmup_requests`` requests, at most the largest tier's concurrency at a time."""
    n = runner.settings.warmup_requests
    if n <= 0:
        return
    tier = Tier(concurrency=min(n, max(t.concurrency or 1 for t in tiers)))
    gate = asyncio.Semaphore(tier.concurrency or 1)

    async def warm(i: int) -> str | None:
        async with gate:
            slot = RequestSlot(variant, tier, -1 - i, time.perf_counter_ns())
            exchange = await runner.one(slot, record=False)
        return runner.records_of(slot, exchange)[0].error

    errors = [e for e in await asyncio.gather(*map(warm, range(n))) if e is not None]
    if len(errors) == n and not runner.stop.is_set():
        raise LoadTestError(
            f"every warmup request to model {runner.target.interface.name!r} failed: "
            f"{errors[0]}"
        )


async def _run(
    runner: TierRunner, variant: str, tiers: Sequence[Tier], seed: int
) -> None:
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, runner.stop.set)
    try:
        async with grpc.aio.insecure_channel(runner.target.url) as channel:
            runner.stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            await _warmup(runner, variant, tiers)
            for i, tier in enumerate(tiers):
                if runner.stop.is_set():
                    break
                if runner.progress is not None:
                    runner.progress.tier_started(
                        variant, tier, runner.settings.requests_per_tier
                    )
                if tier.concurrency is not None:
                    await runner.closed_loop(variant, tier)
                else:
                    await runner.open_loop(variant, tier, seed + i)
                runner.to_records()
                if runner.progress is not None:
                    runner.progress.tier_ended()
                log.info("%s %s: %s", variant, tier.label, runner.tier_line(tier))
                if not runner.stop.is_set():
                    runner.result.tiers_done.append(tier.label)
    finally:
        runner.to_records()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGINT)
    runner.result.interrupted = runner.stop.is_set()


def run_load(
    target: LoadTarget,
    prompts: Sequence[Prompt],
    tiers: Sequence[Tier],
    settings: LoadSettings,
    variant: str,
    tokenizer: TextTokenizer | None = None,
    progress: Progress | None = None,
    seed: int = 0,
) -> LoadResult:
    """Warm up, then run every tier against one served model; return all records.

    Args:
        target: url, probed model interface and endpoint kind (``ENDPOINTS`` key).
        prompts: used in order, cycling; the same order for every tier and variant.
        tiers: load levels, run in order.
        settings: per-tier size, warmup, timeout, arrival process.
        variant: label written into every record.
        tokenizer: needed when the model returns only text (re-tokenization).
        progress: optional progress sink.
        seed: seeds the arrival process of tier i with ``seed + i``.

    Returns:
        LoadResult; ``interrupted`` is True after Ctrl-C (records kept).

    Raises:
        LoadTestError: every warmup request failed, or only text came back and no
            tokenizer was given.
    """
    if not prompts:
        raise LoadTestError("no prompts to send; give a dataset or synthetic lengths")
    if target.endpoint not in ENDPOINTS:
        raise LoadTestError(
            f"unknown endpoint kind {target.endpoint!r}; use {', '.join(ENDPOINTS)}"
        )
    if not target.interface.returns_ids and tokenizer is None:
        raise LoadTestError(
            f"model {target.interface.name!r} returns text_output without output_ids; "
            "pass --tokenizer DIR (the model directory) so the text can be re-tokenized"
        )
    runner = TierRunner(target, prompts, settings, tokenizer, progress)
    # Samplers may run as threads of this process; a 1 ms GIL switch interval (default
    # 5 ms) bounds how long they can hold up the event loop that stamps responses.
    switch = sys.getswitchinterval()
    sys.setswitchinterval(min(switch, GIL_SWITCH_S))
    try:
        asyncio.run(_run(runner, variant, tiers, seed))
    finally:
        sys.setswitchinterval(switch)
    return runner.result
