"""Read-only access to an nsys SQLite export: validation, schema discovery, columnar fetches.

The export is opened read-only (``mode=ro``); tables and columns are discovered, never assumed
(Nsight Systems Analysis Guide, SQLite Schema Reference,
https://docs.nvidia.com/nsight-systems/AnalysisGuide/index.html: lazily created tables, columns
that drift between versions, version in ``META_DATA_EXPORT`` or the older ``EXPORT_META_DATA``).
Bulk query results come as Arrow columns from the ADBC SQLite driver (:func:`read_columns`: C code
appends each cell to an Arrow buffer, no Python object per cell), then as NumPy ``int64`` arrays
with NULL as :data:`NA`. Small integer pairs may travel packed in one 64-bit value
(:func:`pack_sql`, split with :func:`unpack`), which saves a column. Metadata, string ids and NVTX
ranges use ``sqlite3``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import adbc_driver_manager as adbc
import adbc_driver_sqlite as adbc_sqlite
import numpy as np
import pandas as pd
import pyarrow as pa

from trtbench.core.errors import ConfigError, TraceParseError

SQLITE_MAGIC = b"SQLite format 3\x00"
NA = -1  # SQL COALESCE sentinel for NULL (every real value here is >= 0)
BATCH_ROWS = 8_192  # rows per Arrow batch (also the rows ADBC looks at to infer types)
RANGE_ROWS = 262_144  # rows per threaded range read
READ_THREADS = 2  # the SQLite reads scale to 2 threads; more add contention, not speed
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")


def connect_export(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only after checking it is a non-empty SQLite file."""
    if not path.is_file():
        raise ConfigError(
            f"nsys export {path} does not exist; pass the .sqlite file of a report"
        )
    with path.open("rb") as fh:
        header = fh.read(100)
    head = header[: len(SQLITE_MAGIC)]
    if not head:
        raise TraceParseError(
            f"{path} is empty (0 bytes); export the report again with "
            "`nsys export --type sqlite REPORT.nsys-rep`"
        )
    if head != SQLITE_MAGIC:
        hint = (
            "a .nsys-rep/.qdrep report must be exported first"
            if path.suffix in (".nsys-rep", ".qdrep")
            else "it is not an SQLite file"
        )
        raise TraceParseError(
            f"{path} is not an nsys SQLite export ({hint}); run "
            "`nsys export --type sqlite REPORT.nsys-rep` and pass the .sqlite"
        )
    declared = declared_size(header)
    actual = path.stat().st_size
    if declared is not None and actual < declared:
        raise TraceParseError(
            f"{path} is truncated or corrupt ({actual} bytes of the {declared} its SQLite "
            "header declares); copy the file again or export the report again with "
            "`nsys export --type sqlite REPORT.nsys-rep`"
        )
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def declared_size(header: bytes) -> int | None:
    """Bytes an SQLite file should hold by its 100-byte header: page size (offset 16, 2 bytes
    big-endian, 1 meaning 65536) x page count (offset 28, 4 bytes), trusted only when the
    "version-valid-for" number (offset 92) equals the change counter (offset 24), as SQLite
    itself requires (https://www.sqlite.org/fileformat2.html#the_database_header). None when
    the header is short or the count is not valid."""
    if len(header) < 100:
        return None
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(header[28:32], "big")
    if header[24:28] != header[92:96] or pages == 0:
        return None
    return page * pages


