"""Nsight Systems SQLite exports: the :class:`NsysReport` facade (schema-aware loader).

Facts used (``research/profiling.md`` §1): the schema version is in ``META_DATA_EXPORT`` (nsys
>= 2023) or ``EXPORT_META_DATA`` (older); tables are created lazily and carry no indexes; columns
drift between versions (resolved here with ``PRAGMA table_info``, never ``SELECT *``);
``CUPTI_ACTIVITY_KIND_RUNTIME`` holds runtime and driver calls; GPU work joins its call on
``correlationId`` AND process (``globalPid = globalTid & ~0xFFFFFF``), as NVIDIA's
``cuda_kern_exec_*`` reports do. The join runs inside SQLite against a keyed temporary table
(the export itself is opened read-only and never modified); only the joined integer columns are
fetched, in chunks, and string ids are decoded once per distinct id.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import numpy as np
import pandas as pd

from trtbench.errors import TraceParseError
from trtbench.profiling.traces.launches import (
    LaunchAnalysis,
    LaunchTraceFacade,
    classify_api,
    make_launch_frame,
    make_range_frame,
    strip_api_version,
)
from trtbench.profiling.traces.nsys_sqlite import (
    NA,
    ExportSchema,
    categorical_from_ids,
    connect_export,
    decode_strings,
    fetch_into,
    pack_sql,
    unpack,
)
from trtbench.profiling.traces.schemas import GPU_KINDS, RANGE_COLUMNS

logger = logging.getLogger(__name__)

_PID_MASK = -16777216  # 0xFFFFFFFFFF000000 as a signed 64-bit SQLite integer
_NVTX_RANGE_TYPES = {  # ENUM_NSYS_EVENT_TYPE ids, used when the ENUM table is absent
    "NvtxPushPopRange": 59,
    "NvtxStartEndRange": 60,
    "NvtxtPushPopRange": 70,
    "NvtxtStartEndRange": 71,
}
_MEMCPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
                 8: "DtoD", 9: "HtoH", 10: "PtoP"}  # fmt: skip
# gpu_kind code, table, name expression (kernel: StringIds id; memcpy: copyKind)
_GPU_TABLES = (
    (0, "CUPTI_ACTIVITY_KIND_KERNEL", ("demangledName", "shortName")),
    (1, "CUPTI_ACTIVITY_KIND_MEMCPY", ("copyKind",)),
    (2, "CUPTI_ACTIVITY_KIND_MEMSET", ()),
    (3, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", ()),
)
# Fetched columns of the launch query, in order (kind is filled in numpy, not fetched). Pairs of
# small integers travel packed in one int64 (hi << 32 | lo) because the sqlite3 module's cost is
# per cell; grid/block pack x << 32 | y << 16 | z (CUDA limits: x < 2^31, y and z < 2^16).
_ROW_FIELDS = ("kind", "start", "end", "device_stream", "pid_corr", "name", "graphNodeId",
               "grid", "block", "api_start", "api_end", "tid_api_name")  # fmt: skip
_PACKED = {"grid": ("gridX", "gridY", "gridZ"), "block": ("blockX", "blockY", "blockZ")}


def _gpu_names(
    kind: np.ndarray, name: np.ndarray, kernel_names: dict
) -> pd.Categorical:
    """Kernel names from StringIds; ``Memcpy <kind>``, ``Memset``, ``CUDA graph`` otherwise."""
    kernels = categorical_from_ids(np.where(kind == 0, name, NA), kernel_names)
    extra = [f"Memcpy {v}" for v in _MEMCPY_KINDS.values()] + [
        "Memcpy",
        "Memset",
        "CUDA graph",
    ]
    categories = list(kernels.categories)
    categories += [c for c in extra if c not in set(categories)]
    lookup = {c: j for j, c in enumerate(categories)}
    codes = kernels.codes.astype(np.int32)
    copy_codes = np.full(max(_MEMCPY_KINDS) + 1, lookup["Memcpy"], dtype=np.int32)
    for copy_kind, label in _MEMCPY_KINDS.items():
        copy_codes[copy_kind] = lookup[f"Memcpy {label}"]
    memcpy = kind == 1
    copy_kind = np.clip(name[memcpy], 0, len(copy_codes) - 1)
    codes[memcpy] = np.where(
        name[memcpy] < len(copy_codes), copy_codes[copy_kind], lookup["Memcpy"]
    )
    codes[kind == 2] = lookup["Memset"]
    codes[kind == 3] = lookup["CUDA graph"]
    return pd.Categorical.from_codes(codes, categories=categories)


class NsysReport(LaunchTraceFacade):
    """One nsys SQLite export, parsed eagerly into a launch frame and an NVTX range frame.

    Attributes:
        path: the export.
        schema_version: ``EXPORT_SCHEMA_VERSION`` (e.g. ``"3.16.1"``).
        product_version: ``EXPORT_PRODUCT_VERSION`` (nsys release, e.g. ``"2024.6.2.225"``).
        launches: launch frame (:data:`~trtbench.profiling.traces.schemas.LAUNCH_FRAME_COLUMNS`).
        ranges: NVTX push/pop and start/end ranges with an end (names decoded).

    Raises:
        ConfigError: the file does not exist.
        TraceParseError: empty, not SQLite, not an nsys export, truncated/corrupt, or no CUDA
            activity (no kernel/memcpy/memset/graph rows and no launch calls).
    """

    range_kind = "NVTX range"

    def describe(self) -> str:
        """``nsys <release> export (schema <version>) <file name>``."""
        return f"nsys {self.product_version} export (schema {self.schema_version}) {self.path.name}"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        started = time.perf_counter()
        conn = connect_export(self.path)
        try:
            schema = ExportSchema(conn, self.path)
            self.schema_version = schema.meta.get("EXPORT_SCHEMA_VERSION", "unknown")
            self.product_version = schema.meta.get("EXPORT_PRODUCT_VERSION", "unknown")
            self.launches = self._load_launches(conn, schema)
            self.ranges = self._load_ranges(conn, schema)
        except sqlite3.DatabaseError as exc:
            raise TraceParseError(
                f"{self.path} is truncated or corrupt ({exc}); export the report again with "
                "`nsys export --type sqlite REPORT.nsys-rep`"
            ) from exc
        finally:
            conn.close()
        logger.debug(
            "%s: %d launch-frame rows, %d ranges, loaded in %.2f s",
            path,
            len(self.launches),
            len(self.ranges),
            time.perf_counter() - started,
        )

    def _load_launches(
        self, conn: sqlite3.Connection, schema: ExportSchema
    ) -> pd.DataFrame:
        """Fill temp tables (calls keyed by correlation and process, GPU keys), then fetch
        every GPU table left-joined with its call, and the launch calls without GPU rows."""
        conn.execute(
            "CREATE TEMP TABLE trtbench_api (corr INTEGER NOT NULL, gpid INTEGER NOT NULL, "
            "start INTEGER, end INTEGER, tid INTEGER, nameId INTEGER, "
            "PRIMARY KEY (corr, gpid)) WITHOUT ROWID"
        )
        conn.execute(
            "CREATE TEMP TABLE trtbench_gpu (corr INTEGER NOT NULL, gpid INTEGER NOT NULL, "
            "PRIMARY KEY (corr, gpid)) WITHOUT ROWID"
        )
        runtime = schema.table("CUPTI_ACTIVITY_KIND_RUNTIME")
        if runtime:
            conn.execute(
                "INSERT OR IGNORE INTO temp.trtbench_api SELECT correlationId, "
                f"globalTid & {_PID_MASK}, start, end, globalTid & 16777215, nameId "
                f"FROM {runtime} WHERE correlationId IS NOT NULL AND globalTid IS NOT NULL"
            )
        sources = [
            (table, self._gpu_query(conn, schema, table, names))
            for _, table, names in _GPU_TABLES
            if schema.has_rows(schema.table(table))
        ]
        name_ids = [
            r[0] for r in conn.execute("SELECT DISTINCT nameId FROM temp.trtbench_api")
        ]
        api_names = decode_strings(conn, np.array(name_ids, dtype=np.int64))
        launch_ids = [
            i
            for i, n in api_names.items()
            if classify_api(strip_api_version(n)) != "other"
        ]
        counts = [
            conn.execute(f"SELECT count(*) FROM {schema.table(table)}").fetchone()[0]
            for table, _ in sources
        ]
        rows = np.empty((sum(counts), len(_ROW_FIELDS)), dtype=np.int64)
        at = 0
        for (table, sql), count in zip(sources, counts, strict=True):
            rows[at : at + count, 0] = next(k for k, t, _ in _GPU_TABLES if t == table)
            at += fetch_into(conn, sql, rows[at : at + count, 1:])
        if launch_ids:  # rare and small: appended with one copy
            idle = conn.execute(self._idle_calls_query(launch_ids)).fetchall()
            if idle:
                idle_rows = np.array([(NA, *r) for r in idle], dtype=np.int64)
                rows = np.concatenate([rows[:at], idle_rows])
                at = len(rows)
        if at == 0:
            raise TraceParseError(
                f"{self.path} holds no CUDA activity (no kernel, memcpy, memset or graph rows "
                "and no launch calls); record with `nsys profile --trace=cuda,nvtx` and make "
                "sure CUDA work runs inside the capture range"
            )
        rows = rows[:at]
        kernel_names = decode_strings(
            conn, rows[rows[:, 0] == 0, _ROW_FIELDS.index("name")]
        )
        return self._frame(rows, kernel_names, api_names)

    def _gpu_query(
        self,
        conn: sqlite3.Connection,
        schema: ExportSchema,
        base: str,
        names: tuple[str, ...],
    ) -> str:
        """SELECT of one GPU table in ``_ROW_FIELDS`` order (without ``kind``); also records
        the table's (correlation, process) keys in ``temp.trtbench_gpu``."""
        table = schema.table(base)
        cols = schema.columns(table)
        missing = [c for c in ("start", "end") if c not in cols]
        if missing:
            raise TraceParseError(f"{self.path}: table {table} lacks columns {missing}")

        def col(name: str) -> str:
            return f"COALESCE(g.{name}, {NA})" if name in cols else str(NA)

        name = next((f"COALESCE(g.{n}, {NA})" for n in names if n in cols), str(NA))
        packed = [
            pack_sql(*(f"g.{c}" for c in xyz)) if set(xyz) <= cols else str(NA)
            for xyz in _PACKED.values()
        ]
        pid_corr = (
            pack_sql("(g.globalPid >> 24) & 16777215", "g.correlationId")
            if {"globalPid", "correlationId"} <= cols
            else str(NA)
        )
        device = [f"g.{c}" if c in cols else "NULL" for c in ("deviceId", "streamId")]
        select = ", ".join(
            [col("start"), col("end"), pack_sql(*device), pid_corr, name, col("graphNodeId"),
             *packed, f"COALESCE(a.start, {NA})", f"COALESCE(a.end, {NA})",
             pack_sql("a.tid", "a.nameId")]
        )  # fmt: skip
        if not {"correlationId", "globalPid"} <= cols:
            return f"SELECT {select} FROM {table} g LEFT JOIN temp.trtbench_api a ON 0"
        conn.execute(
            "INSERT OR IGNORE INTO temp.trtbench_gpu SELECT correlationId, globalPid "
            f"FROM {table} WHERE correlationId IS NOT NULL AND globalPid IS NOT NULL"
        )
        return (
            f"SELECT {select} FROM {table} g LEFT JOIN temp.trtbench_api a "
            "ON a.corr = g.correlationId AND a.gpid = g.globalPid"
        )

    @staticmethod
    def _idle_calls_query(launch_ids: list[int]) -> str:
        """Launch calls with no GPU row (e.g. replays of graphs traced without node rows)."""
        na3, na4 = ", ".join([str(NA)] * 3), ", ".join([str(NA)] * 4)
        pid_corr = pack_sql("(a.gpid >> 24) & 16777215", "a.corr")
        return (
            f"SELECT {na3}, {pid_corr}, {na4}, a.start, a.end, {pack_sql('a.tid', 'a.nameId')} "
            f"FROM temp.trtbench_api a WHERE a.nameId IN ({','.join(map(str, launch_ids))}) "
            "AND NOT EXISTS (SELECT 1 FROM temp.trtbench_gpu g "
            "WHERE g.corr = a.corr AND g.gpid = a.gpid)"
        )

    @staticmethod
    def _frame(rows: np.ndarray, kernel_names: dict, api_names: dict) -> pd.DataFrame:
        """Launch frame from the fetched (rows, fields) array (see ``_ROW_FIELDS``)."""
        f = {name: rows[:, j] for j, name in enumerate(_ROW_FIELDS)}

        def masked(values: np.ndarray) -> pd.arrays.IntegerArray:
            values = np.ascontiguousarray(values)
            return pd.arrays.IntegerArray(values, values == NA)

        kind = np.ascontiguousarray(f["kind"])
        device, stream = unpack(f["device_stream"])
        pid, corr = unpack(f["pid_corr"])
        tid, api_name = unpack(f["tid_api_name"])
        api = {i: strip_api_version(n) for i, n in api_names.items()}
        geometry = {}
        for packed in _PACKED:
            values = f[packed]
            na = values == NA
            parts = (values >> 32, (values >> 16) & 0xFFFF, values & 0xFFFF)
            for axis, part in zip("xyz", parts, strict=True):
                geometry[f"{packed}_{axis}"] = pd.arrays.IntegerArray(part, na)
        return make_launch_frame(
            {
                "pid": pid,
                "tid": tid,
                "correlation_id": corr,
                "s_api_name": categorical_from_ids(
                    api_name.to_numpy(np.int64, na_value=NA), api
                ),
                "api_start_ns": masked(f["api_start"]),
                "api_end_ns": masked(f["api_end"]),
                "gpu_kind": pd.Categorical.from_codes(kind, categories=GPU_KINDS),
                "start_ns": masked(f["start"]),
                "end_ns": masked(f["end"]),
                "device_id": device,
                "stream_id": stream,
                "graph_node_id": masked(f["graphNodeId"]),
                "s_name": _gpu_names(
                    kind, np.ascontiguousarray(f["name"]), kernel_names
                ),
                **geometry,
            }
        )

    def _load_ranges(
        self, conn: sqlite3.Connection, schema: ExportSchema
    ) -> pd.DataFrame:
        table = schema.table("NVTX_EVENTS")
        empty = {c: [] for c in RANGE_COLUMNS}
        if not schema.has_rows(table):
            return make_range_frame(empty)
        types = dict(_NVTX_RANGE_TYPES)
        if "ENUM_NSYS_EVENT_TYPE" in schema.tables:
            enum = dict(conn.execute("SELECT name, id FROM ENUM_NSYS_EVENT_TYPE"))
            types = {n: enum[n] for n in types if n in enum} or types
        cols = schema.columns(table)
        text = "n.text" if "text" in cols else "NULL"
        if "textId" in cols:
            name, join = (
                f"COALESCE({text}, s.value)",
                "LEFT JOIN StringIds s ON s.id = n.textId",
            )
        else:
            name, join = text, ""
        rows = conn.execute(
            f"SELECT {name}, (n.globalTid >> 24) & 16777215, n.globalTid & 16777215, n.start, "
            f"n.end FROM {table} n {join} WHERE n.end IS NOT NULL AND n.eventType IN "
            f"({','.join(str(v) for v in types.values())})"
        ).fetchall()
        columns = list(zip(*rows, strict=True)) if rows else [[] for _ in empty]
        return make_range_frame(dict(zip(empty, columns, strict=True)))


def analyze_nsys_report(path: Path, step_pattern: str | None = None) -> LaunchAnalysis:
    """Load ``path`` and run every launch analyzer (``trtbench analyze nsys``).

    Raises:
        ConfigError, TraceParseError: see :class:`NsysReport` and
            :func:`~trtbench.profiling.traces.launches.resolve_step_windows`.
    """
    return NsysReport(path).analyze(step_pattern)
