"""Load-test records: one per request and one per streamed response (raw units, ns).

Times are ``time.perf_counter_ns()`` readings of the client process (CLOCK_MONOTONIC on
Linux): comparable within one run, meaningless across machines. A failed request is a row
with ``error`` set, never an exception. The CSV layouts built from these records are in
``trtbench.profiling.loadtest.files.schemas``.
"""

from __future__ import annotations

from dataclasses import dataclass

TOKEN_SOURCE_IDS = "output_ids"
TOKEN_SOURCE_RETOKENIZED = "retokenized"
TOKEN_SOURCE_TOKENIZER = "tokenizer"
TOKEN_SOURCE_WORDS = "words"
TOKEN_SOURCE_DATASET = "dataset"


@dataclass(frozen=True)
class RequestRecord:
    """One request of one tier.

    Attributes:
        variant: the served variant (or the ``--variant`` label of ``trtbench loadtest``).
        tier: tier label, e.g. ``c4`` (concurrency 4) or ``r2.5`` (2.5 requests/s).
        concurrency: closed-loop concurrency of the tier (None in request-rate mode).
        request_rate_per_s: open-loop target rate of the tier (None in concurrency mode).
        request_id: unique within the run (``<variant>-<tier>-<index>``).
        task_id: the prompt's id (dataset ``task_id`` or ``synthetic-<i>``).
        scheduled_ns: intended send time (rate mode: from the arrival schedule; closed
            loop: when a concurrency slot became free).
        sent_ns: when the request was handed to gRPC (stamped right before the call).
        first_token_ns: arrival of the first response that carried a token (None: none).
        last_token_ns: arrival of the last response that carried a token (None: none).
        end_ns: when the request ended (final response, error or timeout).
        input_tokens: prompt length in tokens (see ``input_token_source``).
        requested_output_tokens: ``max_tokens`` sent.
        output_tokens: generated tokens, prompt echo excluded.
        token_responses: responses that carried at least one token.
        empty_responses: responses with no token (e.g. the empty final response).
        echoed_tokens: prompt tokens the server echoed back (removed from the output).
        first_response_tokens: tokens in the first token-carrying response.
        draft_tokens: draft tokens proposed for this request, when the server reports it.
        accepted_draft_tokens: draft tokens accepted, when the server reports it.
        input_token_source: ``tokenizer`` | ``dataset`` | ``words`` (approximate).
        output_token_source: ``output_ids`` (exact) | ``retokenized`` (text re-encoded).
        error: None on success, else a one-line reason.
        repeat: 0-based pass over the tier (``loadtest.repeats``); 0 with one pass.
        request_index: 0-based index of the request in its tier pass; the prompt is
            ``prompts[request_index % len(prompts)]``, the same for every variant and
            repeat (what the lossless gate matches on).
        ready_ns: when the request could go: ``max(scheduled_ns, when its
            ``max_concurrency`` slot became free)``; = ``scheduled_ns`` without a cap and
            in a closed loop (None in files from before the column: read as scheduled).
        server_arrival_ns: when the server says the request arrived (its
            ``arrival_time_ns``), on this clock (see
            ``trtbench.profiling.loadtest.records.client_timing``); None when not reported.
        max_concurrency: the open loop's cap on requests in flight (None: no cap).
        server_scheduled_ns: when the server first scheduled the request (TensorRT-LLM's
            ``first_scheduled_time_ns``), on this clock like ``server_arrival_ns``; None
            when not reported.
        server_first_token_ns: when the server generated the first token (its
            ``first_token_time_ns``), on this clock; None when not reported.
        category: the prompt's category (its dataset's own, or the source's name; empty
            for synthetic prompts and a single trtllm-bench file).
        verify_steps: verify steps the server counted for this request (SGLang's
            ``spec_verify_ct``); None when it reports none.
        accepted_drafts_histogram: the request's verify steps by accepted drafts, space
            separated, index j = steps that accepted exactly j drafts (SGLang's
            ``spec_correct_drafts_histogram``); empty when not reported.
        spec_counts_source: the name of the server's own per-request counts
            (``sglang_spec_tokens_details``, or ``sglang_spec_tokens_details_nominal`` where
            its proposals are nominal); empty where the source is inferred from the
            responses (``server_per_step`` / ``server_request_totals``).
        proposed_drafts_histogram: the request's verify steps by proposed drafts, space
            separated, index j = steps that proposed exactly j drafts, where the server
            counts the proposals themselves (SGLang's ``spec_proposed_drafts_histogram`` /
            ``spec_num_proposed_drafts_by_position``); empty otherwise.
    """

    variant: str
    tier: str
    concurrency: int | None
    request_rate_per_s: float | None
    request_id: str
    task_id: str
    scheduled_ns: int
    sent_ns: int
    first_token_ns: int | None
    last_token_ns: int | None
    end_ns: int
    input_tokens: int
    requested_output_tokens: int
    output_tokens: int
    token_responses: int
    empty_responses: int
    echoed_tokens: int
    first_response_tokens: int
    draft_tokens: int | None
    accepted_draft_tokens: int | None
    input_token_source: str
    output_token_source: str
    error: str | None = None
    repeat: int = 0
    request_index: int | None = None
    ready_ns: int | None = None
    server_arrival_ns: int | None = None
    max_concurrency: int | None = None
    server_scheduled_ns: int | None = None
    server_first_token_ns: int | None = None
    category: str = ""
    verify_steps: int | None = None
    accepted_drafts_histogram: str = ""
    spec_counts_source: str = ""
    proposed_drafts_histogram: str = ""


@dataclass(frozen=True)
class ResponseRecord:
    """One streamed response of one request.

    Attributes:
        variant, tier, request_id: as in :class:`RequestRecord`.
        index: 0-based position of the response in its request's stream.
        received_ns: ``perf_counter_ns()`` when the client got it.
        tokens: output tokens it carried (0 for an empty response).
        final: the server flagged it ``triton_final_response``.
        draft_tokens: draft tokens proposed in the steps this response covers (None: not
            reported).
        accepted_draft_tokens: of those, accepted (None: not reported).
    """

    variant: str
    tier: str
    request_id: str
    index: int
    received_ns: int
    tokens: int
    final: bool
    draft_tokens: int | None = None
    accepted_draft_tokens: int | None = None


OUTPUT_KIND_IDS = "ids"
OUTPUT_KIND_TEXT = "text"


@dataclass(frozen=True)
class OutputRecord:
    """What one successful request generated, for the lossless gate (``loadtest/outputs.csv``).

    Attributes:
        variant, tier, repeat, request_index, request_id: as in :class:`RequestRecord`.
        output_tokens: generated tokens (prompt echo excluded): ids counted, or the
            re-tokenized count for text.
        output_kind: ``ids`` (the server returned ``output_ids``) | ``text`` (text only).
        output_digest: 16 hex digits, BLAKE2b with an 8-byte digest of the ids as
            little-endian int32 (``ids``) or of the UTF-8 text (``text``).
        output_token_ids: the ids, space separated (empty for ``text``).
        output_chars: length of the text in characters (``text``; None for ``ids``).
    """

    variant: str
    tier: str
    repeat: int
    request_index: int | None
    request_id: str
    output_tokens: int
    output_kind: str
    output_digest: str
    output_token_ids: str
    output_chars: int | None = None