class ExportSchema:
    """Table and column names present in one export, and its metadata (``meta``).

    Raises:
        TraceParseError: neither metadata table exists (not an nsys export; nvprof named).
    """

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        names = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        self.tables = set(names)
        meta = next((t for t in META_TABLES if t in self.tables), None)
        if meta is None:
            kind = (
                "an nvprof database"
                if "Version" in self.tables
                else "not an nsys export"
            )
            raise TraceParseError(
                f"{path} is {kind}: it has neither META_DATA_EXPORT nor EXPORT_META_DATA; "
                "export the report with `nsys export --type sqlite REPORT.nsys-rep`"
            )
        self.meta = dict(conn.execute(f"SELECT name, value FROM {meta}").fetchall())
        self._conn = conn
        self._columns: dict[str, set[str]] = {}

    def table(self, base: str) -> str | None:
        """``base`` itself, else the highest ``base_V<n>`` variant, else None."""
        if base in self.tables:
            return base
        variants = sorted(
            (
                t
                for t in self.tables
                if t.startswith(base + "_V") and t[len(base) + 2 :].isdigit()
            ),
            key=lambda t: int(t[len(base) + 2 :]),
        )
        return variants[-1] if variants else None

    def columns(self, table: str) -> set[str]:
        """Column names of ``table`` (``PRAGMA table_info``, cached)."""
        if table not in self._columns:
            rows = self._conn.execute(f"PRAGMA table_info({table})").fetchall()
            self._columns[table] = {r[1] for r in rows}
        return self._columns[table]

    def has_rows(self, table: str | None) -> bool:
        """Whether ``table`` exists and holds at least one row."""
        if not table:
            return False
        return (
            self._conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None
        )


def _read_range(uri: str, sql: str, out: dict[str, np.ndarray], at: int) -> int:
    """Run ``sql`` through ADBC, copy its columns into ``out[name][at:]`` (NULL -> NA) and
    return the number of rows. One database handle per call: safe to run in threads (the
    Arrow stream is read with the GIL released)."""
    with (
        closing(adbc_sqlite.connect(uri)) as db,
        closing(adbc.AdbcConnection(db)) as conn,
        closing(adbc.AdbcStatement(conn)) as statement,
    ):
        statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
        statement.set_sql_query(sql)
        stream, _ = statement.execute_query()
        table = pa.RecordBatchReader.from_stream(stream).read_all()
    for name, target in out.items():
        pos = at
        for chunk in table.column(name).chunks:
            if chunk.null_count:
                chunk = chunk.fill_null(NA)
            target[pos : pos + len(chunk)] = chunk.cast(pa.int64()).to_numpy()
            pos += len(chunk)
    return table.num_rows


