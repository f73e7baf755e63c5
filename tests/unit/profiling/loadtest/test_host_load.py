"""host_load: /proc parsers, snapshots of a fake proc tree, fake NVML, a real CPU burner.

Every expected figure is worked out by hand from proc(5)'s field definitions and the
formulas in the module's docstrings, never read back from the code under test.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pynvml
import pytest

from tests.support.fake_nvml import FakeGpu, FakeNvml
from trtbench.profiling.loadtest.records.host_load import (
    OTHER_SHARE_LIMIT,
    CpuTimes,
    HostLoad,
    HostLoadMeter,
    host_load,
    is_flagged,
    parse_pid_cpu_ticks,
    parse_proc_stat_cpu,
    take_snapshot,
)
from trtbench.profiling.memory.nvml import try_open_nvml

GiB, MiB = 2**30, 2**20
CLK_TCK = 100  # ticks per second, passed explicitly so the arithmetic below is fixed


def stat_line(pid: int, comm: str, ppid: int, ticks: tuple[int, int, int, int]) -> str:
    """A /proc/<pid>/stat line (proc(5)): 1 pid, 2 (comm), 3 state, 4 ppid, 5-13 (pgrp …
    cmajflt) as zeros, 14-17 utime stime cutime cstime, 18-22 priority … starttime."""
    utime, stime, cutime, cstime = ticks
    zeros = " ".join(["0"] * 9)
    return (
        f"{pid} ({comm}) S {ppid} {zeros} {utime} {stime} {cutime} {cstime} "
        "20 0 1 0 4242\n"
    )


def write_proc(
    root: Path, cpu_line: str, procs: dict[int, tuple[int, tuple[int, int, int, int]]]
) -> None:
    """A fake procfs: ``stat`` (aggregate + two CPUs), ``self/statm`` and ``<pid>/stat``
    for each ``{pid: (ppid, (utime, stime, cutime, cstime))}``; other PIDs are removed."""
    root.mkdir(exist_ok=True)
    (root / "stat").write_text(f"{cpu_line}\ncpu0 0 0 0 0\ncpu1 0 0 0 0\nctxt 1\n")
    (root / "self").mkdir(exist_ok=True)
    (root / "self" / "statm").write_text("1 1 0 0 0 0 0\n")
    for entry in root.iterdir():
        if entry.name.isdigit() and int(entry.name) not in procs:
            shutil.rmtree(entry)  # the process exited
    for pid, (ppid, ticks) in procs.items():
        (root / str(pid)).mkdir(exist_ok=True)
        (root / str(pid) / "stat").write_text(stat_line(pid, "py x", ppid, ticks))


# A client (100) with a worker (101) and a server (102) whose stub (103) exits during the
# tier and is reaped by the server; init (1) and an unrelated job (200) are not ours.
CPU_BEFORE = "cpu  1000 0 200 5000 10 0 50 0 0 0"  # busy = 1000+0+200+0+50+0 = 1250
BEFORE = {
    1: (0, (500, 100, 0, 0)),
    100: (1, (10, 5, 0, 0)),  # 15
    101: (100, (20, 0, 0, 0)),  # 20
    102: (100, (30, 10, 0, 0)),  # 40
    103: (102, (4, 1, 0, 0)),  # 5       own before: 15+20+40+5 = 80 ticks, 4 PIDs
    200: (1, (1000, 200, 0, 0)),
}
CPU_AFTER = "cpu  1220 0 270 5100 10 0 60 0 0 0"  # busy = 1220+270+60 = 1550
AFTER = {
    1: (0, (510, 100, 0, 0)),
    100: (1, (60, 10, 0, 0)),  # 70
    101: (100, (60, 0, 0, 0)),  # 60
    # 103 ran 7 user + 3 system ticks in all, then 102 reaped it: cutime 7, cstime 3
    102: (100, (50, 20, 7, 3)),  # 80     own after: 70+60+80 = 210 ticks, 3 PIDs
    200: (1, (1200, 250, 0, 0)),
}
TWO_S_NS = 2_000_000_000


def clock_of(*values: int):
    return iter(values).__next__


def test_proc_stat_aggregate_line():
    text = "cpu  100 2 30 400 5 6 7 8 9 1\ncpu0 50 1 15 200 2 3 3 4 4 0\nintr 1 2\n"
    cpu = parse_proc_stat_cpu(text)
    assert cpu == CpuTimes(100, 2, 30, 400, 5, 6, 7, 8)
    assert cpu.busy_ticks == 100 + 2 + 30 + 6 + 7 + 8  # guest 9, guest_nice 1 not added
    assert cpu.total_ticks == 153 + 400 + 5


def test_proc_stat_of_an_old_kernel_and_without_cpu_line():
    cpu = parse_proc_stat_cpu("cpu  1 2 3 4\n")  # before iowait (2.5.41) …: zeros
    assert (cpu.busy_ticks, cpu.total_ticks) == (1 + 2 + 3, 1 + 2 + 3 + 4)
    with pytest.raises(ValueError):
        parse_proc_stat_cpu("cpu0 1 2 3 4\nintr 5\n")


@pytest.mark.parametrize("comm", ["tritonserver (x)", "a) S 9 (b", "python3"])
def test_pid_ticks_sum_fields_14_to_17_after_the_last_parenthesis(comm):
    text = (
        f"4242 ({comm}) S 1 4242 4242 0 -1 4194560 100 0 0 0 11 22 33 44 20 0 5 0 9\n"
    )
    # after ")": S=3 1=4 4242=5 4242=6 0=7 -1=8 4194560=9 100=10 0=11 0=12 0=13,
    # then utime 11 (14), stime 22 (15), cutime 33 (16), cstime 44 (17)
    assert parse_pid_cpu_ticks(text) == 11 + 22 + 33 + 44


def test_pid_ticks_of_a_truncated_line():
    with pytest.raises(ValueError):
        parse_pid_cpu_ticks("7 (x) S 1 0 0")


def test_snapshot_counts_the_own_tree_only(tmp_path):
    proc = tmp_path / "proc"
    write_proc(proc, CPU_BEFORE, BEFORE)
    # 103 lies inside 100's tree (counted once); 999 does not exist (skipped)
    snap = take_snapshot([103, 100, 999], proc, clock=clock_of(7))
    assert (snap.t_ns, snap.own_ticks, snap.own_pids, snap.ncpu) == (7, 80, 4, 2)
    assert snap.cpu.busy_ticks == 1250
    assert snap.gpu_other is None  # no NVML given
    # the server alone: 102 (40) + its stub 103 (5)
    assert take_snapshot([102], proc).own_ticks == 45


def test_host_load_between_two_fake_snapshots(tmp_path):
    proc = tmp_path / "proc"
    write_proc(proc, CPU_BEFORE, BEFORE)
    before = take_snapshot([100], proc, clock=clock_of(0))
    write_proc(proc, CPU_AFTER, AFTER)
    after = take_snapshot([100], proc, clock=clock_of(TWO_S_NS))
    assert (after.own_ticks, after.own_pids) == (210, 3)
    load = host_load(before, after, clk_tck=CLK_TCK)
    # wall 2 s; busy Δ = 1550-1250 = 300 ticks = 3.0 CPU-s -> 1.5 cores;
    # own Δ = 210-80 = 130 ticks = 1.3 CPU-s -> 0.65 cores (103's run is in 102's cutime);
    # other = 1.5-0.65 = 0.85 cores; share = 0.85 / 2 CPUs = 0.425 of the host
    assert load.wall_s == 2.0
    assert load.host_busy_cores == pytest.approx(1.5)
    assert load.own_cores == pytest.approx(0.65)
    assert load.other_cores == pytest.approx(0.85)
    assert load.other_share == pytest.approx(0.425)
    assert (load.ncpu, load.source) == (2, "proc")
    assert (load.gpu_other_processes, load.gpu_other_used_bytes) == (None, None)
    assert is_flagged(load)


def test_zero_wall_time_gives_nan_and_jitter_is_clamped(tmp_path):
    proc = tmp_path / "proc"
    write_proc(proc, CPU_BEFORE, BEFORE)
    snap = take_snapshot([100], proc, clock=clock_of(5))
    same = host_load(snap, snap, clk_tck=CLK_TCK)
    assert same.wall_s == 0.0 and math.isnan(same.other_share)
    assert math.isnan(same.host_busy_cores) and not is_flagged(same)
    # own ticks grew by 130 while the host's busy ticks did not move (sampling jitter):
    # own 130/100/2 = 0.65 cores, other max(0, 0 - 0.65) = 0
    write_proc(proc, CPU_BEFORE, AFTER)
    later = take_snapshot([100], proc, clock=clock_of(TWO_S_NS))
    load = host_load(snap, later, clk_tck=CLK_TCK)
    assert (load.host_busy_cores, load.other_cores, load.other_share) == (0, 0, 0)
    assert load.own_cores == pytest.approx(0.65)
    # reversed: own ticks fell by 130 (a tree process reaped elsewhere) -> own 0, not < 0
    write_proc(proc, CPU_BEFORE, BEFORE)
    fell = take_snapshot([100], proc, clock=clock_of(2 * TWO_S_NS))
    back = host_load(later, fell, clk_tck=CLK_TCK)
    assert (back.own_cores, back.other_cores) == (0, 0)


def load_of(share: float, gpu: int | None = None) -> HostLoad:
    return HostLoad(1.0, share * 2, 0.0, share * 2, share, 2, gpu, None, "proc")


def test_flag_limit():
    assert OTHER_SHARE_LIMIT == 0.10
    assert is_flagged(load_of(0.11))
    assert not is_flagged(load_of(0.10))  # "more than" 10 %
    assert not is_flagged(load_of(0.05, gpu=0))
    assert is_flagged(load_of(0.0, gpu=1))  # someone else holds a GPU
    assert not is_flagged(load_of(math.nan))
    assert is_flagged(load_of(0.3), limit=0.25)


def test_gpu_processes_that_are_not_ours(tmp_path):
    # This machine has no GPU: the real NvmlReader runs over the pynvml fake.
    proc = tmp_path / "proc"
    write_proc(proc, CPU_BEFORE, BEFORE)
    gpu_a = FakeGpu("GPU-a", processes=[(102, 3 * GiB)])
    gpu_b = FakeGpu("GPU-b", processes=[])
    reader, _ = try_open_nvml(FakeNvml([gpu_a, gpu_b]))
    before = take_snapshot([100], proc, nvml=reader, clock=clock_of(0))
    assert before.gpu_other is not None and before.gpu_other.pids == frozenset()
    # a foreign 555 on both GPUs, 777 with memory "not available" on GPU-b
    gpu_a.processes = [(102, 3 * GiB), (555, GiB)]
    gpu_b.processes = [(555, 512 * MiB), (777, None)]
    write_proc(proc, CPU_AFTER, AFTER)
    after = take_snapshot([100], proc, nvml=reader, clock=clock_of(TWO_S_NS))
    load = host_load(before, after, clk_tck=CLK_TCK)
    assert load.gpu_other_processes == 2  # max(0, |{555, 777}|); 102 is ours
    assert load.gpu_other_used_bytes == GiB + 512 * MiB  # 777's unknown adds 0
    assert load.source == "proc+nvml"
    assert load.other_share == pytest.approx(0.425)  # CPU figures as without NVML


def test_gpu_figures_empty_when_nvml_cannot_list(tmp_path):
    proc = tmp_path / "proc"
    write_proc(proc, CPU_BEFORE, BEFORE)
    no_list = {"nvmlDeviceGetComputeRunningProcesses": pynvml.NVML_ERROR_NOT_SUPPORTED}
    reader, _ = try_open_nvml(FakeNvml([FakeGpu("GPU-a", fail=no_list)]))
    snap = take_snapshot([100], proc, nvml=reader, clock=clock_of(0))
    later = take_snapshot([100], proc, nvml=reader, clock=clock_of(TWO_S_NS))
    load = host_load(snap, later, clk_tck=CLK_TCK)
    assert (load.gpu_other_processes, load.gpu_other_used_bytes) == (None, None)
    assert load.source == "proc"


def test_meter_over_a_fake_proc(tmp_path):
    proc = tmp_path / "proc"
    write_proc(proc, CPU_BEFORE, BEFORE)
    calls = []

    def roots():
        calls.append(1)
        return [100]

    meter = HostLoadMeter(roots, proc=proc, clock=clock_of(0, TWO_S_NS))
    start = meter.start()
    write_proc(proc, CPU_AFTER, AFTER)
    load = meter.stop(start)
    assert len(calls) == 2  # the roots are asked at each snapshot
    assert load.other_share == pytest.approx(0.425)  # as in the two-snapshot test


def test_meter_never_raises(tmp_path):
    gone = HostLoadMeter(lambda: [1], proc=tmp_path / "no-proc")
    start = gone.start()
    assert start is None
    load = gone.stop(start)
    assert load.source == "unavailable" and math.isnan(load.other_share)
    assert not is_flagged(load)

    def broken():
        raise RuntimeError("server list unreadable")

    proc = tmp_path / "proc"
    write_proc(proc, CPU_BEFORE, BEFORE)
    assert HostLoadMeter(broken, proc=proc).start() is None
    meter = HostLoadMeter(lambda: [100], proc=proc)
    start = meter.start()
    (proc / "stat").write_text("garbage\n")  # no aggregate cpu line at stop
    assert meter.stop(start).source == "unavailable"


def cpu_seconds(pid: int) -> float:
    """utime+stime of /proc/<pid>/stat in seconds, read by psutil (not by the module)."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


@pytest.mark.skipif(not Path("/proc/stat").is_file(), reason="needs Linux /proc")
def test_a_real_burner_counts_as_other_unless_it_is_ours():
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        # pairs taken back to back: without the burner in our roots, and with it
        excl0 = take_snapshot([])
        c0 = cpu_seconds(burner.pid)
        incl0 = take_snapshot([burner.pid])
        time.sleep(1.5)
        excl1 = take_snapshot([])
        c1 = cpu_seconds(burner.pid)
        incl1 = take_snapshot([burner.pid])
    finally:
        burner.kill()
        burner.wait()
    burner_s = c1 - c0
    assert burner_s > 0
    excluded, included = host_load(excl0, excl1), host_load(incl0, incl1)
    # CPU-seconds against CPU-seconds: holds however busy the host is
    other_excl_s = excluded.other_cores * excluded.wall_s
    other_incl_s = included.other_cores * included.wall_s
    assert other_excl_s >= 0.5 * burner_s
    # as an own root, the burner's time leaves "other" and lands in "own"
    assert other_incl_s <= other_excl_s - 0.5 * burner_s
    assert included.own_cores * included.wall_s >= 0.5 * burner_s
