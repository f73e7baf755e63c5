"""Request slots of a capped open loop (``--request-rate R --max-concurrency C``).

Requests keep the send times the arrival process gave them (``scheduled_ns``, never
shifted); each then waits for one of C slots. A request is *ready* at
``max(scheduled, when the slot it takes became free)``, so the wait for a slot is
``ready − scheduled`` (the client queue time, vLLM's ``client_queue_time`` of its
``--max-concurrency`` semaphore) and the client's own delay after that is
``sent − ready`` (dispatch lag). Latency measured from ``scheduled`` includes the queue
(no coordinated omission). Slots are taken in request order (one scheduler takes them),
and a slot is given back with the time its request ended (the last response), so the
records' ``sent_ns`` / ``end_ns`` never show more than C requests in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque


class SlotPool:
    """C slots; :meth:`take` waits for a free one and says since when it was free.

    Used by one scheduler coroutine; slots are given back from request tasks of the same
    event loop. Memory is O(C).
    """

    def __init__(self, slots: int) -> None:
        """Raises: ValueError: ``slots`` < 1."""
        if slots < 1:
            raise ValueError(f"max concurrency must be ≥ 1, got {slots}")
        self._free: deque[int] = deque([0] * slots)  # ns each free slot became free
        self._freed = asyncio.Event()
        self.in_flight = 0

    async def take(self, scheduled_ns: int, stop: asyncio.Event) -> int | None:
        """Wait for a free slot; return the request's ready time in ns.

        Args:
            scheduled_ns: the request's intended send time (``perf_counter_ns``).
            stop: when set, give up.

        Returns:
            ``max(scheduled_ns, time the slot became free)``, or None when ``stop`` was set
            before a slot was free (nothing taken).
        """
        while not self._free:
            if stop.is_set():
                return None
            self._freed.clear()
            waits = [asyncio.ensure_future(e.wait()) for e in (self._freed, stop)]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
        if stop.is_set():
            return None
        self.in_flight += 1
        return max(scheduled_ns, self._free.popleft())

    def give_back(self, end_ns: int) -> None:
        """Free one slot as of ``end_ns`` (the request's end, ``perf_counter_ns``)."""
        self.in_flight -= 1
        self._free.append(end_ns)
        self._freed.set()


class Ticket:
    """One request's pass through the gate: its ready time and a once-only slot release."""

    def __init__(self, ready_ns: int | None, pool: SlotPool | None) -> None:
        self.ready_ns = ready_ns
        self._pool = pool

    def release(self, end_ns: int | None = None) -> None:
        """Give the slot back as of ``end_ns`` (default: now); later calls do nothing."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.give_back(time.perf_counter_ns() if end_ns is None else end_ns)

    def task_done(self, task: object) -> None:
        """Done-callback of the request's task: release if the request did not."""
        self.release()


class OpenLoopGate:
    """When an open-loop request may go: at its scheduled time, then (with a cap) once a
    slot is free. ``max_concurrency`` None: no cap, ready = scheduled."""

    def __init__(self, max_concurrency: int | None) -> None:
        self.pool = None if max_concurrency is None else SlotPool(max_concurrency)

    async def enter(
        self, scheduled_ns: int, stop: asyncio.Event, deadline_ns: int | None = None
    ) -> Ticket | None:
        """Sleep until ``scheduled_ns``, then wait for a slot.

        Returns:
            The request's :class:`Ticket` (``ready_ns`` None without a cap), or None: stop
            was set, or the tier's ``deadline_ns`` passed while it waited for a slot.
        """
        if await sleep_until(scheduled_ns, stop):
            return None
        if self.pool is None:
            return Ticket(None, None)
        ready = await self.pool.take(scheduled_ns, stop)
        if ready is None:
            return None
        ticket = Ticket(ready, self.pool)
        if deadline_ns is not None and time.perf_counter_ns() >= deadline_ns:
            ticket.release()
            return None
        return ticket


async def sleep_until(when_ns: int, stop: asyncio.Event) -> bool:
    """Sleep until ``perf_counter_ns() ≥ when_ns`` or ``stop`` is set; True when stopped.

    The event loop wakes within about 1 ms of ``when_ns`` when it is idle (epoll's
    timeout is in whole milliseconds); that lateness is part of the dispatch lag.
    """
    delay = (when_ns - time.perf_counter_ns()) / 1e9
    if delay > 0:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
    return stop.is_set()
