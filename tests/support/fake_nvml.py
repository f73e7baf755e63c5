"""A small fake of the ``pynvml`` functions ``NvmlReader`` calls (this machine has no GPU).

It raises the real ``pynvml`` exception classes (``pynvml.NVMLError(code)`` builds
``NVMLError_NotSupported`` etc.), so the reader's error handling is exercised as on a GPU.
Each device is a :class:`FakeGpu`; ``fail`` maps a pynvml function name to the NVML error
code it raises on that device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml


@dataclass
class FakeGpu:
    """Scripted readings of one device (bytes, %, mW, MHz)."""

    uuid: str
    name: str = "Fake GPU"
    total: int = 80 * 2**30
    used: int = 10 * 2**30
    reserved: int = 500 * 2**20
    gpu_util: int = 40
    mem_util: int = 20
    power_mw: int = 250_000
    sm_clock_mhz: int = 1_410
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    fail: dict[str, int] = field(default_factory=dict)
    has_v3_processes: bool = True


class FakeNvml:
    """Module-like fake: the attributes of ``pynvml`` that ``NvmlReader`` uses."""

    NVMLError = pynvml.NVMLError
    NVMLLibraryMismatchError = pynvml.NVMLLibraryMismatchError

    def __init__(self, gpus: list[FakeGpu], init_error: int | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.initialised = 0
        self.calls: dict[str, int] = {}

    def _gpu(self, handle: int, fn: str) -> FakeGpu:
        self.calls[fn] = self.calls.get(fn, 0) + 1
        if self.initialised <= 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        gpu = self.gpus[handle]
        if fn in gpu.fail:
            raise pynvml.NVMLError(gpu.fail[fn])
        return gpu

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self.initialised -= 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self._gpu(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self._gpu(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetMemoryInfo(self, handle: int, version: int | None = None):
        if version:
            g = self._gpu(handle, "nvmlDeviceGetMemoryInfo_v2")
            # v2: used excludes reserved; total = reserved + used + free
            free = g.total - g.used - g.reserved
            return SimpleNamespace(
                version=version,
                total=g.total,
                reserved=g.reserved,
                free=free,
                used=g.used,
            )
        g = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        # v1: used includes reserved
        return SimpleNamespace(
            total=g.total, free=g.total - g.used - g.reserved, used=g.used + g.reserved
        )

    def _procs(self, g: FakeGpu) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in g.processes]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int):
        g = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        if not g.has_v3_processes:  # what throwOnVersionMismatch raises on old drivers
            raise pynvml.NVMLLibraryMismatchError("no _v3 in this driver")
        return self._procs(g)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: int):
        return self._procs(self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses_v2"))

    def nvmlDeviceGetUtilizationRates(self, handle: int):
        g = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=g.gpu_util, memory=g.mem_util)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return self._gpu(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetClockInfo(self, handle: int, clock_type: int) -> int:
        g = self._gpu(handle, "nvmlDeviceGetClockInfo")
        if clock_type != pynvml.NVML_CLOCK_SM:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return g.sm_clock_mhz
