"""The load-test runner: tiers of streamed requests (Triton gRPC or OpenAI HTTP: the transport,
:mod:`trtbench.profiling.loadtest.clients.transport`), recorded per request/response.

Per tier: a request count or a duration; closed loop (concurrency) or open loop (request
rate, send times from :mod:`trtbench.profiling.loadtest.workload.schedule`). Warmup requests go first against
the server and are not recorded. Every request ends as a :class:`RequestRecord` — a
timeout or server error is a row with ``error`` set — handed to a record sink as soon as
the request ends (:mod:`trtbench.profiling.loadtest.records.record_sink`), so nothing grows per
request. Right before and after each tier pass the transport reads the server's speculative
counters (OpenAI: ``/metrics``); their difference goes into the pass's outcome (server_counts.py).

A watcher (:mod:`trtbench.profiling.loadtest.clients.health`) stops the tier when the server dies;
SIGINT, SIGTERM and SIGHUP stop sending. Either way the requests in flight are counted as
unfinished (not written), the tier gets its :class:`TierOutcome` status and no later tier
runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Callable, Sequence

from trtbench.core.errors import LoadTestError
from trtbench.core.records import OutputRecord, RequestRecord, ResponseRecord
from trtbench.core.stop_signals import loop_stop_handlers
from trtbench.profiling.loadtest.clients.health import HealthCheck, Watcher
from trtbench.profiling.loadtest.clients.response_parse import Exchange
from trtbench.profiling.loadtest.clients.target import (
    LoadSettings,
    LoadTarget,
    Progress,
)
from trtbench.profiling.loadtest.clients.transport import (
    UNAVAILABLE,
    Transport,
    make_transport,
)
from trtbench.profiling.loadtest.driver.tier_pass import opened, run_pass, warm_up
from trtbench.profiling.loadtest.files.responses import (
    RequestSlot,
    exchange_to_all_records,
)
from trtbench.profiling.loadtest.records.cell_tally import CellTally
from trtbench.profiling.loadtest.records.client_timing import wall_minus_perf_ns
from trtbench.profiling.loadtest.records.loop_lag import LagHistogram, sample_loop_lag
from trtbench.profiling.loadtest.records.outcome import (
    LoadResult,
    TierOutcome,
    settle_tier,
)
from trtbench.profiling.loadtest.records.record_sink import RecordSink
from trtbench.profiling.loadtest.workload.partition import WorkerShare
from trtbench.profiling.loadtest.workload.prompts import Prompt, TextTokenizer
from trtbench.profiling.loadtest.workload.repeats import (
    TierPass,
    merge_passes,
    tier_passes,
)
from trtbench.profiling.loadtest.workload.schedule import Tier, iter_send_offsets_ns
from trtbench.profiling.loadtest.workload.slots import OpenLoopGate
from trtbench.profiling.loadtest.workload.tasks import gather_until_stop

log = logging.getLogger(__name__)

INTERRUPTED = "in flight at the stop"
GIL_SWITCH_S = 0.001


class TierRunner:
    """One event loop's worth of state: the transport, the stop flag, the tier's counts."""

    def __init__(
        self,
        target: LoadTarget,
        prompts: Sequence[Prompt],
        settings: LoadSettings,
        tokenizer: TextTokenizer | None,
        progress: Progress | None,
        sink: RecordSink,
    ):
        self.target, self.prompts, self.settings = target, prompts, settings
        self.tokenizer, self.progress = tokenizer, progress
        # every pass's output tok/s for its closing log line (tier_pass.run_pass)
        self.sink = sink if isinstance(sink, CellTally) else CellTally(sink)
        self.transport: Transport | None = None  # opened by _run (transport.py)
        self.stop = asyncio.Event()
        self.result = LoadResult()
        self.watcher: Watcher | None = None
        self.current = TierOutcome("warmup")
        self.echo_possible = target.echo_possible
        self.lag, self.clock_offset_ns = LagHistogram(), wall_minus_perf_ns()
        self.share = WorkerShare()  # worker k of N client processes (partition.py)
        self.before_tier: Callable[[Tier], bool] | None = None  # False: stop (workers)
        self.repeat = 0  # the pass over the tiers now running (loadtest.repeats)

    def on_signal(self, signum: int) -> None:
        """A stop signal: stop sending, mark the tier interrupted."""
        if self.result.stop_signal is None:
            self.result.stop_signal = signum
        self.stop.set()

    def on_dead(self, reason: str) -> None:
        """The server died or stopped answering: stop the tier, keep what finished."""
        if self.result.server_failure is None:
            self.result.server_failure = reason
        self.stop.set()

    def prompt_of(self, slot: RequestSlot) -> Prompt:
        """The prompt of request ``slot.index`` (prompts cycle)."""
        return self.prompts[slot.index % len(self.prompts)]

    def records_of(
        self, slot: RequestSlot, exchange: Exchange
    ) -> tuple[RequestRecord, Sequence[ResponseRecord], OutputRecord | None]:
        """The records of one request's exchange (the output: None when it failed;
        llmapi models send the text so far on each response)."""
        how = (self.echo_possible, self.clock_offset_ns, self.target.interface.llmapi)
        return exchange_to_all_records(
            exchange, self.prompt_of(slot), slot, self.tokenizer, *how
        )

    async def one(
        self,
        slot: RequestSlot,
        record: bool = True,
        on_end: Callable[[int], None] | None = None,
    ) -> str | None:
        """Send one request; hand its records to the sink as soon as it ends
        (``on_end(end_ns)`` first: a capped open loop's slot is free from then).

        Making the records (parsing the responses) runs on the event loop, between
        awaits: it is kept cheap (a request's responses parsed at once into columns,
        :func:`~trtbench.profiling.loadtest.clients.response_columns.parse_columns`; its
        response records kept as columns, ``records.response_rows``) because that time
        delays the receive stamps of other requests in flight.

        Returns:
            The request's error (None: it succeeded).
        """
        prompt, transport = self.prompt_of(slot), self.transport
        assert transport is not None
        try:
            exchange = await transport.send(
                prompt, slot.request_id, self.settings.request_timeout_s
            )
        except asyncio.CancelledError:
            t = time.perf_counter_ns()
            exchange = Exchange(t, t, [], INTERRUPTED)
        if on_end is not None:
            on_end(exchange.end_ns)
        if exchange.error == INTERRUPTED:
            self.current.unfinished += record
            return INTERRUPTED
        error = exchange.error or ""
        if error.startswith(UNAVAILABLE) and self.watcher is not None:
            with contextlib.suppress(asyncio.CancelledError):  # it finished: keep it
                await self.watcher.verify()  # dead? then stop before the next send
        req, responses, output = self.records_of(slot, exchange)
        if record:
            self.sink.add(req, responses, output)
            self.current.requests += 1
            self.current.failed += req.error is not None
            if self.progress is not None:
                self.progress.request_done(req.error is None)
        return req.error

    def end_tier(self) -> TierOutcome:
        """Decide the status of the tier that just ended and record it."""
        self.current.loop_lag = self.lag.pop_stats()
        tier = settle_tier(
            self.current, self.result.stop_signal, self.result.server_failure
        )
        self.result.tiers.append(tier)
        return tier

    def more(
        self, issued: int, deadline_ns: int | None, limit: int | None = None
    ) -> bool:
        n = self.settings.requests_per_tier if limit is None else limit
        if self.stop.is_set() or (n is not None and issued >= n):
            return False
        return deadline_ns is None or time.perf_counter_ns() < deadline_ns

    async def closed_loop(self, variant: str, tier: Tier) -> None:
        issued = 0
        deadline = self._deadline()
        workers = tier.concurrency or 1
        indexes = self.share.closed_indexes(workers)
        limit = self.share.closed_requests(self.settings.requests_per_tier, workers)

        async def worker(k: int) -> None:
            nonlocal issued
            delay = k * self.settings.ramp_up_s / workers
            if delay > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), delay)
            while self.more(issued, deadline, limit):
                slot = RequestSlot(
                    variant, tier, next(indexes), time.perf_counter_ns(), self.repeat
                )
                issued += 1
                await self.one(slot)

        slots = self.share.slots(workers)
        await self._gather({asyncio.ensure_future(worker(k)) for k in slots})

    async def open_loop(self, variant: str, tier: Tier, rng_seed: int) -> None:
        rate, share = tier.request_rate_per_s or 1.0, self.share
        offsets = iter_send_offsets_ns(
            share.open_rate(rate),
            self.settings.arrival,
            share.open_rng(rng_seed),  # type: ignore[arg-type]
            self.settings.burstiness,
        )
        start, deadline = time.perf_counter_ns(), self._deadline()
        start += share.open_start_ns(rate, self.settings.arrival)
        limit = share.open_requests(self.settings.requests_per_tier)
        pending: set[asyncio.Task[str | None]] = set()  # done tasks leave the set
        gate = OpenLoopGate(tier.max_concurrency)  # sleep to scheduled, then a slot
        for issued, offset in enumerate(offsets):
            scheduled = start + offset
            if not self.more(issued, deadline, limit) or (
                deadline and scheduled > deadline
            ):
                break
            ticket = await gate.enter(scheduled, self.stop, deadline)
            if ticket is None:
                break
            index, ready = share.open_index(issued), ticket.ready_ns
            slot = RequestSlot(variant, tier, index, scheduled, self.repeat, ready)
            task = asyncio.create_task(self.one(slot, on_end=ticket.release))
            task.add_done_callback(ticket.task_done)
            pending.add(task)
            task.add_done_callback(self._settled(pending))
        await self._gather(pending)

    def _settled(self, pending: set) -> Callable[[asyncio.Task], None]:
        def done(task: asyncio.Task) -> None:
            if not task.cancelled() and task.exception() is None:
                pending.discard(task)  # a crashed task stays, so _gather re-raises

        return done

    def _deadline(self) -> int | None:
        d = self.settings.duration_s
        return None if d is None else time.perf_counter_ns() + int(d * 1e9)

    async def _gather(self, tasks: set[asyncio.Task]) -> None:
        """Wait for ``tasks``; on stop, cancel the rest (each counts itself unfinished)."""
        await gather_until_stop(tasks, self.stop)


async def _run(
    runner: TierRunner,
    variant: str,
    tiers: Sequence[Tier],
    passes: Sequence[TierPass],
    seed: int,
    health: HealthCheck | None,
) -> None:
    loop = asyncio.get_running_loop()
    with loop_stop_handlers(loop, runner.on_signal):
        async with opened(runner, tiers, health):
            sampler = asyncio.ensure_future(sample_loop_lag(runner.lag))
            try:
                await warm_up(runner, variant, tiers)
                for one_pass in passes:
                    if (
                        await run_pass(runner, variant, one_pass, seed, len(tiers))
                        is None
                    ):
                        break
            finally:
                sampler.cancel()


def run_load(
    target: LoadTarget,
    prompts: Sequence[Prompt],
    tiers: Sequence[Tier],
    settings: LoadSettings,
    variant: str,
    tokenizer: TextTokenizer | None = None,
    progress: Progress | None = None,
    seed: int = 0,
    *,
    sink: RecordSink,
    health: HealthCheck | None = None,
    share: WorkerShare | None = None,
    before_tier: Callable[[Tier], bool] | None = None,
    passes: Sequence[TierPass] | None = None,
) -> LoadResult:
    """Warm up, then run every tier against one served model, streaming records to ``sink``.

    Args:
        target: url, probed model interface, endpoint kind and API (transport.py).
        prompts: used in order, cycling; the same order for every tier and variant.
        tiers: load levels, run in order (then, with ``settings.repeats`` > 1, again in
            fresh orders; the outcome has one entry per tier, its passes merged).
        settings: per-tier size, warmup, timeout, arrival process.
        variant: label written into every record.
        tokenizer: needed when the model returns only text (re-tokenization).
        progress: optional progress sink.
        seed: seeds the arrival process of tier i in pass r with ``seed + i + r · len(tiers)``
            and the tier order of pass r > 0 (``settings.repeats``; :mod:`.repeats`).
        sink: receives each request's records as soon as it ends.
        health: a blocking check of the server (process + readiness), polled every
            0.25 s; default: the transport's (gRPC ``ServerReady``, OpenAI ``GET /health``). A dead
            server stops the tier (``server_failure``); no later tier runs.
        share: this process's part of each tier when several client processes share it
            (:class:`~trtbench.profiling.loadtest.workload.partition.WorkerShare`; default: all).
        before_tier: a blocking call made (in a thread) before each tier pass, e.g. a
            barrier of the client processes; False ends the run before that pass.
        passes: the tier passes to run, in order (default: every tier ``settings.repeats``
            times, :func:`~trtbench.profiling.loadtest.workload.repeats.tier_passes`); the
            ``rounds`` design runs one round's passes per server start
            (:mod:`trtbench.profiling.loadtest.workload.design`).

    Returns:
        LoadResult: each tier's outcome; ``stop_signal`` after SIGINT/SIGTERM/SIGHUP (the
        tier in progress is ``interrupted``, finished requests are in the sink).

    Raises:
        LoadTestError: every warmup request failed, or only text came back and no
            tokenizer was given.
    """
    if not prompts:
        raise LoadTestError("no prompts to send; give a dataset or synthetic lengths")
    make_transport(target, tiers)  # an unknown endpoint kind fails here
    if not target.interface.returns_ids and tokenizer is None:
        raise LoadTestError(
            f"model {target.interface.name!r} returns text without token ids; pass "
            "--tokenizer DIR (the model directory) so the text can be re-tokenized"
        )
    runner = TierRunner(target, prompts, settings, tokenizer, progress, sink)
    runner.share, runner.before_tier = share or WorkerShare(), before_tier
    # Samplers may run as threads of this process; a 1 ms GIL switch interval (default
    # 5 ms) bounds how long they can hold up the event loop that stamps responses.
    switch = sys.getswitchinterval()
    sys.setswitchinterval(min(switch, GIL_SWITCH_S))
    try:
        if passes is None:
            passes = tier_passes(tiers, settings.repeats, seed)
        asyncio.run(_run(runner, variant, tiers, passes, seed, health))
    finally:
        sys.setswitchinterval(switch)
    runner.result.tiers = merge_passes(runner.result.tiers)  # one outcome per tier
    return runner.result
