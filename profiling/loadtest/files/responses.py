"""From one request's gRPC responses to its records: token counts, echo, speculative counts.

Tokens come from ``output_ids`` (or OpenAI ``token_ids``) when the server returns them (source
``output_ids``); otherwise the text of all responses is re-tokenized once with the model's
tokenizer and each token is attributed to the response that completes it (source
``retokenized``; where the server streams ``usage``, its total wins: :func:`fit_total`).
Responses come as Triton messages or already parsed (OpenAI SSE chunks, ``openai_client.py``). A
prompt echoed at the start of the output is removed and counted in ``echoed_tokens``.
Triton's llmapi model sends the text so far on every streamed response (``cumulative_text``):
it is turned into the new text of each response first (``llmapi_tensors.text_deltas``).
Speculative counts come per response or as running totals (turned into per-response deltas,
whether the totals come on every response or on the final one only); request totals a server
names (SGLang's, with its verify steps and histogram) also go to the request record. Server times
(``arrival_time_ns``, ``first_scheduled_time_ns``, ``first_token_time_ns``) are moved onto
the client's clock (``client_timing.server_ns_to_client``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trtbench.core.errors import LoadTestError
from trtbench.core.records import (
    TOKEN_SOURCE_IDS,
    TOKEN_SOURCE_RETOKENIZED,
    OutputRecord,
    RequestRecord,
    ResponseRecord,
)
from trtbench.profiling.loadtest.clients.grpc_client import Exchange
from trtbench.profiling.loadtest.clients.llmapi_tensors import text_deltas
from trtbench.profiling.loadtest.clients.response_columns import (
    SERVER_TIMES,
    ParsedColumns,
    parse_columns,
)
from trtbench.profiling.loadtest.files.outputs import output_record
from trtbench.profiling.loadtest.records.client_timing import server_ns_to_client
from trtbench.profiling.loadtest.records.response_rows import ResponseRows
from trtbench.profiling.loadtest.stats.metrics import remove_echo, strip_prompt_echo
from trtbench.profiling.loadtest.workload.prompts import Prompt, TextTokenizer
from trtbench.profiling.loadtest.workload.schedule import Tier


@dataclass(frozen=True)
class RequestSlot:
    """Identity of one request inside a tier pass (``repeat``: 0-based pass number;
    ``ready_ns``: when its ``max_concurrency`` slot let it go, None: at ``scheduled_ns``)."""

    variant: str
    tier: Tier
    index: int
    scheduled_ns: int
    repeat: int = 0
    ready_ns: int | None = None

    @property
    def request_id(self) -> str:
        """``<variant>-<tier>-<index>``; later passes ``<variant>-<tier>-r<repeat>-<index>``."""
        head = f"{self.variant}-{self.tier.label}"
        if self.repeat:
            head += f"-r{self.repeat}"
        return f"{head}-{self.index}"


def _token_counts(
    parsed: ParsedColumns,
    prompt: Prompt,
    tokenizer: TextTokenizer | None,
    echo: bool,
) -> tuple[list[int], int, str]:
    """Per-response output tokens, echoed prompt tokens and the count's source."""
    if parsed.ids is not None:
        counts = [0 if n is None else n for n in parsed.id_counts]
        echoed = 0
        if echo and prompt.input_ids:
            joined = parsed.ids.tolist()
            echoed = strip_prompt_echo(joined, list(prompt.input_ids))
        return remove_echo(counts, echoed), echoed, TOKEN_SOURCE_IDS
    if all(t is None for t in parsed.texts):
        return [0] * len(parsed), 0, ""
    if tokenizer is None:
        raise LoadTestError(
            "the model returns text_output without output_ids; pass --tokenizer DIR so "
            "the text can be re-tokenized"
        )
    chunks = [t or "" for t in parsed.texts]
    echo_chars = strip_prompt_echo("".join(chunks), prompt.text) if echo else 0
    chunks = _drop_prefix(chunks, echo_chars)
    echoed = prompt.input_tokens if echo_chars else 0
    counts = tokenizer.tokens_per_chunk(chunks)
    usage = [u for u in parsed.usage_tokens if u is not None]
    if usage:  # the server's total wins; re-tokenizing only splits it over the chunks
        counts = fit_total(counts, usage[-1])
    return counts, echoed, TOKEN_SOURCE_RETOKENIZED


