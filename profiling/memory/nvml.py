"""A thin, degrading interface over NVML (PyPI ``nvidia-ml-py``, module ``pynvml``).

:class:`NvmlReader` turns each NVML query into a small frozen record, or ``None`` when the
device or the driver cannot answer (``NVMLError_NotSupported``, ``NoPermission``, a missing
versioned symbol, a lost GPU …): one column degrades, never the run. Each (device, query,
error) is logged once per reader.

Facts used (``pynvml.py`` of PyPI ``nvidia-ml-py`` 13.615.71, and the issues linked):

- ``nvmlDeviceGetMemoryInfo(h, version=nvmlMemory_v2)`` reports ``reserved`` separately; v1
  ``used`` includes the driver's reserved memory (A100 idle: 912 MB v1 vs 7.8 MB v2,
  https://github.com/Cldfire/nvml-wrapper/issues/57). v2 is tried first, v1 is the fallback
  (then ``reserved_bytes`` is None).
- ``nvmlDeviceGetComputeRunningProcesses`` (→ ``_v3``) raises ``NVMLLibraryMismatchError``
  on drivers without ``_v3``; ``_v2`` is the fallback. ``usedGpuMemory`` is None when NVML
  says "not available". PIDs are host PIDs: inside a container without ``--pid=host`` the
  list is empty or holds foreign PIDs (https://github.com/NVIDIA/nvidia-docker/issues/179).
- ``nvmlDeviceGetUtilizationRates`` raises NotSupported on MIG-enabled GPUs
  (https://github.com/XuehaiPan/nvitop/issues/5).
- ``nvmlDeviceGetPowerUsage`` is in mW; ``nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM)`` in MHz.

The library object is injected (``lib``), so tests drive the real reader with a small fake of
the ``pynvml`` functions listed in :class:`NvmlLib` — the only stand-in allowed for hardware
this machine lacks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

NVML_CLOCK_SM = 1  # pynvml.NVML_CLOCK_SM
NVML_MEMORY_V2 = 0x02000028  # pynvml.nvmlMemory_v2: sizeof(c_nvmlMemory_v2_t) | 2 << 24


@dataclass(frozen=True)
class GpuDevice:
    """One NVML device: its index, UUID, product name and opaque handle."""

    index: int
    uuid: str
    name: str
    handle: Any


@dataclass(frozen=True)
class DeviceMemory:
    """Framebuffer memory of one device, in bytes.

    Attributes:
        total_bytes: total framebuffer memory.
        used_bytes: allocated memory (v2: excludes reserved; v1: includes it).
        free_bytes: free memory.
        reserved_bytes: memory the driver reserves (None with v1).
        version: ``v2`` or ``v1`` — which NVML call answered.
    """

    total_bytes: int
    used_bytes: int
    free_bytes: int
    reserved_bytes: int | None
    version: str


@dataclass(frozen=True)
class ProcessMemory:
    """Device memory one process holds (``used_bytes`` None when NVML cannot tell)."""

    pid: int
    used_bytes: int | None


@dataclass(frozen=True)
class Utilization:
    """Percent of the last NVML sample period (1/6 s - 1 s) a kernel ran / memory was busy."""

    gpu_pct: int
    memory_pct: int


class NvmlLib(Protocol):
    """The ``pynvml`` functions :class:`NvmlReader` calls (the module satisfies it)."""

    NVMLError: type[Exception]
    NVMLLibraryMismatchError: type[Exception]

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str: ...
    def nvmlDeviceGetName(self, handle: Any) -> str: ...
    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: Any = None) -> Any: ...
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]: ...
    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any) -> list[Any]: ...
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any: ...
    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int: ...
    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int: ...


class GpuReader(Protocol):
    """What the memory sampler needs from a GPU library; every reading may be None."""

    def devices(self) -> list[GpuDevice]: ...
    def memory(self, device: GpuDevice) -> DeviceMemory | None: ...
    def processes(self, device: GpuDevice) -> list[ProcessMemory] | None: ...
    def utilization(self, device: GpuDevice) -> Utilization | None: ...
    def power_mw(self, device: GpuDevice) -> int | None: ...
    def sm_clock_mhz(self, device: GpuDevice) -> int | None: ...
    def close(self) -> None: ...


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlReader:
    """:class:`GpuReader` over an initialised NVML library.

    Use :func:`open_nvml` to get one; :meth:`close` calls ``nvmlShutdown``. Safe to call from
    one sampling thread and the caller's thread (NVML is thread-safe), never concurrently
    with :meth:`close`.

    Args:
        lib: the ``pynvml`` module (or a fake with the same functions), already initialised.
    """

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self._reported: set[tuple[int, str, str]] = set()
        self._v2_memory_ok: dict[int, bool] = {}
        self._closed = False

    def _degrade(self, device: GpuDevice, what: str, exc: Exception) -> None:
        key = (device.index, what, type(exc).__name__)
        if key not in self._reported:
            self._reported.add(key)
            log.warning(
                "NVML %s of GPU %d unavailable (%s: %s); that column stays empty",
                what,
                device.index,
                type(exc).__name__,
                exc,
            )

    def _query(self, device: GpuDevice, what: str, call: Callable[[], T]) -> T | None:
        try:
            return call()
        except (self._lib.NVMLError, self._lib.NVMLLibraryMismatchError) as exc:
            self._degrade(device, what, exc)
            return None

    def devices(self) -> list[GpuDevice]:
        """All devices NVML sees, by index ([] when NVML cannot count them)."""
        lib = self._lib
        try:
            count = int(lib.nvmlDeviceGetCount())
        except lib.NVMLError as exc:
            log.warning("NVML cannot count devices (%s); no GPU columns", exc)
            return []
        out = []
        for index in range(count):
            try:
                handle = lib.nvmlDeviceGetHandleByIndex(index)
            except lib.NVMLError as exc:  # e.g. GpuIsLost, NoPermission on one device
                log.warning("NVML cannot open GPU %d (%s); skipping it", index, exc)
                continue
            probe = GpuDevice(index, "", "", handle)
            uuid = self._query(probe, "uuid", lambda h=handle: lib.nvmlDeviceGetUUID(h))
            name = self._query(probe, "name", lambda h=handle: lib.nvmlDeviceGetName(h))
            out.append(GpuDevice(index, _text(uuid or ""), _text(name or ""), handle))
        return out

    def memory(self, device: GpuDevice) -> DeviceMemory | None:
        """Memory info v2 (reserved reported apart) when the driver has it, else v1."""
        lib, handle = self._lib, device.handle
        if self._v2_memory_ok.get(device.index, True):
            try:
                m = lib.nvmlDeviceGetMemoryInfo(handle, version=NVML_MEMORY_V2)
                self._v2_memory_ok[device.index] = True
                return DeviceMemory(
                    int(m.total), int(m.used), int(m.free), int(m.reserved), "v2"
                )
            except (lib.NVMLError, lib.NVMLLibraryMismatchError) as exc:
                self._v2_memory_ok[device.index] = False
                self._degrade(device, "memory info v2 (reserved)", exc)
        m = self._query(
            device, "memory info", lambda: lib.nvmlDeviceGetMemoryInfo(handle)
        )
        if m is None:
            return None
        return DeviceMemory(int(m.total), int(m.used), int(m.free), None, "v1")

    def processes(self, device: GpuDevice) -> list[ProcessMemory] | None:
        """Compute processes on the device (host PIDs); None when NVML cannot list them."""
        lib, handle = self._lib, device.handle
        try:
            procs = lib.nvmlDeviceGetComputeRunningProcesses(handle)
        except lib.NVMLLibraryMismatchError:
            procs = self._query(
                device,
                "process list",
                lambda: lib.nvmlDeviceGetComputeRunningProcesses_v2(handle),
            )
        except lib.NVMLError as exc:
            self._degrade(device, "process list", exc)
            procs = None
        if procs is None:
            return None
        return [
            ProcessMemory(
                int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory)
            )
            for p in procs
        ]

    def utilization(self, device: GpuDevice) -> Utilization | None:
        """GPU and memory utilisation in percent (None on MIG, where NVML refuses)."""
        u = self._query(
            device,
            "utilization",
            lambda: self._lib.nvmlDeviceGetUtilizationRates(device.handle),
        )
        return None if u is None else Utilization(int(u.gpu), int(u.memory))

    def power_mw(self, device: GpuDevice) -> int | None:
        """Board power draw in mW (a 1 s average on Ampere+ except GA100)."""
        value = self._query(
            device, "power", lambda: self._lib.nvmlDeviceGetPowerUsage(device.handle)
        )
        return None if value is None else int(value)

    def sm_clock_mhz(self, device: GpuDevice) -> int | None:
        """Current SM clock in MHz."""
        value = self._query(
            device,
            "SM clock",
            lambda: self._lib.nvmlDeviceGetClockInfo(device.handle, NVML_CLOCK_SM),
        )
        return None if value is None else int(value)

    def close(self) -> None:
        """``nvmlShutdown`` once (errors ignored: nothing to degrade at the end)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._lib.nvmlShutdown()
        except self._lib.NVMLError as exc:
            log.debug("nvmlShutdown failed: %s", exc)


def try_open_nvml(lib: Any = None) -> tuple[NvmlReader | None, str]:
    """Initialise NVML without logging.

    Args:
        lib: the ``pynvml`` module or a fake; None imports ``pynvml``.

    Returns:
        ``(reader, "")`` on success, ``(None, reason)`` when ``pynvml`` is not installed or
        ``nvmlInit`` fails (no driver: ``NVMLError_LibraryNotFound``; driver not loaded …).
    """
    if lib is None:
        try:
            import pynvml as lib  # noqa: PLC0415 - optional at run time
        except ImportError:
            return None, "nvidia-ml-py (pynvml) is not installed"
    try:
        lib.nvmlInit()
    except (lib.NVMLError, OSError) as exc:  # OSError: a broken libnvidia-ml.so
        return None, f"{type(exc).__name__}: {exc}"
    return NvmlReader(lib), ""


def open_nvml(lib: Any = None) -> NvmlReader | None:
    """Initialise NVML; return None (after ONE warning naming the reason) when unavailable.

    Args:
        lib: the ``pynvml`` module or a fake; None imports ``pynvml``.
    """
    reader, reason = try_open_nvml(lib)
    if reader is None:
        log.warning("NVML unavailable (%s); no GPU readings", reason)
    return reader
