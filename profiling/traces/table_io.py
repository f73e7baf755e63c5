"""Columnar writers for the trace tables: CSV byte-identical to pandas ``to_csv``, or Parquet.

``kernel_launches.csv`` holds one row per kernel (5 M rows, 731 MB for a 5 M-kernel export);
pandas formats it one Python cell at a time. Here every column becomes an Arrow array and
``pyarrow.csv.write_csv`` formats row chunks in C++ threads, unquoted (``quoting_style="none"``).
The output is the same bytes ``DataFrame.to_csv(index=False)`` writes (tests compare the two):

- integers (``Int64`` or NumPy) as Arrow integers: decimal digits, an empty field for NA;
- text (category or ``str`` objects): each distinct value formatted once by Python's
  :mod:`csv` writer with pandas' dialect (``QUOTE_MINIMAL``, ``"`` doubled, ``\\n`` line end);
  the quote, comma, CR and LF of that text travel as the control bytes ``\\x1e \\x1f \\x1c
  \\x1d`` (Arrow refuses structural characters unquoted) and are translated back per chunk;
- anything else (floats, booleans): pandas' own text of the column (``Series.to_csv``).

A table whose text holds one of those control bytes, or a NUL, is written by pandas itself.
Parquet (:func:`write_parquet`) stores the same columns with their types: ``int64`` with nulls,
``float64``, text as dictionary-encoded strings.
"""

from __future__ import annotations

import csv
import io
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from trtbench.core.export import Schema, conform, write_csv
from trtbench.core.run_dir import atomic_target

FORMATS = ("csv", "parquet")
CHUNK_ROWS = 131_072
_CONTROL = "\x1e\x1f\x1c\x1d"  # stand-ins for  "  ,  \r  \n  inside text values
_TRANSLATE = bytes.maketrans(_CONTROL.encode(), b'",\r\n')
_TO_CONTROL = str.maketrans('",\r\n', _CONTROL)


