"""``launch_summary.csv`` of a kernel trace that arrives in pieces, exact, in bounded memory.

The statistics of ``nsys stats`` ``cuda_kern_exec_sum`` (:func:`~trtbench.profiling.traces.
launches.kernel_launch_summary`: count, mean, median, min, max, sample std per (pid, tid,
device, API, kernel)) are computed exactly, not from a sketch: each piece's rows are parked on
disk by key (:class:`~trtbench.profiling.traces.spill.SpillFiles`: a key number and the four
durations; a key's rows all in one partition, keys dealt to the partition holding the fewest rows),
and at the end each partition is summarized by
:func:`~trtbench.profiling.traces.launches.summary_statistics`, the statistics of
:func:`kernel_launch_summary` itself. Every key's values then reach it in the order of the whole
trace, so means, medians and standard deviations are the very numbers of one call on the whole
trace; the rows are ordered as it orders them (total mean descending, ties by first
appearance). Memory: one piece, then one partition (about ``part_rows`` rows unless one key
alone holds more: the largest key bounds it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from trtbench.profiling.traces.launches import (
    SUMMARY_KEYS,
    kernel_launch_summary,
    summary_statistics,
)
from trtbench.profiling.traces.schemas import LAUNCH_SUMMARY_SCHEMA
from trtbench.profiling.traces.spill import SpillFiles

KEYS = SUMMARY_KEYS
METRICS = ("total_dur_ns", "api_dur_ns", "queue_dur_ns", "kernel_dur_ns")
PART_ROWS = (
    500_000  # kernel rows per summary partition (about 40 MB parked, 150 MB summarized)
)


_AS_INT64 = {pa.int64(): pd.Int64Dtype()}


class SummaryAccumulator:
    """Collect kernel-trace pieces (:func:`~trtbench.profiling.traces.launches.
    kernel_launch_trace` rows, in trace order), then :meth:`finish` into the summary table.

    Use as a context manager: the parked rows are removed on exit, also after an error.

    Args:
        work_dir: where the partitions are parked (a temporary folder inside; None: the
            system's temporary folder).
        rows_hint: about how many kernel rows will come (sets the number of partitions).
        part_rows: rows per partition aimed at.
    """

    def __init__(
        self, work_dir: Path | None, rows_hint: int, part_rows: int = PART_ROWS
    ) -> None:
        parts = max(1, -(-rows_hint // part_rows))
        self._spill = SpillFiles(work_dir, parts, "summary")
        self._ids: dict[
            tuple, int
        ] = {}  # key -> key number (in order of first appearance)
        self._part_of_id: list[int] = []
        self._part_rows = np.zeros(parts, dtype=np.int64)
        self.rows = 0

    def __enter__(self) -> SummaryAccumulator:
        return self

    def __exit__(self, *exc: object) -> None:
        """Remove the parked partitions (after :meth:`finish`, or after an error)."""
        self._spill.__exit__(*exc)

    def add(self, trace: pd.DataFrame) -> None:
        """Take the next piece of the kernel trace."""
        if not len(trace):
            return
        keys = trace[list(KEYS)]
        group = (
            keys.groupby(list(KEYS), observed=True, dropna=False, sort=False)
            .ngroup()
            .to_numpy()
        )
        sizes = np.bincount(group)
        _, first_rows = np.unique(group, return_index=True)
        id_of_group = np.empty(len(sizes), dtype=np.int64)
        for g, row in enumerate(first_rows):
            key = tuple(None if pd.isna(v) else v for v in keys.iloc[int(row)])
            if key not in self._ids:
                self._ids[key] = len(self._ids)
                self._part_of_id.append(int(np.argmin(self._part_rows)))
            id_of_group[g] = self._ids[key]
            self._part_rows[self._part_of_id[id_of_group[g]]] += sizes[g]
        ids = id_of_group[group]
        part = np.asarray(self._part_of_id, dtype=np.int64)[ids]
        columns = {"key": pa.array(ids)}
        columns |= {c: pa.array(trace[c].array).cast(pa.int64()) for c in METRICS}
        batch = pa.record_batch(columns)
        order = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[order], np.arange(self._spill.parts + 1))
        for p in range(self._spill.parts):
            if bounds[p + 1] > bounds[p]:
                self._spill.append(p, batch.take(order[bounds[p] : bounds[p + 1]]))
        self.rows += len(trace)

    def finish(self, empty_trace: pd.DataFrame) -> pd.DataFrame:
        """The summary table (:data:`~trtbench.profiling.traces.schemas.
        LAUNCH_SUMMARY_SCHEMA`); ``empty_trace``: a kernel trace of no rows (for the dtypes
        when no piece held a row). Removes the parked partitions."""
        with self._spill as spill:
            spill.close()
            parts = [
                self._summarize(table)
                for p in range(spill.parts)
                if (table := spill.read(p)) is not None
            ]
        if not parts:
            return kernel_launch_summary(empty_trace)
        stats = pd.concat(parts)  # indexed by key number = order of first appearance
        stats = stats.sort_index(kind="stable")
        key_rows = list(self._ids)
        keyed = empty_trace[list(KEYS)].iloc[:0]
        keys = pd.DataFrame(
            {
                c: pd.Series([k[i] for k in key_rows], dtype=keyed[c].dtype)
                if c in ("s_api_name", "s_kernel_name")
                else pd.array([k[i] for k in key_rows], dtype="Int64")
                for i, c in enumerate(KEYS)
            }
        ).iloc[stats.index.to_numpy()]
        out = pd.concat(
            [keys.reset_index(drop=True), stats.reset_index(drop=True)], axis=1
        )
        out = out.sort_values("total_mean_ns", ascending=False, kind="stable")
        return out.reset_index(drop=True)[[c.name for c in LAUNCH_SUMMARY_SCHEMA]]

    def _summarize(self, table: pa.Table) -> pd.DataFrame:
        frame = pd.DataFrame(
            {c: table.column(c).to_pandas(types_mapper=_AS_INT64.get) for c in METRICS}
        )
        frame["key"] = table.column("key").to_numpy()
        return summary_statistics(frame.groupby("key", sort=False))
