"""Is the server still there? A watcher the load generator runs beside every tier.

A check returns a :class:`Health`: healthy (``reason`` None), sick (a reason, not fatal:
it must repeat :data:`CONFIRMATIONS` times in a row before the tier stops, so one slow
readiness answer under load is not a death) or dead (``fatal``: the server process has
exited; the tier stops at once). The watcher polls every :data:`INTERVAL_S`; a request that
fails with ``UNAVAILABLE`` (what gRPC says when the server went away) waits for a check
before its worker sends again, and every tier is checked once more before it is settled,
so a killed server is noticed well within a second and never ends a tier as complete.

Without a managed process (``trtbench loadtest --url`` of a server trtbench did not start)
the check is gRPC ``ServerReady`` on the generator's own channel.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

INTERVAL_S = 0.25
CONFIRMATIONS = 3
GRPC_READY_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Health:
    """One check's answer. ``reason``: None when healthy, else one line saying what is wrong;
    ``fatal``: the server is gone for certain (its process exited)."""

    reason: str | None = None
    fatal: bool = False


HealthCheck = Callable[[], Health]
"""A blocking check (run in a worker thread), e.g. process poll + HTTP readiness."""


def grpc_ready_check(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, url: str
) -> Callable[[], Awaitable[Health]]:
    """An async check: gRPC ``ServerReady`` at ``url`` with a 1 s deadline (never fatal)."""

    async def check() -> Health:
        try:
            ready = await stub.ServerReady(
                service_pb2.ServerReadyRequest(), timeout=GRPC_READY_TIMEOUT_S
            )
        except grpc.aio.AioRpcError as exc:
            return Health(f"Triton at {url} does not answer ({exc.code().name})")
        return Health(None if ready.ready else f"Triton at {url} is not ready")

    return check


class Watcher:
    """Runs a check every :data:`INTERVAL_S` until stopped, and on demand (:meth:`verify`);
    calls ``on_dead(reason)`` once when the server is dead, or sick :data:`CONFIRMATIONS`
    times in a row.

    Args:
        check: async function returning :class:`Health`.
        on_dead: called with the reason (the runner stops the tier).
    """

    def __init__(
        self,
        check: Callable[[], Awaitable[Health]],
        on_dead: Callable[[str], None],
    ):
        self.check, self.on_dead = check, on_dead
        self.dead = False
        self._sick = 0
        self._task: asyncio.Task[None] | None = None
        self._pending: asyncio.Future[None] | None = None

    async def _check_once(self) -> None:
        """One check; report the death when it is fatal or the sickness is confirmed."""
        try:
            health = await self.check()
        except Exception as exc:  # noqa: BLE001 - a broken check is a sick answer
            health = Health(f"health check failed ({type(exc).__name__}: {exc})")
        if health.reason is None:
            self._sick = 0
            return
        self._sick += 1
        if (health.fatal or self._sick >= CONFIRMATIONS) and not self.dead:
            self.dead = True
            self.on_dead(health.reason)

    async def verify(self) -> None:
        """Check now and wait for the answer; callers at the same moment share one check.

        The runner calls it when a request fails with ``UNAVAILABLE`` (before it sends the
        next one, so a dead server cannot burn through a tier's requests in the gap
        between two polls) and before it settles each tier.
        """
        if self.dead:
            return
        if self._pending is None or self._pending.done():
            self._pending = asyncio.ensure_future(self._check_once())
        await asyncio.shield(self._pending)

    async def _loop(self) -> None:
        while not self.dead:
            await asyncio.sleep(INTERVAL_S)
            await self.verify()

    def start(self) -> None:
        """Start watching (inside the running loop)."""
        self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        """Stop watching; a check in flight is let finish (each check has its deadline):
        a gRPC call cancelled here would end in gRPC's poller after the event loop has
        closed (``RuntimeError: Event loop is closed``)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._pending is not None and not self._pending.done():
            await self._pending  # _check_once turns a failed check into an answer
        self._task = self._pending = None


def threaded(check: HealthCheck) -> Callable[[], Awaitable[Health]]:
    """Run a blocking check in the loop's default executor (a worker thread)."""

    async def run() -> Health:
        return await asyncio.get_running_loop().run_in_executor(None, check)

    return run
