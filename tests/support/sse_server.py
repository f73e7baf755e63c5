"""A real local SSE server for the OpenAI transport's tests (aiohttp.web, in the test's loop)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator

from aiohttp import web

from trtbench.profiling.loadtest.clients.openai_client import OpenAITransport
from trtbench.profiling.loadtest.clients.response_parse import Exchange
from trtbench.profiling.loadtest.clients.target import LoadTarget
from trtbench.profiling.loadtest.workload.prompts import Prompt


@contextlib.asynccontextmanager
async def serving(handler) -> AsyncIterator[str]:
    """A real aiohttp server on 127.0.0.1 (a free port) answering every POST under ``/v1``
    with ``handler``; yields its ``/v1`` base URL."""
    app = web.Application()
    app.router.add_post("/v1/{endpoint:.*}", handler)
    async with serving_app(app) as url:
        yield url


@contextlib.asynccontextmanager
async def serving_app(app: web.Application) -> AsyncIterator[str]:
    """``app`` served on 127.0.0.1 (a free port) in the running loop; yields its ``/v1``
    base URL and stops it on exit."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    finally:
        await runner.cleanup()


def streaming(pieces: list[bytes], gap_s: float = 0.0, status: int = 200):
    """A handler sending ``pieces`` as separate writes ``gap_s`` apart (a body in one piece
    when the status is not 200); it records the requests it saw in ``handler.seen`` and
    ``time.perf_counter_ns()`` before each piece's write in ``handler.written``."""

    async def handler(request: web.Request) -> web.StreamResponse:
        handler.seen.append(
            (str(request.url), request.headers.copy(), await request.json())
        )
        if status != 200:
            return web.Response(status=status, body=b"".join(pieces))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i, piece in enumerate(pieces):
            if i and gap_s:
                await asyncio.sleep(gap_s)
            handler.written.append(time.perf_counter_ns())
            await resp.write(piece)
        await resp.write_eof()
        return resp

    handler.seen = []
    handler.written = []
    return handler


async def send_all(
    t: LoadTarget, handler, n: int = 1, pool: int | None = 4, timeout_s: float = 60.0
) -> list[Exchange]:
    """``n`` requests sent one after the other by an OpenAITransport to ``handler``
    (``timeout_s``: each request's; the default only bounds a hang: this loop serves the
    handler too, and a host that stalls it for seconds must not time a request out)."""
    async with serving(handler) as url:
        transport = OpenAITransport(dataclasses.replace(t, url=url), pool)
        await transport.open()
        try:
            prompt = Prompt("t", "Hello", 5, 3, "words")
            return [await transport.send(prompt, f"r-{i}", timeout_s) for i in range(n)]
        finally:
            await transport.close()
