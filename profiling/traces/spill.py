"""Rows parked on disk while a trace streams through: by partition (:class:`SpillFiles`, Arrow
IPC stream files, one per partition), in key-sorted runs read back by key range
(:class:`SortedRuns`, one Arrow IPC file), or as batches read back in order
(:class:`ParkedBatches`, one Arrow IPC file).

The streaming analysis (:mod:`trtbench.profiling.traces.nsys_stream`) meets rows in table order
but analyses them by call start time (GPU rows) or by summary key; the rows go to disk as they
come (uncompressed IPC format,
https://arrow.apache.org/docs/format/Columnar.html#serialization-and-interprocess-communication-ipc)
and come back one partition or one key range at a time, so memory holds that, not the trace.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa


class SpillFiles:
    """``parts`` append-only Arrow files in a private temporary folder under ``work_dir``.

    Every batch appended to one part must have the same schema. Use as a context manager:
    the folder is removed on exit.
    """

    def __init__(
        self, work_dir: Path | None, parts: int, prefix: str = "spill"
    ) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=f"trtbench_{prefix}_", dir=work_dir))
        self.parts = parts
        self._writers: dict[
            int, tuple[pa.NativeFile, pa.ipc.RecordBatchStreamWriter]
        ] = {}
        self.rows = [0] * parts

    def __enter__(self) -> SpillFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _path(self, part: int) -> Path:
        return self.folder / f"{part:06d}.arrows"

    def append(self, part: int, batch: pa.RecordBatch | pa.Table) -> None:
        """Append ``batch``'s rows to ``part`` (0 <= part < parts)."""
        if not batch.num_rows:
            return
        if part not in self._writers:
            sink = pa.OSFile(str(self._path(part)), "wb")
            self._writers[part] = (sink, pa.ipc.new_stream(sink, batch.schema))
        self._writers[part][1].write(batch)
        self.rows[part] += batch.num_rows

    def close(self) -> None:
        """Finish every part (appending after this is an error)."""
        for sink, writer in self._writers.values():
            writer.close()
            sink.close()
        self._writers.clear()

    def read(self, part: int) -> pa.Table | None:
        """Every row appended to ``part``, in order (None when it got none); the file is
        deleted once read. Call :meth:`close` first."""
        path = self._path(part)
        if not path.exists():
            return None
        with pa.OSFile(str(path), "rb") as source:  # read into memory: the file can go
            table = pa.ipc.open_stream(source).read_all()
        path.unlink()
        return table


class SortedRuns:
    """Rows parked on disk in runs, each run sorted by an ``int64`` key column, and read back
    by key range: the rows of every run whose key lies in ``[lo, hi)``, runs in the order they
    were appended, each run's rows in its (key) order.

    One Arrow IPC file (https://arrow.apache.org/docs/format/Columnar.html#ipc-file-format), a
    record batch per run, in a private temporary folder under ``work_dir``; read through a
    memory map opened per :meth:`read` (only the pages of the rows asked for are touched, and
    they leave the process's resident memory when the map closes). Memory between reads: the
    smallest and largest key of each run. Use as a context manager: the folder is removed on
    exit.
    """

    def __init__(self, work_dir: Path | None, key: str, prefix: str = "runs") -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=f"trtbench_{prefix}_", dir=work_dir))
        self.key = key
        self.path = self.folder / "runs.arrow"
        self._sink: pa.NativeFile | None = None
        self._writer: pa.ipc.RecordBatchFileWriter | None = None
        self._bounds: list[tuple[int, int]] = []  # (smallest, largest) key per run
        self.rows = 0

    def __enter__(self) -> SortedRuns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def append(self, batch: pa.RecordBatch) -> None:
        """Append one run; ``batch`` must be sorted by the key column (not checked) and have
        the schema of the first run."""
        if not batch.num_rows:
            return
        if self._writer is None:
            self._sink = pa.OSFile(str(self.path), "wb")
            self._writer = pa.ipc.new_file(self._sink, batch.schema)
        self._writer.write_batch(batch)
        keys = batch.column(self.key)
        self._bounds.append((keys[0].as_py(), keys[-1].as_py()))
        self.rows += batch.num_rows

    def close(self) -> None:
        """Finish the file (appending after this is an error)."""
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = self._sink = None

    def read(self, lo: int, hi: int | None) -> dict[str, np.ndarray] | None:
        """The rows with ``lo <= key < hi`` (``hi`` None: no upper bound) as one copied
        ``numpy`` array per column, in run order; None when there are none. Columns must be
        primitive without nulls (``pyarrow.ArrowInvalid`` otherwise). Call :meth:`close`
        first."""
        wanted = [
            i
            for i, (low, high) in enumerate(self._bounds)
            if high >= lo and (hi is None or low < hi)
        ]
        if not wanted:
            return None
        with pa.memory_map(str(self.path)) as source:
            reader = pa.ipc.open_file(source)
            parts = []
            for i in wanted:
                batch = reader.get_batch(i)
                keys = batch.column(self.key).to_numpy()
                a = int(np.searchsorted(keys, lo))
                b = len(keys) if hi is None else int(np.searchsorted(keys, hi))
                if b > a:
                    parts.append(batch.slice(a, b - a))
            if not parts:
                return None
            # np.concatenate copies even one part: nothing refers to the map once it closes
            return {
                name: np.concatenate([p.column(name).to_numpy() for p in parts])
                for name in reader.schema.names
            }


class ParkedBatches:
    """Record batches parked in one Arrow IPC file as they come, read back one at a time in
    the same order (through a memory map; each batch's columns copied out, so memory holds
    one batch). Use as a context manager: the folder is removed on exit."""

    def __init__(self, work_dir: Path | None, prefix: str = "batches") -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=f"trtbench_{prefix}_", dir=work_dir))
        self.path = self.folder / "batches.arrow"
        self._sink: pa.NativeFile | None = None
        self._writer: pa.ipc.RecordBatchFileWriter | None = None
        self.rows = self.batches = 0

    def __enter__(self) -> ParkedBatches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def append(self, columns: dict[str, np.ndarray]) -> None:
        """Park one batch (same column names and types every time)."""
        n = len(next(iter(columns.values()))) if columns else 0
        if not n:
            return
        batch = pa.record_batch({k: pa.array(v) for k, v in columns.items()})
        if self._writer is None:
            self._sink = pa.OSFile(str(self.path), "wb")
            self._writer = pa.ipc.new_file(self._sink, batch.schema)
        self._writer.write_batch(batch)
        self.rows += n
        self.batches += 1

    def close(self) -> None:
        """Finish the file (appending after this is an error)."""
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = self._sink = None

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        """Every batch, in order, as copied ``numpy`` columns; call :meth:`close` first.

        Each batch is read through a memory map of its own, closed before the batch is
        handed out: the pages a map has touched count in the process's resident memory
        while it is open, so one map over the whole file would end up holding the file.
        """
        for i in range(self.batches):
            with pa.memory_map(str(self.path)) as source:
                batch = pa.ipc.open_file(source).get_batch(i)
                columns = {
                    name: batch.column(name).to_numpy().copy()
                    for name in batch.schema.names
                }
                del batch  # nothing refers to the map once it closes
            yield columns
