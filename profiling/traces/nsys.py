"""Nsight Systems SQLite exports: the :class:`NsysReport` facade (schema-aware loader).

Facts used (the SQLite Schema Reference of the Nsight Systems Analysis Guide,
https://docs.nvidia.com/nsight-systems/AnalysisGuide/index.html, checked on the real exports listed
in ``tests/data/README.md``): the schema version is in ``META_DATA_EXPORT`` (nsys >= 2023) or
``EXPORT_META_DATA`` (older); tables are created lazily and carry no indexes; columns drift between
versions (resolved here with ``PRAGMA table_info``, never ``SELECT *``);
``CUPTI_ACTIVITY_KIND_RUNTIME`` holds runtime and driver calls; GPU work joins its call on
``correlationId`` AND process (``globalPid = globalTid & ~0xFFFFFF``), as NVIDIA's
``cuda_kern_exec_*`` reports do. The export is opened read-only and never modified: the needed
integer columns of the call table and of each GPU table are read as Arrow columns
(:func:`~trtbench.profiling.traces.nsys_sqlite.read_columns`, threaded rowid ranges), the join runs
in NumPy (one sort of the call keys, a binary search per GPU row; the first call per key is kept),
and string ids are decoded once per distinct id. ``trtbench analyze nsys`` reads exports through
:mod:`~trtbench.profiling.traces.nsys_stream` instead, which uses the functions here on bounded
batches and writes the same tables without holding the export.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import adbc_driver_manager
import numpy as np
import pandas as pd
import pyarrow as pa

from trtbench.core.errors import TraceParseError
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
    pack_sql,
    read_columns,
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
_MEMCPY_KINDS = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}
# Names of GPU rows that are not kernels (after the kernel names in the s_name categories).
MEMCPY_LABELS = (
    *(f"Memcpy {v}" for v in _MEMCPY_KINDS.values()),
    "Memcpy",
    "Memset",
    "CUDA graph",
)
# gpu_kind code, table, name columns (kernel: StringIds id, first present; memcpy: copyKind)
_GPU_TABLES = (
    (0, "CUPTI_ACTIVITY_KIND_KERNEL", ("demangledName", "shortName")),
    (1, "CUPTI_ACTIVITY_KIND_MEMCPY", ("copyKind",)),
    (2, "CUPTI_ACTIVITY_KIND_MEMSET", ()),
    (3, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", ()),
)
# GPU-row fields read per table (NA where the table lacks the column). Each ADBC column costs
# about as much as the row itself, so small integers travel packed (NA when any part is NULL):
# grid/block x << 32 | y << 16 | z (CUDA limits: x < 2^31, y and z < 2^16), device << 32 | stream.
_GPU_FIELDS = (
    "start",
    "end",
    "device_stream",
    "globalPid",
    "correlationId",
    "name",
    "graphNodeId",
    "grid",
    "block",
)
_PACKED = {
    "grid": ("gridX", "gridY", "gridZ"),
    "block": ("blockX", "blockY", "blockZ"),
    "device_stream": ("deviceId", "streamId"),
}
# Fields of the launch-call rows (CUPTI_ACTIVITY_KIND_RUNTIME) taken into the frame.
_CALL_FIELDS = ("start", "end", "tid", "nameId")


def _gpu_names(
    kind: np.ndarray, name: np.ndarray, kernel_names: dict
) -> pd.Categorical:
    """Kernel names from StringIds; ``Memcpy <kind>``, ``Memset``, ``CUDA graph`` otherwise."""
    kernels = categorical_from_ids(np.where(kind == 0, name, NA), kernel_names)
    categories = list(kernels.categories)
    categories += [c for c in MEMCPY_LABELS if c not in set(categories)]
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


def _pair_keys(
    hi: tuple[np.ndarray, np.ndarray], lo: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """One int64 key per (hi, lo) pair of two row sets, equal exactly when both parts are; -1
    where either part is NA. ``hi`` is factorized over both sets; ``lo`` (a CUPTI correlation
    id, uint32) is used as is when in [0, 2^32), else factorized too."""
    n = len(hi[0])
    hi_all, lo_all = np.concatenate(hi), np.concatenate(lo)
    na = (hi_all == NA) | (lo_all == NA)
    hi_codes = pd.factorize(hi_all)[0].astype(np.int64)
    if len(lo_all) and (lo_all.min() < 0 or lo_all.max() >= 2**32):
        lo_codes, uniques = pd.factorize(lo_all)
        keys = hi_codes * len(uniques) + lo_codes
    else:
        keys = (hi_codes << 32) | lo_all
    keys[na] = -1
    return keys[:n], keys[n:]


def _match_calls(
    calls: dict[str, np.ndarray], gpu: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Join GPU rows to their call on (correlation id, process), first call row per key (as
    ``INSERT OR IGNORE`` into a keyed table would keep).

    Returns:
        ``(call row per GPU row or -1, first call rows whose key no GPU row has)``.
    """
    call_key, gpu_key = _pair_keys(
        (calls["gpid"], gpu["globalPid"]), (calls["corr"], gpu["correlationId"])
    )
    keys, first = np.unique(call_key, return_index=True)  # first occurrence of each key
    if not len(keys):
        return np.full(len(gpu_key), -1), first
    pos = np.minimum(np.searchsorted(keys, gpu_key), len(keys) - 1)
    found = (gpu_key >= 0) & (keys[pos] == gpu_key)
    matched = np.zeros(len(keys), dtype=bool)
    matched[pos[found]] = True
    return np.where(found, first[pos], -1), first[~matched]


