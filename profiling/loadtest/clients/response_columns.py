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
    """Where one layout's outputs are (a name's last output wins): ids (position,
    datatype), text position, and per count or server time name (position, datatype);
    ``needs``: how many contents it reads."""

    def __init__(self, outputs: Sequence) -> None:
        self.outputs = list(outputs)
        self.ids: tuple[int, str] | None = None
        self.text: int | None = None
        self.counts: dict[str, tuple[int, str]] = {}
        self.times: dict[str, tuple[int, str]] = {}
        self.needs = 0
        for i, output in enumerate(self.outputs):
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
                self.counts[name] = (i, output.datatype)
            else:
                self.times[name] = (i, output.datatype)

    def first_count(self, names: tuple[str, ...]) -> tuple[str, int, str] | None:
        """The first of ``names`` this layout has: (name, position, datatype)."""
        for name in names:
            if name in self.counts:
                return (name, *self.counts[name])
        return None


@dataclass
class _Run:
    """Consecutive responses ``start:stop`` sharing a layout and a number of contents;
    ``columns[i]``: output ``i``'s contents, one per response."""

    layout: _Layout
    start: int
    stop: int = 0
    raws: list = field(default_factory=list)
    columns: list[tuple[bytes, ...]] = field(default_factory=list)


def parse_columns(
    responses: Sequence[service_pb2.ModelInferResponse | ParsedResponse],
    text_with_ids: bool = True,
) -> ParsedColumns:
    """A request's responses (Triton messages, lean or not, or already parsed) as columns.

    Consecutive responses with the same outputs (compared as serialized descriptions for
    lean messages) and as many contents form a run: a run's contents are transposed into
    one tuple per output and each figure read from its tuple at once.
    ``text_with_ids`` false: texts are decoded only when no response has ids (the records
    use the text only then: ``files/responses.py``).

    Raises:
        ValueError, KeyError: an ``output_ids`` tensor whose size is no multiple of its
            datatype's, or of a datatype not in ``DTYPES`` (as ``parse_response``).
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
    runs = _runs(responses, cols.finals)
    _read_ids(cols, runs)
    for run in runs:
        _read_counts(cols, run)
    _read_times(cols, runs)
    if text_with_ids or cols.ids is None:
        for run in runs:
            if run.layout.text is not None:
                texts = map(tensor_text, run.columns[run.layout.text])
                cols.texts[run.start : run.stop] = texts
    return cols


def _runs(responses: Sequence, finals: list[bool]) -> list[_Run]:
    """The responses' runs (their final flags set in ``finals`` on the way): per response
    only its flag is read and its outputs compared with the previous response's."""
    runs: list[_Run] = []
    layouts: dict[tuple, _Layout] = {}
    run = previous = None
    raws: list = []
    lean = LeanInferResponse
    for at, response in enumerate(responses):
        final = response.parameters.get(FINAL_PARAM)
        if final is not None and final.bool_param:
            finals[at] = True
        outputs, contents = response.outputs, response.raw_output_contents
        if (
            run is None
            or type(response) is not lean
            or outputs != previous
            or len(contents) != len(raws[-1])
        ):
            run = _Run(_layout(response, layouts, len(contents)), at)
            raws = run.raws
            runs.append(run)
            previous = outputs
        raws.append(contents)
    for run in runs:
        run.stop = run.start + len(run.raws)
        run.columns = list(zip(*map(tuple, run.raws), strict=True))
        run.raws = []
    return runs


def _layout(response, layouts: dict[tuple, _Layout], contents: int) -> _Layout:
    """The layout of ``response``'s outputs, paired with its first ``contents`` contents
    (fewer contents than outputs: the outputs without contents are not read)."""
    outputs = response.outputs
    if type(response) is LeanInferResponse:
        key = (*outputs, contents)
        layout = layouts.get(key)
        if layout is None:
            found = [output_description(o) for o in outputs[:contents]]
            layout = layouts[key] = _Layout(found)
        return layout
    return _Layout(list(outputs)[:contents])


def _read_ids(cols: ParsedColumns, runs: list[_Run]) -> None:
    """Every response's ids: one ``np.frombuffer`` per run (per response where a size is
    no multiple of the datatype's, which raises as ``parse_response`` does)."""
    chunks = []
    for run in runs:
        if run.layout.ids is None:
            continue
        i, name = run.layout.ids
        raws, dtype = run.columns[i], np.dtype(DTYPES[name])
        sizes = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
        if (sizes % dtype.itemsize).any():
            bad = int(np.flatnonzero(sizes % dtype.itemsize)[0])
            np.frombuffer(
                raws[bad], dtype=dtype
            )  # raises ValueError, as parse_response
        chunks.append(np.frombuffer(b"".join(raws), dtype=dtype))
        cols.id_counts[run.start : run.stop] = (sizes // dtype.itemsize).tolist()
    if chunks:
        cols.ids = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)


def _count_values(raws: tuple[bytes, ...], dtype: str) -> list[int | None]:
    """:func:`tensor_count` of each; one numpy call where all are one INT32."""
    if dtype == "INT32" and set(map(len, raws)) == {4}:
        return np.frombuffer(b"".join(raws), dtype="<i4").tolist()
    return [tensor_count(raw, dtype) for raw in raws]


def _read_counts(cols: ParsedColumns, run: _Run) -> None:
    """A run's draft and accepted counts: the first of ``DRAFT_OUTPUTS`` /
    ``ACCEPTED_OUTPUTS`` a response has (a per-response count wins over a running total)."""
    span = slice(run.start, run.stop)
    draft = run.layout.first_count(DRAFT_OUTPUTS)
    if draft is not None:
        name, i, dtype = draft
        cols.drafts[span] = _count_values(run.columns[i], dtype)
        cols.cumulative[span] = [name.startswith("total_")] * (run.stop - run.start)
    accepted = run.layout.first_count(ACCEPTED_OUTPUTS)
    if accepted is not None:
        _, i, dtype = accepted
        cols.accepted[span] = _count_values(run.columns[i], dtype)


def _read_times(cols: ParsedColumns, runs: list[_Run]) -> None:
    """Each server time: its first positive value, in response order."""
    for name, field_name in _TIME_OF.items():
        for run in runs:
            where = run.layout.times.get(name)
            if where is None:
                continue
            values = (tensor_count(raw, where[1]) for raw in run.columns[where[0]])
            value = next((v for v in values if v is not None and v > 0), None)
            if value is not None:
                setattr(cols, field_name, value)
                break