def fit_total(counts: list[int], total: int) -> list[int]:
    """Per-chunk counts changed to sum to ``total`` (the server's ``usage``): the difference
    goes to the last chunk with tokens, a shortfall is taken from the last chunks first.
    Unchanged when no chunk has a token (no receive time to give them).

    Example: ``fit_total([0, 2, 1, 0], 5) == [0, 2, 3, 0]``;
    ``fit_total([0, 2, 1, 0], 2) == [0, 2, 0, 0]``.
    """
    out = list(counts)
    with_tokens = [i for i, n in enumerate(out) if n > 0]
    if not with_tokens:
        return out
    diff = total - sum(out)
    if diff >= 0:
        out[with_tokens[-1]] += diff
        return out
    for i in reversed(range(len(out))):
        take = min(out[i], -diff)
        out[i] -= take
        diff += take
    return out


def _drop_prefix(chunks: list[str], chars: int) -> list[str]:
    out = []
    for chunk in chunks:
        take = min(len(chunk), chars)
        chars -= take
        out.append(chunk[take:])
    return out


def _spec_counts(
    parsed: ParsedColumns,
) -> tuple[list[int | None], list[int | None]]:
    """Per-response draft and accepted counts (two columns); running totals turned into
    deltas.

    Where a stream carries per-response counts, running totals (also sent on a final
    response) are ignored so nothing is counted twice.
    """
    if not any(parsed.cumulative):  # per-response counts only: as they are
        return list(parsed.drafts), list(parsed.accepted)
    per_response = any(
        not total and draft is not None
        for draft, total in zip(parsed.drafts, parsed.cumulative, strict=True)
    )
    drafts: list[int | None] = []
    accepted: list[int | None] = []
    last = (0, 0)
    rows = zip(parsed.drafts, parsed.accepted, parsed.cumulative, strict=True)
    for draft, taken, total in rows:
        if total and per_response:
            draft = taken = None
        elif total and draft is not None and taken is not None:
            totals = (draft, taken)
            draft, taken = draft - last[0], taken - last[1]
            last = totals
        drafts.append(draft)
        accepted.append(taken)
    return drafts, accepted


def exchange_to_records(
    exchange: Exchange,
    prompt: Prompt,
    slot: RequestSlot,
    tokenizer: TextTokenizer | None = None,
    echo_possible: bool = False,
    clock_offset_ns: int | None = None,
    cumulative_text: bool = False,
) -> tuple[RequestRecord, Sequence[ResponseRecord]]:
    """:func:`exchange_to_all_records` without the output record."""
    record, responses, _ = exchange_to_all_records(
        exchange,
        prompt,
        slot,
        tokenizer,
        echo_possible,
        clock_offset_ns,
        cumulative_text,
    )
    return record, responses


