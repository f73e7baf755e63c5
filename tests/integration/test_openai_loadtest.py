"""``trtbench loadtest --api openai-completions`` against a real ``vllm serve`` (CPU, float32)
of the tiny target: two tiers of 4 requests, token ids from the server, lengths forced with
``ignore_eos``; the per-request token counts checked against the server's own ``usage``."""

from __future__ import annotations

import asyncio

import pandas as pd
import pytest

from tests.support.cli import run_cli
from tests.support.vllm_serve import openai_loadtest
from trtbench.profiling.loadtest.clients.openai_client import (
    OpenAITransport,
    connect_openai,
)
from trtbench.profiling.loadtest.clients.target import API_COMPLETIONS
from trtbench.profiling.loadtest.files.responses import (
    RequestSlot,
    exchange_to_all_records,
)
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.schedule import Tier
from trtbench.triton_repo.ports import free_port

pytestmark = pytest.mark.integration

OUTPUT_TOKENS = 8


@pytest.fixture
def vllm_url(vllm_target_url) -> str:
    """The session's vLLM server of the tiny target (tests/integration/conftest.py)."""
    return vllm_target_url


def test_loadtest_completions_two_tiers(vllm_url, tiny_models, tmp_path, capsys):
    out = tmp_path / "run"
    openai_loadtest(
        capsys,
        vllm_url,
        tiny_models["target"],
        out,
        variant="vllm",
        concurrency="1,2",
        output_tokens=OUTPUT_TOKENS,
    )
    summary = pd.read_csv(out / "loadtest" / "summary.csv")
    assert list(summary["tier"]) == ["c1", "c2"]
    assert set(summary["tier_status"]) == {"complete"}
    req = pd.read_csv(out / "loadtest" / "requests.csv")
    assert len(req) == 8 and req["error"].isna().all()
    assert (req["output_tokens"] == OUTPUT_TOKENS).all()  # ignore_eos forces the length
    assert (req["requested_output_tokens"] == OUTPUT_TOKENS).all()
    assert set(req["output_token_source"]) == {"output_ids"}
    assert (req["time_to_first_token_ms"] <= req["request_latency_ms"]).all()
    assert (req["first_token_ns"] >= req["sent_ns"]).all()
    assert list(summary["request_count"]) == [4, 4]
    assert list(summary["error_count"]) == [0, 0]
    cols = [
        "time_to_first_token_mean_ms",
        "request_latency_mean_ms",
        "time_per_output_token_mean_ms",
    ]
    assert summary[cols].notna().all().all()
    assert (
        summary["time_to_first_token_mean_ms"] <= summary["request_latency_mean_ms"]
    ).all()
    resp = pd.read_csv(out / "loadtest" / "responses.csv")
    assert resp.groupby("request_id")["tokens"].sum().eq(OUTPUT_TOKENS).all()


def test_loadtest_chat_streams_tokens_not_roles(
    vllm_url, tiny_models, tmp_path, capsys
):
    """``--api openai-chat``: the same tiers over /v1/chat/completions. A chat stream opens
    with a role-only delta: it is an empty response, never a token, so the tokens counted
    per request still equal the forced length and TTFT is the first chunk with content."""
    out = tmp_path / "chat"
    openai_loadtest(
        capsys,
        vllm_url,
        tiny_models["target"],
        out,
        variant="vllm-chat",
        concurrency="1,2",
        output_tokens=OUTPUT_TOKENS,
        api="openai-chat",
    )
    req = pd.read_csv(out / "loadtest" / "requests.csv")
    assert len(req) == 8 and req["error"].isna().all()
    assert (req["output_tokens"] == OUTPUT_TOKENS).all()
    assert (req["empty_responses"] >= 1).all()  # the role-only opening delta (+ usage)
    resp = pd.read_csv(out / "loadtest" / "responses.csv")
    first = resp.sort_values("index").groupby("request_id").first()
    assert (first["tokens"] == 0).all()  # the role delta carries no token
    assert resp.groupby("request_id")["tokens"].sum().eq(OUTPUT_TOKENS).all()
    with_tokens = resp[resp["tokens"] > 0].groupby("request_id")["received_ns"].min()
    ttft_ns = (with_tokens - req.set_index("request_id")["sent_ns"]).sort_index()
    got = req.set_index("request_id")["time_to_first_token_ms"].sort_index()
    assert list(got) == pytest.approx(list(ttft_ns / 1e6), abs=1e-6)
    summary = pd.read_csv(out / "loadtest" / "summary.csv")
    assert list(summary["tier"]) == ["c1", "c2"]
    assert set(summary["tier_status"]) == {"complete"}


def test_counts_equal_the_servers_usage(vllm_url, tiny_models):
    """Per request: the tokens counted from the streamed ids equal the server's usage."""
    model = str(tiny_models["target"])
    target = connect_openai(vllm_url, model, API_COMPLETIONS, fixed_output_len=False)
    assert target.interface.returns_ids and target.health_url.endswith("/health")
    prompts = [
        Prompt(f"p{i}", text, 4, n, "words")
        for i, (text, n) in enumerate(
            [("The cat", 5), ("Hello world", 12), ("def f(x):", 3)]
        )
    ]

    async def go():
        transport = OpenAITransport(target, 2)
        await transport.open()
        try:
            return [
                await transport.send(p, f"r{i}", 60.0) for i, p in enumerate(prompts)
            ]
        finally:
            await transport.close()

    for prompt, exchange in zip(prompts, asyncio.run(go()), strict=True):
        assert exchange.error is None
        usage = [
            r.usage_tokens for _, r in exchange.responses if r.usage_tokens is not None
        ]
        slot = RequestSlot("v", Tier(concurrency=1), 0, exchange.sent_ns)
        record, _, _ = exchange_to_all_records(exchange, prompt, slot)
        assert usage == [record.output_tokens]
        assert 0 < record.output_tokens <= prompt.output_tokens


def test_bad_urls_exit_2_in_one_line(vllm_url, tiny_models, tmp_path, capsys):
    model = str(tiny_models["target"])
    host_port = vllm_url.removeprefix("http://").removesuffix("/v1")
    dead = f"http://127.0.0.1:{free_port()}/v1"
    for args, says in (
        (["--api", "openai-completions", "--url", host_port], "http://HOST:8000/v1"),
        (["--url", vllm_url], "gRPC port (8001"),
        (["--api", "openai-completions", "--url", dead], dead),
    ):
        code, stdout, stderr = run_cli(
            [
                "loadtest",
                *args,
                "--model",
                model,
                "--requests-per-tier",
                "1",
                "--out",
                str(tmp_path / "bad"),
            ],
            capsys,
        )
        assert code == 2, stdout + stderr
        line = [s for s in stderr.splitlines() if s.strip()]
        assert len(line) == 1 and says in line[0], stderr
