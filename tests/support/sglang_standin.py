"""A scripted stand-in for an SGLang server's HTTP endpoints: a contract test, not a run of
SGLang (SGLang needs a GPU here).

It serves what trtbench reads, in SGLang's formats (sgl-project/sglang):

* ``GET /server_info``: an object with ``version``, the server arguments trtbench names
  (``speculative_algorithm``, ``speculative_num_draft_tokens``, ``decode_log_interval``) and
  ``internal_states`` (one per data-parallel rank, with the running
  ``avg_spec_accept_length``), as ``http_server.py``'s ``get_server_info`` returns them.
* ``POST /v1/completions`` streaming: one chunk per engine step (``choices[0].text``, and
  ``token_ids`` when ``return_token_ids`` is asked, as sglang's ``serving_completions.py``
  does), the last with ``finish_reason``; then, when the request asked for
  ``return_spec_tokens_details`` and ``details`` is on (sglang 0.5.19+), one chunk
  ``{"choices": [], "sglext": {"spec_tokens_details": {...}}}`` (0.5.23
  ``serving_completions.py`` lines 444–476) with the fields ``tokenizer_manager.py``'s
  ``_calculate_spec_decoding_metrics`` computes; then the usage chunk and ``data: [DONE]``.
  With ``details`` off it ignores the field, as releases before 0.5.19 do.
* ``GET /metrics``: SGLang's gauges ``sglang:spec_accept_length`` / ``sglang:spec_accept_rate``
  (a recent window; trtbench refuses them as tier figures).

Every request decodes with ``speculative_num_draft_tokens`` = 4 (K = 3 drafts per verify
step), the steps accepting the trtllm-serve stand-in's pattern (2, 0, 3, 1, …; the last step
cut by ``max_tokens``, its accepted drafts still counted).

Variants (constructor arguments): ``details`` off (an SGLang that sends no ``sglext`` chunk:
before 0.5.19, or at a version that has the field, ``version`` says which); ``adaptive``
(``speculative_adaptive``: the steps propose :data:`ADAPTIVE_PROPOSALS` drafts in turn, but
the details count ``spec_verify_ct × (speculative_num_draft_tokens − 1)``, as 0.5.19–0.5.23's
``_calculate_spec_decoding_metrics`` does); ``by_position`` (the steps propose
:data:`ADAPTIVE_PROPOSALS` and the details count them: ``spec_num_proposed_drafts`` the actual
proposals and the ``*_by_position`` fields and ``spec_proposed_drafts_histogram`` that SGLang's
main branch after 0.5.23 computes in ``_calculate_spec_decoding_metrics``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web

from tests.support.sse_server import serving_app
from tests.support.trtllm_serve_standin import K, request_steps, serving_in_thread

NUM_DRAFT_TOKENS = K + 1
ADAPTIVE_PROPOSALS = (3, 1, 3, 1, 2)
"""Drafts the adaptive variants' steps propose, in turn (each ≥ the pattern's accepted)."""


def counts_by(values: list[int], size: int) -> list[int]:
    """index j = how many of ``values`` equal j (grown to ``size``)."""
    hist = [0] * size
    for v in values:
        hist[v] += 1
    return hist


def spec_tokens_details(
    max_tokens: int, adaptive: bool = False, by_position: bool = False
) -> dict:
    """``spec_tokens_details`` of one request of ``max_tokens`` tokens, computed as SGLang's
    ``_calculate_spec_decoding_metrics`` does from the scheduler's per-request counters
    (module doc for ``adaptive`` and ``by_position``)."""
    steps = request_steps(max_tokens)
    verify = len(steps)
    correct = sum(a for _, a in steps)
    proposed = verify * (NUM_DRAFT_TOKENS - 1)
    hist: list[int] = []
    for _, a in steps:  # Req.update_spec_correct_drafts_histogram: grown on demand
        hist.extend([0] * (a + 1 - len(hist)))
        hist[a] += 1
    extra: dict = {}
    if adaptive or by_position:
        drafts = [
            ADAPTIVE_PROPOSALS[i % len(ADAPTIVE_PROPOSALS)] for i in range(verify)
        ]
        assert all(a <= d for (_, a), d in zip(steps, drafts, strict=True))
    if by_position:
        proposed = sum(drafts)
        by_pos = [sum(d > j for d in drafts) for j in range(K)]
        right = [sum(a > j for _, a in steps) for j in range(K)]
        extra = {
            "spec_num_proposed_drafts_by_position": by_pos,
            "spec_num_correct_drafts_by_position": right,
            "spec_accept_rate_by_position": [
                r / p if p else None for r, p in zip(right, by_pos, strict=True)
            ],
            "spec_proposed_drafts_histogram": counts_by(drafts, K + 1),
            "spec_draft_occupancy_rate": proposed / (verify * K),
            "spec_proposed_draft_length": proposed / verify,
        }
    return extra | {
        "spec_accept_rate": correct / proposed if proposed else 0.0,
        "spec_accept_length": max_tokens / verify if verify else 0.0,
        "spec_cap_length": 0.0,
        "spec_block_accept_length": 0.0,
        "spec_num_correct_drafts": correct,
        "spec_num_proposed_drafts": proposed,
        "spec_verify_ct": verify,
        "spec_correct_drafts_histogram": hist,
        "spec_cap_lens_histogram": [],
    }


@dataclass
class SGLangStandIn:
    """What the stand-in exposes (``details``: an SGLang that answers
    ``return_spec_tokens_details``; ``model``: the one name ``/v1/models`` lists;
    ``version``, ``adaptive``, ``by_position``: the release played, module doc)."""

    details: bool = True
    model: str = "tiny"
    version: str = "0.5.23"
    adaptive: bool = False
    by_position: bool = False

    def server_info(self) -> dict:
        return {
            "model_path": self.model,
            "speculative_algorithm": "EAGLE",
            "speculative_num_steps": K,
            "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": NUM_DRAFT_TOKENS,
            "speculative_adaptive": self.adaptive,
            "decode_log_interval": 40,
            "internal_states": [
                {"avg_spec_accept_length": 2.4, "last_gen_throughput": 1.0}
            ],
            "version": self.version,
        }

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        max_tokens = int(body.get("max_tokens", 16))
        ids_asked = bool(body.get("return_token_ids"))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        token = 100

        async def send(data: dict) -> None:
            head = {"id": "cmpl-standin", "object": "text_completion", "created": 0}
            await resp.write(f"data: {json.dumps(head | data)}\n\n".encode())
            await asyncio.sleep(0.001)

        async def chunk(n: int, finish: str | None) -> None:
            nonlocal token
            choice: dict = {"index": 0, "text": "x" * n, "logprobs": None}
            choice["finish_reason"] = finish
            if ids_asked:
                choice["token_ids"] = list(range(token, token + n))
            token += n
            await send({"model": self.model, "choices": [choice], "usage": None})

        steps = request_steps(max_tokens)
        await chunk(1, None if steps else "length")
        for i, (tokens, _) in enumerate(steps):
            await chunk(tokens, "length" if i == len(steps) - 1 else None)
        if self.details and body.get("return_spec_tokens_details"):
            ext = {
                "spec_tokens_details": spec_tokens_details(
                    max_tokens, self.adaptive, self.by_position
                )
            }
            await send(
                {"model": self.model, "choices": [], "usage": None, "sglext": ext}
            )
        usage = {"prompt_tokens": 8, "completion_tokens": max_tokens}
        usage["total_tokens"] = 8 + max_tokens
        await send({"model": self.model, "choices": [], "usage": usage})
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def metrics(self, _: web.Request) -> web.Response:
        labels = (
            f'model_name="{self.model}",engine_type="unified",tp_rank="0",pp_rank="0"'
        )
        text = (
            "# HELP sglang:spec_accept_length The average acceptance length of "
            "speculative decoding.\n# TYPE sglang:spec_accept_length gauge\n"
            f"sglang:spec_accept_length{{{labels}}} 2.4\n"
            "# HELP sglang:spec_accept_rate The average acceptance rate of speculative "
            "decoding.\n# TYPE sglang:spec_accept_rate gauge\n"
            f"sglang:spec_accept_rate{{{labels}}} 0.47\n"
        )
        return web.Response(text=text, content_type="text/plain")


@contextlib.asynccontextmanager
async def sglang_standing_in(standin: SGLangStandIn) -> AsyncIterator[str]:
    """Serve ``standin`` on 127.0.0.1 (a free port); yields its ``/v1`` base URL."""
    app = web.Application()
    app.router.add_post("/v1/completions", standin.completions)
    app.router.add_get("/metrics", standin.metrics)

    async def server_info(_: web.Request) -> web.Response:
        return web.json_response(standin.server_info())

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="")

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": standin.model}]})

    app.router.add_get("/server_info", server_info)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    async with serving_app(app) as url:
        yield url


def sglang_standin_thread(
    standin: SGLangStandIn,
) -> contextlib.AbstractContextManager[str]:
    """:func:`sglang_standing_in` on its own event loop in a thread (for a CLI run, which has
    its own loop); yields the ``/v1`` base URL, stops the server on exit."""
    return serving_in_thread(lambda: sglang_standing_in(standin))
