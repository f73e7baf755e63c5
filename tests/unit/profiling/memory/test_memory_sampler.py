"""MemorySampler and NvmlReader: fake NVML values, degraded columns, real process-tree RSS."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pynvml
import pytest

from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.faults import wait_for
from trtbench.core.proctree import descendants, parent_map
from trtbench.profiling.memory.nvml import NvmlReader, open_nvml, try_open_nvml
from trtbench.profiling.memory.sampler import (
    MEMORY_SCHEMA,
    MemorySampler,
    memory_frame,
    write_memory_csv,
)

GiB, MiB = 2**30, 2**20

# A parent that holds 200 MiB and starts a child holding 100 MiB; both print "ready".
# bytes(n) with a non-zero fill touches every page, so RSS really grows by n.
HOLDER = """
import subprocess, sys, time
mib = int(sys.argv[1])
block = b"\\x01" * (mib << 20)
child = None
if len(sys.argv) > 2:
    child = subprocess.Popen([sys.executable, "-c", sys.argv[2], sys.argv[3]],
                             stdout=sys.stdout)
    time.sleep(0.05)
print("ready", flush=True)
time.sleep(60)
"""


def reader_for(*gpus: FakeGpu) -> NvmlReader:
    reader, reason = try_open_nvml(FakeNvml(list(gpus)))
    assert reader is not None, reason
    return reader


def sample_once(sampler: MemorySampler) -> pd.DataFrame:
    """Enter, take exactly the boundary reading of one mark, leave."""
    with sampler:
        sampler.mark("tier:c1")
    frame = sampler.frame()
    return frame[frame["phase"] == "tier:c1"].tail(len(frame["device_index"].unique()))


@pytest.fixture
def holder_tree():
    """A real process (200 MiB) with a child (100 MiB); yields the parent's PID."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, "200", HOLDER, "100"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for _ in range(2):
            assert proc.stdout.readline().strip() == "ready"
        yield proc.pid
    finally:
        for pid in descendants(proc.pid, parent_map())[::-1]:
            subprocess.run(["kill", "-9", str(pid)], check=False)
        proc.wait()


def test_nvml_reader_reports_v2_memory_with_reserved_apart():
    reader = reader_for(
        FakeGpu("GPU-a", total=80 * GiB, used=10 * GiB, reserved=500 * MiB)
    )
    (dev,) = reader.devices()
    mem = reader.memory(dev)
    assert (dev.index, dev.uuid) == (0, "GPU-a")
    assert mem is not None and mem.version == "v2"
    assert mem.used_bytes == 10 * GiB
    assert mem.reserved_bytes == 500 * MiB
    # free = total - used - reserved = 80 GiB - 10 GiB - 500 MiB
    assert mem.free_bytes == 70 * GiB - 500 * MiB


def test_nvml_reader_falls_back_to_v1_once_when_v2_is_missing():
    lib = FakeNvml(
        [FakeGpu("GPU-a", used=4 * GiB, reserved=1 * GiB)],
    )
    lib.gpus[0].fail["nvmlDeviceGetMemoryInfo_v2"] = (
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    )
    reader, _ = try_open_nvml(lib)
    assert reader is not None
    (dev,) = reader.devices()
    first, second = reader.memory(dev), reader.memory(dev)
    # v1 "used" includes the reserved memory: 4 GiB + 1 GiB
    assert first == second
    assert first is not None and first.used_bytes == 5 * GiB
    assert first.reserved_bytes is None and first.version == "v1"
    assert lib.calls["nvmlDeviceGetMemoryInfo_v2"] == 1  # not retried every tick


def test_open_nvml_without_a_driver_returns_none_with_one_warning(caplog):
    lib = FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with caplog.at_level(logging.WARNING):
        assert open_nvml(lib) is None
    assert len(caplog.records) == 1
    assert "NVMLError_LibraryNotFound" in caplog.records[0].getMessage()