def read_calls(path: Path, schema: ExportSchema) -> dict[str, np.ndarray]:
    """Runtime/driver calls with a correlation id and thread (``int64`` columns corr, gpid,
    start, end, tid, nameId; gpid = ``globalTid & ~0xFFFFFF``), in table order.

    Raises:
        adbc_driver_manager.Error, pyarrow.ArrowInvalid: as
            :func:`~trtbench.profiling.traces.nsys_sqlite.read_columns`.
    """
    runtime = schema.table("CUPTI_ACTIVITY_KIND_RUNTIME")
    if not runtime:
        return {k: np.empty(0, np.int64) for k in ("corr", "gpid", *_CALL_FIELDS)}
    calls = read_columns(
        path,
        runtime,
        {
            "corr": "correlationId",
            "gtid": "globalTid",
            "start": "start",
            "end": "end",
            "nameId": "nameId",
        },
        "correlationId IS NOT NULL AND globalTid IS NOT NULL",
    )
    gtid = calls.pop("gtid")
    calls["gpid"] = gtid & _PID_MASK
    calls["tid"] = gtid & 0xFFFFFF
    return calls


def gpu_tables(schema: ExportSchema) -> list[tuple[int, str, tuple[str, ...]]]:
    """``(gpu_kind code, table, name columns)`` of the GPU tables present with rows."""
    found = []
    for kind, base, names in _GPU_TABLES:
        table = schema.table(base)
        if schema.has_rows(table):
            found.append((kind, table, names))
    return found


def gpu_exprs(
    path: Path, schema: ExportSchema, table: str, names: tuple[str, ...]
) -> dict[str, str]:
    """SQL expressions of the :data:`_GPU_FIELDS` that ``table`` has (a missing field is read
    as NA: see :func:`fill_gpu_fields`).

    Raises:
        TraceParseError: the table lacks ``start`` or ``end``.
    """
    cols = schema.columns(table)
    missing = [c for c in ("start", "end") if c not in cols]
    if missing:
        raise TraceParseError(f"{path}: table {table} lacks columns {missing}")
    name = next((n for n in names if n in cols), None)
    exprs = {f: f if f in cols else None for f in _GPU_FIELDS}
    exprs["name"] = name
    for packed, xyz in _PACKED.items():
        exprs[packed] = pack_sql(*xyz) if set(xyz) <= cols else None
    if not {"correlationId", "globalPid"} <= cols:  # no join key: no call
        exprs["correlationId"] = exprs["globalPid"] = None
    return {f: e for f, e in exprs.items() if e is not None}