def csv_field(value: str) -> str:
    """``value`` as pandas ``to_csv`` writes one field (Python csv, ``QUOTE_MINIMAL``)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([value, ""])
    return buf.getvalue()[:-2]  # drop the separator of the empty second field and "\n"


def _is_text(series: pd.Series) -> bool:
    if isinstance(series.dtype, pd.CategoricalDtype):
        return all(isinstance(c, str) for c in series.cat.categories)
    if isinstance(series.dtype, pd.StringDtype):
        return True
    if series.dtype == object:
        return bool(series.dropna().map(lambda v: isinstance(v, str)).all())
    return False


def _codes(series: pd.Series) -> tuple[np.ndarray, list[str]]:
    cat = (
        series
        if isinstance(series.dtype, pd.CategoricalDtype)
        else series.astype("category")
    )
    return cat.cat.codes.to_numpy().astype(np.int32), list(cat.cat.categories)


def _integers(series: pd.Series) -> pa.Array:
    """``int64`` Arrow array sharing the values buffer (pandas masked arrays convert their
    mask to a validity bitmap; only the bitmap is new)."""
    if isinstance(series.dtype, pd.api.extensions.ExtensionDtype):
        return pa.array(series.array).cast(pa.int64())
    return pa.array(series.to_numpy(dtype=np.int64))


def _csv_columns(frame: pd.DataFrame) -> tuple[list[pa.Array], bool] | None:
    """Arrow columns that format as pandas does; whether any holds control stand-ins; None
    when the frame holds text this writer cannot carry (a control byte or NUL)."""
    columns, translate = [], False
    for name in frame.columns:
        series = frame[name]
        if pd.api.types.is_integer_dtype(series.dtype):
            columns.append(_integers(series))
        elif _is_text(series):
            codes, labels = _codes(series)
            if any(ch in label for label in labels for ch in _CONTROL + "\x00"):
                return None
            fields = [csv_field(label) for label in labels]
            translate |= any(
                f != label for f, label in zip(fields, labels, strict=True)
            )
            text = pa.array([f.translate(_TO_CONTROL) for f in fields], pa.string())
            indices = pa.array(codes, mask=codes < 0)
            columns.append(pa.DictionaryArray.from_arrays(indices, text))
        else:  # floats, booleans, dates: pandas' own text of the column
            lines = series.to_csv(index=False, header=False, lineterminator="\n")
            values = lines.split("\n")[: len(series)]
            if any(ch in v for v in values for ch in _CONTROL + '",\r'):
                return None
            columns.append(pa.array(values, pa.string()))
    return columns, translate


def _chunks(table: pa.Table, translate: bool) -> Iterator[bytes | pa.Buffer]:
    """CSV bytes of ``table``'s row chunks, formatted by a thread pool, in order."""
    options = pa_csv.WriteOptions(include_header=False, quoting_style="none")

    def render(start: int) -> bytes | pa.Buffer:
        sink = pa.BufferOutputStream()
        pa_csv.write_csv(table.slice(start, CHUNK_ROWS), sink, options)
        data = sink.getvalue()  # written through the buffer protocol: no copy
        return data.to_pybytes().translate(_TRANSLATE) if translate else data

    workers = max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        pending: deque = deque()
        for start in range(0, table.num_rows, CHUNK_ROWS):
            pending.append(pool.submit(render, start))
            if len(pending) > workers:  # bounded memory: a few chunks in flight
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def write_csv_fast(frame: pd.DataFrame, path: Path, schema: Schema) -> Path:
    """Write ``frame`` conformed to ``schema`` as CSV, the bytes of pandas ``to_csv``.

    Args:
        frame: the table; columns as for :func:`trtbench.core.export.conform`.
        path: the file, written atomically (temp file + rename).
        schema: its columns.

    Returns:
        ``path``.

    Raises:
        ValueError: from :func:`~trtbench.core.export.conform` (missing or unknown columns).
    """
    out = conform(frame, schema)
    converted = _csv_columns(out)
    if converted is None:
        return write_csv(frame, path, schema)
    columns, translate = converted
    table = pa.table(columns, names=[str(c) for c in out.columns])
    header = ",".join(csv_field(str(c)) for c in out.columns) + "\n"
    with atomic_target(path) as tmp, tmp.open("wb") as fh:
        fh.write(header.encode())
        for data in _chunks(table, translate):
            fh.write(data)
    return path


def arrow_table(frame: pd.DataFrame) -> pa.Table:
    """``frame`` as Arrow: integers ``int64`` (NA -> null), text dictionary strings, floats
    ``float64``, others as :meth:`pyarrow.Table.from_pandas` converts them."""
    columns = []
    for name in frame.columns:
        series = frame[name]
        if pd.api.types.is_integer_dtype(series.dtype):
            columns.append(_integers(series))
        elif _is_text(series):
            codes, labels = _codes(series)
            indices = pa.array(codes, mask=codes < 0)
            columns.append(
                pa.DictionaryArray.from_arrays(indices, pa.array(labels, pa.string()))
            )
        elif pd.api.types.is_float_dtype(series.dtype):
            columns.append(
                pa.array(
                    series.to_numpy(dtype=np.float64, na_value=np.nan), from_pandas=True
                )
            )
        else:
            columns.append(pa.Array.from_pandas(series))
    return pa.table(columns, names=[str(c) for c in frame.columns])


def write_parquet(frame: pd.DataFrame, path: Path, schema: Schema) -> Path:
    """Write ``frame`` conformed to ``schema`` as Parquet (:func:`arrow_table` types)."""
    table = arrow_table(conform(frame, schema))
    with atomic_target(path) as tmp:
        pq.write_table(table, tmp)
    return path


