"""The steps a load test is made of, over one :class:`~trtbench.profiling.loadtest.driver.runner.
TierRunner`: open its transport and health watcher, warm the server up, run one pass over one
tier and settle it.

:func:`~trtbench.profiling.loadtest.driver.runner.run_load` strings them together for one server;
:func:`~trtbench.profiling.loadtest.driver.interleave.run_interleaved` for several servers at once,
one cell at a time (:mod:`trtbench.profiling.loadtest.workload.design`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from trtbench.core.errors import LoadTestError
from trtbench.profiling.loadtest.clients.health import HealthCheck, Watcher, threaded
from trtbench.profiling.loadtest.clients.server_counts import pass_delta
from trtbench.profiling.loadtest.clients.transport import make_transport
from trtbench.profiling.loadtest.files.responses import RequestSlot
from trtbench.profiling.loadtest.records.outcome import (
    TIER_COMPLETE,
    TierOutcome,
    missed_pass,
)
from trtbench.profiling.loadtest.workload.repeats import TierPass
from trtbench.profiling.loadtest.workload.schedule import Tier

if TYPE_CHECKING:
    from trtbench.profiling.loadtest.driver.runner import TierRunner

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def opened(
    runner: TierRunner, tiers: Sequence[Tier], health: HealthCheck | None
) -> AsyncIterator[None]:
    """Open ``runner``'s transport and start its health watcher (``health``: a managed
    server's check, polled every 0.25 s; default the transport's readiness check); stop
    and close both on exit."""
    transport = runner.transport = make_transport(runner.target, tiers)
    await transport.open()
    try:
        check = threaded(health) if health is not None else transport.ready_check()
        runner.watcher = Watcher(check, runner.on_dead)
        runner.watcher.start()
        try:
            yield
        finally:
            await runner.watcher.stop()
    finally:
        await transport.close()


async def warm_up(runner: TierRunner, variant: str, tiers: Sequence[Tier]) -> None:
    """``warmup_requests`` requests, at most the largest tier's concurrency at a time; not
    recorded.

    Raises:
        LoadTestError: every warmup request failed (and no stop was asked for).
    """
    n = runner.settings.warmup_requests
    if n <= 0:
        return
    tier = Tier(concurrency=min(n, max(t.concurrency or 1 for t in tiers)))
    gate = asyncio.Semaphore(tier.concurrency or 1)

    async def warm(i: int) -> str | None:
        async with gate:
            slot = RequestSlot(variant, tier, -1 - i, time.perf_counter_ns())
            return await runner.one(slot, record=False)

    errors = [e for e in await asyncio.gather(*map(warm, range(n))) if e is not None]
    if len(errors) == n and not runner.stop.is_set():
        raise LoadTestError(
            f"every warmup request to model {runner.target.interface.name!r} failed: "
            f"{errors[0]}"
        )


async def run_pass(
    runner: TierRunner, variant: str, one_pass: TierPass, seed: int, n_tiers: int
) -> TierOutcome | None:
    """Run one pass over one tier (a cell of the run's design) and settle it.

    The server's speculative counters are read right before and after (their delta is the
    pass's); the event-loop lag is this pass's alone; a dead server is confirmed before the
    pass is settled. The arrival schedule of an open-loop pass is seeded with
    ``seed + index + repeat · n_tiers``, so every variant gets the same send times in the
    same round.

    Returns:
        The pass's outcome (a cell whose server had died: a pass that was not measured,
        :func:`~trtbench.profiling.loadtest.records.outcome.missed_pass`); None (nothing
        sent) when a stop signal came or the client processes could not line up.
    """
    tier, runner.repeat = one_pass.tier, one_pass.repeat
    failure = runner.result.server_failure
    if runner.stop.is_set() and failure and runner.result.stop_signal is None:
        # its server died before this cell: the tier says so (never complete from the
        # rounds that ran while others measured all of theirs)
        earlier = any(
            t.tier == tier.label and t.status == TIER_COMPLETE
            for t in runner.result.tiers
        )
        missed = missed_pass(tier.label, one_pass.repeat, failure, earlier)
        runner.result.tiers.append(missed)
        log.info("%s %s: %s", variant, tier.label, missed.line())
        return missed
    if runner.stop.is_set():
        return None
    line_up = runner.before_tier  # several client processes wait for each other
    if line_up is not None and not await asyncio.to_thread(line_up, tier):
        return None
    started = time.perf_counter()
    transport = runner.transport
    assert transport is not None  # opened() first
    before = await transport.spec_counters()
    runner.current = TierOutcome(tier.label)
    runner.lag.pop_stats()  # this pass's loop lag only (others may have run in between)
    if runner.progress is not None:
        runner.progress.tier_started(variant, tier, runner.settings.requests_per_tier)
    cpu = time.process_time()
    try:
        if tier.concurrency is not None:
            await runner.closed_loop(variant, tier)
        else:
            pass_seed = seed + one_pass.index + runner.repeat * n_tiers
            await runner.open_loop(variant, tier, pass_seed)
    finally:
        runner.current.client_cpu_s = time.process_time() - cpu
        if runner.watcher is not None:
            await runner.watcher.verify()  # never settle a tier on a dead server
        after = await transport.spec_counters()
        runner.current.spec_counts = pass_delta(before, after)  # server_counts.py
        outcome = runner.end_tier()
        if runner.progress is not None:
            runner.progress.tier_ended()
    done = f" (round {runner.repeat + 1})" if runner.settings.repeats > 1 else ""
    rate = runner.sink.tokens_per_s(tier.label, runner.repeat)
    figures = cell_figures(rate, time.perf_counter() - started)
    log.info("%s %s%s: %s; %s", variant, tier.label, done, outcome.line(), figures)
    return outcome


def cell_figures(tokens_per_s: float | None, wall_s: float) -> str:
    """The figures of a pass's closing log line: ``812.3 out tok/s, 4.10 s wall``.

    ``tokens_per_s``: the pass's output tokens/s (successful requests' output tokens over
    first send → last end, as rounds.csv; None: no figure, ``-``); ``wall_s``: the pass
    from the read of the server's counters before it to its settling, seconds.
    """
    rate = "-" if tokens_per_s is None else f"{tokens_per_s:.1f}"
    return f"{rate} out tok/s, {wall_s:.2f} s wall"
