"""The OpenAI transport's HTTP side against a real local aiohttp server: lines split across
reads, receive stamps, connection reuse and pool size, the end of the body, broken streams."""

from __future__ import annotations

import asyncio
import contextlib
import time

from aiohttp import web

from tests.support.sse_server import send_all, serving, streaming
from trtbench.profiling.loadtest.clients.grpc_client import (
    ModelInterface,
    RequestOptions,
)
from trtbench.profiling.loadtest.clients.openai_client import (
    COMPLETIONS,
    OpenAITransport,
)
from trtbench.profiling.loadtest.clients.sse_http import (
    DRAIN_S,
    open_session,
    read_stamped_lines,
)
from trtbench.profiling.loadtest.clients.target import API_COMPLETIONS, LoadTarget
from trtbench.profiling.loadtest.workload.prompts import Prompt

# A /completions reply without token ids: three chunks, the usage chunk, [DONE].
TEXT_SSE = (
    b'data: {"choices":[{"index":0,"text":"Hi"}]}\n\n'
    b'data: {"choices":[{"index":0,"text":""}]}\n\n'
    b'data: {"choices":[{"index":0,"text":" there!","finish_reason":"length"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}\n\n'
    b"data: [DONE]\n\n"
)


def target(ids: bool, url: str = "http://h:1/v1") -> LoadTarget:
    outputs = ("output_ids",) if ids else ("text_output",)
    return LoadTarget(
        url,
        ModelInterface("m", {}, outputs, True),
        COMPLETIONS,
        RequestOptions(),
        API_COMPLETIONS,
    )


GAP_S = 0.05
# Two events in CRLF, the second split inside its JSON and its blank line split off, each
# piece written GAP_S after the last.
SPLIT = [
    b'data: {"choices":[{"text":"a","token_ids":[1]}]}\r\n\r\ndata: {"choi',
    b'ces":[{"text":"b","token_ids":[2,3]}]}\r\n',
    b"\r\ndata: [DONE]\r\n\r\n",
]


def test_lines_split_across_reads_are_joined_and_stamped_on_arrival():
    # No time bound: each stamp is held to the moment the server began writing the piece
    # that carries the line's last byte (a line is never stamped before its end was sent),
    # however late a busy host lets the client read it.
    async def go():
        handler = streaming(SPLIT, GAP_S)
        async with serving(handler) as url, open_session(1, 5.0) as session:
            lines: list[tuple[int, str]] = []
            async with session.post(f"{url}/completions", json={}) as r:
                done = await read_stamped_lines(r.content, lines)
        second = streaming(SPLIT, GAP_S)
        (exchange,) = await send_all(target(True), second)
        return done, lines, handler.written, exchange, second.written

    done, lines, w, exchange, w2 = asyncio.run(go())
    assert done is True
    assert [line for _, line in lines] == [
        'data: {"choices":[{"text":"a","token_ids":[1]}]}',
        "",
        'data: {"choices":[{"text":"b","token_ids":[2,3]}]}',
        "",
        "data: [DONE]",
    ]
    t = [stamp for stamp, _ in lines]
    # lines 0-1 end in piece 0, line 2 in piece 1 (joined across reads), 3-4 in piece 2
    assert t[0] == t[1] and t[3] == t[4]
    assert t[0] >= w[0] and t[2] >= w[1] and t[3] >= w[2]
    assert exchange.error is None
    stamps = [stamp for stamp, _ in exchange.responses]
    assert [p.ids.tolist() for _, p in exchange.responses] == [[1], [2, 3]]
    assert stamps[0] >= w2[0] and stamps[1] >= w2[1] and exchange.end_ns >= w2[2]
    assert [p.final for _, p in exchange.responses] == [False, True]


def test_connections_are_reused_and_the_pool_never_queues():
    peers: list[tuple] = []
    inside, all_in = [0], asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        peers.append(request.transport.get_extra_info("peername"))
        inside[0] += 1
        if inside[0] == 4:
            all_in.set()
        # raises unless 4 are in at once (a pool that queued would hold the 4th back
        # for good); the time only bounds the wait for the others on a starved loop
        await asyncio.wait_for(all_in.wait(), 60.0)
        return await streaming([TEXT_SSE])(request)

    async def go(pool):
        async with serving(handler) as url:
            t = target(False, url)
            transport = OpenAITransport(t, pool)
            await transport.open()
            try:
                prompt = Prompt("t", "Hello", 5, 3, "words")
                # request timeouts beyond the server's wait: its error is the answer
                sends = [transport.send(prompt, f"r{i}", 120.0) for i in range(4)]
                first = await asyncio.gather(*sends)
                again = [await transport.send(prompt, "s", 120.0) for _ in range(3)]
                return first + again
            finally:
                await transport.close()

    for pool in (4, None):
        peers.clear()
        inside[0] = 0
        all_in.clear()
        exchanges = asyncio.run(go(pool))
        assert [e.error for e in exchanges] == [None] * 7
        # 4 connections at once, then the 3 later requests on those same connections
        assert len(set(peers[:4])) == 4 and set(peers[4:]) <= set(peers[:4])


def test_a_body_that_never_ends_after_done_is_still_a_success():
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(TEXT_SSE)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(release.wait(), 10.0)
        return resp

    async def go():
        start = time.monotonic()
        (exchange,) = await send_all(target(False), handler)
        release.set()
        return exchange, time.monotonic() - start

    exchange, elapsed = asyncio.run(go())
    assert exchange.error is None and len(exchange.responses) == 4
    assert elapsed < DRAIN_S + 3.0


def test_dropped_connection_and_timeout_are_request_errors():
    async def drop(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(TEXT_SSE[:60])
        await asyncio.sleep(0.05)
        request.transport.close()
        return resp

    t = target(False)
    (dropped,) = asyncio.run(send_all(t, drop))
    assert dropped.error.startswith("UNAVAILABLE: http://127.0.0.1:"), dropped.error
    assert "ClientPayloadError" in dropped.error and "\n" not in dropped.error
    slow = streaming([TEXT_SSE[:60], b"\n"], gap_s=2.0)
    (late,) = asyncio.run(send_all(t, slow, timeout_s=0.3))
    assert late.error == "timed out after 0.3 s"
    # the whole first line came before the cut in both: its chunk is kept
    for exchange in (dropped, late):
        assert [p.text for _, p in exchange.responses] == ["Hi"]