def fill_gpu_fields(out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every :data:`_GPU_FIELDS` column of a read, NA for the fields the table lacks."""
    rows = len(out["start"])
    return {f: out[f] if f in out else np.full(rows, NA) for f in _GPU_FIELDS}


def launch_api_ids(api_names: dict[int, str]) -> list[int]:
    """String ids of the kernel- and graph-launch API names among ``api_names``."""
    return [
        i for i, n in api_names.items() if classify_api(strip_api_version(n)) != "other"
    ]


def no_activity_error(path: Path) -> TraceParseError:
    """The error for an export without GPU rows and launch calls."""
    return TraceParseError(
        f"{path} holds no CUDA activity (no kernel, memcpy, memset or graph rows "
        "and no launch calls); record with `nsys profile --trace=cuda,nvtx` and make "
        "sure CUDA work runs inside the capture range"
    )


def build_launch_frame(
    kind: np.ndarray,
    gpu: dict[str, np.ndarray],
    calls: dict[str, np.ndarray],
    call_of: np.ndarray,
    idle: np.ndarray,
    kernel_names: dict,
    api_names: dict,
) -> pd.DataFrame:
    """Launch frame: the GPU rows with their call's fields (NA without one), then the
    ``idle`` call rows (launch calls without GPU rows; GPU fields NA).

    Args:
        kind: gpu_kind code per GPU row (0 kernel, 1 memcpy, 2 memset, 3 graph).
        gpu: :data:`_GPU_FIELDS` columns of the GPU rows (NA sentinel for NULL).
        calls: :func:`read_calls` columns.
        call_of: per GPU row, its call's row in ``calls`` or -1.
        idle: rows of ``calls`` to append (launch calls without GPU rows).
        kernel_names, api_names: ``StringIds`` values of the ids used.
    """
    n_gpu, n_idle = len(kind), len(idle)

    def rows(gpu_part: np.ndarray | None, idle_part: np.ndarray | None) -> np.ndarray:
        if not n_idle and gpu_part is not None:
            return gpu_part  # no copy
        out = np.full(n_gpu + n_idle, NA)
        if gpu_part is not None:
            out[:n_gpu] = gpu_part
        if idle_part is not None:
            out[n_gpu:] = idle_part
        return out

    def masked(values: np.ndarray) -> pd.arrays.IntegerArray:
        return pd.arrays.IntegerArray(values, values == NA)

    no_call = call_of < 0

    def of_call(field: str) -> np.ndarray:
        values = calls[field]
        if not len(values):
            return np.full(n_gpu, NA)
        taken = values[call_of]  # -1 takes the last row: set to NA next
        taken[no_call] = NA
        return taken

    call = {f: rows(of_call(f), calls[f][idle]) for f in _CALL_FIELDS}
    gpid = rows(gpu["globalPid"], calls["gpid"][idle])
    pid = (gpid >> 24) & 0xFFFFFF
    pid[gpid == NA] = NA
    device, stream = unpack(rows(gpu["device_stream"], None))
    geometry = {}
    for packed in ("grid", "block"):
        values = rows(gpu[packed], None)
        na = values == NA
        parts = (values >> 32, (values >> 16) & 0xFFFF, values & 0xFFFF)
        for axis, part in zip("xyz", parts, strict=True):
            geometry[f"{packed}_{axis}"] = pd.arrays.IntegerArray(part, na)
    kinds = np.concatenate([kind, np.full(n_idle, -1, dtype=np.int8)])
    api = {i: strip_api_version(n) for i, n in api_names.items()}
    return make_launch_frame(
        {
            "pid": masked(pid),
            "tid": masked(call["tid"]),
            "correlation_id": masked(rows(gpu["correlationId"], calls["corr"][idle])),
            "s_api_name": categorical_from_ids(call["nameId"], api),
            "api_start_ns": masked(call["start"]),
            "api_end_ns": masked(call["end"]),
            "gpu_kind": pd.Categorical.from_codes(kinds, categories=GPU_KINDS),
            "start_ns": masked(rows(gpu["start"], None)),
            "end_ns": masked(rows(gpu["end"], None)),
            "device_id": device,
            "stream_id": stream,
            "graph_node_id": masked(rows(gpu["graphNodeId"], None)),
            "s_name": _gpu_names(kinds, rows(gpu["name"], None), kernel_names),
            **geometry,
        }
    )


def load_ranges(conn: sqlite3.Connection, schema: ExportSchema) -> pd.DataFrame:
    """NVTX push/pop and start/end ranges with an end, names decoded (a range frame)."""
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
            self.ranges = load_ranges(conn, schema)
        except (
            sqlite3.DatabaseError,
            adbc_driver_manager.Error,
            pa.ArrowInvalid,
        ) as exc:
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
        """Read the calls and every GPU table as columns, join them on (correlation id,
        process) in NumPy, and append the launch calls without GPU rows."""
        calls = read_calls(self.path, schema)
        parts, kinds = [], []
        for kind, table, names in gpu_tables(schema):
            exprs = gpu_exprs(self.path, schema, table, names)
            parts.append(fill_gpu_fields(read_columns(self.path, table, exprs)))
            kinds.append(np.full(len(parts[-1]["start"]), kind, dtype=np.int8))
        gpu = (
            {
                f: parts[0][f]
                if len(parts) == 1
                else np.concatenate([p[f] for p in parts])
                for f in _GPU_FIELDS
            }
            if parts
            else {f: np.empty(0, np.int64) for f in _GPU_FIELDS}
        )
        kind = np.concatenate(kinds) if kinds else np.empty(0, np.int8)
        del parts
        call_of, unmatched = _match_calls(calls, gpu)
        api_names = decode_strings(conn, calls["nameId"])
        launch_ids = launch_api_ids(api_names)
        idle = unmatched[np.isin(calls["nameId"][unmatched], launch_ids)]
        idle = idle[np.lexsort((calls["gpid"][idle], calls["corr"][idle]))]
        if len(kind) + len(idle) == 0:
            raise no_activity_error(self.path)
        kernel_names = decode_strings(conn, gpu["name"][kind == 0])
        frame = build_launch_frame(
            kind, gpu, calls, call_of, idle, kernel_names, api_names
        )
        pa.default_memory_pool().release_unused()  # the Arrow results, back to the OS
        return frame


def analyze_nsys_report(path: Path, step_pattern: str | None = None) -> LaunchAnalysis:
    """Load ``path`` and run every launch analyzer (``trtbench analyze nsys``).

    Raises:
        ConfigError, TraceParseError: see :class:`NsysReport` and
            :func:`~trtbench.profiling.traces.launches.resolve_step_windows`.
    """
    return NsysReport(path).analyze(step_pattern)
