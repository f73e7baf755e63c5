"""One PyTorch profiler (Kineto) trace analysed as a stream: the three tables in bounded memory.

:class:`~trtbench.profiling.traces.kineto.KinetoTrace` parses a whole trace with ``json.load``
(about 4 GB of Python objects per million kernels). :func:`analyze_kineto_stream` writes the same
tables, byte for byte, holding the launch calls and one batch of GPU events:

1. ``traceEvents`` is read in chunks of text (:class:`~trtbench.profiling.traces.json_stream.
   ArrayMemberStream`), each decoded into columns (:class:`~trtbench.profiling.traces.
   kineto_events.ChunkColumns`): the launch calls (every ``cuda_runtime``/``cuda_driver`` call:
   six ``int64`` columns, about 50 bytes a call) stay in memory, the GPU events are parked on
   disk in batches (:class:`~trtbench.profiling.traces.spill.ParkedBatches`), the ranges kept;
2. events without ``args.correlation`` take the id of the flow event (``ac2g``, legacy
   ``async_gpu``) that starts or ends at their pid, tid and ts, found in a second pass over the
   file (only when such events exist: traces of the last years carry the id);
3. the GPU batches are read back, each row joined on the correlation id to the first call that
   has it (the whole-file reader's left join), and parked again sorted by the call's start
   (:class:`~trtbench.profiling.traces.spill.SortedRuns`);
4. the calls with GPU rows are cut, in start order, into buckets of about ``bucket_rows`` rows
   (:func:`~trtbench.profiling.traces.nsys_calls.cut_buckets`), and bucket by bucket, in time
   order, its launch frame goes to :func:`~trtbench.profiling.traces.bucket_tables.
   write_bucket_tables`; the launch calls without GPU work (which count in the steps only)
   follow, a (pid, correlation id) group never split, so each call counts once per step as in
   the whole frame.

Row order is that of the whole frame: GPU rows in event order within a bucket, so the kernel
trace's stable sort by (API start, kernel start) puts tied rows where the whole-file reader
does; step windows from graph launches see the calls in the whole frame's order (first by their
first GPU row, then the calls without GPU work in event order). Disk: about 150 bytes per GPU
event while it runs, in ``work_dir``.
"""

from __future__ import annotations

import ctypes
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from trtbench.profiling.traces.bucket_tables import (
    PARQUET_KERNELS,
    WrittenAnalysis,
    kernel_table_format,
    write_bucket_tables,
)
from trtbench.profiling.traces.json_stream import (
    BLOCK_BYTES,
    GZIP_MAGIC,
    ArrayMemberStream,
    Chunk,
    JsonStreamError,
)
from trtbench.profiling.traces.kineto import (
    check_trace_file,
    int_or_none,
    no_activity_error,
    no_events_error,
    not_json_error,
    trace_description,
)
from trtbench.profiling.traces.kineto_chunks import Refused, iter_columns
from trtbench.profiling.traces.kineto_events import (
    DECODE_ERRORS,
    GPU_COLUMNS,
    NA,
    ChunkColumns,
    Codes,
    decode_flows,
    flow_ids,
)
from trtbench.profiling.traces.kineto_join import (
    CallJoin,
    LaunchFrames,
    idle_pieces,
    masked,
)
from trtbench.profiling.traces.launch_steps import DEFAULT_STEP_PATTERN
from trtbench.profiling.traces.launches import (
    any_range_matches,
    make_range_frame,
    resolve_step_windows,
    summarize_steps,
)
from trtbench.profiling.traces.nsys_calls import cut_buckets
from trtbench.profiling.traces.nsys_stream import BUCKET_ROWS, return_freed_arrays
from trtbench.profiling.traces.spill import ParkedBatches, SortedRuns

logger = logging.getLogger(__name__)

PARALLEL_BLOCKS = (
    4  # blocks of text below which worker processes are not worth starting
)
BATCH_ROWS = 1 << 18  # GPU rows parked per batch (one sorted run each)
_CALL_COLUMNS = ("corr", "pid", "tid", "name", "start", "end")
_RANGE_INTS = ("pid", "tid", "start_ns", "end_ns")