def exchange_to_all_records(
    exchange: Exchange,
    prompt: Prompt,
    slot: RequestSlot,
    tokenizer: TextTokenizer | None = None,
    echo_possible: bool = False,
    clock_offset_ns: int | None = None,
    cumulative_text: bool = False,
) -> tuple[RequestRecord, ResponseRows, OutputRecord | None]:
    """Turn one request's responses into records (pure apart from re-tokenizing).

    The third item is what the request generated, for the lossless gate
    (:func:`~trtbench.profiling.loadtest.files.outputs.output_record`; None when it failed).

    ``echo_possible``: the model could not be asked to exclude the prompt (it has no
    ``exclude_input_in_output`` input), so an output that starts with the whole prompt
    has it removed. Only responses that carry tokens set first/last-token times, so an
    empty response (mid-stream or the empty final one) never extends E2E. A request
    without tokens and without an error gets the error ``no output tokens``.

    ``clock_offset_ns`` (epoch − ``perf_counter_ns``,
    :func:`~trtbench.profiling.loadtest.records.client_timing.wall_minus_perf_ns`) moves a
    server-reported ``arrival_time_ns``, ``first_scheduled_time_ns`` and
    ``first_token_time_ns`` (the first response that has each) onto the client's clock
    (:func:`~trtbench.profiling.loadtest.records.client_timing.server_ns_to_client`; None: not
    recorded).

    ``cumulative_text``: each response's ``text_output`` is all the text so far (Triton's
    llmapi model); only its new part counts for that response.
    """
    parsed = parse_columns([r for _, r in exchange.responses], text_with_ids=False)
    if cumulative_text:
        parsed.texts = text_deltas(parsed.texts)
    arrival, scheduled, first = (
        server_ns_to_client(getattr(parsed, name), clock_offset_ns, exchange.sent_ns)
        for name in SERVER_TIMES
    )
    counts, echoed, source = (
        _token_counts(parsed, prompt, tokenizer, echo_possible)
        if len(parsed)
        else ([], 0, "")
    )
    times = [t for t, _ in exchange.responses]
    drafts_each, accepted_each = _spec_counts(parsed)
    v, tier, rid = slot.variant, slot.tier, slot.request_id
    label = tier.label  # a property: once, not per response
    responses = ResponseRows(
        v, label, rid, times, counts, parsed.finals, drafts_each, accepted_each
    )
    with_tokens = [i for i, n in enumerate(counts) if n > 0]
    error = exchange.error
    if error is None and not with_tokens:
        error = f"no output tokens in {len(parsed)} responses"
    drafts = [d for d in drafts_each if d is not None]
    accepted = [a for a in accepted_each if a is not None]
    named = parsed.named
    record = RequestRecord(
        variant=v,
        tier=label,
        concurrency=tier.concurrency,
        request_rate_per_s=tier.request_rate_per_s,
        request_id=rid,
        task_id=prompt.task_id,
        scheduled_ns=slot.scheduled_ns,
        sent_ns=exchange.sent_ns,
        first_token_ns=times[with_tokens[0]] if with_tokens else None,
        last_token_ns=times[with_tokens[-1]] if with_tokens else None,
        end_ns=exchange.end_ns,
        input_tokens=prompt.input_tokens,
        requested_output_tokens=prompt.output_tokens,
        output_tokens=sum(counts),
        token_responses=len(with_tokens),
        empty_responses=len(counts) - len(with_tokens),
        echoed_tokens=echoed,
        first_response_tokens=counts[with_tokens[0]] if with_tokens else 0,
        draft_tokens=sum(drafts) if drafts else None,
        accepted_draft_tokens=sum(accepted) if accepted else None,
        input_token_source=prompt.input_token_source,
        output_token_source=source,
        error=error,
        repeat=slot.repeat,
        request_index=slot.index,
        ready_ns=slot.scheduled_ns if slot.ready_ns is None else slot.ready_ns,
        server_arrival_ns=arrival,
        max_concurrency=tier.max_concurrency,
        server_scheduled_ns=scheduled,
        server_first_token_ns=first,
        category=prompt.category,
        verify_steps=None if named is None else named.verify_steps,
        accepted_drafts_histogram=" ".join(
            map(str, (named and named.accepted_histogram) or ())
        ),
        spec_counts_source="" if named is None else named.counts_source or "",
        proposed_drafts_histogram=" ".join(
            map(str, (named and named.proposed_histogram) or ())
        ),
    )
    return record, responses, output_record(parsed, prompt, record, echo_possible)
