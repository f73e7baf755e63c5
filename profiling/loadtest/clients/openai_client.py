"""OpenAI-compatible HTTP client for the load test: probe, request bodies, SSE streams.

Any server with ``POST /v1/completions`` or ``/v1/chat/completions`` and ``stream=true``
(vLLM, SGLang, ``trtllm-serve``, Triton's OpenAI frontend). Every request streams with
``stream_options.include_usage=true`` (the final chunk, with empty ``choices``, carries
``usage.completion_tokens``), ``temperature`` 0 and ``max_tokens``; ``ignore_eos=true`` when the
output length is fixed (a vLLM / SGLang extension) and ``return_token_ids=true`` where the
probe found the server returns them (vLLM ≥ 0.10: ``choices[0].token_ids``, the new token ids
of each chunk). ``echo`` is never sent.

Server-sent events (the WHATWG HTML "server-sent events" format as OpenAI uses it): each event
is one ``data: <JSON>`` line followed by a blank line; the stream ends with ``data: [DONE]``.
Every ``data`` line is stamped on receipt and parsed at once into a
:class:`~trtbench.profiling.loadtest.clients.response_parse.ParsedResponse` (one response record per
chunk: a role-only or empty chunk carries no token).

One ``aiohttp.ClientSession`` per client process streams the requests
(:mod:`~trtbench.profiling.loadtest.clients.sse_http`: HTTP parsed in C, lines split and stamped
there); its pool allows at least the largest concurrency of the tiers
(:func:`~trtbench.profiling.loadtest.clients.transport.pool_size`), so no request ever waits for a
connection (a pool capped below the concurrency queues requests inside the client and inflates
TTFT). Readiness, ``/metrics`` scrapes and the probe are a few requests outside the stream and
use httpx. Proxy variables in the environment are ignored by every client here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import httpx
import numpy as np

from trtbench.core.errors import ConfigError, LoadTestError
from trtbench.profiling.loadtest.clients import sglang_spec
from trtbench.profiling.loadtest.clients.counter_reader import CounterReader
from trtbench.profiling.loadtest.clients.grpc_client import (
    ModelInterface,
    RequestOptions,
)
from trtbench.profiling.loadtest.clients.health import Health
from trtbench.profiling.loadtest.clients.openai_spec import (
    attach_step_counts,
    spec_stats_of,
)
from trtbench.profiling.loadtest.clients.response_parse import (
    IDS_OUTPUT,
    TEXT_OUTPUT,
    UNAVAILABLE,
    Exchange,
    ParsedResponse,
)
from trtbench.profiling.loadtest.clients.sse_http import (
    DONE,
    drain,
    open_session,
    read_stamped_lines,
)
from trtbench.profiling.loadtest.clients.target import (
    API_CHAT,
    API_COMPLETIONS,
    LoadTarget,
)
from trtbench.profiling.loadtest.records.spec_counters import SpecCounters
from trtbench.profiling.loadtest.workload.prompts import Prompt

COMPLETIONS = "completions"
CHAT = "chat/completions"
ENDPOINT_OF_API = {API_COMPLETIONS: COMPLETIONS, API_CHAT: CHAT}
CONNECT_TIMEOUT_S = 10.0
HEALTH_TIMEOUT_S = 1.0
PROBE_PROMPT = "Hello"
PROBE_TOKENS = 2


def request_body(
    endpoint: str,
    model: str,
    text: str,
    max_tokens: int,
    options: RequestOptions,
    token_ids: bool,
) -> dict[str, Any]:
    """The JSON body of one streamed request (``endpoint``: :data:`COMPLETIONS` or
    :data:`CHAT`; ``token_ids``: ask for ``return_token_ids``). ``options.extra`` is merged
    last (any field the server takes)."""
    body: dict[str, Any] = {"model": model}
    if endpoint == CHAT:
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    body["max_tokens"] = max_tokens
    body["temperature"] = 0.0
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    if options.fixed_output_len:
        body["ignore_eos"] = True
    if token_ids:
        body["return_token_ids"] = True
    body.update(options.extra)
    return body


def parse_event(line: str) -> dict[str, Any] | str | None:
    """One SSE line → the JSON object of a ``data:`` line, :data:`DONE`, or None (a blank
    line, a comment ``:...``, or another field such as ``event:``).

    Raises:
        ValueError: a ``data:`` line that is not JSON.
    """
    if not line.startswith("data:"):
        return None
    data = line[5:].strip()
    if data == DONE:
        return DONE
    return json.loads(data)


def chunk_to_parsed(chunk: dict[str, Any], endpoint: str) -> ParsedResponse:
    """One streamed chunk → its text, token ids and the usage it reports (pure).

    Completions: ``choices[0].text``; chat: ``choices[0].delta.content`` (a role-only delta
    has none). ``choices[0].token_ids`` (vLLM ``return_token_ids``): the chunk's new ids.
    ``usage.completion_tokens``: the request's output tokens (on the final, choice-less chunk).
    Never final: the ``[DONE]`` line marks the last chunk final (:class:`OpenAITransport`).
    """
    text = ids = None
    choices = chunk.get("choices") or []
    if choices:
        choice = choices[0]
        if endpoint == CHAT:
            text = (choice.get("delta") or {}).get("content")
        else:
            text = choice.get("text")
        if choice.get("token_ids") is not None:
            ids = np.asarray(choice["token_ids"], dtype=np.int64)
    usage = chunk.get("usage") or {}
    used = usage.get("completion_tokens")
    return ParsedResponse(
        ids,
        text,
        False,
        None,
        None,
        False,
        usage_tokens=None if used is None else int(used),
    )


def sse_to_parsed(
    stamped_lines: Iterable[tuple[int, str]], endpoint: str, adaptive: bool = False
) -> tuple[list[tuple[int, ParsedResponse]], int | None, str | None]:
    """Stamped SSE lines → (stamped responses, the ``[DONE]`` stamp, error) (pure).

    The last response before ``[DONE]`` is marked final. A chunk ``{"error": ...}`` ends the
    stream with that error; no ``[DONE]`` leaves the done stamp None (the caller says why).
    Per-request speculative counts the server sent (vLLM's ``metrics.speculative_decoding``,
    :func:`~trtbench.profiling.loadtest.clients.openai_spec.attach_step_counts`; SGLang's
    ``sglext.spec_tokens_details``,
    :func:`~trtbench.profiling.loadtest.clients.sglang_spec.attach_details`; ``adaptive``:
    the server drafts adaptively, so SGLang's proposals may be nominal) are attached to the
    responses.
    """
    out: list[tuple[int, ParsedResponse]] = []
    stats: dict[str, Any] | None = None
    details: Mapping[str, Any] | None = None
    for t, line in stamped_lines:
        try:
            event = parse_event(line)
        except ValueError:
            return out, None, f"not JSON in the event stream: {line[:120]!r}"
        if event is None:
            continue
        if event == DONE:
            out = attach_step_counts(out, stats)
            out = sglang_spec.attach_details(out, details, adaptive)
            if out:
                out[-1] = (out[-1][0], replace(out[-1][1], final=True))
            return out, t, None
        if "error" in event:  # type: ignore[operator]
            return out, None, f"server error: {_one_line(json.dumps(event['error']))}"
        stats = spec_stats_of(event) or stats  # type: ignore[arg-type]
        details = sglang_spec.details_of(event) or details  # type: ignore[arg-type]
        out.append((t, chunk_to_parsed(event, endpoint)))  # type: ignore[arg-type]
    return out, None, None


def _one_line(text: str, limit: int = 200) -> str:
    return " ".join(text.split())[:limit]


class OpenAITransport:
    """Streams requests to ``target.url`` (the ``/v1`` base URL) over HTTP/1.1 keep-alive.

    Args:
        target: ``endpoint`` :data:`COMPLETIONS` / :data:`CHAT`; ``interface.outputs``
            holds ``output_ids`` when ``return_token_ids`` is sent; ``health_url`` the
            readiness URL.
        pool: the most requests in flight at once (None: no limit).
    """

    def __init__(self, target: LoadTarget, pool: int | None):
        self.target, self.pool = target, pool
        self.token_ids = target.interface.returns_ids
        self.url = f"{target.url.rstrip('/')}/{target.endpoint}"
        self.session: aiohttp.ClientSession | None = None
        self.health_client: httpx.AsyncClient | None = None
        self.counters: CounterReader | None = None
        self.finished = 0  # streams that ended with [DONE]: the server finished them

    async def open(self) -> None:
        self.session = open_session(self.pool, CONNECT_TIMEOUT_S)
        # httpx logs every request at INFO: not in the run log
        logging.getLogger("httpx").setLevel(logging.WARNING)
        # readiness on its own connection: a busy pool must not look like a sick server
        self.health_client = httpx.AsyncClient(
            timeout=HEALTH_TIMEOUT_S, trust_env=False
        )
        self.counters = CounterReader(
            self.health_client, self.target.url, lambda: self.finished
        )

    async def close(self) -> None:
        if self.counters is not None:
            await self.counters.close()
            self.counters = None
        if self.session is not None:
            await self.session.close()
        if self.health_client is not None:
            await self.health_client.aclose()
        self.session = self.health_client = None

    async def send(self, prompt: Prompt, request_id: str, timeout_s: float) -> Exchange:
        """POST one streamed request; at most ``timeout_s`` from send to ``[DONE]``.

        A refused or broken connection is an :data:`UNAVAILABLE` error naming the aiohttp
        exception; a stream that ended properly stays a success whatever happens after
        ``[DONE]``.
        """
        t = self.target
        body = request_body(
            t.endpoint,
            t.interface.name,
            prompt.text,
            prompt.output_tokens,
            t.options,
            self.token_ids,
        )
        lines: list[tuple[int, str]] = []
        sent = time.perf_counter_ns()
        error: str | None = None
        try:
            error = await asyncio.wait_for(
                self._stream(body, request_id, lines), timeout_s
            )
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            # before TimeoutError: aiohttp's connect timeout is both
            error = (
                f"{UNAVAILABLE}: {t.url} ({type(exc).__name__}: {_one_line(str(exc))})"
            )
        except asyncio.TimeoutError:
            error = f"timed out after {timeout_s:g} s"
        end = time.perf_counter_ns()
        responses, done, bad = sse_to_parsed(lines, t.endpoint, t.adaptive_drafting)
        if done is not None and bad is None:
            error = None
            self.finished += 1
        elif error is None:
            error = bad or "stream closed before data: [DONE]"
        return Exchange(sent, done or end, responses, error)

    async def _stream(
        self, body: dict[str, Any], request_id: str, lines: list[tuple[int, str]]
    ) -> str | None:
        """Read the SSE lines into ``lines`` (receive-stamped) until ``[DONE]``; the HTTP
        error when the status is not 200."""
        assert self.session is not None, "open() the transport first"
        headers = {"X-Request-Id": request_id}
        async with self.session.post(self.url, json=body, headers=headers) as response:
            if response.status != 200:
                text = (await response.read()).decode(errors="replace")
                return f"HTTP {response.status}: {_one_line(text)}"
            if await read_stamped_lines(response.content, lines):
                await drain(response.content)
        return None

    def ready_check(self) -> Callable[[], Awaitable[Health]]:
        """GET ``target.health_url`` (1 s timeout): 200 is ready."""
        url = self.target.health_url or self.target.url.rstrip("/") + "/models"

        async def check() -> Health:
            assert self.health_client is not None
            try:
                r = await self.health_client.get(url)
            except httpx.HTTPError as exc:
                return Health(f"{url} does not answer ({type(exc).__name__})")
            return Health(
                None if r.status_code == 200 else f"{url}: HTTP {r.status_code}"
            )

        return check

    async def spec_counters(self) -> SpecCounters | None:
        """The server's speculative counters, read as its kind needs (counter_reader.py)."""
        assert self.counters is not None, "open() the transport first"
        return await self.counters.read()


@dataclass(frozen=True)
class OpenAIProbe:
    """What one short probe request found: token ids returned, usage streamed, the
    readiness URL (``/health`` where it answers, else ``/v1/models``); for SGLang its
    ``/server_info`` and the source the reply's ``sglext.spec_tokens_details`` were named
    (None: the reply carried none)."""

    token_ids: bool
    usage: bool
    health_url: str
    sglang: Mapping[str, Any] | None = None
    spec_details: str | None = None


def _unreachable(url: str, exc: Exception) -> LoadTestError:
    return LoadTestError(
        f"cannot reach an OpenAI-compatible server at {url} ({type(exc).__name__}); start "
        "it or pass --url http://HOST:PORT/v1 of its HTTP port"
    )


def _probe_stream(
    client: httpx.Client, url: str, endpoint: str, body: dict[str, Any]
) -> tuple[int, str, list[tuple[int, ParsedResponse]]]:
    with client.stream("POST", f"{url}/{endpoint}", json=body) as r:
        if r.status_code != 200:
            return r.status_code, _one_line(r.read().decode(errors="replace")), []
        lines = [(0, line) for line in r.iter_lines()]
    parsed, done, error = sse_to_parsed(lines, endpoint)
    if error is not None or done is None:
        raise LoadTestError(
            f"{url}/{endpoint} did not stream a reply ending with data: [DONE] ({error or 'no [DONE]'})"
        )
    return 200, "", parsed


def probe_openai(
    url: str, model: str, endpoint: str, timeout_s: float = 30.0
) -> OpenAIProbe:
    """List the models, then stream one 2-token request, first with ``return_token_ids``
    (again without it when the server refuses the field with HTTP 400). An SGLang server
    (:func:`~trtbench.profiling.loadtest.clients.sglang_spec.probe_sglang`) is asked for
    ``return_spec_tokens_details`` too; other servers are not sent the field (trtllm-serve
    refuses unknown fields with HTTP 400).

    Raises:
        LoadTestError: unreachable server (names ``url``), ``model`` not served (lists the
            served ones), or a probe request that fails.
    """
    url = url.rstrip("/")
    with httpx.Client(timeout=timeout_s, trust_env=False) as client:
        try:
            listed = client.get(f"{url}/models")
        except httpx.HTTPError as exc:
            raise _unreachable(url, exc) from None
        if listed.status_code != 200:
            raise LoadTestError(
                f"GET {url}/models answered HTTP {listed.status_code}; pass --url of the "
                "OpenAI base, e.g. http://HOST:PORT/v1"
            )
        served = [m.get("id") for m in listed.json().get("data", [])]
        if model not in served:
            raise LoadTestError(
                f"model {model!r} is not served at {url} (served: "
                f"{', '.join(map(str, served)) or 'none'}); pass --model with one of them"
            )
        base = url.removesuffix("/v1")
        sglang = sglang_spec.probe_sglang(client, base)
        extra = {} if sglang is None else {sglang_spec.REQUEST_FIELD: True}
        options = RequestOptions(fixed_output_len=True, extra=extra)
        for ids in (True, False):
            body = request_body(
                endpoint, model, PROBE_PROMPT, PROBE_TOKENS, options, ids
            )
            try:
                status, text, parsed = _probe_stream(client, url, endpoint, body)
            except httpx.HTTPError as exc:
                raise _unreachable(url, exc) from None
            if status == 200 or not (status == 400 and ids):
                break
        if status != 200:
            raise LoadTestError(f"POST {url}/{endpoint} answered HTTP {status}: {text}")
        try:
            health = f"{base}/health"
            ok = client.get(health).status_code == 200
        except httpx.HTTPError:
            ok = False
    return OpenAIProbe(
        token_ids=ids and any(p.ids is not None for _, p in parsed),
        usage=any(p.usage_tokens is not None for _, p in parsed),
        health_url=health if ok else f"{url}/models",
        sglang=sglang,
        spec_details=sglang_spec.details_source(parsed, sglang),
    )


def connect_openai(
    url: str,
    model: str,
    api: str,
    *,
    fixed_output_len: bool = True,
    extra: dict[str, object] | None = None,
    has_tokenizer: bool = False,
) -> LoadTarget:
    """Probe the server (:func:`probe_openai`) and describe the target (an SGLang server's
    requests ask for its per-request speculative counts:
    :func:`~trtbench.profiling.loadtest.clients.sglang_spec.request_fields`).

    Raises:
        LoadTestError: see :func:`probe_openai`.
        ConfigError: the server returns no token ids and no ``--tokenizer`` was given (the
            per-chunk counts need one; ``usage`` alone only gives each request's total).
    """
    endpoint = ENDPOINT_OF_API[api]
    probe = probe_openai(url, model, endpoint)
    if not probe.token_ids and not has_tokenizer:
        usage = "only usage totals" if probe.usage else "neither token ids nor usage"
        raise ConfigError(
            f"{url} streams {usage} for model {model!r} (no return_token_ids); pass "
            "--tokenizer DIR (the model's tokenizer) so each chunk's text is re-tokenized"
        )
    outputs = (IDS_OUTPUT,) if probe.token_ids else (TEXT_OUTPUT,)
    interface = ModelInterface(model, {}, outputs, True)
    fields = sglang_spec.request_fields(
        probe.sglang, extra, url, probe.spec_details, endpoint
    )
    options = RequestOptions(
        stream=True, fixed_output_len=fixed_output_len, extra=fields
    )
    adaptive = sglang_spec.is_adaptive(
        probe.sglang
    )  # SGLang's proposals may be nominal
    return LoadTarget(
        url.rstrip("/"), interface, endpoint, options, api, probe.health_url, adaptive
    )
