"""One request's responses parsed at once, into columns (the load generator's hot path).

:func:`parse_columns` gives, for a request's Triton responses, what
:func:`~trtbench.profiling.loadtest.clients.response_parse.parse_response` gives for each (the
tests hold the two equal), as one :class:`ParsedColumns`: a list per figure, one entry per
response, and every response's ``output_ids`` in one array. It runs on the event loop when a
request ends, where its time delays the receive stamps of the requests still in flight, so it
makes no object per response: each response's outputs are located once per layout (a
:data:`~trtbench.profiling.loadtest.clients.lean_stream.LeanInferResponse` brings them as
serialized descriptions, compared as bytes with the previous response's), their contents
collected, and the ids and INT32 scalar counts of all responses read with one numpy call
each. Already parsed responses (OpenAI) become columns through :func:`columns_of`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from tritonclient.grpc import service_pb2

from trtbench.profiling.loadtest.clients.lean_stream import (
    LeanInferResponse,
    output_description,
)
from trtbench.profiling.loadtest.clients.response_parse import (
    ACCEPTED_OUTPUTS,
    ARRIVAL_OUTPUT,
    DRAFT_OUTPUTS,
    DTYPES,
    FINAL_PARAM,
    FIRST_TOKEN_OUTPUT,
    IDS_OUTPUT,
    SCHEDULED_OUTPUT,
    TEXT_OUTPUT,
    ParsedResponse,
    parse_response,
    tensor_count,
    tensor_text,
)

_IDS, _TEXT, _COUNTS, _TIMES = range(4)
_KIND = {IDS_OUTPUT: _IDS, TEXT_OUTPUT: _TEXT}
_KIND |= {n: _COUNTS for n in DRAFT_OUTPUTS + ACCEPTED_OUTPUTS}
_KIND |= {n: _TIMES for n in (ARRIVAL_OUTPUT, SCHEDULED_OUTPUT, FIRST_TOKEN_OUTPUT)}
SERVER_TIMES = ("server_arrival_ns", "server_scheduled_ns", "server_first_token_ns")
_TIME_OF = dict(
    zip(
        (ARRIVAL_OUTPUT, SCHEDULED_OUTPUT, FIRST_TOKEN_OUTPUT),
        SERVER_TIMES,
        strict=True,
    )
)


@dataclass
class ParsedColumns:
    """A request's responses, parsed: one entry per response, in order, of each figure
    :class:`~trtbench.profiling.loadtest.clients.response_parse.ParsedResponse` has.

    Attributes:
        finals: the ``triton_final_response`` flag.
        id_counts: token ids in the response (None: no ``output_ids``).
        ids: every response's ids, in order (None: no response had ids).
        texts: the text (None: none; also None for all when ``text_with_ids`` was false
            and a response had ids).
        drafts, accepted, cumulative: speculative counts and whether they are running
            totals.
        usage_tokens: the server's output-token total (OpenAI ``usage``), where sent.
        server_arrival_ns, server_scheduled_ns, server_first_token_ns: the first non-zero
            value of each over the responses (the server's clock).
        named: the first response that names its counts' source (SGLang's request totals:
            verify steps, acceptance histogram), or None.
    """

    finals: list[bool] = field(default_factory=list)
    id_counts: list[int | None] = field(default_factory=list)
    ids: np.ndarray | None = None
    texts: list[str | None] = field(default_factory=list)
    drafts: list[int | None] = field(default_factory=list)
    accepted: list[int | None] = field(default_factory=list)
    cumulative: list[bool] = field(default_factory=list)
    usage_tokens: list[int | None] = field(default_factory=list)
    server_arrival_ns: int | None = None
    server_scheduled_ns: int | None = None
    server_first_token_ns: int | None = None
    named: ParsedResponse | None = None

    def __len__(self) -> int:
        return len(self.finals)


def columns_of(parsed: Sequence[ParsedResponse]) -> ParsedColumns:
    """Already parsed responses (OpenAI's, or single parses) as columns."""
    ids = [p.ids for p in parsed if p.ids is not None]
    cols = ParsedColumns(
        finals=[p.final for p in parsed],
        id_counts=[None if p.ids is None else int(p.ids.size) for p in parsed],
        ids=np.concatenate(ids) if ids else None,
        texts=[p.text for p in parsed],
        drafts=[p.draft_tokens for p in parsed],
        accepted=[p.accepted_draft_tokens for p in parsed],
        cumulative=[p.cumulative_counts for p in parsed],
        usage_tokens=[p.usage_tokens for p in parsed],
        named=next((p for p in parsed if p.counts_source), None),
    )
    for name in SERVER_TIMES:
        setattr(
            cols, name, next(filter(None, (getattr(p, name) for p in parsed)), None)
        )
    return cols


class _Layout:
    """Where one layout's outputs are, as one pass pairing each output with its contents
    finds them (a name's last output wins): ids (position, datatype), text position, counts
    and server times (position, name, datatype), in output order; ``needs``: how many
    contents it reads."""

    def __init__(self, outputs: list) -> None:
        self.outputs = outputs
        self.ids: tuple[int, str] | None = None
        self.text: int | None = None
        self.counts: list[tuple[int, str, str]] = []
        self.times: list[tuple[int, str, str]] = []
        self.needs = 0
        for i, output in enumerate(outputs):
            name = output.name
            kind = _KIND.get(name)
            if kind is None:
                continue
            self.needs = i + 1
            if kind == _IDS:
                self.ids = (i, output.datatype)
            elif kind == _TEXT:
                self.text = i
            elif kind == _COUNTS:
                self.counts.append((i, name, output.datatype))
            else:
                self.times.append((i, name, output.datatype))


@dataclass
class _Contents:
    """The contents collected for one figure: response index, raw bytes, datatype."""

    at: list[int] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    dtype: list[str] = field(default_factory=list)

    def add(self, at: int, raw: bytes, dtype: str) -> None:
        self.at.append(at)
        self.raw.append(raw)
        self.dtype.append(dtype)


def parse_columns(
    responses: Sequence[service_pb2.ModelInferResponse | ParsedResponse],
    text_with_ids: bool = True,
) -> ParsedColumns:
    """A request's responses (Triton messages, lean or not, or already parsed) as columns.

    ``text_with_ids`` false: texts are decoded only when no response has ids (the records
    use the text only then: ``files/responses.py``).
    """
    if any(isinstance(r, ParsedResponse) for r in responses):
        return columns_of([parse_response(r) for r in responses])
    n = len(responses)
    cols = ParsedColumns(
        finals=[False] * n,
        id_counts=[None] * n,
        texts=[None] * n,
        drafts=[None] * n,
        accepted=[None] * n,
        cumulative=[False] * n,
        usage_tokens=[None] * n,
    )
    ids, text = _Contents(), _Contents()
    ids_at, ids_raw, ids_dtype = ids.at, ids.raw, ids.dtype
    counts: dict[str, _Contents] = {}
    times: list[tuple[int, str, bytes, str]] = []
    layouts: dict[tuple[bytes, ...], _Layout] = {}
    previous, layout = None, None
    for at, response in enumerate(responses):
        final = response.parameters.get(FINAL_PARAM)
        cols.finals[at] = final is not None and final.bool_param
        outputs = response.outputs
        if type(response) is not LeanInferResponse:
            layout = _Layout(list(outputs))
        elif layout is None or outputs != previous:
            key = tuple(outputs)
            layout = layouts.get(key) or layouts.setdefault(
                key, _Layout([output_description(o) for o in key])
            )
            previous = outputs
        raws = response.raw_output_contents
        use = layout
        if use.needs > len(raws):  # fewer contents than outputs: pair what there is
            use = _Layout(use.outputs[: len(raws)])
        if use.ids is not None:
            ids_at.append(at)
            ids_raw.append(raws[use.ids[0]])
            ids_dtype.append(use.ids[1])
        if use.text is not None and (text_with_ids or use.ids is None):
            text.add(at, raws[use.text], "BYTES")
        for i, name, dtype in use.counts:
            got = counts.get(name)
            if got is None:
                got = counts[name] = _Contents()
            got.add(at, raws[i], dtype)
        for i, name, dtype in use.times:
            times.append((at, name, raws[i], dtype))
    _read_ids(cols, ids)
    _read_counts(cols, counts)
    _read_times(cols, times)
    if text_with_ids or cols.ids is None:
        for at, raw in zip(text.at, text.raw, strict=True):
            cols.texts[at] = tensor_text(raw)
    return cols


def _read_ids(cols: ParsedColumns, ids: _Contents) -> None:
    """Every response's ids: one ``np.frombuffer`` when they share a datatype."""
    if not ids.at:
        return
    if len(set(ids.dtype)) == 1:
        dtype = np.dtype(DTYPES[ids.dtype[0]])
        sizes = [len(raw) for raw in ids.raw]
        if not any(size % dtype.itemsize for size in sizes):
            cols.ids = np.frombuffer(b"".join(ids.raw), dtype=dtype)
            for at, size in zip(ids.at, sizes, strict=True):
                cols.id_counts[at] = size // dtype.itemsize
            return
    arrays = list(map(_array, ids.raw, ids.dtype))
    for at, array in zip(ids.at, arrays, strict=True):  # mixed datatypes
        cols.id_counts[at] = int(array.size)
    cols.ids = np.concatenate(arrays)


def _array(raw: bytes, dtype: str) -> np.ndarray:
    return np.frombuffer(raw, dtype=DTYPES[dtype])


def _read_counts(cols: ParsedColumns, counts: dict[str, _Contents]) -> None:
    """Draft and accepted counts: in a response, a per-response count wins over a running
    total (the first of ``DRAFT_OUTPUTS`` / ``ACCEPTED_OUTPUTS`` it has: written last)."""
    for name in (*DRAFT_OUTPUTS[::-1], *ACCEPTED_OUTPUTS[::-1]):
        got = counts.get(name)
        if got is None:
            continue
        if set(got.dtype) == {"INT32"} and set(map(len, got.raw)) == {4}:
            values = np.frombuffer(b"".join(got.raw), dtype="<i4").tolist()
        else:
            values = list(map(tensor_count, got.raw, got.dtype))
        if name in DRAFT_OUTPUTS:
            total = name.startswith("total_")
            for at, value in zip(got.at, values, strict=True):
                cols.drafts[at], cols.cumulative[at] = value, total
        else:
            for at, value in zip(got.at, values, strict=True):
                cols.accepted[at] = value


def _read_times(cols: ParsedColumns, times: list[tuple[int, str, bytes, str]]) -> None:
    """The first positive value of each server time (a response's last output of a name
    wins within it)."""
    per_response: dict[tuple[int, str], int | None] = {}
    for at, name, raw, dtype in times:
        value = tensor_count(raw, dtype)
        per_response[(at, _TIME_OF[name])] = value if value and value > 0 else None
    for (_, field_name), value in sorted(per_response.items()):
        if value is not None and getattr(cols, field_name) is None:
            setattr(cols, field_name, value)
