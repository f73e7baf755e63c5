"""One nsys export analysed in bounded batches: the three tables written as it streams (issue 33).

:class:`~trtbench.profiling.traces.nsys.NsysReport` holds a whole export as a pandas frame
(about 340 bytes per kernel). :func:`analyze_nsys_export` writes the same tables while holding
one batch of GPU rows at a time:

1. the launch calls (``CUPTI_ACTIVITY_KIND_RUNTIME``) are read whole as six ``int64`` columns
   and indexed by (process, correlation id), the first call of a key kept (as the eager join);
2. the GPU tables are read once, in chunks of ``chunk_rows`` rows (the next chunk read in the
   background while one is parked), each row joined to its call, counted per call, and the
   chunk parked on disk sorted by its calls' start
   (:class:`~trtbench.profiling.traces.spill.SortedRuns`; rows without a call are left out, as
   the kernel trace and the steps leave them out);
3. the calls are cut, in start-time order, into buckets of about ``bucket_rows`` GPU rows
   (calls starting at the same nanosecond share a bucket), so a bucket is a span of call
   start times holding every kernel of its calls;
4. bucket by bucket, in time order, its rows are read back from every chunk (the chunk's rows
   whose call starts in the span) into its launch frame
   (:func:`~trtbench.profiling.traces.nsys.build_launch_frame`), and
   :func:`~trtbench.profiling.traces.bucket_tables.write_bucket_tables` writes its kernel-trace rows
   (:func:`~trtbench.profiling.traces.launches.kernel_launch_trace`) appended to the kernel table
   (:class:`~trtbench.profiling.traces.table_io.TableWriter`: Parquet row groups or CSV),
   parked for the summary (:class:`~trtbench.profiling.traces.launch_summary_stream.
   SummaryAccumulator`), and counted into the steps
   (:class:`~trtbench.profiling.traces.launch_steps.StepAccumulator`), whose GPU busy time is
   settled once no later bucket can reach a step.

The tables are those of ``NsysReport(path).analyze()`` row for row: the kernel trace is sorted by
(API start, kernel start) with a stable sort and buckets follow API start; rows tied on both
reach it in table order (within a chunk the park keeps table order among equal call starts,
and chunks are read back in table order); the summary and the steps are computed by the same
functions on the same rows (tests compare both paths). Memory: the call columns and index
(about 100 bytes per host call with a correlation id; a graph launch replaying 800 nodes is one
call), two chunks and one bucket of GPU rows, one summary partition; not the kernels. Disk:
about 80 bytes per GPU row while it runs, in ``work_dir``.
"""

from __future__ import annotations

import ctypes
import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import adbc_driver_manager
import numpy as np
import pandas as pd
import pyarrow as pa

from trtbench.core.errors import TraceParseError
from trtbench.profiling.traces.bucket_tables import (  # noqa: F401 (re-exported)
    PARQUET_KERNELS,
    TABLE_FORMATS,
    WrittenAnalysis,
    kernel_table_format,
    write_bucket_tables,
)
from trtbench.profiling.traces.launch_steps import DEFAULT_STEP_PATTERN
from trtbench.profiling.traces.launches import (
    any_range_matches,
    resolve_step_windows,
    strip_api_version,
    summarize_steps,
)
from trtbench.profiling.traces.nsys import (
    MEMCPY_LABELS,
    build_launch_frame,
    fill_gpu_fields,
    gpu_exprs,
    gpu_tables,
    launch_api_ids,
    load_ranges,
    no_activity_error,
    read_calls,
)
from trtbench.profiling.traces.nsys_calls import (
    CallBuckets,
    CallIndex,
    calls_frame,
    cut_buckets,
)
from trtbench.profiling.traces.nsys_sqlite import (
    ExportSchema,
    connect_export,
    decode_strings,
    iter_columns,
)
from trtbench.profiling.traces.spill import SortedRuns

logger = logging.getLogger(__name__)