def rowid_span(path: Path, table: str) -> tuple[int, int] | None:
    """``(min(rowid), max(rowid))`` of ``table``, None when it is empty. Two queries: SQLite
    answers a lone ``min(rowid)`` or ``max(rowid)`` from the B-tree's edge, but scans the
    whole table for both in one SELECT (https://www.sqlite.org/optoverview.html#minmax)."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        (first,) = conn.execute(f"SELECT min(rowid) FROM {table}").fetchone()
        (last,) = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()
    return None if first is None else (first, last)


def read_columns(
    path: Path,
    table: str,
    exprs: dict[str, str],
    where: str = "",
    rowids: tuple[int, int] | None = None,
) -> dict[str, np.ndarray]:
    """``SELECT exprs FROM table [WHERE where]`` in table (rowid) order, each result column a
    contiguous ``int64`` array with NULL as :data:`NA`, keyed like ``exprs``.

    The rowid span (the whole table, or ``rowids`` = (first, last) inclusive) is cut into
    ranges of about :data:`RANGE_ROWS` rows, read by :data:`READ_THREADS` threads through the
    ADBC SQLite driver, each range copied straight into its slot of the result (rowids of nsys
    tables are dense; gaps cost one copy).

    Raises:
        adbc_driver_manager.Error: SQLite failed (corrupt file, missing column);
        pyarrow.ArrowInvalid: a value is not an integer. Callers map both to
            ``TraceParseError``.
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    bounds = rowid_span(path, table) if rowids is None else rowids
    first, last = bounds if bounds is not None else (0, -1)
    span = last - first + 1
    out = {name: np.empty(span, dtype=np.int64) for name in exprs}
    select = ", ".join(f"{e} AS {n}" for n, e in exprs.items())
    cond = f" AND ({where})" if where else ""
    starts = range(0, span, max(RANGE_ROWS, -(-span // 64)))
    step = starts.step

    def read(lo: int) -> int:
        sql = (
            f"SELECT {select} FROM {table} WHERE rowid BETWEEN {first + lo} AND "
            f"{first + min(lo + step, span) - 1}{cond}"
        )
        return _read_range(uri, sql, out, lo)

    with ThreadPoolExecutor(READ_THREADS) as pool:
        counts = list(pool.map(read, starts))
    if sum(counts) == span:
        return out
    return {  # rowid gaps or rows filtered by ``where``: keep each range's rows
        name: np.concatenate(
            [v[lo : lo + n] for lo, n in zip(starts, counts, strict=True)]
        )
        for name, v in out.items()
    }


def iter_columns(
    path: Path, table: str, exprs: dict[str, str], chunk_rows: int, where: str = ""
) -> Iterator[dict[str, np.ndarray]]:
    """:func:`read_columns` of ``table`` one rowid span of ``chunk_rows`` rows at a time, in
    rowid order, the next span read in a background thread while the caller works on this
    one: memory holds two chunks, whatever the table's size. Raises as it does."""
    bounds = rowid_span(path, table)
    if bounds is None:
        return
    first, last = bounds
    spans = [
        (lo, min(lo + chunk_rows - 1, last))
        for lo in range(first, last + 1, chunk_rows)
    ]
    with ThreadPoolExecutor(1) as ahead:
        pending = ahead.submit(read_columns, path, table, exprs, where, spans[0])
        for span in spans[1:]:
            chunk = pending.result()
            pending = ahead.submit(read_columns, path, table, exprs, where, span)
            yield chunk
        yield pending.result()


def pack_sql(*parts: str) -> str:
    """SQL packing two (hi << 32 | lo) or three (x << 32 | y << 16 | z) integer expressions;
    NULL in any part gives the sentinel."""
    shifts = (32, 0) if len(parts) == 2 else (32, 16, 0)
    packed = " | ".join(f"(({p}) << {n})" for p, n in zip(parts, shifts, strict=True))
    return f"COALESCE({packed}, {NA})"


def unpack(
    values: np.ndarray,
) -> tuple[pd.arrays.IntegerArray, pd.arrays.IntegerArray]:
    """Inverse of two-part :func:`pack_sql`: (hi, lo) as Int64 arrays, NA at the sentinel."""
    na = values == NA
    return (
        pd.arrays.IntegerArray(values >> 32, na),
        pd.arrays.IntegerArray(values & 0xFFFFFFFF, na),
    )


def decode_strings(conn: sqlite3.Connection, ids: np.ndarray) -> dict[int, str]:
    """``StringIds`` values of the distinct non-negative ``ids`` (queried 500 at a time)."""
    wanted = [int(i) for i in pd.unique(np.asarray(ids, dtype=np.int64)) if i >= 0]
    out: dict[int, str] = {}
    for lo in range(0, len(wanted), 500):
        part = wanted[lo : lo + 500]
        marks = ",".join("?" * len(part))
        out.update(
            conn.execute(f"SELECT id, value FROM StringIds WHERE id IN ({marks})", part)
        )
    return out


def categorical_from_ids(
    codes_by_id: np.ndarray, labels: dict[int, str]
) -> pd.Categorical:
    """Categorical of the labels of integer ids (-1 or unknown id -> NA), categories sorted.

    One hash pass over ``codes_by_id`` (:func:`pandas.factorize`), then a small remap of the
    distinct ids; ids with the same label share one category.
    """
    codes, uniques = pd.factorize(np.asarray(codes_by_id, dtype=np.int64))
    names = [labels.get(int(i)) if i >= 0 else None for i in uniques]
    categories = sorted({n for n in names if n is not None})
    lookup = {c: j for j, c in enumerate(categories)}
    remap = np.array(
        [lookup[n] if n is not None else -1 for n in names] + [-1], dtype=np.int32
    )
    return pd.Categorical.from_codes(remap[codes], categories=categories)