def test_sampler_rows_carry_every_fake_reading_per_device():
    gpus = [
        FakeGpu("GPU-a", total=80 * GiB, used=10 * GiB, reserved=500 * MiB),
        FakeGpu("GPU-b", total=40 * GiB, used=1 * GiB, reserved=0, power_mw=90_000),
    ]
    rows = sample_once(MemorySampler(reader=reader_for(*gpus), variant="medusa"))
    a, b = rows.iloc[0], rows.iloc[1]
    assert list(rows["device_uuid"]) == ["GPU-a", "GPU-b"]
    assert set(rows["source"]) == {"nvml"} and set(rows["variant"]) == {"medusa"}
    assert (a["mem_total_bytes"], a["mem_used_bytes"]) == (80 * GiB, 10 * GiB)
    assert a["mem_reserved_bytes"] == 500 * MiB
    assert b["mem_free_bytes"] == 39 * GiB
    assert (a["gpu_util_pct"], a["mem_util_pct"], a["sm_clock_mhz"]) == (40, 20, 1410)
    assert (a["power_mw"], b["power_mw"]) == (250_000, 90_000)
    assert pd.isna(a["proc_used_bytes"]) and pd.isna(a["tree_pids"])  # no root pid


@pytest.mark.parametrize(
    ("function", "error", "empty_columns"),
    [
        (
            "nvmlDeviceGetUtilizationRates",
            pynvml.NVML_ERROR_NOT_SUPPORTED,
            ["gpu_util_pct", "mem_util_pct"],
        ),
        ("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NO_PERMISSION, ["power_mw"]),
        ("nvmlDeviceGetClockInfo", pynvml.NVML_ERROR_GPU_IS_LOST, ["sm_clock_mhz"]),
    ],
)
def test_one_nvml_error_empties_one_column_and_warns_once(
    function, error, empty_columns, caplog
):
    gpu = FakeGpu("GPU-a", fail={function: error})
    with caplog.at_level(logging.WARNING), MemorySampler(reader=reader_for(gpu)) as s:
        for phase in ("load", "warmup", "tier:c1"):
            s.mark(phase)
    frame = s.frame()
    assert len(frame) >= 3
    for col in empty_columns:
        assert frame[col].isna().all()
    others = ["mem_used_bytes", "gpu_util_pct", "power_mw", "sm_clock_mhz"]
    assert frame[[c for c in others if c not in empty_columns]].notna().all().all()
    warnings = [r for r in caplog.records if "unavailable" in r.getMessage()]
    assert len(warnings) == 1
    assert pynvml.NVMLError(error).__class__.__name__ in warnings[0].getMessage()


def test_process_memory_counts_only_the_server_tree(holder_tree):
    parent = holder_tree
    tree = descendants(parent, parent_map())
    assert len(tree) == 2
    gpu = FakeGpu(
        "GPU-a",
        processes=[(tree[0], 3 * GiB), (tree[1], 512 * MiB), (1, 7 * GiB)],
        has_v3_processes=False,  # old driver: the _v2 call answers
    )
    row = sample_once(MemorySampler(parent, reader=reader_for(gpu))).iloc[0]
    assert row["proc_used_bytes"] == 3 * GiB + 512 * MiB  # pid 1 is not in the tree
    assert (row["proc_count"], row["tree_pids"]) == (2, 2)


@pytest.mark.parametrize(
    ("processes", "fail", "count"),
    [
        ([], {}, 0),  # container without --pid=host: NVML lists nothing of ours
        (
            None,
            {"nvmlDeviceGetComputeRunningProcesses": pynvml.NVML_ERROR_NO_PERMISSION},
            None,
        ),
        ("own-unknown", {}, 1),  # usedGpuMemory not available (WDDM-like)
    ],
)
def test_missing_per_process_figure_leaves_proc_used_empty(
    processes, fail, count, caplog
):
    own = os.getpid()
    procs = [(own, None)] if processes == "own-unknown" else processes or []
    gpus = [FakeGpu("GPU-a", processes=procs, fail=fail), FakeGpu("GPU-b", fail=fail)]
    with caplog.at_level(logging.WARNING):
        row = sample_once(MemorySampler(own, reader=reader_for(*gpus))).iloc[0]
    # "none of ours on any GPU" is said once, only when NVML did list processes
    said = sum("--pid=host" in r.getMessage() for r in caplog.records)
    assert said == (1 if count == 0 else 0)
    assert pd.isna(row["proc_used_bytes"])
    assert pd.isna(row["proc_count"]) if count is None else row["proc_count"] == count
    assert row["mem_used_bytes"] == 10 * GiB  # the device columns still answer


def test_rss_fallback_samples_the_real_process_tree(holder_tree, caplog):
    with (
        caplog.at_level(logging.WARNING),
        MemorySampler(
            holder_tree, reader=None, interval_ms=20, variant="baseline", phase="load"
        ) as sampler,
    ):
        time.sleep(0.1)
        sampler.mark("tier:c1")
        time.sleep(0.1)
    frame = sampler.frame()
    assert set(frame["source"]) == {"rss"} and frame["device_index"].isna().all()
    assert (frame["tree_pids"] == 2).all()
    # 200 MiB + 100 MiB of touched pages, plus two interpreters (each well under 50 MiB)
    assert frame["rss_bytes"].between(300 * MiB, 400 * MiB).all()
    assert sum("no NVML" in r.getMessage() for r in caplog.records) == 1
    assert sampler.info()["source"] == "rss"


def test_schedule_is_monotonic_and_never_bursts():
    interval_ms = 50
    with MemorySampler(reader=None, interval_ms=interval_ms) as sampler:
        time.sleep(0.6)
        # a starved thread reads less often, never more: wait for the readings counted
        wait_for(lambda: len(sampler.records) >= 5, 60, "five readings")
    t = sampler.frame()["t_ns"].astype("int64")
    elapsed_ms = (t.iloc[-1] - t.iloc[0]) / 1e6
    gaps_ms = t.diff().dropna() / 1e6
    assert t.is_monotonic_increasing
    # deadlines t0 + k·50 ms: at most one reading per deadline in the elapsed span
    assert 5 <= len(t) <= elapsed_ms / interval_ms + 1
    assert 0.8 * interval_ms <= gaps_ms.median() <= 1.5 * interval_ms


def test_marks_label_following_samples_and_sample_at_the_boundary():
    # a tick far beyond pytest's timeout: none comes after the first reading on any host
    with MemorySampler(reader=reader_for(FakeGpu("GPU-a")), interval_ms=3.6e6) as s:
        wait_for(lambda: s.records, 60, "the thread's first (t0) reading")
        s.mark("load")
        s.mark("warmup")
        s.mark("tier:c8")
    frame = s.frame()
    assert [m.phase for m in s.marks] == ["load", "warmup", "tier:c8"]
    # one reading per mark (the hour's tick after the first reading cannot come in time)
    assert list(frame["phase"])[-3:] == ["load", "warmup", "tier:c8"]
    for mark in s.marks:
        row = frame[frame["phase"] == mark.phase].iloc[0]
        assert row["t_ns"] >= mark.t_ns


def test_thread_records_its_own_errors_and_gives_up_after_ten_in_a_row():
    def broken_pid() -> int:
        raise ZeroDivisionError("no pid")

    with MemorySampler(broken_pid, reader=None, interval_ms=5) as sampler:
        time.sleep(0.3)
        # ten failed readings 5 ms apart; a starved thread takes longer to give up
        wait_for(lambda: not sampler.running, 60, "the thread to give up")
        assert not sampler.running
    assert sampler.error_count == 10
    assert sampler.errors[0] == "ZeroDivisionError: no pid"
    assert sampler.frame().empty


def test_memory_csv_has_the_schema_columns(tmp_path: Path):
    with MemorySampler(reader=reader_for(FakeGpu("GPU-a"))) as s:
        s.mark("tier:c1")
    path = write_memory_csv(s.frame(), tmp_path / "memory.csv")
    back = pd.read_csv(path)
    assert list(back.columns) == [c.name for c in MEMORY_SCHEMA]
    assert back["mem_total_bytes"].iloc[-1] == 80 * GiB
    assert list(memory_frame([]).columns) == [c.name for c in MEMORY_SCHEMA]


def test_parent_map_reads_names_with_spaces_and_parentheses(tmp_path: Path):
    (tmp_path / "123").mkdir()
    (tmp_path / "123" / "stat").write_text("123 (tri ton) srv) S 77 123 123 0 -1\n")
    (tmp_path / "self").mkdir()
    assert parent_map(tmp_path) == {123: 77}
    assert descendants(1, {2: 1, 3: 1, 4: 2, 5: 9}) == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("warn", "level"), [(True, logging.WARNING), (False, logging.INFO)]
)
def test_missing_nvml_is_said_once_at_the_level_asked(caplog, warn, level):
    """A run warns for its first variant only; later samplers say it at INFO."""
    with (
        caplog.at_level(logging.INFO),
        MemorySampler(reader=None, warn_unavailable=warn),
    ):
        pass
    said = [r for r in caplog.records if "no NVML" in r.getMessage()]
    assert [r.levelno for r in said] == [level]