CHUNK_ROWS = 1 << 19  # GPU rows read per chunk (two threads, one range each)
BUCKET_ROWS = 1 << 18  # GPU rows per bucket (the frame analysed at once)
_SPILLED = ("start", "end", "device_stream", "name", "graphNodeId", "grid", "block")


class _ExportRun:
    """The passes of :func:`analyze_nsys_export` over one open export."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        schema: ExportSchema,
        chunk_rows: int,
        bucket_rows: int,
    ) -> None:
        self.path, self.conn, self.schema = path, conn, schema
        self.chunk_rows, self.bucket_rows = chunk_rows, bucket_rows
        self.calls = read_calls(path, schema)
        self.api_names = decode_strings(conn, self.calls["nameId"])
        self.index = CallIndex(self.calls)
        self.tables = [
            (kind, table, gpu_exprs(path, schema, table, names))
            for kind, table, names in gpu_tables(schema)
        ]

    def idle_calls(self, per_key: np.ndarray) -> np.ndarray:
        """Launch calls without GPU rows, ordered as the eager frame appends them."""
        calls = self.calls
        unmatched = self.index.first[per_key == 0]
        idle = unmatched[
            np.isin(calls["nameId"][unmatched], launch_api_ids(self.api_names))
        ]
        return idle[np.lexsort((calls["gpid"][idle], calls["corr"][idle]))]

    def buckets(self, per_key: np.ndarray, idle: np.ndarray) -> CallBuckets:
        """Calls with GPU rows (weighted by their rows) and idle calls (weight 1) cut into
        buckets (pass 3)."""
        has = np.flatnonzero(per_key > 0)
        starts = self.calls["start"]
        first_start = cut_buckets(
            np.concatenate([starts[self.index.first[has]], starts[idle]]),
            np.concatenate([per_key[has], np.ones(len(idle), dtype=np.int64)]),
            self.bucket_rows,
        )
        of_idle = np.searchsorted(first_start, starts[idle], side="right") - 1
        return CallBuckets(of_idle, first_start)

    def windows(
        self, ranges: pd.DataFrame, step_pattern: str | None, frame_calls: np.ndarray
    ) -> tuple[pd.DataFrame, str]:
        """Step windows as :func:`resolve_step_windows` picks them; the calls frame is built
        only when no range decides."""
        if step_pattern is not None or any_range_matches(ranges, DEFAULT_STEP_PATTERN):
            frame = calls_frame(self.calls, frame_calls[:0], self.api_names)
        else:
            frame = calls_frame(self.calls, frame_calls, self.api_names)
        return resolve_step_windows(frame, ranges, step_pattern, what="NVTX range")

    def park(self, runs: SortedRuns) -> tuple[np.ndarray, int, set[int]]:
        """Pass 2: every GPU row with a call parked, each chunk sorted by its call's start;
        returns the GPU rows per call key, the kernel rows among them and the kernel name
        ids."""
        per_key = np.zeros(len(self.index.keys), dtype=np.int64)
        kernels, names = 0, set()
        starts = self.calls["start"]
        for kind, table, exprs in self.tables:
            if "correlationId" not in exprs:
                continue  # no join key: no GPU row of this table has a call
            for chunk in iter_columns(self.path, table, exprs, self.chunk_rows):
                gpu = fill_gpu_fields(chunk)
                pos = self.index.lookup(gpu["globalPid"], gpu["correlationId"])
                keep = np.flatnonzero(pos >= 0)
                pos = pos[keep]
                per_key += np.bincount(pos, minlength=len(per_key))
                call = self.index.first[pos]
                call_start = starts[call]
                order = np.argsort(call_start, kind="stable")
                rows = keep[order]
                columns = {f: gpu[f][rows] for f in _SPILLED}
                if kind == 0:
                    kernels += len(rows)
                    names.update(np.unique(columns["name"]).tolist())
                columns["kind"] = np.full(len(rows), kind, dtype=np.int8)
                columns["call"] = call[order]
                columns["call_start"] = call_start[order]
                runs.append(pa.record_batch(columns))
        return per_key, kernels, names

    def bucket_frame(
        self,
        cols: dict[str, np.ndarray] | None,
        idle: np.ndarray,
        kernel_names: dict,
        categories: tuple[list[str], list[str]],
    ) -> pd.DataFrame:
        """The launch frame of one bucket (its GPU rows as parked, then its idle calls),
        with the categories of the whole export."""
        calls = self.calls
        if cols is None:
            cols = {f: np.empty(0, dtype=np.int64) for f in (*_SPILLED, "call")}
            cols["kind"] = np.empty(0, dtype=np.int8)
        call_of = cols["call"]
        gpu = {f: cols[f] for f in _SPILLED}
        gpu["globalPid"] = calls["gpid"][call_of]  # the key the row joined on
        gpu["correlationId"] = calls["corr"][call_of]
        frame = build_launch_frame(
            cols["kind"], gpu, calls, call_of, idle, kernel_names, self.api_names
        )
        kernel_cats, api_cats = categories
        frame["s_name"] = frame["s_name"].cat.set_categories(kernel_cats)
        frame["s_api_name"] = frame["s_api_name"].cat.set_categories(api_cats)
        return frame


_M_MMAP_THRESHOLD = -3  # glibc mallopt parameter (malloc.h)
# blocks from 32 MiB up get their own mapping, returned to the OS when freed
MMAP_THRESHOLD = 32 << 20


def return_freed_arrays() -> bool:
    """Make glibc give freed large arrays back to the OS at once (process-wide; returns
    whether it could).

    glibc serves a block over the mmap threshold (128 KiB at start) with its own mapping, but
    raises the threshold to the size of each such block freed and the heap's trim threshold
    to twice that, so freed column arrays stay resident: about 300 MB at 5 M kernels
    (measured with ``scripts/bench_nsys.py``). Fixing the threshold (``mallopt
    M_MMAP_THRESHOLD``, https://man7.org/linux/man-pages/man3/mallopt.3.html) turns that
    adjustment off. The value trades memory for system time: below it, a freed block is
    reused from the heap; above it, every new block is fresh pages the kernel must zero. On
    the 5 M-kernel benchmark export, alternating runs in one session: 4 MiB 9.3-10.6 s wall,
    3.6-4.7 s system CPU, 0.55 GiB peak; 32 MiB 7.4-8.4 s, 2.0-2.4 s, 0.58-0.63 GiB. Elsewhere
    than glibc this does nothing.
    """
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):
        return False


def analyze_nsys_export(
    path: Path,
    out_dir: Path,
    step_pattern: str | None = None,
    fmt: str = "auto",
    *,
    work_dir: Path | None = None,
    chunk_rows: int = CHUNK_ROWS,
    bucket_rows: int = BUCKET_ROWS,
    parquet_kernels: int = PARQUET_KERNELS,
) -> WrittenAnalysis:
    """Analyse one export in bounded memory and write its three tables into ``out_dir``.

    Args:
        path: the ``.sqlite`` export.
        out_dir: where ``kernel_launches``, ``launch_summary`` and ``steps`` go.
        step_pattern: as for :func:`~trtbench.profiling.traces.launches.resolve_step_windows`.
        fmt: ``auto`` (kernel table Parquet above ``parquet_kernels`` rows, else CSV; the
            other two CSV), ``csv`` (all CSV) or ``parquet`` (all Parquet).
        work_dir: where the parked rows go while it runs, in a temporary folder removed at
            the end (default: ``out_dir``; not /tmp, which may be memory); about 70 bytes per
            GPU row.
        chunk_rows: GPU rows read at once.
        bucket_rows: GPU rows analysed at once.
        parquet_kernels: the ``auto`` threshold.

    Returns:
        The written files and the steps and summary tables.

    Raises:
        ConfigError: the file does not exist; the step pattern is invalid or matches nothing.
        TraceParseError: as :class:`~trtbench.profiling.traces.nsys.NsysReport` (empty, not an
            nsys export, truncated or corrupt, no CUDA activity).
        ValueError: an unknown ``fmt``.
    """
    kernel_table_format(fmt, 0)  # checks fmt before any work
    return_freed_arrays()
    path = Path(path)
    started = time.perf_counter()
    conn = connect_export(path)
    try:
        schema = ExportSchema(conn, path)
        result = _analyze(
            path,
            conn,
            schema,
            out_dir,
            step_pattern,
            fmt,
            work_dir,
            chunk_rows,
            bucket_rows,
            parquet_kernels,
        )
    except (sqlite3.DatabaseError, adbc_driver_manager.Error, pa.ArrowInvalid) as exc:
        raise TraceParseError(
            f"{path} is truncated or corrupt ({exc}); export the report again with "
            "`nsys export --type sqlite REPORT.nsys-rep`"
        ) from exc
    finally:
        conn.close()
    logger.debug(
        "%s: %d kernels streamed in %.2f s",
        path,
        result.kernels,
        time.perf_counter() - started,
    )
    return result


def _analyze(
    path: Path,
    conn: sqlite3.Connection,
    schema: ExportSchema,
    out_dir: Path,
    step_pattern: str | None,
    fmt: str,
    work_dir: Path | None,
    chunk_rows: int,
    bucket_rows: int,
    parquet_kernels: int,
) -> WrittenAnalysis:
    version = schema.meta.get("EXPORT_SCHEMA_VERSION", "unknown")
    product = schema.meta.get("EXPORT_PRODUCT_VERSION", "unknown")
    source = f"nsys {product} export (schema {version}) {path.name}"
    run = _ExportRun(path, conn, schema, chunk_rows, bucket_rows)
    ranges = load_ranges(conn, schema)
    work_dir = work_dir or out_dir  # beside the outputs: /tmp may be memory (tmpfs)
    work_dir.mkdir(parents=True, exist_ok=True)
    with SortedRuns(work_dir, "call_start", "gpu_rows") as runs:
        per_key, kernel_rows, name_ids = run.park(runs)
        runs.close()
        idle = run.idle_calls(per_key)
        if not run.tables and not len(idle):
            raise no_activity_error(path)
        frame_calls = np.concatenate([run.index.first[per_key > 0], idle])
        windows, step_source = run.windows(ranges, step_pattern, frame_calls)
        del frame_calls
        buckets = run.buckets(per_key, idle)
        del per_key
        api_cats = sorted({strip_api_version(n) for n in run.api_names.values()})
        kernel_names = decode_strings(conn, np.array(sorted(name_ids), dtype=np.int64))
        kernel_cats = sorted(set(kernel_names.values()))
        kernel_cats += [c for c in MEMCPY_LABELS if c not in set(kernel_cats)]
        categories = (kernel_cats, api_cats)

        def pieces() -> Iterator[tuple[pd.DataFrame, int | None]]:
            for b in range(buckets.count):
                # a bucket is the calls starting in [its first start, the next one's)
                hi = int(buckets.first_start[b + 1]) if b + 1 < buckets.count else None
                rows = runs.read(int(buckets.first_start[b]), hi)
                idle_b = idle[buckets.of_idle == b]
                yield run.bucket_frame(rows, idle_b, kernel_names, categories), hi
            runs.__exit__()  # the parked rows go before the summary's are read

        tables = write_bucket_tables(
            out_dir,
            fmt,
            work_dir,
            windows,
            run.bucket_frame(None, idle[:0], {}, categories),
            pieces(),
            kernel_rows=kernel_rows,
            parquet_kernels=parquet_kernels,
        )
    return WrittenAnalysis(
        source=source,
        kernels=tables.kernels,
        steps=tables.steps,
        launch_summary=tables.launch_summary,
        summary=summarize_steps(tables.steps, step_source),
        files=tables.files,
    )
