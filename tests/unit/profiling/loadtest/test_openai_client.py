"""OpenAI client: request bodies, SSE bytes → parsed responses → records (hand-worked values)."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.sse_server import send_all, streaming
from trtbench.core.errors import ConfigError
from trtbench.profiling.loadtest.clients.grpc_client import (
    ModelInterface,
    RequestOptions,
)
from trtbench.profiling.loadtest.clients.openai_client import (
    CHAT,
    COMPLETIONS,
    DONE,
    OpenAITransport,
    parse_event,
    request_body,
    sse_to_parsed,
)
from trtbench.profiling.loadtest.clients.target import (
    API_CHAT,
    API_COMPLETIONS,
    API_GRPC,
    LoadTarget,
    check_url,
)
from trtbench.profiling.loadtest.clients.transport import pool_size
from trtbench.profiling.loadtest.files.responses import (
    RequestSlot,
    exchange_to_all_records,
    fit_total,
)
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.schedule import Tier

# A chat stream as vLLM sends it: role-only first chunk, an empty-content chunk, two
# content chunks with their token ids, the usage-only final chunk, then [DONE].
CHAT_SSE = (
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":""},"token_ids":[]}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"token_ids":[17]}]}\n\n'
    b": keep-alive comment\n\n"
    b'data: {"choices":[{"index":0,"delta":{"content":" there!"},'
    b'"token_ids":[42,7],"finish_reason":"length"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,'
    b'"total_tokens":8}}\n\n'
    b"data: [DONE]\n\n"
)
# The same reply from /completions without token ids (text + usage only).
TEXT_SSE = (
    b'data: {"choices":[{"index":0,"text":"Hi"}]}\n\n'
    b'data: {"choices":[{"index":0,"text":""}]}\n\n'
    b'data: {"choices":[{"index":0,"text":" there!","finish_reason":"length"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}\n\n'
    b"data: [DONE]\n\n"
)


def stamped(raw: bytes) -> list[tuple[int, str]]:
    return [(i * 10, line) for i, line in enumerate(raw.decode().split("\n"))]


def test_request_bodies_exact():
    opts = RequestOptions(fixed_output_len=True)
    assert request_body(COMPLETIONS, "m", "Hello", 8, opts, True) == {
        "model": "m",
        "prompt": "Hello",
        "max_tokens": 8,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "return_token_ids": True,
    }
    free = RequestOptions(fixed_output_len=False, extra={"top_k": 1})
    assert request_body(CHAT, "m", "Hi", 4, free, False) == {
        "model": "m",
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 4,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "top_k": 1,
    }


def test_parse_event_lines():
    assert parse_event("data: [DONE]") == DONE
    assert parse_event('data: {"a": 1}') == {"a": 1}
    assert parse_event("") is None
    assert parse_event(": comment") is None
    assert parse_event("event: x") is None
    with pytest.raises(ValueError):
        parse_event("data: {not json")


def test_chat_stream_parsed_chunk_by_chunk():
    parsed, done, error = sse_to_parsed(stamped(CHAT_SSE), CHAT)
    assert error is None
    # lines: 0 role, 2 empty, 4 "Hi", 6 comment, 8 " there!", 10 usage, 12 [DONE]
    assert done == 120
    assert [t for t, _ in parsed] == [0, 20, 40, 80, 100]
    p = [r for _, r in parsed]
    assert [None if r.ids is None else r.ids.tolist() for r in p] == [
        None,
        [],
        [17],
        [42, 7],
        None,
    ]
    assert [r.text for r in p] == ["", "", "Hi", " there!", None]
    assert [r.usage_tokens for r in p] == [None, None, None, None, 3]
    assert [r.final for r in p] == [False, False, False, False, True]


def test_error_event_and_missing_done():
    lines = stamped(
        b'data: {"choices":[{"text":"a"}]}\n\ndata: {"error":{"message":"boom"}}\n'
    )
    parsed, done, error = sse_to_parsed(lines, COMPLETIONS)
    assert len(parsed) == 1 and done is None
    assert error == 'server error: {"message": "boom"}'
    assert sse_to_parsed(stamped(b'data: {"choices":[]}\n'), COMPLETIONS)[1:] == (
        None,
        None,
    )


def target(
    api: str, endpoint: str, ids: bool, url: str = "http://h:1/v1"
) -> LoadTarget:
    outputs = ("output_ids",) if ids else ("text_output",)
    return LoadTarget(
        url,
        ModelInterface("m", {}, outputs, True),
        endpoint,
        RequestOptions(),
        api,
        "http://h:1/health",
    )


def send_mocked(t: LoadTarget, raw: bytes, status: int = 200):
    """One request answered ``raw`` by a real local server; (exchange, what it saw)."""
    handler = streaming([raw], status=status)
    (exchange,) = asyncio.run(send_all(t, handler))
    url, headers, body = handler.seen[0]
    return exchange, {"url": url, "headers": headers, "body": body}


def test_chat_records_count_ids_not_role_or_empty_chunks():
    exchange, seen = send_mocked(target(API_CHAT, CHAT, True), CHAT_SSE)
    assert seen["url"].endswith("/v1/chat/completions")
    assert seen["headers"]["X-Request-Id"] == "r-0"
    assert seen["body"]["return_token_ids"] is True and "echo" not in seen["body"]
    assert exchange.error is None and len(exchange.responses) == 5
    slot = RequestSlot("v", Tier(concurrency=1), 0, exchange.sent_ns)
    prompt = Prompt("t", "Hello", 5, 3, "words")
    req, resp, _ = exchange_to_all_records(exchange, prompt, slot)
    assert [r.tokens for r in resp] == [0, 0, 1, 2, 0]
    assert (req.output_tokens, req.token_responses, req.empty_responses) == (3, 2, 3)
    assert req.output_token_source == "output_ids" and req.echoed_tokens == 0
    times = [t for t, _ in exchange.responses]
    assert (req.first_token_ns, req.last_token_ns) == (times[2], times[3])
    assert req.first_response_tokens == 1 and req.error is None


class CharTokenizer:
    """One token per character: an independent stand-in for re-tokenizing."""

    def tokens_per_chunk(self, chunks):
        return [len(c) for c in chunks]


def test_text_stream_retokenized_then_fitted_to_usage():
    exchange, _ = send_mocked(target(API_COMPLETIONS, COMPLETIONS, False), TEXT_SSE)
    slot = RequestSlot("v", Tier(concurrency=1), 0, exchange.sent_ns)
    prompt = Prompt("t", "Hello", 5, 3, "words")
    req, resp, _ = exchange_to_all_records(exchange, prompt, slot, CharTokenizer())
    # characters: 2, 0, 7, 0 = 9; usage says 3 → the surplus comes off the last chunks
    assert [r.tokens for r in resp] == [2, 0, 1, 0]
    assert req.output_tokens == 3 and req.output_token_source == "retokenized"


def test_http_error_and_missing_done_are_request_errors():
    exchange, _ = send_mocked(
        target(API_COMPLETIONS, COMPLETIONS, True),
        b'{"error": {"message": "bad  model"}}',
        404,
    )
    assert exchange.error == 'HTTP 404: {"error": {"message": "bad model"}}'
    cut = TEXT_SSE.split(b"data: [DONE]")[0]
    exchange, _ = send_mocked(target(API_COMPLETIONS, COMPLETIONS, True), cut)
    assert exchange.error == "stream closed before data: [DONE]"
    assert len(exchange.responses) == 4


def test_refused_connection_is_unavailable():
    t = LoadTarget(
        "http://127.0.0.1:9/v1",
        ModelInterface("m", {}, ("output_ids",), True),
        COMPLETIONS,
        RequestOptions(),
        API_COMPLETIONS,
    )

    async def go():
        transport = OpenAITransport(t, 1)
        await transport.open()
        try:
            return await transport.send(Prompt("t", "x", 1, 1, "words"), "r", 5.0)
        finally:
            await transport.close()

    exchange = asyncio.run(go())
    assert exchange.error.startswith(
        "UNAVAILABLE: http://127.0.0.1:9/v1 (ClientConnectorError"
    )


def test_fit_total_examples():
    assert fit_total([0, 2, 1, 0], 5) == [0, 2, 3, 0]
    assert fit_total([0, 2, 1, 0], 2) == [0, 2, 0, 0]
    assert fit_total([0, 0], 4) == [0, 0]


def test_pool_sized_to_the_largest_concurrency():
    assert pool_size([Tier(concurrency=1), Tier(concurrency=16)]) == 16
    assert pool_size([Tier(None, 5.0, 8)]) == 8
    assert pool_size([Tier(concurrency=4), Tier(None, 5.0, None)]) is None


@pytest.mark.parametrize(
    ("api", "url", "says"),
    [
        (API_GRPC, "http://h:8000/v1", "gRPC port (8001"),
        (API_COMPLETIONS, "h:8001", "http://HOST:8000/v1"),
        (API_CHAT, "grpc://h:8001", "HOST:PORT alone is the Triton gRPC form"),
    ],
)
def test_url_that_does_not_fit_the_api(api, url, says):
    with pytest.raises(ConfigError, match=None) as err:
        check_url(api, url)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_urls_that_fit():
    check_url(API_GRPC, "localhost:8001")
    check_url(API_COMPLETIONS, "https://h/v1")
