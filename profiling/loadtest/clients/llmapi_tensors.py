"""The request tensors of Triton's ``llmapi`` model (TensorRT-LLM's LLM API behind Triton).

TensorRT-LLM's ``triton_backend/all_models/llmapi/tensorrt_llm`` model (a Python-backend
model named ``tensorrt_llm``; its ``config.pbtxt`` read at NVIDIA/TensorRT-LLM commits
0a71057313ec0626527e164a8fc0205c5822e2f5 and c8c6df08bd0ead54cd47f7973e1e425c28a174cd,
identical in these tensors) takes ``text_input`` (TYPE_STRING, dims [-1]),
``streaming`` (TYPE_BOOL [1], optional) and sampling parameters named
``sampling_param_<SamplingParams field>``: ``sampling_param_max_tokens`` (TYPE_INT32 [1]),
``sampling_param_exclude_input_from_output`` and ``sampling_param_return_perf_metrics``
(TYPE_BOOL [1]). Its outputs: ``text_output`` (text only, no token ids), the timing perf
metrics ``arrival_time_ns`` / ``first_scheduled_time_ns`` / ``first_token_time_ns`` /
``last_token_time_ns`` and ``acceptance_rate`` / ``total_accepted_draft_tokens`` /
``total_draft_tokens``, filled when ``sampling_param_return_perf_metrics`` is true.

Facts of its ``1/model.py`` (same repository, commits 044a90d2 and b35ac1b6) that the client
follows: each streamed response carries ``output.text`` of the LLM API's ``CompletionOutput``
— the whole text generated so far, not the new part (:func:`text_deltas`); the perf-metric
outputs are built with the ``text_output`` numpy dtype (object), so they arrive as BYTES
tensors holding decimal strings (``grpc_client._count`` reads both); and the times are
``std::chrono::steady_clock`` readings (``RequestPerfMetrics::TimePoint`` in
``cpp/include/tensorrt_llm/executor/types.h``), i.e. CLOCK_MONOTONIC ns on Linux
(``client_timing.server_ns_to_client``).

There is no ``min_tokens`` and no ``end_id`` input: ``fixed_output_len`` cannot be forced
on this interface, so the output length is whatever the model generates up to
``max_tokens`` — measured, never assumed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

MAX_TOKENS_INPUT = "sampling_param_max_tokens"
STREAMING_INPUT = "streaming"
EXCLUDE_INPUT = "sampling_param_exclude_input_from_output"
PERF_METRICS_INPUT = "sampling_param_return_perf_metrics"


def is_llmapi(inputs: Mapping[str, object]) -> bool:
    """True when a model's inputs (name → anything) are the llmapi interface: it has
    ``sampling_param_max_tokens``."""
    return MAX_TOKENS_INPUT in inputs


def llmapi_values(text: str, max_tokens: int, stream: bool) -> dict[str, object]:
    """Input name → value of one llmapi request.

    Args:
        text: the prompt (sent as ``text_input``).
        max_tokens: the most tokens to generate (``sampling_param_max_tokens``).
        stream: ask for one response per step (``streaming``; needs a decoupled model).

    Returns:
        ``text_input``, ``streaming``, ``sampling_param_max_tokens``, and
        ``sampling_param_exclude_input_from_output`` / ``sampling_param_return_perf_metrics``
        set to true (the prompt stays out of ``text_output``; the server times and draft
        totals come back). Nothing forces the output length (no ``min_tokens`` input).
    """
    return {
        "text_input": text,
        STREAMING_INPUT: stream,
        MAX_TOKENS_INPUT: max_tokens,
        EXCLUDE_INPUT: True,
        PERF_METRICS_INPUT: True,
    }


def text_deltas(texts: Sequence[str | None]) -> list[str | None]:
    """The new text of each response of a stream whose responses carry the text so far.

    Where a response's text starts with all the text before it, only the rest is new;
    otherwise (a server that sends only the new text) the whole text is new. ``None``
    (a response without ``text_output``) stays ``None``.

    Example: ``["He", "Hello", "Hello!"]`` → ``["He", "llo", "!"]``.
    """
    out: list[str | None] = []
    seen = ""
    for text in texts:
        if text is None:
            out.append(None)
            continue
        new = text[len(seen) :] if text.startswith(seen) else text
        seen = text if text.startswith(seen) else seen + text
        out.append(new)
    return out