@dataclass
class _Collected:
    """What the first pass keeps: the calls (columns, in event order), the GPU events
    (parked), the ranges, the names, the rows waiting for a flow's correlation id."""

    gpu: ParkedBatches
    api_names: Codes = field(default_factory=Codes)
    gpu_names: Codes = field(default_factory=Codes)
    calls: dict[str, np.ndarray] = field(default_factory=dict)
    ranges: dict[str, object] = field(default_factory=dict)
    call_keys: list[tuple[int, tuple]] = field(default_factory=list)
    gpu_keys: list[tuple[int, tuple]] = field(default_factory=list)
    base_time_ns: int = 0

    def read(self, path: Path, block_bytes: int, workers: int) -> None:
        """The first pass (step 1), decoding in ``workers`` processes.

        Raises:
            Refused: see :func:`~trtbench.profiling.traces.kineto_chunks.iter_columns`.
        """
        calls, ranges = {c: [] for c in _CALL_COLUMNS}, {c: [] for c in _RANGE_INTS}
        names: list[str] = []
        pending: dict[str, list] = {c: [] for c in GPU_COLUMNS}
        n_calls = n_gpu = held = 0
        stream = ArrayMemberStream(path, "traceEvents", block_bytes)
        chunks = iter_columns(stream, self.api_names, self.gpu_names, workers)
        for cols in _readable(chunks, path):
            self.call_keys += [(n_calls + i, k) for i, k in cols.call_keys]
            self.gpu_keys += [(n_gpu + i, k) for i, k in cols.gpu_keys]
            n_calls += len(cols.calls["corr"])
            n_gpu += len(cols.gpu["corr"])
            for c in _CALL_COLUMNS:
                calls[c].append(cols.calls[c])
            for c in _RANGE_INTS:
                ranges[c].append(cols.ranges[c])
            names += cols.ranges["s_name"]
            for c in GPU_COLUMNS:
                pending[c].append(cols.gpu[c])
            held += len(cols.gpu["corr"])
            if held >= BATCH_ROWS:
                self.gpu.append({c: np.concatenate(v) for c, v in pending.items()})
                pending, held = {c: [] for c in GPU_COLUMNS}, 0
        if held:
            self.gpu.append({c: np.concatenate(v) for c, v in pending.items()})
        self.gpu.close()
        if not stream.found:
            raise no_events_error(path)
        self.base_time_ns = int_or_none(stream.members.get("baseTimeNanoseconds")) or 0
        self.calls = {c: _joined(v, np.int64) for c, v in calls.items()}
        self.calls["name"] = self.calls["name"].astype(np.int32)
        del calls
        trim_heap()
        self.ranges = {"s_name": names} | {
            c: masked(_joined(v, np.int64)) for c, v in ranges.items()
        }

    def resolve_flows(self, path: Path, block_bytes: int) -> dict[int, int]:
        """Step 2: the correlation ids of the calls without one set in :attr:`calls`;
        returns those of the GPU rows without one (row -> id)."""
        if not self.call_keys and not self.gpu_keys:
            return {}
        wanted = {k for _, k in self.call_keys + self.gpu_keys if _hashable(k)}
        found: dict = {}
        stream = ArrayMemberStream(path, "traceEvents", block_bytes)
        for chunk in _chunks(stream, path):
            try:
                events = decode_flows(chunk.text, fast=True)
            except DECODE_ERRORS:
                if not chunk.exact:
                    stream.reject()
                    continue
                try:
                    events = decode_flows(chunk.text, fast=False)
                except ValueError as exc:
                    raise not_json_error(path, exc) from None
            flow_ids(events, wanted, found)

        def corr(key: tuple) -> int:
            value = int_or_none(found.get(key)) if _hashable(key) else None
            return NA if value is None else value

        for row, key in self.call_keys:
            self.calls["corr"][row] = corr(key)
        return {row: corr(key) for row, key in self.gpu_keys}


def trim_heap() -> bool:
    """Give the free pages of glibc's heap back to the OS (``malloc_trim(0)``,
    https://man7.org/linux/man-pages/man3/malloc_trim.3.html); returns whether it could.

    The calls arrive as one small array per chunk and column, served from the heap (below
    the mmap threshold), then are joined into one array each: the freed pieces stay resident
    as holes in the heap unless trimmed. Elsewhere than glibc this does nothing.
    """
    try:
        return bool(ctypes.CDLL(None).malloc_trim(0))
    except (OSError, AttributeError):
        return False


def _hashable(key: tuple) -> bool:
    try:
        hash(key)
    except TypeError:  # a list as pid, tid or ts: no flow has that key
        return False
    return True


def _chunks(stream: ArrayMemberStream, path: Path) -> Iterator[Chunk]:
    try:
        yield from stream
    except JsonStreamError as exc:
        raise not_json_error(path, exc) from None


