"""NVML on a real GPU: readings are consistent and see a 512 MiB allocation of this process.

The allocation goes through the CUDA driver API (``libcuda.so.1`` via ctypes), so the test
needs no CUDA build of torch.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time

import pytest

from tests.support.faults import wait_for
from trtbench.profiling.memory.nvml import try_open_nvml
from trtbench.profiling.memory.sampler import MemorySampler

pytestmark = pytest.mark.gpu

MiB = 2**20
ALLOC_BYTES = 512 * MiB


@pytest.fixture(scope="module")
def reader():
    reader, reason = try_open_nvml()
    if reader is None:
        pytest.skip(f"needs an NVIDIA GPU and driver: NVML unavailable ({reason})")
    yield reader
    reader.close()


@contextlib.contextmanager
def device_allocation():
    """Hold ALLOC_BYTES on GPU 0 through the driver API inside the block."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        pytest.skip(f"needs the CUDA driver library libcuda.so.1 ({exc})")
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    assert cuda.cuInit(0) == 0
    assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
    try:
        assert cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(ALLOC_BYTES)) == 0
        yield
        cuda.cuMemFree_v2(ptr)
    finally:
        cuda.cuCtxDestroy_v2(ctx)


def test_memory_readings_add_up(reader):
    devices = reader.devices()
    assert devices and devices[0].uuid.startswith(("GPU-", "MIG-"))
    mem = reader.memory(devices[0])
    assert mem is not None and mem.total_bytes >= 1024 * MiB
    if mem.version == "v2":  # v2: total = reserved + used + free
        parts = mem.reserved_bytes + mem.used_bytes + mem.free_bytes
        assert abs(mem.total_bytes - parts) <= 4 * MiB
    else:  # v1: total = used + free
        assert abs(mem.total_bytes - mem.used_bytes - mem.free_bytes) <= 4 * MiB
    clock = reader.sm_clock_mhz(devices[0])
    assert clock is None or 100 <= clock <= 4000


def test_sampler_sees_this_process_allocate(reader):
    with MemorySampler(os.getpid(), reader=reader, interval_ms=50) as sampler:
        sampler.mark("idle")
        with device_allocation():
            sampler.mark("tier:alloc")
            time.sleep(0.2)
            # the mark's reading and a tick of the schedule (a starved thread ticks late)
            wait_for(
                lambda: (
                    sum(
                        r.phase == "tier:alloc" and r.device_index == 0
                        for r in sampler.records
                    )
                    >= 2
                ),
                60,
                "two readings of GPU 0 while the block is held",
            )
            procs = reader.processes(reader.devices()[0])
    frame = sampler.frame()
    gpu0 = frame[(frame["device_index"] == 0) & (frame["phase"] == "tier:alloc")]
    assert set(frame["source"]) == {"nvml"} and len(gpu0) >= 2
    idle = frame[(frame["device_index"] == 0) & (frame["phase"] == "idle")]
    # the context and the 512 MiB block are charged to this PID when NVML can see it
    visible = procs is not None and any(p.pid == os.getpid() for p in procs)
    if visible:
        assert (gpu0["proc_used_bytes"] >= ALLOC_BYTES).all()
    else:  # container without --pid=host: the column degrades, the run goes on
        assert gpu0["proc_used_bytes"].isna().all()
    grew = gpu0["mem_used_bytes"].min() - idle["mem_used_bytes"].iloc[-1]
    assert grew >= ALLOC_BYTES  # other processes on a shared GPU could only add to it
