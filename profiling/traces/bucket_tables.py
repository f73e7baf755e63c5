"""The three tables of a trace written from launch-frame pieces (the streamed readers' last step).

:mod:`~trtbench.profiling.traces.nsys_stream` and :mod:`~trtbench.profiling.traces.kineto_stream`
cut a trace's launch frame into pieces by the start time of the launch calls (a piece holds every
GPU row of its calls) and hand them here in time order: each piece's kernel-trace rows
(:func:`~trtbench.profiling.traces.launches.kernel_launch_trace`) are appended to the kernel table
(:class:`~trtbench.profiling.traces.table_io.TableWriter`), parked for the summary
(:class:`~trtbench.profiling.traces.launch_summary_stream.SummaryAccumulator`) and counted into the
steps (:class:`~trtbench.profiling.traces.launch_steps.StepAccumulator`), whose GPU busy time is
settled once no later piece can reach a step. The tables are those of the whole frame, row for
row, when the pieces come in call-start order and each keeps the frame's row order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from trtbench.profiling.traces.launch_steps import StepAccumulator
from trtbench.profiling.traces.launch_summary_stream import SummaryAccumulator
from trtbench.profiling.traces.launches import StepSummary, kernel_launch_trace
from trtbench.profiling.traces.schemas import (
    KERNEL_LAUNCH_SCHEMA,
    LAUNCH_SUMMARY_SCHEMA,
    STEP_SCHEMA,
)
from trtbench.profiling.traces.table_io import TableWriter, write_trace_tables

PARQUET_KERNELS = (
    1_000_000  # kernel table as Parquet above this many rows (format "auto")
)
TABLE_FORMATS = ("auto", "csv", "parquet")


@dataclass(frozen=True)
class WrittenAnalysis:
    """What a streamed analysis wrote and the small tables it kept.

    Attributes:
        source: the trace, e.g. ``nsys 2024.6.2.225 export (schema 3.16.1) x.sqlite``.
        kernels: rows of the kernel table.
        steps: ``steps.csv`` rows (:data:`~trtbench.profiling.traces.schemas.STEP_SCHEMA`).
        launch_summary: ``launch_summary.csv`` rows.
        summary: per-step means for the printed paragraph.
        files: the written tables.
    """

    source: str
    kernels: int
    steps: pd.DataFrame
    launch_summary: pd.DataFrame
    summary: StepSummary
    files: tuple[Path, ...]


def kernel_table_format(
    fmt: str, kernels: int, threshold: int = PARQUET_KERNELS
) -> str:
    """``csv`` or ``parquet`` for the kernel table: ``fmt`` unless ``auto``, which means
    Parquet above ``threshold`` kernels (a CSV row costs about 140 bytes)."""
    if fmt not in TABLE_FORMATS:
        raise ValueError(f"format {fmt!r} is not one of {', '.join(TABLE_FORMATS)}")
    if fmt == "auto":
        return "parquet" if kernels > threshold else "csv"
    return fmt


@dataclass(frozen=True)
class BucketTables:
    """The tables :func:`write_bucket_tables` wrote (``files``: kernel table first) and the
    two small ones it kept; ``kernels``: rows of the kernel table."""

    files: tuple[Path, ...]
    kernels: int
    launch_summary: pd.DataFrame
    steps: pd.DataFrame


def write_bucket_tables(
    out_dir: Path,
    fmt: str,
    work_dir: Path,
    windows: pd.DataFrame,
    empty_frame: pd.DataFrame,
    pieces: Iterable[tuple[pd.DataFrame, int | None]],
    *,
    kernel_rows: int,
    parquet_kernels: int = PARQUET_KERNELS,
) -> BucketTables:
    """Write ``kernel_launches``, ``launch_summary`` and ``steps`` from launch-frame pieces.

    Args:
        out_dir: where the tables go.
        fmt: ``auto``, ``csv`` or ``parquet`` (:func:`kernel_table_format`; the two small
            tables are Parquet only for ``parquet``).
        work_dir: where the summary parks its rows.
        windows: the step windows.
        empty_frame: a launch frame of no rows with the categories of the whole trace.
        pieces: ``(launch frame piece, t_ns)`` in call-start order; ``t_ns`` (or None): no
            later piece holds a call starting before it.
        kernel_rows: kernels the pieces will hold (the ``auto`` format, summary partitions).
        parquet_kernels: the ``auto`` threshold.
    """
    kernel_fmt = kernel_table_format(fmt, kernel_rows, parquet_kernels)
    kernel_path = out_dir / f"kernel_launches.{kernel_fmt}"
    steps = StepAccumulator(windows)
    empty = kernel_launch_trace(empty_frame)
    with SummaryAccumulator(work_dir, kernel_rows) as summary:
        with TableWriter(kernel_path, KERNEL_LAUNCH_SCHEMA, kernel_fmt) as writer:
            writer.write(empty)
            for frame, settled_before in pieces:
                trace = kernel_launch_trace(frame)
                writer.write(trace)
                summary.add(trace)
                steps.add(frame)
                del trace, frame
                if settled_before is not None:
                    steps.close_before(settled_before)
                pa.default_memory_pool().release_unused()
            kernels = writer.rows
        launch_summary = summary.finish(empty)
    steps_table = steps.table()
    small_fmt = "parquet" if fmt == "parquet" else "csv"
    files = write_trace_tables(
        [
            ("launch_summary.csv", launch_summary, LAUNCH_SUMMARY_SCHEMA),
            ("steps.csv", steps_table, STEP_SCHEMA),
        ],
        out_dir,
        small_fmt,
    )
    return BucketTables((kernel_path, *files), kernels, launch_summary, steps_table)
