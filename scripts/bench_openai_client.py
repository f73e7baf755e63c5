#!/usr/bin/env python3
"""Benchmark: client CPU per streamed chunk of trtbench's OpenAI transport.

A tiny aiohttp server in a child process streams OpenAI completions chunks the way vLLM 0.32
does (one ``data:`` event per token with ``choices[0].token_ids``, a usage chunk, then
``data: [DONE]``), ``max_tokens`` chunks per request. This process drives a closed loop of
``--requests`` requests at ``--concurrency`` with each client in turn, in alternating rounds:

- ``aiohttp lines``: the baseline, a bare aiohttp session iterating ``resp.content`` by line
  and stamping each (no parsing), as a minimal peer client would;
- ``sse_http reader``: trtbench's line reader alone (``sse_http.read_stamped_lines``);
- ``transport``: :class:`~trtbench.profiling.loadtest.clients.openai_client.OpenAITransport.send`,
  the whole request as the runner sees it (stamps, SSE parsing, ParsedResponse per chunk);
- ``httpx lines``: a bare ``httpx.AsyncClient`` ``aiter_lines`` loop (the old client's
  reader, for reference).

Two server paces: ``burst`` (chunks written back to back: many per network read) and
``paced`` (``--gap-us`` between chunks: about one read per chunk, as from a real server
decoding a token at a time). Figure: client CPU µs per token chunk (``time.process_time`` of
this process over the loop / (requests × chunks)); medians over rounds; each client's ratio
to the ``aiohttp lines`` baseline. Then the parsing alone (``sse_to_parsed`` over one
request's recorded lines) and, inside it, ``np.asarray`` of one chunk's ids.

    .venv/bin/python scripts/bench_openai_client.py [--requests 64] [--chunks 256]
        [--concurrency 4] [--gap-us 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import statistics
import time
import timeit
from collections.abc import Awaitable, Callable

import aiohttp
import httpx
import numpy as np
from aiohttp import web

from trtbench.profiling.loadtest.clients.grpc_client import (
    ModelInterface,
    RequestOptions,
)
from trtbench.profiling.loadtest.clients.openai_client import (
    COMPLETIONS,
    OpenAITransport,
    request_body,
    sse_to_parsed,
)
from trtbench.profiling.loadtest.clients.sse_http import (
    open_session,
    read_stamped_lines,
)
from trtbench.profiling.loadtest.clients.target import API_COMPLETIONS, LoadTarget
from trtbench.profiling.loadtest.workload.prompts import Prompt

Send = Callable[[int], Awaitable[int]]


def chunk_bytes(i: int) -> bytes:
    """One vLLM-like completions chunk carrying token id ``i``."""
    chunk = {
        "id": "cmpl-bench",
        "object": "text_completion",
        "created": 1,
        "model": "bench",
        "choices": [
            {
                "index": 0,
                "text": f" t{i}",
                "logprobs": None,
                "finish_reason": None,
                "stop_reason": None,
                "token_ids": [i],
            }
        ],
    }
    return f"data: {json.dumps(chunk)}\n\n".encode()


def serve(port_out, gap_s: float) -> None:
    """Child process: serve ``POST /v1/completions`` on 127.0.0.1 (port sent back)."""
    chunks = [chunk_bytes(i) for i in range(4096)]

    async def completions(request: web.Request) -> web.StreamResponse:
        n = int((await request.json())["max_tokens"])
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(n):
            await resp.write(chunks[i % len(chunks)])
            if gap_s:
                await asyncio.sleep(gap_s)
        usage = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": n}}
        await resp.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        await resp.write_eof()
        return resp

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/completions", completions)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_out.send(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(main())


def body(n: int) -> dict:
    return request_body(COMPLETIONS, "bench", "x", n, RequestOptions(), True)


async def closed_loop(send: Send, requests: int, concurrency: int) -> int:
    """Send ``requests`` requests, ``concurrency`` at a time; lines received in all."""
    left = list(range(requests))
    received = 0

    async def worker() -> None:
        nonlocal received
        while left:
            received += await send(left.pop())

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return received


def aiohttp_lines(url: str, n: int, pool: int):
    async def run(requests: int, concurrency: int) -> int:
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=pool),
            timeout=aiohttp.ClientTimeout(total=None),
        ) as session:
            now = time.perf_counter_ns

            async def send(_: int) -> int:
                lines = []
                async with session.post(f"{url}/completions", json=body(n)) as r:
                    async for line in r.content:
                        lines.append((now(), line))
                return len(lines)

            await closed_loop(send, concurrency, concurrency)  # warm the connections
            return await measure(send, requests, concurrency)

    return run


def reader_only(url: str, n: int, pool: int):
    async def run(requests: int, concurrency: int) -> int:
        async with open_session(pool, 10.0) as session:

            async def send(_: int) -> int:
                lines: list[tuple[int, str]] = []
                async with session.post(f"{url}/completions", json=body(n)) as r:
                    await read_stamped_lines(r.content, lines)
                return len(lines)

            await closed_loop(send, concurrency, concurrency)
            return await measure(send, requests, concurrency)

    return run


def transport(url: str, n: int, pool: int):
    target = LoadTarget(
        url,
        ModelInterface("bench", {}, ("output_ids",), True),
        COMPLETIONS,
        RequestOptions(stream=True),
        API_COMPLETIONS,
    )
    prompt = Prompt("p", "x", 1, n, "words")

    async def run(requests: int, concurrency: int) -> int:
        t = OpenAITransport(target, pool)
        await t.open()
        try:

            async def send(i: int) -> int:
                exchange = await t.send(prompt, f"r{i}", 600.0)
                assert exchange.error is None, exchange.error
                tokens = sum(1 for _, p in exchange.responses if p.ids is not None)
                assert tokens == n, (tokens, n)
                return len(exchange.responses)

            await closed_loop(send, concurrency, concurrency)
            return await measure(send, requests, concurrency)
        finally:
            await t.close()

    return run


def httpx_lines(url: str, n: int, pool: int):
    async def run(requests: int, concurrency: int) -> int:
        limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
        async with httpx.AsyncClient(
            limits=limits, timeout=httpx.Timeout(None), trust_env=False
        ) as client:
            now = time.perf_counter_ns

            async def send(_: int) -> int:
                lines = []
                async with client.stream(
                    "POST", f"{url}/completions", json=body(n)
                ) as r:
                    async for line in r.aiter_lines():
                        lines.append((now(), line))
                return len(lines)

            await closed_loop(send, concurrency, concurrency)
            return await measure(send, requests, concurrency)

    return run


CPU: list[float] = []


async def measure(send: Send, requests: int, concurrency: int) -> int:
    """The measured loop: its CPU seconds are appended to :data:`CPU`."""
    cpu = time.process_time()
    received = await closed_loop(send, requests, concurrency)
    CPU.append(time.process_time() - cpu)
    return received


CLIENTS = {
    "aiohttp lines": aiohttp_lines,
    "sse_http reader": reader_only,
    "transport": transport,
    "httpx lines": httpx_lines,
}


def run_pace(name: str, gap_s: float, args: argparse.Namespace) -> dict[str, float]:
    """Median client CPU µs per token chunk of every client at one server pace."""
    recv, send_end = mp.Pipe(duplex=False)
    server = mp.get_context("spawn").Process(target=serve, args=(send_end, gap_s))
    server.start()
    try:
        url = f"http://127.0.0.1:{recv.recv()}/v1"
        per: dict[str, list[float]] = {c: [] for c in CLIENTS}
        for r in range(args.rounds):
            order = list(CLIENTS) if r % 2 == 0 else list(reversed(CLIENTS))
            for client in order:
                run = CLIENTS[client](url, args.chunks, args.concurrency)
                wall = time.perf_counter()
                asyncio.run(run(args.requests, args.concurrency))
                wall = time.perf_counter() - wall
                us = CPU.pop() / (args.requests * args.chunks) * 1e6
                per[client].append(us)
                print(
                    f"  {name} round {r}: {client:16s} {us:7.2f} µs/chunk "
                    f"(wall {wall:.2f} s)"
                )
        return {c: statistics.median(v) for c, v in per.items()}
    finally:
        server.kill()
        server.join()


def parse_cost(n: int) -> tuple[float, float]:
    """µs per chunk of ``sse_to_parsed`` over one request's lines, and of ``np.asarray``
    of one chunk's ids."""
    lines = []
    for i in range(n):
        lines += chunk_bytes(i).decode().split("\n")[:2]
    usage = json.dumps({"choices": [], "usage": {"completion_tokens": n}})
    lines += [f"data: {usage}", "", "data: [DONE]"]
    stamped = [(i, line) for i, line in enumerate(lines)]
    reps = 20
    whole = timeit.timeit(lambda: sse_to_parsed(stamped, COMPLETIONS), number=reps)
    ids = [17]
    asarray = timeit.timeit(lambda: np.asarray(ids, dtype=np.int64), number=100_000)
    return whole / reps / n * 1e6, asarray / 100_000 * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--chunks", type=int, default=256, help="token chunks per request")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--gap-us", type=float, default=1000.0, help="paced server's gap")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    results = {
        "burst": run_pace("burst", 0.0, args),
        "paced": run_pace("paced", args.gap_us / 1e6, args),
    }
    print(
        f"\nclient CPU µs per token chunk (median of {args.rounds} rounds; "
        f"{args.requests} requests x {args.chunks} chunks, concurrency "
        f"{args.concurrency}; ratio to 'aiohttp lines')"
    )
    for pace, per in results.items():
        base = per["aiohttp lines"]
        for client, us in per.items():
            print(f"  {pace:5s} {client:16s} {us:7.2f} µs   x{us / base:.2f}")
    parse, asarray = parse_cost(args.chunks)
    print(
        f"parsing alone (sse_to_parsed): {parse:.2f} µs/chunk, of which np.asarray of "
        f"the ids ~{asarray:.2f} µs"
    )


if __name__ == "__main__":
    main()