def write_trace_tables(
    tables: Iterable[tuple[str, pd.DataFrame, Schema]], out_dir: Path, fmt: str = "csv"
) -> list[Path]:
    """Write ``(csv file name, frame, schema)`` tables into ``out_dir``.

    Args:
        fmt: ``csv`` (``name``) or ``parquet`` (``name`` with the suffix ``.parquet``).

    Raises:
        ValueError: an unknown ``fmt``.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    if fmt == "csv":
        return [write_csv_fast(f, out_dir / n, s) for n, f, s in tables]
    return [
        write_parquet(f, out_dir / Path(n).with_suffix(".parquet").name, s)
        for n, f, s in tables
    ]


class TableWriter:
    """Write one table piece by piece (pieces conformed to ``schema``), CSV or Parquet.

    CSV pieces are the bytes :func:`write_csv_fast` writes (header once; pandas formats a piece
    holding control bytes). Parquet pieces become row groups of at most ``row_group_rows`` rows,
    so a reader can stream the file a row group at a time (``pyarrow.parquet.ParquetFile.
    iter_batches``), LZ4-compressed, dictionary-encoded for text columns only (integers
    plain: twice as fast to write, about as small); the Arrow schema is that of the first piece
    (:func:`arrow_table`); a piece is encoded in a second thread while the caller prepares the
    next (one piece in flight). The
    file appears under its name when :meth:`close` runs (temp file + rename); a writer closed
    after an error leaves nothing. Use as a context manager.

    Args:
        path: the file.
        schema: its columns.
        fmt: ``csv`` or ``parquet``.
        row_group_rows: Parquet rows per row group.

    Raises:
        ValueError: an unknown ``fmt``.
    """

    def __init__(
        self, path: Path, schema: Schema, fmt: str, row_group_rows: int = 1_048_576
    ) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
        self.path, self.schema, self.fmt = Path(path), schema, fmt
        self.rows = 0
        self._row_group_rows = row_group_rows
        self._target = atomic_target(self.path)
        self._tmp = self._target.__enter__()
        self._fh = self._tmp.open("wb")
        self._parquet: pq.ParquetWriter | None = None
        self._pool = ThreadPoolExecutor(
            1
        )  # Parquet encoding beside the next piece's work
        self._pending: Future | None = None

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if exc is None:
            self.close()
        else:
            self._pool.shutdown()  # waits for a write in flight
            if self._parquet is not None:
                self._parquet.close()
            self._fh.close()
            self._target.__exit__(kind, exc, tb)

    def write(self, frame: pd.DataFrame) -> None:
        """Append ``frame``'s rows (columns as for :func:`~trtbench.core.export.conform`)."""
        out = conform(frame, self.schema)
        if self.fmt == "parquet":
            self._write_parquet(out)
        elif self.rows == 0 or len(out):
            self._write_csv(out)
        self.rows += len(out)

    def _write_csv(self, out: pd.DataFrame) -> None:
        if self.rows == 0 and self._fh.tell() == 0:
            header = ",".join(csv_field(str(c)) for c in out.columns) + "\n"
            self._fh.write(header.encode())
        if not len(out):
            return
        converted = _csv_columns(out)
        if converted is None:
            text = out.to_csv(index=False, header=False, lineterminator="\n")
            self._fh.write(text.encode())
            return
        columns, translate = converted
        table = pa.table(columns, names=[str(c) for c in out.columns])
        for data in _chunks(table, translate):
            self._fh.write(data)

    def _write_parquet(self, out: pd.DataFrame) -> None:
        table = arrow_table(out)
        if self._parquet is None:
            text = [f.name for f in table.schema if pa.types.is_dictionary(f.type)]
            self._parquet = pq.ParquetWriter(
                self._fh, table.schema, compression="lz4", use_dictionary=text
            )
        elif len(out):
            table = table.cast(self._parquet.schema)
        if len(out):
            self._wait()  # one piece in flight: memory stays bounded
            self._pending = self._pool.submit(
                self._parquet.write_table, table, row_group_size=self._row_group_rows
            )

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()  # raises what the write raised

    def close(self) -> Path:
        """Finish the file and give it its name; returns the path."""
        if self._fh.closed:
            return self.path
        if self.rows == 0 and self._fh.tell() == 0 and self._parquet is None:
            self.write(pd.DataFrame({c.name: [] for c in self.schema}))
        try:
            self._wait()
        finally:
            self._pool.shutdown()
        if self._parquet is not None:
            self._parquet.close()
        self._fh.close()
        self._target.__exit__(None, None, None)
        return self.path
