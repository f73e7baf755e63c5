"""Kineto trace events -> column arrays, one chunk at a time (the streamed reader's parser).

Each chunk of ``traceEvents`` text (:class:`~trtbench.profiling.traces.json_stream.Chunk`) is
decoded by ``msgspec`` into :class:`Event` records holding only the fields the launch analysis
reads (``ts``/``dur`` as their raw JSON text, the other fields of ``args`` skipped unparsed),
then turned into ``int64`` columns a whole chunk at a time. The values are those of the
whole-file reader (:mod:`~trtbench.profiling.traces.kineto`, ``json.load(parse_float=Decimal)``
and :meth:`_Collector.add`): the same rules (:data:`~trtbench.profiling.traces.kineto.API_CATS`,
:func:`~trtbench.profiling.traces.kineto.int_or_none`,
:func:`~trtbench.profiling.traces.kineto.ns_from_us`), applied to columns:

- ``ts``/``dur`` text is read as exact decimals with three places (Arrow's CSV reader into
  ``decimal128(38, 3)``, whose unscaled integer is the ns); text with more places, or not a
  number, falls back to :func:`~trtbench.profiling.traces.kineto.ns_from_us` of the
  ``json``-parsed value, value by value;
- a column of Python ints is taken as is; any other value goes through ``int_or_none``.

A chunk ``msgspec`` refuses (a value of an unexpected type, ``NaN``, a lone surrogate) is parsed
by the standard library (:func:`decode_slow`) into the same records. Missing values are
:data:`NA` in the columns. Events without a correlation id keep their flow key (pid, tid, ts as
written) to be resolved through the flow events (:func:`flow_ids`, a second pass, needed only by
traces that have such events).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from decimal import Decimal
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from trtbench.core.errors import TraceParseError
from trtbench.profiling.traces.kineto import (
    API_CATS,
    FLOW_CATS,
    GPU_CATS,
    LEGACY_STEP,
    int_or_none,
    ns_from_us,
    xyz_or_none,
)
from trtbench.profiling.traces.schemas import GPU_KINDS

NA = np.iinfo(np.int64).min  # a missing value in the columns
UNSET = msgspec.UNSET
_NULL = msgspec.Raw(b"null")
API, GPU, ANNOTATION, CPU_OP = 1, 2, 3, 4
_KIND = {c: API for c in API_CATS} | {c: GPU for c in GPU_CATS}
_KIND |= {"user_annotation": ANNOTATION, "cpu_op": CPU_OP}
_GPU_KIND = {c: GPU_KINDS.index(k) for c, k in GPU_CATS.items()}
GPU_COLUMNS = ("corr", "kind", "start", "end", "device", "stream", "node", "name")
GPU_COLUMNS += tuple(f"{g}_{a}" for g in ("grid", "block") for a in "xyz")


class EventArgs(msgspec.Struct, gc=False):
    """The ``args`` the analysis reads (``device``/``stream`` default to the event's
    pid/tid when absent: :data:`UNSET`)."""

    correlation: Any = None
    device: Any = UNSET
    stream: Any = UNSET
    grid: Any = None
    block: Any = None
    graph_node_id: Any = msgspec.field(default=None, name="graph node id")


_NO_ARGS = EventArgs()  # an event without args (or with null, {}, [] ...: none read)


class Event(msgspec.Struct, gc=False):
    """One trace event's fields used here (``ts``/``dur``: raw JSON text, or the value when
    parsed by the standard library)."""

    ph: str | None = None
    cat: str | None = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: EventArgs | None = None


class _RawEvent(Event):
    ts: msgspec.Raw = _NULL  # absent: as null (a Raw cannot be in a union)
    dur: msgspec.Raw = _NULL


class FlowEvent(msgspec.Struct, gc=False):
    """A flow event's fields (its key and id)."""

    ph: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    id: Any = None


