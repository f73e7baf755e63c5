"""Read-only access to an nsys SQLite export: validation, schema discovery, fast integer fetches.

The export is opened read-only (``mode=ro``); tables and columns are discovered, never assumed
(``research/profiling.md`` §1: lazily created tables, columns that drift between versions, version
in ``META_DATA_EXPORT`` or the older ``EXPORT_META_DATA``). Query results are fetched as integers
into NumPy arrays; the ``sqlite3`` module's cost is per cell, so callers pack small integer pairs
into one 64-bit value in SQL (:func:`pack_sql`) and split them afterwards (:func:`unpack`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from trtbench.errors import ConfigError, TraceParseError

SQLITE_MAGIC = b"SQLite format 3\x00"
NA = -1  # SQL COALESCE sentinel for NULL (every real value here is >= 0)
CHUNK_ROWS = 262_144
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")


def connect_export(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only after checking it is a non-empty SQLite file."""
    if not path.is_file():
        raise ConfigError(
            f"nsys export {path} does not exist; pass the .sqlite file of a report"
        )
    with path.open("rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
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
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


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


def fetch_into(conn: sqlite3.Connection, sql: str, out: np.ndarray) -> int:
    """Run ``sql`` (integer columns only) into ``out`` (rows, n_cols), chunk by chunk; return
    the number of rows written."""
    cursor = conn.execute(sql)
    filled = 0
    while rows := cursor.fetchmany(CHUNK_ROWS):
        out[filled : filled + len(rows)] = rows
        filled += len(rows)
    return filled


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
    wanted = [int(i) for i in np.unique(ids) if i >= 0]
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
    """Categorical of the labels of integer ids (-1 or unknown id -> NA), built from codes."""
    ids = np.unique(codes_by_id[codes_by_id >= 0])
    names = [labels.get(int(i)) for i in ids]
    categories = sorted({n for n in names if n is not None})
    lookup = {c: j for j, c in enumerate(categories)}
    id_codes = np.array(
        [lookup.get(n, -1) if n is not None else -1 for n in names] + [-1]
    )
    pos = np.searchsorted(ids, codes_by_id)
    pos = np.where(codes_by_id >= 0, pos, len(ids))
    return pd.Categorical.from_codes(
        id_codes[pos].astype(np.int32), categories=categories
    )
