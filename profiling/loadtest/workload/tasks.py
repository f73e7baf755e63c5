"""Waiting for a tier's request tasks: to the end, or until a stop cancels the rest."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


async def gather_until_stop(tasks: Iterable[asyncio.Task], stop: asyncio.Event) -> None:
    """Wait for ``tasks``; once ``stop`` is set, cancel those still running.

    Every task is awaited to its end (a cancelled request counts itself unfinished).

    Raises:
        The first exception a task raised (a crash in the runner, not a failed request:
        those are records).
    """
    everything = list(tasks)
    stopper = asyncio.ensure_future(stop.wait())
    pending = set(everything)
    while pending and not stop.is_set():
        _, pending = await asyncio.wait(
            pending | {stopper}, return_when=asyncio.FIRST_COMPLETED
        )
        pending.discard(stopper)
    for t in pending:
        t.cancel()
    stopper.cancel()
    await asyncio.gather(*everything, return_exceptions=True)
    for t in everything:
        if not t.cancelled() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]
