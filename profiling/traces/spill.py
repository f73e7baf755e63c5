"""Rows parked on disk by partition while a trace streams through (Arrow IPC stream files).

The streaming analysis (:mod:`trtbench.profiling.traces.nsys_stream`) cuts a trace into
partitions (calls by start time, summary keys) whose rows arrive in any order; each partition's
rows are appended here as Arrow record batches (uncompressed IPC stream format,
https://arrow.apache.org/docs/format/Columnar.html#ipc-streaming-format) and read back one
partition at a time, so memory holds one partition, not the trace.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

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