_FAST = msgspec.json.Decoder(list[_RawEvent], float_hook=Decimal)
_FLOWS = msgspec.json.Decoder(list[FlowEvent], float_hook=Decimal)
_STDLIB = json.JSONDecoder(parse_float=Decimal)
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)


def decode_fast(text: bytes) -> list[Event]:
    """``msgspec`` decode of a chunk's text.

    Raises:
        msgspec.DecodeError, msgspec.ValidationError: see :data:`DECODE_ERRORS`.
    """
    return _FAST.decode(text)


def decode_slow(text: bytes) -> list[Event]:
    """The standard library's decode of a chunk's text, as :class:`Event` records (values
    exactly as ``json.load(parse_float=Decimal)`` gives them; non-object events dropped).

    Raises:
        json.JSONDecodeError, UnicodeDecodeError: the text is not JSON.
        TraceParseError: a launch call or GPU event whose ``args`` is not an object.
    """
    events = []
    for e in _STDLIB.decode(text.decode("utf-8")):
        if not isinstance(e, dict):
            continue
        cat, args = e.get("cat"), e.get("args") or {}
        cat = cat if isinstance(cat, str) else None  # only names in _KIND count
        if isinstance(args, dict):
            args = EventArgs(
                args.get("correlation"),
                args.get("device", UNSET),
                args.get("stream", UNSET),
                args.get("grid"),
                args.get("block"),
                args.get("graph node id"),
            )
        elif cat in API_CATS or cat in GPU_CATS:
            raise TraceParseError(f"a {cat} event's args is {args!r}, not an object")
        else:
            args = None
        ph = e.get("ph")
        events.append(
            Event(
                ph if isinstance(ph, str) else None,
                cat,
                e.get("name"),
                e.get("pid"),
                e.get("tid"),
                e.get("ts"),
                e.get("dur"),
                args,
            )
        )
    return events


def decode_flows(text: bytes, fast: bool) -> list[FlowEvent]:
    """A chunk's events as :class:`FlowEvent` records (``fast``: ``msgspec``, else the
    standard library)."""
    if fast:
        return _FLOWS.decode(text)
    found = _STDLIB.decode(text.decode("utf-8"))
    keys = ("ph", "cat", "pid", "tid", "ts", "id")
    return [FlowEvent(*(e.get(k) for k in keys)) for e in found if isinstance(e, dict)]


def flow_ids(events: Iterable[FlowEvent], wanted: set, found: dict) -> None:
    """Record in ``found`` the id of every flow event (``ac2g``/``async_gpu``, phase ``s``
    or ``f``) whose key ``(ph, pid, tid, ts)`` is in ``wanted`` (a later one wins, as in
    the whole-file reader)."""
    for e in events:
        if e.ph in ("s", "f") and isinstance(e.cat, str) and e.cat in FLOW_CATS:
            key = (e.ph, e.pid, e.tid, e.ts)
            try:
                if key in wanted:
                    found[key] = e.id
            except TypeError:  # an unhashable pid/tid/ts: no event has that key
                continue


def _value(raw: Any) -> Any:
    """A raw JSON text as the standard library parses it; a parsed value as is."""
    if isinstance(raw, msgspec.Raw):
        return json.loads(bytes(raw), parse_float=Decimal)
    return raw


