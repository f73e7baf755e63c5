"""Records of hand-worked streamed requests: one request and its responses from a list of
engine steps, as the load generator writes them for a Triton stream (one response per step)."""

from __future__ import annotations

from collections.abc import Sequence

from trtbench.core.records import RequestRecord, ResponseRecord

Step = tuple[int, int | None, int | None]
"""(tokens, drafts proposed, drafts accepted) of one step; None counts: not reported."""


def stream(
    variant: str,
    rid: str,
    steps: Sequence[Step],
    *,
    tier: str = "c1",
    totals: tuple[int | None, int | None] | None = None,
    error: str | None = None,
    gap_ns: int = 10,
    **fields: object,
) -> tuple[RequestRecord, list[ResponseRecord]]:
    """One request of ``steps``: sent at 100 ns, its responses ``gap_ns`` apart from 1000 ns.

    Args:
        totals: (proposed, accepted) carried by the final response only, the others carrying
            no counts (TensorRT-LLM's perf metrics: request totals); None: each step's own.
        error: the request's error (its records are kept, as the load generator does).
        fields: other :class:`RequestRecord` fields (``category``, ``repeat`` …).

    The request's ``draft_tokens`` / ``accepted_draft_tokens`` are the sums of the counts
    its responses carry (None when none carries any).
    """
    responses = []
    for i, (n, proposed, accepted) in enumerate(steps):
        final = i == len(steps) - 1
        counts = (proposed, accepted) if totals is None else (None, None)
        if totals is not None and final:
            counts = totals
        responses.append(
            ResponseRecord(variant, tier, rid, i, 1000 + gap_ns * i, n, final, *counts)
        )
    counted = [r for r in responses if r.draft_tokens is not None]
    osl = sum(n for n, _, _ in steps)
    request = RequestRecord(
        variant=variant,
        tier=tier,
        concurrency=1,
        request_rate_per_s=None,
        request_id=rid,
        task_id=rid,
        scheduled_ns=0,
        sent_ns=100,
        first_token_ns=1000,
        last_token_ns=1000 + gap_ns * (len(steps) - 1),
        end_ns=max(2000, 1000 + gap_ns * len(steps)),
        input_tokens=8,
        requested_output_tokens=osl,
        output_tokens=osl,
        token_responses=len(steps),
        empty_responses=0,
        echoed_tokens=0,
        first_response_tokens=steps[0][0],
        draft_tokens=sum(r.draft_tokens for r in counted) if counted else None,
        accepted_draft_tokens=(
            sum(r.accepted_draft_tokens or 0 for r in counted) if counted else None
        ),
        input_token_source="tokenizer",
        output_token_source="output_ids",
        error=error,
        **fields,
    )
    return request, responses
