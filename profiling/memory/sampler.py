"""Memory sampler: NVML per device (or process-tree RSS without NVML) on a fixed schedule.

:class:`MemorySampler` is a context manager with its own thread. Every ``interval_ms`` (default
100 ms, deadlines ``t0 + k·interval`` on the monotonic clock; a tick that cannot be met is
skipped and counted, never bunched) it writes one :class:`MemorySample` per GPU:

- ``source="nvml"``: total / used / free / reserved (memory info v2, else v1), the device
  memory of the server's process tree (NVML's per-process list filtered by the tree's PIDs),
  GPU and memory utilisation, power and SM clock, plus the tree's RSS;
- ``source="rss"`` when NVML is unavailable (said once): one row per tick with the RSS of the
  process tree rooted at ``root_pid`` and no device columns.

NVML errors leave one column empty (see :mod:`trtbench.profiling.memory.nvml`); an unexpected error in
the thread is recorded in ``errors`` and sampling goes on (schedule, errors and phase marks:
:mod:`trtbench.profiling.memory.sampling`). ``mark(phase)`` labels the following samples and
takes one sample at the boundary. ``t_ns`` is ``time.perf_counter_ns()`` (CLOCK_MONOTONIC on
Linux), the clock of the load-test records, so samples line up with requests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from trtbench.core.export import Column, conform, records_to_frame, write_csv
from trtbench.core.proctree import (
    PROC,
    proc_available,
    process_tree,
    tree_rss_bytes,
)
from trtbench.profiling.memory.nvml import GpuDevice, GpuReader, try_open_nvml
from trtbench.profiling.memory.sampling import PeriodicSampler

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_MS = 100.0
# Finding the tree reads every /proc/<pid>/stat (~4 ms for 100 processes): not every tick.
TREE_REFRESH_S = 1.0
SOURCE_NVML = "nvml"
SOURCE_RSS = "rss"

PidSource = int | Callable[[], int | None] | None
# MemorySample fields read from the GPU (all None in an rss row).
DEVICE_FIELDS = (
    "device_index",
    "device_uuid",
    "mem_total_bytes",
    "mem_used_bytes",
    "mem_free_bytes",
    "mem_reserved_bytes",
    "mem_info_version",
    "proc_used_bytes",
    "proc_count",
    "gpu_util_pct",
    "mem_util_pct",
    "power_mw",
    "sm_clock_mhz",
)


@dataclass(frozen=True)
class MemorySample:
    """One reading: one GPU at one tick (``source=nvml``) or the process tree (``rss``).

    ``None`` means "not available" (an NVML column that degraded, no process tree …).
    """

    t_ns: int
    variant: str
    phase: str
    source: str
    device_index: int | None
    device_uuid: str | None
    mem_total_bytes: int | None
    mem_used_bytes: int | None
    mem_free_bytes: int | None
    mem_reserved_bytes: int | None
    mem_info_version: str | None
    proc_used_bytes: int | None
    proc_count: int | None
    gpu_util_pct: int | None
    mem_util_pct: int | None
    power_mw: int | None
    sm_clock_mhz: int | None
    tree_pids: int | None
    rss_bytes: int | None


MEMORY_SCHEMA: tuple[Column, ...] = (
    Column(
        "t_ns", "time.perf_counter_ns() at the reading (clock of the load-test records)"
    ),
    Column("variant", "variant served while sampling"),
    Column("phase", "label set by mark(): load, warmup, tier:<tier>, …"),
    Column("source", "nvml (device readings) or rss (no NVML: process-tree RSS only)"),
    Column("device_index", "NVML device index (empty for source=rss)", required=False),
    Column("device_uuid", "NVML device UUID", required=False),
    Column("mem_total_bytes", "device framebuffer total", required=False),
    Column(
        "mem_used_bytes",
        "device memory allocated (v2: without reserved; v1: with it)",
        required=False,
    ),
    Column("mem_free_bytes", "device memory free", required=False),
    Column(
        "mem_reserved_bytes",
        "driver-reserved device memory (memory info v2 only)",
        required=False,
    ),
    Column(
        "mem_info_version", "v2 or v1: which NVML memory call answered", required=False
    ),
    Column(
        "proc_used_bytes",
        "device memory of the server's process tree on this device (NVML per-process; empty when NVML lists none of its PIDs)",
        required=False,
    ),
    Column(
        "proc_count", "processes of the tree NVML lists on this device", required=False
    ),
    Column("gpu_util_pct", "% of the last NVML period a kernel ran", required=False),
    Column(
        "mem_util_pct",
        "% of the last NVML period device memory was read or written",
        required=False,
    ),
    Column("power_mw", "board power draw, mW", required=False),
    Column("sm_clock_mhz", "SM clock, MHz", required=False),
    Column(
        "tree_pids", "processes in the tree rooted at the server PID", required=False
    ),
    Column(
        "rss_bytes",
        "sum of the tree's resident set sizes (shared pages counted per process)",
        required=False,
    ),
)


def memory_frame(samples: Iterable[MemorySample]) -> pd.DataFrame:
    """Samples as a DataFrame in :data:`MEMORY_SCHEMA` order (nullable integer columns)."""
    frame = records_to_frame(samples)
    if frame.empty:
        return pd.DataFrame({c.name: pd.Series(dtype="object") for c in MEMORY_SCHEMA})
    frame = conform(frame, MEMORY_SCHEMA)
    ints = [f for f in frame.columns if f.endswith(("_bytes", "_pct", "_mw", "_mhz"))]
    ints += ["t_ns", "device_index", "proc_count", "tree_pids"]
    return frame.astype({c: "Int64" for c in ints})


def write_memory_csv(frame: pd.DataFrame, path: Path) -> Path:
    """Write a frame of :data:`MEMORY_SCHEMA` rows (e.g. several variants concatenated)."""
    return write_csv(frame, path, MEMORY_SCHEMA)


class MemorySampler(PeriodicSampler[MemorySample]):
    """Sample device memory (NVML) or process-tree RSS in a background thread.

    Example::

        server = TritonServer(config)          # not started yet: server.process is None
        pid = lambda: server.process.pid if server.process else None
        with MemorySampler(pid, variant="medusa", phase="load") as mem, server:
            mem.mark("warmup")                 # server ready: load phase is over
            ...
            mem.mark("tier:c8")
        frame = mem.frame()

    Args:
        root_pid: the server's PID, a callable returning it (None until it exists; called at
            each tick), or None for no process tree (no per-process or RSS figures).
        variant: written into every row.
        interval_ms: period of the schedule (> 0).
        reader: a :class:`GpuReader`; ``"auto"`` opens NVML (and closes it on exit); None
            forces the RSS source.
        phase: label of the samples before the first :meth:`mark`.
        proc: procfs root.
        warn_unavailable: say at WARNING (else INFO) that NVML is missing; a run with
            several variants warns once.

    Raises:
        ValueError: ``interval_ms`` is not positive (a programming error).
    """

    kind = "memory-sampler"

    def __init__(
        self,
        root_pid: PidSource = None,
        *,
        variant: str = "",
        interval_ms: float = DEFAULT_INTERVAL_MS,
        reader: GpuReader | Literal["auto"] | None = "auto",
        phase: str = "start",
        proc: Path = PROC,
        warn_unavailable: bool = True,
    ) -> None:
        super().__init__(interval_ms=interval_ms, phase=phase, variant=variant)
        self._warn_level = logging.WARNING if warn_unavailable else logging.INFO
        self._root = root_pid
        self._reader_arg = reader
        self._reader: GpuReader | None = None
        self._owns_reader = False
        self._devices: list[GpuDevice] = []
        self._proc = proc
        self._reported: set[str] = set()
        self.source = SOURCE_RSS
        self.unavailable_reason = ""
        self.device_ids: list[str] = []
        self._tree_cache: tuple[int | None, list[int], float] = (None, [], 0.0)

    def _open(self) -> None:
        arg = self._reader_arg
        if arg == "auto":
            self._reader, self.unavailable_reason = try_open_nvml()
            self._owns_reader = self._reader is not None
        elif arg is None:
            self.unavailable_reason = "no GPU reader given"
        else:
            self._reader = arg
        if self._reader is not None:
            self._devices = self._reader.devices()
            if not self._devices:
                self.unavailable_reason = "NVML sees no GPU"
                self._close()
        self.source = SOURCE_NVML if self._devices else SOURCE_RSS
        self.device_ids = [d.uuid or str(d.index) for d in self._devices]
        if self.source == SOURCE_RSS:
            log.log(
                self._warn_level,
                "no NVML (%s): memory.csv holds the RSS of the server's process tree "
                "instead of device memory",
                self.unavailable_reason,
            )

    def _close(self) -> None:
        if self._owns_reader and self._reader is not None:
            self._reader.close()
        self._reader = None
        self._devices = []

    def frame(self) -> pd.DataFrame:
        """The samples as a :data:`MEMORY_SCHEMA` DataFrame."""
        return memory_frame(self.records)

    def info(self) -> dict[str, Any]:
        """Facts for ``run.json``: source, why NVML is absent, counts, interval."""
        return {
            "source": self.source,
            "unavailable_reason": self.unavailable_reason,
            "interval_ms": self.interval_s * 1000.0,
            "samples": len(self.records),
            "missed_ticks": self.missed_ticks,
            "errors": self.error_count,
            "devices": self.device_ids,
        }

    def _root_pid(self) -> int | None:
        root = self._root
        return root() if callable(root) else root

    def _tree(self, root: int) -> list[int]:
        """The tree under ``root``, rescanned (all of /proc) at most every TREE_REFRESH_S."""
        now = time.perf_counter()
        cached_root, pids, when = self._tree_cache
        if cached_root != root or now - when >= TREE_REFRESH_S or not pids:
            pids = process_tree(root, self._proc)
            self._tree_cache = (root, pids, now)
        return pids

    def _read(self, phase: str) -> list[MemorySample]:
        t_ns = time.perf_counter_ns()
        root = self._root_pid()
        pids: list[int] = []
        if root is not None and proc_available(self._proc):
            pids = self._tree(root)
        elif root is not None:
            self._once("noproc", "no /proc here: no process-tree figures")
        rss = tree_rss_bytes(pids, self._proc) if pids else None
        tree = len(pids) if root is not None else None
        base = {"t_ns": t_ns, "variant": self.variant, "phase": phase}
        reader = self._reader
        if self.source == SOURCE_RSS or reader is None:
            empty = dict.fromkeys(DEVICE_FIELDS)
            return [
                MemorySample(
                    **base, **empty, source=SOURCE_RSS, tree_pids=tree, rss_bytes=rss
                )
            ]
        tree_set = set(pids) if root is not None else None
        rows = [
            MemorySample(
                **base,
                **self._read_device(reader, dev, tree_set),
                tree_pids=tree,
                rss_bytes=rss,
            )
            for dev in self._devices
        ]
        if all(r.proc_count == 0 for r in rows):
            self._once(
                "nopid",
                "NVML lists no process of the server tree on any GPU yet (normal while "
                "the server loads; inside a container NVML reports host PIDs: run it "
                "with --pid=host); proc_used_bytes is empty while so",
            )
        return rows

    def _read_device(
        self, reader: GpuReader, dev: GpuDevice, pids: set[int] | None
    ) -> dict[str, Any]:
        mem = reader.memory(dev)
        util = reader.utilization(dev)
        proc_used, proc_count = None, None
        procs = reader.processes(dev) if pids is not None else None
        if procs is not None and pids is not None:
            mine = [p for p in procs if p.pid in pids]
            proc_count = len(mine)
            if mine and all(p.used_bytes is not None for p in mine):
                proc_used = sum(p.used_bytes or 0 for p in mine)
        return {
            "source": SOURCE_NVML,
            "device_index": dev.index,
            "device_uuid": dev.uuid,
            "mem_total_bytes": mem.total_bytes if mem else None,
            "mem_used_bytes": mem.used_bytes if mem else None,
            "mem_free_bytes": mem.free_bytes if mem else None,
            "mem_reserved_bytes": mem.reserved_bytes if mem else None,
            "mem_info_version": mem.version if mem else None,
            "proc_used_bytes": proc_used,
            "proc_count": proc_count,
            "gpu_util_pct": util.gpu_pct if util else None,
            "mem_util_pct": util.memory_pct if util else None,
            "power_mw": reader.power_mw(dev),
            "sm_clock_mhz": reader.sm_clock_mhz(dev),
        }

    def _once(self, key: str, message: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            log.warning(message)