def _decimal_ns(values: list) -> np.ndarray | None:
    """Raw JSON numbers as exact ns (x 1000), or None when one has more than three
    decimal places, is not a number, or does not fit 64 bits."""
    text = b"v\n" + b"\n".join(values) + b"\n"
    try:
        table = pa_csv.read_csv(
            io.BytesIO(text),
            read_options=pa_csv.ReadOptions(use_threads=False),
            parse_options=pa_csv.ParseOptions(quote_char=False),
            convert_options=pa_csv.ConvertOptions(
                column_types={"v": pa.decimal128(38, 3)},
                null_values=[],
                strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid:
        return None
    column = table.column(0).combine_chunks()
    if len(column) != len(values) or column.null_count:
        return None
    words = np.frombuffer(column.buffers()[1], dtype=np.int64)
    words = words[2 * column.offset : 2 * (column.offset + len(column))].reshape(-1, 2)
    low, high = words[:, 0], words[:, 1]  # little-endian 128-bit unscaled values
    if not np.array_equal(high, low >> 63):
        return None
    return low.copy()


def _int64(values: list) -> np.ndarray:
    """Python ints (or None for :data:`NA`) as ``int64``.

    Raises:
        TraceParseError: a value does not fit 64 bits.
    """
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        raise TraceParseError(
            "a trace value does not fit a 64-bit integer; check the trace"
        ) from None


def ns_column(values: list) -> np.ndarray:
    """``ts``/``dur`` values -> ns (:func:`~trtbench.profiling.traces.kineto.ns_from_us`),
    :data:`NA` where it gives None."""
    if not values:
        return np.empty(0, dtype=np.int64)
    if set(map(type, values)) == {msgspec.Raw}:
        found = _decimal_ns(values)
        if found is not None:
            return found
    return _int64([NA if (v := ns_from_us(_value(x))) is None else v for x in values])


def int_column(values: list) -> np.ndarray:
    """Values -> :func:`~trtbench.profiling.traces.kineto.int_or_none`, :data:`NA` for
    None."""
    types = set(map(type, values))
    if types <= {int}:
        return _int64(values) if values else np.empty(0, dtype=np.int64)
    if types <= {int, type(None)}:
        return _int64([NA if v is None else v for v in values])
    return _int64([NA if (v := int_or_none(x)) is None else v for x in values])


def xyz_columns(values: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``grid``/``block`` values -> three columns
    (:func:`~trtbench.profiling.traces.kineto.xyz_or_none`)."""
    flat = list(chain.from_iterable(values)) if set(map(type, values)) == {list} else []
    if (
        flat
        and len(flat) == 3 * len(values)
        and set(map(len, values)) == {3}
        and set(map(type, flat)) == {int}
    ):
        xyz = _int64(flat).reshape(-1, 3)
        return xyz[:, 0], xyz[:, 1], xyz[:, 2]
    xyz = _int64(
        [[NA if v is None else v for v in xyz_or_none(x)] for x in values]
    ).reshape(-1, 3)
    return xyz[:, 0], xyz[:, 1], xyz[:, 2]


class Codes:
    """Distinct strings -> ``int32`` codes, in order of first appearance."""

    def __init__(self) -> None:
        self.code: dict[str, int] = {}

    def of(self, names: list) -> np.ndarray:
        """Codes of ``names`` (each ``str()``-ed first, as the whole-file reader does)."""
        if set(map(type, names)) - {str}:
            names = list(map(str, names))
        local, uniques = pd.factorize(np.array(names, dtype=object))
        table = np.array(
            [self.code.setdefault(u, len(self.code)) for u in uniques], dtype=np.int32
        )
        return table[local] if len(local) else np.empty(0, dtype=np.int32)

    def names(self) -> list[str]:
        """Every string, by code."""
        return list(self.code)

    def table(self, other: Codes) -> np.ndarray:
        """Per code of ``other``, the code of the same string here (added when new)."""
        codes = [self.code.setdefault(n, len(self.code)) for n in other.code]
        return np.array(codes, dtype=np.int32)


def _pick(events: list, rows: np.ndarray) -> list:
    """``events[i]`` for ``i`` in ``rows``."""
    if len(rows) < 2:
        return [events[i] for i in rows]
    return list(itemgetter(*rows.tolist())(events))


class ChunkColumns:
    """One chunk's launch calls, GPU events and ranges as columns (see the module
    docstring); ``*_keys``: (row, flow key) of the rows without a correlation id; names
    coded by ``api_names`` and ``gpu_names`` (kept as attributes)."""

    def __init__(self, events: list[Event], api_names: Codes, gpu_names: Codes):
        self.api_names, self.gpu_names = api_names, gpu_names
        kind = np.fromiter(
            map(_KIND.get, [e.cat for e in events], repeat(0)), np.int8, len(events)
        )
        picked = np.flatnonzero(kind)
        if len(picked):  # complete events only
            phases = np.array([e.ph for e in _pick(events, picked)], object)
            picked = picked[phases == "X"]
        kind = kind[picked]
        cpu_ops = picked[kind == CPU_OP]
        steps = [LEGACY_STEP.match(str(events[i].name)) is not None for i in cpu_ops]
        ranges = picked[kind == ANNOTATION]
        if any(steps):  # legacy ProfilerStep#N cpu_op events, in event order
            ranges = np.sort(np.concatenate([ranges, cpu_ops[np.array(steps)]]))
        self.calls, self.call_keys = self._calls(
            _pick(events, picked[kind == API]), api_names
        )
        self.gpu, self.gpu_keys = self._gpu(
            _pick(events, picked[kind == GPU]), gpu_names
        )
        self.ranges = self._ranges(_pick(events, ranges))

    @staticmethod
    def _times(events: list) -> tuple[list, np.ndarray, np.ndarray]:
        """The events with a numeric ts and dur, their start and end ns."""
        start, dur = (
            ns_column([e.ts for e in events]),
            ns_column([e.dur for e in events]),
        )
        valid = (start != NA) & (dur != NA)
        if not valid.all():
            events = [e for e, v in zip(events, valid, strict=True) if v]
            start, dur = start[valid], dur[valid]
        return events, start, start + dur

    @staticmethod
    def _keys(events: list, corr: np.ndarray, ph: str) -> list[tuple[int, tuple]]:
        return [
            (int(i), (ph, events[i].pid, events[i].tid, _value(events[i].ts)))
            for i in np.flatnonzero(corr == NA)
        ]

    def _calls(self, events: list, names: Codes) -> tuple[dict, list]:
        events, start, end = self._times(events)
        args = [e.args or _NO_ARGS for e in events]
        corr = int_column([a.correlation for a in args])
        calls = {
            "corr": corr,
            "pid": int_column([e.pid for e in events]),
            "tid": int_column([e.tid for e in events]),
            "name": names.of([e.name for e in events]),
            "start": start,
            "end": end,
        }
        return calls, self._keys(events, corr, "s")

    def _gpu(self, events: list, names: Codes) -> tuple[dict, list]:
        events, start, end = self._times(events)
        args = [e.args or _NO_ARGS for e in events]
        pid, tid = [e.pid for e in events], [e.tid for e in events]
        device, stream = [a.device for a in args], [a.stream for a in args]
        if device.count(UNSET):
            device = [p if d is UNSET else d for d, p in zip(device, pid, strict=True)]
        if stream.count(UNSET):
            stream = [t if s is UNSET else s for s, t in zip(stream, tid, strict=True)]
        corr = int_column([a.correlation for a in args])
        kinds = [_GPU_KIND[e.cat] for e in events]
        gpu = {
            "corr": corr,
            "kind": np.array(kinds, dtype=np.int8),
            "start": start,
            "end": end,
            "device": int_column(device),
            "stream": int_column(stream),
            "node": int_column([a.graph_node_id for a in args]),
            "name": names.of([e.name for e in events]),
        }
        grids = (("grid", [a.grid for a in args]), ("block", [a.block for a in args]))
        for what, values in grids:
            xyz = xyz_columns(values)
            gpu |= {f"{what}_{a}": v for a, v in zip("xyz", xyz, strict=True)}
        return gpu, self._keys(events, corr, "f")

    def _ranges(self, events: list) -> dict:
        events, start, end = self._times(events)
        return {
            "s_name": [str(e.name) for e in events],
            "pid": int_column([e.pid for e in events]),
            "tid": int_column([e.tid for e in events]),
            "start_ns": start,
            "end_ns": end,
        }
