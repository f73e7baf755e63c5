"""Records on their way to disk: appended in chunks while a tier runs, never kept whole.

The load generator turns each finished request into one :class:`RequestRecord` and its
:class:`ResponseRecord` rows at once and hands them to a sink; :class:`CsvRecordSink`
buffers at most ``chunk_rows`` rows and appends them to two CSV files (header = the record
fields, in field order; ``None`` is an empty cell). Memory therefore stays bounded by the
chunk size and the requests in flight, however long the tier runs; the summary is computed
later from the files (read back with
:func:`trtbench.profiling.loadtest.files.schemas.read_records_csv`).
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from trtbench.core.records import OutputRecord, RequestRecord, ResponseRecord
from trtbench.profiling.loadtest.records.response_rows import ResponseRows

DEFAULT_CHUNK_ROWS = 2048


class RecordSink(Protocol):
    """Receives the records of each finished request, in completion order."""

    def add(
        self,
        request: RequestRecord,
        responses: Sequence[ResponseRecord],
        output: OutputRecord | None = None,
    ) -> None:
        """Take one request's records (the caller keeps no reference to them); ``output``:
        what it generated (None: failed, or not recorded)."""
        ...


@dataclass(frozen=True)
class RecordFiles:
    """The CSV files one variant's records stream into (``outputs``: None, not written)."""

    requests: Path
    responses: Path
    outputs: Path | None = None


def _cell(value: Any) -> Any:
    return "" if value is None else value


class _CsvAppender:
    """One CSV file opened for appending, with the header written when it is new."""

    def __init__(self, path: Path, record: type):
        self.names = [f.name for f in dataclasses.fields(record)]
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.is_file() or path.stat().st_size == 0
        self.file: IO[str] = path.open("a", newline="", encoding="utf-8")
        self.writer = csv.writer(self.file)
        if new:
            self.writer.writerow(self.names)
            self.file.flush()
        self.rows: list[Sequence[Any]] = []

    def add(self, record: Any) -> None:
        self.rows.append([_cell(getattr(record, n)) for n in self.names])

    def flush(self) -> None:
        if self.rows:
            self.writer.writerows(self.rows)
            self.rows.clear()
        self.file.flush()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.file.close()


class CsvRecordSink:
    """Append records to ``files`` in chunks of ``chunk_rows`` rows (request + response rows).

    Use as a context manager; leaving the block flushes and closes both files (also on an
    exception or a stop signal, so every finished request is on disk).

    Raises:
        OSError: a file cannot be opened or written (the caller turns it into one line).
    """

    def __init__(self, files: RecordFiles, chunk_rows: int = DEFAULT_CHUNK_ROWS):
        self.files = files
        self.chunk_rows = max(1, int(chunk_rows))
        self._requests: _CsvAppender | None = None
        self._responses: _CsvAppender | None = None
        self._outputs: _CsvAppender | None = None
        self.request_rows = 0
        self.response_rows = 0

    def __enter__(self) -> CsvRecordSink:
        self._requests = _CsvAppender(self.files.requests, RequestRecord)
        self._responses = _CsvAppender(self.files.responses, ResponseRecord)
        if self.files.outputs is not None:
            self._outputs = _CsvAppender(self.files.outputs, OutputRecord)
        return self

    def add(
        self,
        request: RequestRecord,
        responses: Sequence[ResponseRecord],
        output: OutputRecord | None = None,
    ) -> None:
        assert self._requests is not None and self._responses is not None
        self._requests.add(request)
        if isinstance(responses, ResponseRows):  # its rows, no record made
            self._responses.rows.extend(responses.cells())
        else:
            for response in responses:
                self._responses.add(response)
        if output is not None and self._outputs is not None:
            self._outputs.add(output)
        self.request_rows += 1
        self.response_rows += len(responses)
        if len(self._requests.rows) + len(self._responses.rows) >= self.chunk_rows:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows (requests first, so a response never precedes its request)."""
        for appender in (self._requests, self._responses, self._outputs):
            if appender is not None:
                appender.flush()

    def __exit__(self, *exc: object) -> None:
        for appender in (self._requests, self._responses, self._outputs):
            if appender is not None:
                appender.close()
        self._requests = self._responses = self._outputs = None
