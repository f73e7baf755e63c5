"""Per-request speculative counts from an OpenAI stream (vLLM's ``metrics.speculative_decoding``):
hand-worked streams, each chunk's tokens and the counts the records must carry."""

from __future__ import annotations

import numpy as np

from trtbench.profiling.loadtest.clients.openai_spec import (
    attach_step_counts,
    spec_stats_of,
    step_pairs,
)
from trtbench.profiling.loadtest.clients.response_parse import ParsedResponse


def chunk(n_ids: int | None, text: str | None = "x") -> ParsedResponse:
    ids = None if n_ids is None else np.arange(n_ids, dtype=np.int64)
    return ParsedResponse(ids, text, False, None, None, False)


def stream(*sizes: int | None) -> list[tuple[int, ParsedResponse]]:
    """Token chunks of the given sizes, then the choice-less usage chunk (final)."""
    out = [(i, chunk(n)) for i, n in enumerate(sizes)]
    end = ParsedResponse(None, None, True, None, None, False, usage_tokens=0)
    return [*out, (len(sizes), end)]


# K = 4; a prefill token, then steps accepting 3, 0 and 4 drafts (4 + 1 + 5 tokens), and a
# last step cut by max_tokens: 2 drafts accepted, 3 tokens would come, max_tokens leaves 2.
DETAILED = {
    "num_spec_steps": 4,
    "num_draft_tokens": 16,
    "num_accepted_draft_tokens": 9,
    "acceptance_histogram": [1, 0, 1, 1, 1],
    "per_step_drafted": [4, 4, 4, 4],
    "per_step_accepted": [3, 0, 4, 2],
}


def counts(out):
    return [
        (p.draft_tokens, p.accepted_draft_tokens, p.cumulative_counts) for _, p in out
    ]


def test_steps_line_up_with_chunks_each_token_chunk_gets_its_step():
    out = attach_step_counts(stream(1, 4, 1, 5, 2), DETAILED)
    assert counts(out) == [
        (None, None, False),  # the prefill's token: no verify step
        (4, 3, False),
        (4, 0, False),
        (4, 4, False),
        (4, 2, False),  # cut by max_tokens: 2 of 3 tokens emitted, counts as vLLM's
        (None, None, False),  # the usage chunk
    ]


def test_text_only_chunks_line_up_by_count():
    out = attach_step_counts(stream(None, None, None, None, None), DETAILED)
    assert [c[:2] for c in counts(out)][1:5] == [(4, 3), (4, 0), (4, 4), (4, 2)]


def test_a_chunk_with_more_tokens_than_its_step_falls_back_to_totals():
    # two steps merged into one chunk (a stream interval > 1): 4 chunks for 4 steps
    out = attach_step_counts(stream(1, 5, 5, 2), DETAILED)
    assert counts(out)[:-1] == [(None, None, False)] * 4
    assert counts(out)[-1] == (16, 9, True)  # the request's totals, as running totals


def test_a_middle_chunk_short_of_its_step_falls_back_to_totals():
    out = attach_step_counts(stream(1, 3, 1, 5, 2), DETAILED)
    assert counts(out)[-1] == (16, 9, True)
    assert all(c[0] is None for c in counts(out)[:-1])


def test_summary_level_gives_totals_only():
    summary = {k: v for k, v in DETAILED.items() if not k.startswith("per_step")}
    out = attach_step_counts(stream(1, 4, 1, 5, 2), summary)
    assert counts(out)[-1] == (16, 9, True)


def test_no_stats_or_bad_stats_leave_the_stream_alone():
    s = stream(1, 4)
    assert counts(attach_step_counts(s, None)) == counts(s)
    bad = {"num_draft_tokens": 4, "num_accepted_draft_tokens": 5}  # accepted > drafted
    assert counts(attach_step_counts(s, bad)) == counts(s)


def test_a_step_without_drafts_does_not_line_up():
    stats = {
        **DETAILED,
        "per_step_drafted": [4, 0, 4, 4],
        "per_step_accepted": [3, 0, 4, 2],
    }
    assert counts(attach_step_counts(stream(1, 4, 1, 5, 2), stats))[-1] == (16, 9, True)


def test_step_pairs_and_stats_reader():
    assert step_pairs(DETAILED) == [(4, 3), (4, 0), (4, 4), (4, 2)]
    assert step_pairs({"per_step_drafted": [4], "per_step_accepted": [5]}) is None
    assert step_pairs({"per_step_drafted": [4, 4], "per_step_accepted": [1]}) is None
    assert spec_stats_of({"metrics": {"speculative_decoding": DETAILED}}) == DETAILED
    assert spec_stats_of({"metrics": None}) is None
    assert spec_stats_of({"choices": []}) is None
