"""Helpers of the cross-implementation checks (``tests/integration/test_vllm_crosscheck.py``):
prompts, vLLM completions by token ids, vLLM's Prometheus counters, the reference engine's
steps as trtbench records, and the top-2 margins that tell a float tie from a disagreement.

Margins: at an output position the target's (or draft's, or a Medusa head's) greedy choice is
"clear" when its top-1 logit exceeds its top-2 logit by at least :data:`CLEAR_MARGIN`. Two
float32 implementations of the same model differ in their logits by rounding only (other
kernels, other summation orders: float32's relative epsilon is 1.2e-7 and the logits here are
of order 10), so they may pick different tokens only where the margin is about that small.
"""

from __future__ import annotations

import sysconfig
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pandas as pd
import torch

from trtbench.profiling.loadtest.records.spec_counters import (
    SpecCounters,
    parse_spec_counters,
)

CLEAR_MARGIN = 1e-3
"""Top-1 − top-2 logit below which a greedy pick counts as a float tie."""


def stdlib_prompts(tokenizer, n: int, length: int) -> list[list[int]]:
    """``n`` prompts of ``length`` token ids: the first ``length`` tokens after the 200th
    character of the first ``n`` standard-library ``*.py`` files (name order) that have that
    many. Deterministic for one Python version; the tiny models were trained on such text."""
    out: list[list[int]] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        ids = tokenizer(path.read_text(errors="replace")[200:6000])["input_ids"]
        if len(ids) >= length:
            out.append(ids[:length])
        if len(out) == n:
            return out
    raise AssertionError(f"fewer than {n} stdlib files of {length} tokens")


@dataclass(frozen=True)
class Completion:
    """One vLLM completion: generated token ids and, when the server was started with
    ``--per-request-spec-decode-metrics detailed``, its per-step accepted / drafted counts."""

    token_ids: list[int]
    per_step_accepted: list[int] | None
    per_step_drafted: list[int] | None


def complete(
    url: str, model: str, prompt: Sequence[int], max_tokens: int
) -> Completion:
    """POST ``url/completions`` with ``prompt`` as token ids, greedy (temperature 0),
    ``ignore_eos``, ``return_token_ids`` (vLLM 0.32 ``CompletionRequest``), not streamed."""
    body = {
        "model": model,
        "prompt": list(prompt),
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "return_token_ids": True,
    }
    reply = httpx.post(f"{url}/completions", json=body, timeout=300)
    reply.raise_for_status()
    data = reply.json()
    [choice] = data["choices"]
    spec = ((data.get("metrics") or {}).get("speculative_decoding")) or {}
    return Completion(
        list(choice["token_ids"]),
        spec.get("per_step_accepted"),
        spec.get("per_step_drafted"),
    )


def complete_all(
    url: str,
    model: str,
    prompts: Sequence[Sequence[int]],
    max_tokens: int | Sequence[int],
    concurrency: int = 8,
) -> list[Completion]:
    """:func:`complete` for every prompt, ``concurrency`` in flight (vLLM batches them)."""
    lengths = [max_tokens] * len(prompts) if isinstance(max_tokens, int) else max_tokens
    with ThreadPoolExecutor(concurrency) as pool:
        return list(
            pool.map(
                lambda a: complete(url, model, *a), zip(prompts, lengths, strict=True)
            )
        )


def spec_counters(url: str) -> SpecCounters:
    """vLLM's speculative counters now (``GET /metrics`` at the root of ``url``), read with
    trtbench's parser."""
    text = httpx.get(url.removesuffix("/v1") + "/metrics", timeout=30).text
    counters = parse_spec_counters(text)
    assert counters is not None, "the server exports no vllm:spec_decode_* counters"
    return counters


def margins(logits: torch.Tensor) -> torch.Tensor:
    """Top-1 − top-2 of ``logits [..., vocab]`` → ``[...]``."""
    top = logits.float().topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


@torch.inference_mode()
def target_margins(model, prompt: Sequence[int], output: Sequence[int]) -> list[float]:
    """The margin of the target's pick at each output index: one forward of prompt + output
    (no cache, transformers' own causal mask); index i is the prediction of ``output[i]``."""
    ids = torch.tensor([[*prompt, *output]])
    logits = model(ids).logits[0, len(prompt) - 1 : len(prompt) + len(output) - 1]
    return margins(logits).tolist()


@torch.inference_mode()
def draft_margins(draft, context: Sequence[int], k: int) -> float:
    """The smallest margin of the draft's K greedy proposals after ``context`` (K full
    forwards, no cache)."""
    seq, least = list(context), float("inf")
    for _ in range(k):
        logits = draft(torch.tensor([seq])).logits[0, -1]
        least = min(least, float(margins(logits)))
        seq.append(int(logits.argmax()))
    return least


@torch.inference_mode()
def medusa_margins(target, heads, sequence: Sequence[int], at: Sequence[int]) -> float:
    """The smallest margin of every Medusa head's top-1 at the target's last hidden states
    of ``sequence`` positions ``at`` (where the engine drafted from)."""
    out = target(torch.tensor([list(sequence)]), output_hidden_states=True)
    hidden = out.hidden_states[-1][0, list(at)]
    return float(margins(heads(hidden)).min())


def step_frames(
    variant: str, requests: Sequence[Sequence[object]]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """trtbench's request and response records of streamed requests whose responses are the
    reference engine's steps, one response per :class:`~trtbench.builders.reference.engine.Step`
    (what a Triton stream of the reference engine carries), for
    :func:`~trtbench.profiling.loadtest.stats.acceptance.acceptance_table`.

    Args:
        variant: the variant name written in every row (tier ``c1``).
        requests: per request, its steps.
    """
    req_rows, resp_rows = [], []
    for i, steps in enumerate(requests):
        rid = f"r{i}"
        for s in steps:
            resp_rows.append(
                {
                    "variant": variant,
                    "tier": "c1",
                    "request_id": rid,
                    "tokens": len(s.token_ids),
                    "draft_tokens": s.draft_proposed,
                    "accepted_draft_tokens": s.draft_accepted,
                }
            )
        totals = {
            "output_tokens": sum(len(s.token_ids) for s in steps),
            "draft_tokens": sum(s.draft_proposed for s in steps),
            "accepted_draft_tokens": sum(s.draft_accepted for s in steps),
        }
        req_rows.append(
            {
                "variant": variant,
                "tier": "c1",
                "request_id": rid,
                "error": None,
                "first_token_ns": 1,
                "token_responses": len(steps),
                **totals,
            }
        )
    return pd.DataFrame(req_rows), pd.DataFrame(resp_rows)
