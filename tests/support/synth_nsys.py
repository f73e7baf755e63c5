"""Write small nsys-shaped SQLite exports for tests and benchmarks.

The tables and columns are those of real ``nsys export --type sqlite`` files (schema 3.16.1 from
nsys 2024.6.2; the oldest layout, schema 2.9.1 / 3.0.0 from nsys 2022.x: ``EXPORT_META_DATA``, no
``ENUM_*`` tables, no ``greenContextId``), see the exports listed in ``tests/data/README.md`` and,
for schema 2.9.1, ``report1.sqlite`` of lsaeteurn/vectoraddition @ ``8c34d25``. Like nsys, a table
is only created when it gets rows. Timestamps are integer ns; thread ids are serialized
``globalTid = (1 << 48) | (pid << 24) | tid`` and ``globalPid = globalTid & ~0xFFFFFF``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

SCHEMAS = ("3.16.1", "2.9.1")

_KERNEL_COLUMNS = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
    "contextId INTEGER NOT NULL, {green}streamId INTEGER NOT NULL, correlationId INTEGER, "
    "globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, "
    "mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER, "
    "registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, "
    "gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, "
    "blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, "
    "dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, "
    "localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, "
    "sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER"
)
_DDL = {
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
        "globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, "
        "returnValue INTEGER NOT NULL, callchainId INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
        "contextId INTEGER NOT NULL, {green}streamId INTEGER NOT NULL, "
        "correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, "
        "bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
        "contextId INTEGER NOT NULL, {green}streamId INTEGER NOT NULL, "
        "correlationId INTEGER, globalPid INTEGER, graphId INTEGER NOT NULL, "
        "graphExecId INTEGER NOT NULL"
    ),
    "NVTX_EVENTS": (
        "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, "
        "category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, "
        "endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER, "
        "int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, "
        "floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT"
    ),
    "ENUM_NSYS_EVENT_TYPE": "id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT",
    "ENUM_NSYS_EVENT_CLASS": "id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT",
}
_NVTX_TYPES = ((34, "NvtxMark"), (59, "NvtxPushPopRange"), (60, "NvtxStartEndRange"))
_EVENT_CLASSES = (
    (0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME"),
    (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER"),
)


class ApiRow(NamedTuple):
    """One CUDA runtime/driver call (``CUPTI_ACTIVITY_KIND_RUNTIME``); ``name`` as nsys writes it."""

    start_ns: int
    end_ns: int
    global_tid: int
    correlation_id: int
    name: str


class KernelRow(NamedTuple):
    """One kernel (``CUPTI_ACTIVITY_KIND_KERNEL``); ``graph_node_id`` set for graph replays."""

    start_ns: int
    end_ns: int
    global_pid: int
    correlation_id: int
    name: str
    stream_id: int = 7
    device_id: int = 0
    graph_node_id: int | None = None
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (128, 1, 1)


class NvtxRow(NamedTuple):
    """One NVTX push/pop range (``eventType`` 59) with a non-registered ``text``."""

    start_ns: int
    end_ns: int
    global_tid: int
    text: str


class MemsetRow(NamedTuple):
    """One memset on the device (``CUPTI_ACTIVITY_KIND_MEMSET``)."""

    start_ns: int
    end_ns: int
    global_pid: int
    correlation_id: int
    stream_id: int = 7
    device_id: int = 0


class GraphTraceRow(NamedTuple):
    """One whole-graph replay (``CUPTI_ACTIVITY_KIND_GRAPH_TRACE``, ``--cuda-graph-trace=graph``)."""

    start_ns: int
    end_ns: int
    global_pid: int
    correlation_id: int
    graph_id: int = 1
    stream_id: int = 7
    device_id: int = 0


def global_tid(pid: int, tid: int) -> int:
    """Serialized nsys thread id for ``pid``/``tid`` (hardware id 1), as in real exports."""
    return (1 << 48) | (pid << 24) | tid


def global_pid(pid: int) -> int:
    """Serialized nsys process id: ``global_tid(pid, 0)``."""
    return global_tid(pid, 0)


class NsysExportWriter:
    """Write one export; use as a context manager (commits and closes on exit).

    Args:
        path: the ``.sqlite`` file to create (must not exist).
        schema: ``"3.16.1"`` (``META_DATA_EXPORT`` + ``ENUM_*``) or ``"2.9.1"`` (oldest layout).
    """

    def __init__(self, path: Path, schema: str = "3.16.1") -> None:
        if schema not in SCHEMAS:
            raise ValueError(f"schema {schema!r} is not one of {SCHEMAS}")
        self.schema = schema
        self._conn = sqlite3.connect(path)
        self._conn.execute("PRAGMA journal_mode=OFF")
        self._conn.execute("PRAGMA synchronous=OFF")
        self._strings: dict[str, int] = {}
        self._created: set[str] = set()
        self._write_metadata()

    def __enter__(self) -> NsysExportWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._conn.executemany(
            "INSERT INTO StringIds (id, value) VALUES (?, ?)",
            ((i, s) for s, i in self._strings.items()),
        )
        self._conn.commit()
        self._conn.close()

    def _create(self, table: str) -> None:
        if table in self._created:
            return
        green = "greenContextId INTEGER, " if self.schema == "3.16.1" else ""
        body = _KERNEL_COLUMNS if table.endswith("_KERNEL") else _DDL[table]
        self._conn.execute(f"CREATE TABLE {table} ({body.format(green=green)})")
        self._created.add(table)

    def _string_id(self, value: str) -> int:
        return self._strings.setdefault(value, len(self._strings) + 1)

    def _write_metadata(self) -> None:
        self._create("StringIds")
        major, minor, micro = self.schema.split(".")
        table = "META_DATA_EXPORT" if self.schema == "3.16.1" else "EXPORT_META_DATA"
        product = "2024.6.2.225" if self.schema == "3.16.1" else "2022.2.1.31"
        self._conn.execute(f"CREATE TABLE {table} (name TEXT NOT NULL, value TEXT)")
        rows = [
            ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
            ("EXPORT_PRODUCT_VERSION", product),
            ("EXPORT_SCHEMA_VERSION", self.schema),
            ("EXPORT_SCHEMA_VERSION_MAJOR", major),
            ("EXPORT_SCHEMA_VERSION_MINOR", minor),
            ("EXPORT_SCHEMA_VERSION_MICRO", micro),
        ]
        self._conn.executemany(f"INSERT INTO {table} VALUES (?, ?)", rows)
        if self.schema == "3.16.1":
            for enum, values in (
                ("ENUM_NSYS_EVENT_TYPE", _NVTX_TYPES),
                ("ENUM_NSYS_EVENT_CLASS", _EVENT_CLASSES),
            ):
                self._create(enum)
                self._conn.executemany(
                    f"INSERT INTO {enum} VALUES (?, ?, ?)",
                    ((i, n, n) for i, n in values),
                )

    def add_api_calls(self, rows: Iterable[ApiRow]) -> None:
        """Insert runtime (``cuda*``, eventClass 0) and driver (``cu*``, 1) calls."""
        self._create("CUPTI_ACTIVITY_KIND_RUNTIME")
        self._conn.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
            "correlationId, nameId, returnValue) VALUES (?, ?, ?, ?, ?, ?, 0)",
            (
                (
                    r[0],
                    r[1],
                    0 if r[4].startswith("cuda") else 1,
                    r[2],
                    r[3],
                    self._string_id(r[4]),
                )
                for r in rows
            ),
        )

    def add_kernels(self, rows: Iterable[KernelRow]) -> None:
        """Insert kernels; the name is both ``demangledName`` and ``shortName``."""
        self._create("CUPTI_ACTIVITY_KIND_KERNEL")
        self._conn.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, "
            "streamId, correlationId, globalPid, demangledName, shortName, "
            "registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, "
            "staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, "
            "localMemoryTotal, gridId, graphNodeId) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, "
            "32, ?, ?, ?, ?, ?, ?, 0, 0, 0, 0, 0, ?)",
            (
                (
                    k.start_ns,
                    k.end_ns,
                    k.device_id,
                    k.stream_id,
                    k.correlation_id,
                    k.global_pid,
                    self._string_id(k.name),
                    self._string_id(k.name),
                    *k.grid,
                    *k.block,
                    k.graph_node_id,
                )
                for k in (KernelRow(*r) for r in rows)
            ),
        )

    def add_memsets(self, rows: Iterable[MemsetRow]) -> None:
        """Insert device memsets (value 0, 4096 bytes)."""
        self._create("CUPTI_ACTIVITY_KIND_MEMSET")
        self._conn.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, "
            "streamId, correlationId, globalPid, value, bytes) "
            "VALUES (?, ?, ?, 1, ?, ?, ?, 0, 4096)",
            (
                (
                    m.start_ns,
                    m.end_ns,
                    m.device_id,
                    m.stream_id,
                    m.correlation_id,
                    m.global_pid,
                )
                for m in (MemsetRow(*r) for r in rows)
            ),
        )

    def add_graph_traces(self, rows: Iterable[GraphTraceRow]) -> None:
        """Insert whole-graph replay rows (graph exec id = graph id)."""
        self._create("CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
        self._conn.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start, end, deviceId, contextId, "
            "streamId, correlationId, globalPid, graphId, graphExecId) "
            "VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?)",
            (
                (
                    g.start_ns,
                    g.end_ns,
                    g.device_id,
                    g.stream_id,
                    g.correlation_id,
                    g.global_pid,
                    g.graph_id,
                    g.graph_id,
                )
                for g in (GraphTraceRow(*r) for r in rows)
            ),
        )

    def add_nvtx_ranges(self, rows: Iterable[NvtxRow]) -> None:
        """Insert NVTX push/pop ranges (eventType 59, text not registered)."""
        self._create("NVTX_EVENTS")
        self._conn.executemany(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
            "VALUES (?, ?, 59, ?, ?, 0)",
            ((r[0], r[1], r[3], r[2]) for r in rows),
        )


def write_decode_export(
    path: Path,
    *,
    steps: int,
    kernels_per_step: int,
    graph_steps: int = 0,
    pid: int = 4242,
    schema: str = "3.16.1",
    device: int = 0,
) -> None:
    """A decode loop: ``steps`` NVTX ranges ``decode_step#i``; the last ``graph_steps`` replay a
    CUDA graph (node tracing), the others launch eagerly.

    Timing (ns), step i starts at ``t0 = 1_000_000 + i * period``:
    eager step: call k at ``t0 + 1000 + 5000k`` lasting 4000 (``cudaLaunchKernel``), its kernel at
    ``call start + 6000`` lasting 3000 (``kernel_<k % 20>``);
    graph step: one ``cudaGraphLaunch`` at ``t0 + 1000`` lasting 20000, node k (graphNodeId k+1)
    at ``t0 + 24000 + 3000k`` lasting 3000, all with the launch's correlation id;
    every step ends with ``cudaStreamSynchronize`` (no GPU row) and its range ends at
    ``t0 + period - 1000``, ``period = 5000 * kernels_per_step + 20000``. Kernels run on
    stream 7 of ``device``.
    """
    gtid, gpid = global_tid(pid, pid), global_pid(pid)
    period = 5000 * kernels_per_step + 20000
    names = [f"kernel_{k}" for k in range(20)]

    def step_rows(i: int, corr: int) -> tuple[list, list]:
        t0 = 1_000_000 + i * period
        api, kernels = [], []
        if i >= steps - graph_steps:
            api.append((t0 + 1000, t0 + 21000, gtid, corr, "cudaGraphLaunch_v10000"))
            for k in range(kernels_per_step):
                start = t0 + 24000 + 3000 * k
                kernels.append(
                    (start, start + 3000, gpid, corr, names[k % 20], 7, device, k + 1)
                )
            corr += 1
        else:
            for k in range(kernels_per_step):
                start = t0 + 1000 + 5000 * k
                api.append((start, start + 4000, gtid, corr, "cudaLaunchKernel_v7000"))
                kernels.append(
                    (start + 6000, start + 9000, gpid, corr, names[k % 20], 7, device)
                )
                corr += 1
        end = t0 + period - 1000
        api.append((end - 2000, end - 1000, gtid, corr, "cudaStreamSynchronize_v3020"))
        return api, kernels

    def rows(which: int) -> Iterable[tuple]:
        corr = 1
        for i in range(steps):
            api, kernels = step_rows(i, corr)
            corr += len(api)
            yield from (api, kernels)[which]

    with NsysExportWriter(path, schema) as writer:
        writer.add_api_calls(rows(0))
        writer.add_kernels(rows(1))
        writer.add_nvtx_ranges(
            (
                1_000_000 + i * period,
                1_000_000 + (i + 1) * period - 1000,
                gtid,
                f"decode_step#{i}",
            )
            for i in range(steps)
        )


def write_graph_node_export(path: Path, schema: str = "3.16.1") -> Path:
    """Step 0 eager (2 launches + a memset), step 1 one graph replay traced per node
    (process and thread 77)."""
    GT, GP = global_tid(77, 77), global_pid(77)  # noqa: N806 (as the tests name them)
    with NsysExportWriter(path, schema) as w:
        w.add_api_calls(
            [
                ApiRow(1_100, 1_110, GT, 1, "cudaLaunchKernel_v7000"),
                ApiRow(1_200, 1_230, GT, 2, "cudaLaunchKernel_v7000"),
                ApiRow(1_300, 1_305, GT, 3, "cudaMemsetAsync_v3020"),
                ApiRow(2_100, 2_150, GT, 4, "cudaGraphLaunch_v10000"),
                ApiRow(2_800, 2_900, GT, 5, "cudaStreamSynchronize_v3020"),
            ]
        )
        w.add_kernels(
            [
                KernelRow(
                    1_120, 1_200, GP, 1, "gemm", grid=(64, 2, 1), block=(256, 1, 1)
                ),
                KernelRow(1_210, 1_250, GP, 2, "softmax"),
                KernelRow(2_160, 2_200, GP, 4, "gemm", graph_node_id=7),
                KernelRow(2_200, 2_260, GP, 4, "softmax", graph_node_id=8),
                KernelRow(2_300, 2_310, GP, 4, "gemm", graph_node_id=9),
            ]
        )
        w.add_memsets([MemsetRow(1_400, 1_450, GP, 3)])
        w.add_nvtx_ranges(
            [
                NvtxRow(1_000, 2_000, GT, "decode_step#0"),
                NvtxRow(2_000, 3_000, GT, "decode_step#1"),
            ]
        )
    return path
