"""The OpenAI transport's HTTP side: one aiohttp session and the receive-stamped SSE line reader.

aiohttp parses HTTP/1.1 (status line, headers, chunked transfer) in C, so a streamed chunk
costs the client a few µs of Python (the line split and one decode here) where httpx's
pure-Python ``h11`` parser and decoder chain cost tens (docs/bench_serve_agreement.md,
"Client cost"; ``scripts/bench_openai_client.py`` measures it). The peers read the same way:
``vllm bench serve`` (vLLM 0.32, ``vllm/benchmarks/lib/endpoint_request_func.py``) and AIPerf
stream OpenAI replies with aiohttp.

Lines: the WHATWG server-sent-events format ends a line with LF or CRLF (a lone CR, which no
OpenAI-compatible server sends, is not split on). One network read may hold many lines or
part of one; a line split across reads is joined and stamped when its last byte arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import aiohttp

DONE = "[DONE]"
DRAIN_S = 1.0
"""How long to wait, after ``data: [DONE]``, for the end of the HTTP body (the chunked
transfer's last chunk, usually in the same read): the connection is reused only when the body
was read to its end, and a server that never ends it must not hold the request."""


def open_session(pool: int | None, connect_timeout_s: float) -> aiohttp.ClientSession:
    """A session for streamed requests (call inside the running event loop).

    Its pool holds ``pool`` connections (None: no limit), per host too, so a request never
    waits for one; no total or read timeout (the caller bounds each request); connecting
    times out after ``connect_timeout_s``. Proxy variables in the environment are ignored
    (``trust_env=False``): a load test measures the server, not a proxy.
    """
    connector = aiohttp.TCPConnector(limit=pool or 0, limit_per_host=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False)


def is_done(line: str) -> bool:
    """Whether an SSE line is ``data: [DONE]`` (any spaces after the colon)."""
    return line.startswith("data:") and line[5:].strip() == DONE


async def read_stamped_lines(
    content: aiohttp.StreamReader, lines: list[tuple[int, str]]
) -> bool:
    """Append each line of an SSE body to ``lines`` as (``time.perf_counter_ns()`` when its
    last byte was read, the line without its LF / CRLF), until ``data: [DONE]`` (included)
    or the end of the body (a last line without a newline is kept).

    Returns:
        Whether ``data: [DONE]`` was read.

    Raises:
        aiohttp.ClientPayloadError: the body broke off (the server closed mid-chunk).
    """
    now = time.perf_counter_ns
    append = lines.append
    tail = b""
    while True:
        data = await content.readany()
        if not data:
            break
        stamp = now()
        parts = (tail + data if tail else data).split(b"\n")
        tail = parts.pop()
        for part in parts:
            line = part.decode(errors="replace")
            if line.endswith("\r"):
                line = line[:-1]
            append((stamp, line))
            if line.startswith("data:") and is_done(line):
                return True
    if tail:
        line = tail.decode(errors="replace").removesuffix("\r")
        append((now(), line))
        return is_done(line)
    return False


async def drain(content: aiohttp.StreamReader) -> None:
    """Read what is left of the body after ``[DONE]`` for at most :data:`DRAIN_S` (so the
    connection goes back to the pool); a body that does not end in time, or breaks, is left
    to aiohttp, which then closes the connection."""
    if content.at_eof():
        return
    with contextlib.suppress(asyncio.TimeoutError, aiohttp.ClientError):
        await asyncio.wait_for(_read_to_end(content), DRAIN_S)


async def _read_to_end(content: aiohttp.StreamReader) -> None:
    while await content.readany():
        pass
