"""One Triton response → the parts the load-test metrics need (pure, on the hot path).

The output names trtbench reads (TensorRT-LLM's names where they exist), the datatypes it
decodes, :func:`parse_response` (one response; a request's at once:
``response_columns.py``), and :class:`Exchange`, one request's responses (Triton's or
OpenAI's, already parsed). The request side is ``grpc_client.py`` / ``openai_client.py``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from tritonclient.grpc import service_pb2

from trtbench.profiling.loadtest.clients.lean_stream import (
    LeanInferResponse,
    output_description,
)

TEXT_OUTPUT = "text_output"
IDS_OUTPUT = "output_ids"
# Speculative-decoding counts a server may return. ``draft_tokens_proposed`` /
# ``draft_tokens_accepted`` count the steps behind one response (trtbench's reference and
# BLS models, triton_repo/interface.py); ``total_*`` are running totals per request
# (TRT-LLM perf metrics, with ``return_perf_metrics=true``).
DRAFT_OUTPUTS = ("draft_tokens_proposed", "total_draft_tokens")
ACCEPTED_OUTPUTS = ("draft_tokens_accepted", "total_accepted_draft_tokens")
# When the request reached the model: the reference model sends it on the first response
# (epoch ns), TRT-LLM's perf metrics on the final one or on every one (steady clock ns).
ARRIVAL_OUTPUT = "arrival_time_ns"
# TRT-LLM's perf metrics: first scheduled (prefill starts), first token generated.
SCHEDULED_OUTPUT = "first_scheduled_time_ns"
FIRST_TOKEN_OUTPUT = "first_token_time_ns"
FINAL_PARAM = "triton_final_response"
UNAVAILABLE = "UNAVAILABLE"
"""Prefix of a request error meaning the server went away (gRPC's status name; the OpenAI
client uses it for a refused or dropped connection): the runner checks the server before
it sends again."""
DTYPES = {
    "BYTES": None,
    "INT32": "<i4",
    "INT64": "<i8",
    "BOOL": "?",
    "FP32": "<f4",
    "UINT64": "<u8",
}


@dataclass(frozen=True)
class ParsedResponse:
    """The parts of one response the metrics need."""

    ids: np.ndarray | None
    text: str | None
    final: bool
    draft_tokens: int | None
    accepted_draft_tokens: int | None
    cumulative_counts: bool
    # the server's arrival_time_ns, first_scheduled_time_ns, first_token_time_ns (its clock)
    server_arrival_ns: int | None = None
    server_scheduled_ns: int | None = None
    server_first_token_ns: int | None = None
    # the whole request's output tokens as the server counts them (OpenAI ``usage``)
    usage_tokens: int | None = None
    # request totals a server reports with their own name (SGLang's spec_tokens_details,
    # clients/sglang_spec.py), on the final response: its verify steps, the steps by
    # accepted drafts (index j = steps that accepted j), the steps by proposed drafts where
    # the server counts the proposals (index j = steps that proposed j), the source's name
    verify_steps: int | None = None
    accepted_histogram: tuple[int, ...] | None = None
    counts_source: str | None = None
    proposed_histogram: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Exchange:
    """What came back for one request: (receive ns, response) pairs, in order.

    A response is a Triton ``ModelInferResponse`` (parsed later, off the receive path; the
    streamed ones in their lean form, ``lean_stream.py``) or an already parsed
    :class:`ParsedResponse` (OpenAI SSE chunks, ``openai_client.py``).
    """

    sent_ns: int
    end_ns: int
    responses: list[tuple[int, service_pb2.ModelInferResponse | ParsedResponse]]
    error: str | None = None


def _deserialize_bytes(raw: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 4 <= len(raw):
        (size,) = struct.unpack_from("<I", raw, pos)
        out.append(raw[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return out


def tensor_text(raw: bytes) -> str:
    """A BYTES tensor's elements joined and decoded (UTF-8, bad bytes replaced)."""
    if len(raw) >= 4 and int.from_bytes(raw[:4], "little") == len(raw) - 4:
        return raw[4:].decode(errors="replace")  # one element: no loop
    return b"".join(_deserialize_bytes(raw)).decode(errors="replace")


_SCALAR = {"INT32": "<i", "INT64": "<q", "UINT64": "<Q"}
_COUNT_NAMES = frozenset(DRAFT_OUTPUTS + ACCEPTED_OUTPUTS)
_TIME_NAMES = (ARRIVAL_OUTPUT, SCHEDULED_OUTPUT, FIRST_TOKEN_OUTPUT)


def tensor_count(raw: bytes, dtype: str) -> int | None:
    """The sum of an integer count tensor (one element in practice: no numpy for that).

    A BYTES tensor of decimal strings counts too: TensorRT-LLM's llmapi ``model.py``
    builds its perf-metric outputs with the ``text_output`` dtype (llmapi_tensors.py).
    None for anything unreadable.
    """
    fmt = _SCALAR.get(dtype)
    if fmt is not None and len(raw) == struct.calcsize(fmt):
        return int(struct.unpack(fmt, raw)[0])
    if dtype == "BYTES":
        try:
            values = [int(b) for b in _deserialize_bytes(raw)]
        except ValueError:  # not a decimal integer
            return None
        return sum(values) if values else None
    if dtype not in DTYPES:
        return None
    values = np.frombuffer(raw, dtype=DTYPES[dtype])
    return int(values.sum()) if values.size else None


def parse_response(
    response: service_pb2.ModelInferResponse | ParsedResponse,
) -> ParsedResponse:
    """Token ids, text, final flag and speculative counts of one response (pure).

    An empty final response has no outputs: ids and text are None. An already parsed
    response (OpenAI) comes back as it is. The load generator parses a whole request's
    responses at once, into columns (:func:`~trtbench.profiling.loadtest.clients.
    response_columns.parse_columns`, the same values, several times faster); this is the
    definition it is tested against.
    """
    if isinstance(response, ParsedResponse):
        return response
    ids = text = None
    counts: dict[str, int | None] = {}
    times: dict[str, int | None] = {}
    outputs = response.outputs
    if type(response) is LeanInferResponse:  # outputs: serialized descriptions
        outputs = [output_description(o) for o in outputs]
    for output, raw in zip(outputs, response.raw_output_contents, strict=False):
        name = output.name
        if name == IDS_OUTPUT:
            ids = np.frombuffer(raw, dtype=DTYPES[output.datatype])
        elif name == TEXT_OUTPUT:
            text = tensor_text(raw)
        elif name in _COUNT_NAMES:
            counts[name] = tensor_count(raw, output.datatype)
        elif name in _TIME_NAMES:
            times[name] = tensor_count(raw, output.datatype)
    draft = accepted = None
    cumulative = False
    for name in DRAFT_OUTPUTS:
        if name in counts:
            draft, cumulative = counts[name], name.startswith("total_")
            break
    for name in ACCEPTED_OUTPUTS:
        if name in counts:
            accepted = counts[name]
            break
    final_param = response.parameters.get(FINAL_PARAM)
    final = bool(final_param is not None and final_param.bool_param)
    arrival, scheduled, first = (
        t if t and t > 0 else None for t in map(times.get, _TIME_NAMES)
    )
    return ParsedResponse(
        ids, text, final, draft, accepted, cumulative, arrival, scheduled, first
    )