def _readable(chunks: Iterator[ChunkColumns], path: Path) -> Iterator[ChunkColumns]:
    """``chunks``, a trace that is not JSON (or not UTF-8, or truncated) raising
    :class:`~trtbench.core.errors.TraceParseError`."""
    try:
        yield from chunks
    except (JsonStreamError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise not_json_error(path, exc) from None


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def analyze_kineto_stream(
    path: Path,
    out_dir: Path,
    step_pattern: str | None = None,
    fmt: str = "auto",
    *,
    work_dir: Path | None = None,
    bucket_rows: int = BUCKET_ROWS,
    block_bytes: int = BLOCK_BYTES,
    parquet_kernels: int = PARQUET_KERNELS,
    workers: int = 1,
) -> WrittenAnalysis:
    """Analyse one Kineto trace (``.json`` or ``.json.gz``) as a stream and write its three
    tables into ``out_dir`` (those of ``KinetoTrace(path).analyze()``, byte for byte).

    Args:
        path: the trace.
        out_dir: where ``kernel_launches``, ``launch_summary`` and ``steps`` go.
        step_pattern: as for :func:`~trtbench.profiling.traces.launches.resolve_step_windows`.
        fmt: ``auto``, ``csv`` or ``parquet`` (as for
            :func:`~trtbench.profiling.traces.nsys_stream.analyze_nsys_export`).
        work_dir: where GPU events are parked while it runs (a temporary folder inside,
            removed at the end; default ``out_dir``).
        bucket_rows: GPU rows analysed at once.
        block_bytes: trace text decoded at once.
        parquet_kernels: the ``auto`` threshold.
        workers: processes decoding the text (1: this one; more: see
            :func:`~trtbench.profiling.traces.kineto_chunks.iter_columns`).

    Raises:
        ConfigError: the file does not exist; the step pattern is invalid or matches nothing.
        TraceParseError: empty, truncated, not JSON, no ``traceEvents``, no CUDA activity.
        ValueError: an unknown ``fmt``.
    """
    kernel_table_format(fmt, 0)  # checks fmt before any work
    path = Path(path)
    check_trace_file(path)
    return_freed_arrays()
    started = time.perf_counter()
    work_dir = work_dir or out_dir  # beside the outputs: /tmp may be memory (tmpfs)
    work_dir.mkdir(parents=True, exist_ok=True)
    got = _collect(path, work_dir, block_bytes, workers)
    try:
        gpu_corr = got.resolve_flows(path, block_bytes)
        join = CallJoin(got.calls, got.api_names.names(), gpu_corr)
        with SortedRuns(work_dir, "call_start", "kineto_runs") as runs:
            join.park(got.gpu, runs)
            runs.close()
            got.gpu.__exit__()
            sizes = (bucket_rows, parquet_kernels)
            dirs = (out_dir, work_dir)
            result = _write(path, dirs, got, join, runs, step_pattern, fmt, sizes)
    finally:
        got.gpu.__exit__()
    logger.debug(
        "%s: %d kernels streamed in %.2f s",
        path,
        result.kernels,
        time.perf_counter() - started,
    )
    return result


def _collect(path: Path, work_dir: Path, block_bytes: int, workers: int) -> _Collected:
    """The first pass, in ``workers`` processes (when the trace holds at least
    :data:`PARALLEL_BLOCKS` blocks of text, gzip counted as 10 times its size); again in this
    one when a worker refuses a chunk. The caller removes the parked GPU events (``.gpu``)."""
    with path.open("rb") as fh:
        text_bytes = path.stat().st_size * (10 if fh.read(2) == GZIP_MAGIC else 1)
    if workers > 1 and text_bytes >= PARALLEL_BLOCKS * block_bytes:
        try:
            return _read_once(path, work_dir, block_bytes, workers)
        except Refused:
            logger.debug(
                "%s: a guessed chunk cut was refused; read in one process", path
            )
    return _read_once(path, work_dir, block_bytes, 1)


def _read_once(
    path: Path, work_dir: Path, block_bytes: int, workers: int
) -> _Collected:
    got = _Collected(ParkedBatches(work_dir, "kineto_gpu"))
    try:
        got.read(path, block_bytes, workers)
    except BaseException:
        got.gpu.__exit__()
        raise
    return got


def _write(
    path: Path,
    dirs: tuple[Path, Path],
    got: _Collected,
    join: CallJoin,
    runs: SortedRuns,
    step_pattern: str | None,
    fmt: str,
    sizes: tuple[int, int],
) -> WrittenAnalysis:
    """Step 4: windows, buckets, the tables."""
    (out_dir, work_dir), (bucket_rows, parquet_kernels) = dirs, sizes
    idle = join.idle()
    if not join.gpu_rows and not len(idle):
        raise no_activity_error(path)
    frame_calls = join.frame_calls()
    ranges = make_range_frame(got.ranges)
    if step_pattern is not None or any_range_matches(ranges, DEFAULT_STEP_PATTERN):
        frame = join.calls_frame(frame_calls[:0])
    else:
        frame = join.calls_frame(np.concatenate([frame_calls, idle]))
    windows, step_source = resolve_step_windows(
        frame, ranges, step_pattern, what="annotation"
    )
    del frame
    names = (got.api_names.names(), got.gpu_names.names())
    frames = LaunchFrames(got.calls, names, idle, frame_calls)
    has = join.per_key > 0
    first_start = cut_buckets(
        got.calls["start"][join.first[has]], join.per_key[has], bucket_rows
    )
    del frame_calls

    def pieces() -> Iterator[tuple[pd.DataFrame, int | None]]:
        for b in range(len(first_start)):
            hi = int(first_start[b + 1]) if b + 1 < len(first_start) else None
            yield frames.frame(runs.read(int(first_start[b]), hi), idle[:0]), hi
        runs.__exit__()  # the parked rows go before the summary's are read
        yield from idle_pieces(frames, idle, bucket_rows)

    tables = write_bucket_tables(
        out_dir,
        fmt,
        work_dir,
        windows,
        frames.frame(None, idle[:0]),
        pieces(),
        kernel_rows=join.kernel_rows,
        parquet_kernels=parquet_kernels,
    )
    return WrittenAnalysis(
        source=trace_description(path, got.base_time_ns),
        kernels=tables.kernels,
        steps=tables.steps,
        launch_summary=tables.launch_summary,
        summary=summarize_steps(tables.steps, step_source),
        files=tables.files,
    )
