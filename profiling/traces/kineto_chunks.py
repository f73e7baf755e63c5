"""A Kineto trace's events as column chunks, decoded in this process or in worker processes.

:func:`iter_columns` turns the chunks of an :class:`~trtbench.profiling.traces.json_stream.
ArrayMemberStream` into :class:`~trtbench.profiling.traces.kineto_events.ChunkColumns`, in file
order. Decoding and column making take about 90 % of a streamed analysis's CPU time and each
chunk is independent, so with ``workers`` > 1 they run in that many forked processes (started
before the stream's reader thread) while this process reads, cuts and collects; a chunk travels
as its text (pickled through a pipe) and comes back as ``int64`` columns whose name codes are
the worker's own, turned into this process's codes here.

A chunk whose guessed cut the fast decoder refuses (:attr:`~trtbench.profiling.traces.
json_stream.Chunk.exact` false) must be cut again before the chunks after it are valid; in
this process that is :meth:`~trtbench.profiling.traces.json_stream.ArrayMemberStream.reject`,
but the workers have already been handed later chunks, so the parallel pass stops with
:class:`Refused` and the caller reads the trace again in one process (traces whose events are
objects without ``}, {`` in their strings are never refused).
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor

from trtbench.profiling.traces.json_stream import ArrayMemberStream
from trtbench.profiling.traces.kineto_events import (
    DECODE_ERRORS,
    ChunkColumns,
    Codes,
    decode_fast,
    decode_slow,
)


class Refused(Exception):
    """A worker's fast decoder refused a chunk cut by a guess (read the trace again in one
    process)."""


def chunk_columns(
    text: bytes | bytearray, exact: bool, api_names: Codes, gpu_names: Codes
) -> ChunkColumns | None:
    """One chunk's columns; None when its cut was a guess the fast decoder refuses.

    Raises:
        ValueError: the text is not JSON (``json.JSONDecodeError``, ``UnicodeDecodeError``).
        TraceParseError: a value does not fit 64 bits; a call's args is not an object.
    """
    try:
        events = decode_fast(text)
    except DECODE_ERRORS:
        if not exact:
            return None
        events = decode_slow(text)  # NaN, lone surrogates, odd types, or not JSON
    return ChunkColumns(events, api_names, gpu_names)


def _in_worker(text: bytearray, exact: bool) -> ChunkColumns | None:
    return chunk_columns(text, exact, Codes(), Codes())


def _started() -> None:
    """A task that only makes the pool start its processes."""


def iter_columns(
    stream: ArrayMemberStream, api_names: Codes, gpu_names: Codes, workers: int = 1
) -> Iterator[ChunkColumns]:
    """The columns of every chunk of ``stream``, in order, name codes from ``api_names``
    and ``gpu_names``.

    Raises:
        Refused: ``workers`` > 1 and a guessed cut was refused.
        JsonStreamError, ValueError, TraceParseError: as the stream and
            :func:`chunk_columns`.
    """
    if workers <= 1:
        for chunk in stream:
            columns = chunk_columns(chunk.text, chunk.exact, api_names, gpu_names)
            if columns is None:
                stream.reject()
                continue
            yield columns
        return
    context = multiprocessing.get_context("fork")
    pool = ProcessPoolExecutor(workers, mp_context=context)
    try:
        pool.submit(_started).result()  # fork now, before the stream's reader thread
        pending: deque[Future] = deque()
        for chunk in stream:
            pending.append(pool.submit(_in_worker, chunk.text, chunk.exact))
            while len(pending) > 2 * workers:
                yield _local(pending.popleft().result(), api_names, gpu_names)
        while pending:
            yield _local(pending.popleft().result(), api_names, gpu_names)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _local(
    columns: ChunkColumns | None, api_names: Codes, gpu_names: Codes
) -> ChunkColumns:
    """A worker's columns with this process's name codes."""
    if columns is None:
        raise Refused
    columns.calls["name"] = api_names.table(columns.api_names)[columns.calls["name"]]
    columns.gpu["name"] = gpu_names.table(columns.gpu_names)[columns.gpu["name"]]
    return columns
