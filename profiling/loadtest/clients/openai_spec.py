"""Per-request speculative counts an OpenAI-compatible server returns with a stream (pure).

vLLM (0.32, ``--per-request-spec-decode-metrics summary|detailed``) puts
``metrics.speculative_decoding`` on the final usage chunk of a stream
(``v1/metrics/stats.py`` ``RequestSpecDecodeMetrics.to_dict``): ``num_spec_steps`` (verify
steps that had drafts), ``num_draft_tokens`` (proposed), ``num_accepted_draft_tokens``,
``acceptance_histogram`` (steps by accepted draft count j = 0..K) and, with ``detailed``,
``per_step_drafted`` / ``per_step_accepted`` (one entry per verify step, in order).

How they reach the response records (:func:`attach_step_counts`):

* per step, when the stream lines up with the steps: vLLM sends one chunk per engine step,
  so the token-bearing chunks after the first (the prefill's token) are the verify steps,
  each with accepted + 1 tokens (the last may be cut by ``max_tokens``). Each such chunk gets
  its step's (drafted, accepted): ``spec_decode_counts_source`` = ``server_per_step``, as for
  Triton's per-response counts, so acceptance.csv gets its histogram and per-position rows;
* else (``summary`` only, a step without drafts, chunks merged by a stream interval, or a
  chunk whose token count contradicts its step): the request's totals on the final chunk,
  as running totals (``server_request_totals``: no per-position rates).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from trtbench.profiling.loadtest.clients.response_parse import ParsedResponse

Stamped = tuple[int, ParsedResponse]


def spec_stats_of(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """``metrics.speculative_decoding`` of one streamed chunk, or None (never raises)."""
    metrics = event.get("metrics")
    if not isinstance(metrics, Mapping):
        return None
    stats = metrics.get("speculative_decoding")
    return dict(stats) if isinstance(stats, Mapping) else None


def _tokens(p: ParsedResponse) -> int | None:
    """Tokens a chunk carries: its ids' count; None when only text is known."""
    return None if p.ids is None else len(p.ids)


def _has_tokens(p: ParsedResponse) -> bool:
    return (p.ids is not None and len(p.ids) > 0) or (p.ids is None and bool(p.text))


def step_pairs(stats: Mapping[str, Any]) -> list[tuple[int, int]] | None:
    """(drafted, accepted) per verify step from ``per_step_drafted`` / ``per_step_accepted``;
    None when absent, of unequal length or not non-negative integers with accepted ≤ drafted."""
    drafted, accepted = stats.get("per_step_drafted"), stats.get("per_step_accepted")
    if not isinstance(drafted, list) or not isinstance(accepted, list):
        return None
    if len(drafted) != len(accepted):
        return None
    pairs = list(zip(drafted, accepted, strict=True))
    for d, a in pairs:
        if not (isinstance(d, int) and isinstance(a, int) and 0 <= a <= d):
            return None
    return pairs


def attach_step_counts(
    stamped: Sequence[Stamped], stats: Mapping[str, Any] | None
) -> list[Stamped]:
    """The stream's responses with the server's per-request counts attached (see the module
    docstring for the rule); unchanged when ``stats`` is None or has no usable counts.

    Args:
        stamped: (receive ns, parsed chunk) in order; the last is the final one.
        stats: the stream's ``metrics.speculative_decoding`` (:func:`spec_stats_of`).

    Returns:
        A new list of the same length.
    """
    out = list(stamped)
    if not stats or not out:
        return out
    token_chunks = [i for i, (_, p) in enumerate(out) if _has_tokens(p)]
    pairs = step_pairs(stats)
    if pairs is not None and _lines_up(out, token_chunks, pairs):
        for i, (d, a) in zip(token_chunks[1:], pairs, strict=True):
            t, p = out[i]
            out[i] = (
                t,
                replace(
                    p, draft_tokens=d, accepted_draft_tokens=a, cumulative_counts=False
                ),
            )
        return out
    drafted = stats.get("num_draft_tokens")
    accepted = stats.get("num_accepted_draft_tokens")
    if (
        isinstance(drafted, int)
        and isinstance(accepted, int)
        and 0 <= accepted <= drafted
    ):
        t, p = out[-1]
        out[-1] = (
            t,
            replace(
                p,
                draft_tokens=drafted,
                accepted_draft_tokens=accepted,
                cumulative_counts=True,
            ),
        )
    return out


def _lines_up(
    out: Sequence[Stamped],
    token_chunks: Sequence[int],
    pairs: Sequence[tuple[int, int]],
) -> bool:
    """One token chunk per verify step after the prefill's, each with accepted + 1 tokens
    (the last at most that), every step with drafts."""
    if len(token_chunks) != len(pairs) + 1 or any(d == 0 for d, _ in pairs):
        return False
    steps = list(zip(token_chunks[1:], pairs, strict=True))
    for k, (i, (_, a)) in enumerate(steps):
        n = _tokens(out[i][1])
        if n is None:
            continue
        last = k == len(steps) - 1
        if n > a + 1 or (not last and n != a + 1):
            return False
    return True
