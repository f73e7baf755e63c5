"""What ELSE used the host while a load-test tier ran: other processes' CPU, other GPU users.

A tier is measured by two :class:`HostSnapshot` s (before and after). :func:`host_load`
differences them: the CPU time every process on the host used (``/proc/stat``) minus the CPU
time trtbench's own process tree used (the client, its workers and the servers it started,
all descendants of the roots it names; ``/proc/<pid>/stat``) is the CPU time taken by
"other" processes. On a GPU host, NVML's compute-process list names the processes holding a
GPU; those whose PID is not ours are counted. :func:`is_flagged` marks a tier measured while
others took a large share of the machine.

Limits:

- Both sources are tick-sampled (``USER_HZ``, usually 100 per second) and are not read at the
  same instant, so a few % of a core of jitter is normal; negative differences are clamped
  to 0.
- Kernel threads, interrupts (``irq``, ``softirq``) and time stolen by a hypervisor
  (``steal``) count as "other": no process of ours owns them.
- An own process that exits during the tier and is reaped OUTSIDE the tree loses its ticks
  (they count as other); one reaped by a tree member is counted (see
  :func:`parse_pid_cpu_ticks`). A process that joins the tree mid-tier with ticks already
  spent brings them along.
- NVML lists host PIDs: inside a container without ``--pid=host`` the list is empty or holds
  PIDs that are not ours, so other GPU users are missed or our own servers look foreign.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtbench.core.proctree import (
    PROC,
    descendants,
    parent_map,
    parse_pid_cpu_ticks,
    proc_available,
)

log = logging.getLogger(__name__)

OTHER_SHARE_LIMIT = 0.10
"""A tier is flagged when other processes took more than this fraction of the host's CPU
capacity (``ncpu`` cores × the tier's wall time) while it ran: 0.10 is 0.2 of a core on a
2-core machine, 1.6 cores on a 16-core one. Ten % is well above the few % of tick jitter, and
enough to slow a client or server that competes for the same cores."""

_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class CpuTimes:
    """The aggregate ``cpu`` line of ``/proc/stat``, in clock ticks (``USER_HZ``).

    proc(5), ``/proc/stat``: "The amount of time, measured in units of USER_HZ (1/100ths of
    a second on most architectures, use sysconf(_SC_CLK_TCK) to obtain the right value),
    that the system ("cpu" line) […] spent in various states". Fields missing on old kernels
    read 0.
    """

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def busy_ticks(self) -> int:
        """``user + nice + system + irq + softirq + steal``: ticks some CPU was not idle."""
        return (
            self.user + self.nice + self.system + self.irq + self.softirq + self.steal
        )

    @property
    def total_ticks(self) -> int:
        """``busy_ticks + idle + iowait``: every tick of every CPU."""
        return self.busy_ticks + self.idle + self.iowait


@dataclass(frozen=True)
class GpuOthers:
    """Compute processes on the GPUs that are not ours, at one instant.

    Attributes:
        pids: their PIDs (a process on two devices is one process).
        used_bytes: the device memory they hold, summed over (device, process) entries;
            entries NVML reports as "not available" add 0, so this is a lower bound.
    """

    pids: frozenset[int]
    used_bytes: int


@dataclass(frozen=True)
class HostSnapshot:
    """The host's CPU counters and our tree's CPU ticks at one instant.

    Attributes:
        t_ns: ``time.perf_counter_ns()`` when taken (ns, monotonic).
        cpu: the aggregate ``/proc/stat`` counters (clock ticks).
        own_ticks: ``utime + stime + cutime + cstime`` summed over our processes (ticks).
        own_pids: how many of our processes were read.
        ncpu: the ``cpuN`` lines of ``/proc/stat`` (online CPUs).
        gpu_other: other GPU users, None when NVML is absent or could not list processes.
    """

    t_ns: int
    cpu: CpuTimes
    own_ticks: int
    own_pids: int
    ncpu: int
    gpu_other: GpuOthers | None


@dataclass(frozen=True)
class HostLoad:
    """What the host spent between two snapshots, and how much of it was not ours.

    Attributes:
        wall_s: seconds between the snapshots.
        host_busy_cores: ``Δbusy_ticks / clk_tck / wall_s``: cores' worth of CPU every
            process, kernel thread and interrupt used together.
        own_cores: ``Δown_ticks / clk_tck / wall_s``: cores' worth our tree used.
        other_cores: ``max(0, host_busy_cores - own_cores)``.
        other_share: ``other_cores / ncpu``: the fraction of the host's capacity (0..1).
        ncpu: the host's CPUs (from the later snapshot).
        gpu_other_processes: the most foreign compute processes NVML listed in either
            snapshot (None without NVML).
        gpu_other_used_bytes: their device memory at the later snapshot (None without NVML).
        source: ``proc``, ``proc+nvml`` or ``unavailable`` (no ``/proc``: CPU figures NaN).
    """

    wall_s: float
    host_busy_cores: float
    own_cores: float
    other_cores: float
    other_share: float
    ncpu: int
    gpu_other_processes: int | None
    gpu_other_used_bytes: int | None
    source: str


def parse_proc_stat_cpu(text: str) -> CpuTimes:
    """The aggregate ``cpu `` line of ``/proc/stat`` (proc(5)).

    ``guest`` and ``guest_nice`` (fields 9-10) are not read: the kernel adds guest time to
    ``user``/``nice`` as well (``account_guest_time`` in kernel/sched/cputime.c), so adding
    them again would count it twice.

    Raises:
        ValueError: when there is no ``cpu `` line.
    """
    for line in text.splitlines():
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1 : 1 + len(_CPU_FIELDS)]]
            values += [0] * (len(_CPU_FIELDS) - len(values))
            return CpuTimes(*values)
    raise ValueError("no aggregate 'cpu ' line in /proc/stat")


def _count_cpus(text: str) -> int:
    n = sum(
        1 for line in text.splitlines() if line[:3] == "cpu" and line[3:4].isdigit()
    )
    return n or os.cpu_count() or 1


def _own_pids(own_roots: Sequence[int], proc: Path) -> set[int]:
    parents = parent_map(proc)
    own: set[int] = set()
    for root in own_roots:
        if root in parents and root not in own:
            own.update(descendants(root, parents))
    return own


def _gpu_processes(nvml: Any) -> list[tuple[int, int | None]] | None:
    """(pid, used bytes) of every compute process on every device; None if none listed."""
    out: list[tuple[int, int | None]] = []
    listed = False
    for device in nvml.devices():
        procs = nvml.processes(device)
        if procs is not None:
            listed = True
            out += [(p.pid, p.used_bytes) for p in procs]
    return out if listed else None


def take_snapshot(
    own_roots: Sequence[int],
    proc: Path = PROC,
    nvml: Any = None,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> HostSnapshot:
    """Read the host's counters and our tree's ticks now.

    Our processes are the union of each live root and its descendants (one
    :func:`~trtbench.core.proctree.parent_map` read per snapshot). NVML is read
    first, so a GPU process is already in ``/proc`` when our tree is listed. Processes that
    vanish between listing and reading are skipped.

    Args:
        own_roots: PIDs of trtbench's own roots (the client; servers below it come along).
        proc: the procfs mount.
        nvml: an object with ``devices()`` and ``processes(device)`` as
            :class:`~trtbench.profiling.memory.nvml.NvmlReader`, or None.
        clock: a monotonic ns clock.

    Raises:
        OSError, ValueError: when ``proc/stat`` cannot be read or parsed.
    """
    gpu = None if nvml is None else _gpu_processes(nvml)
    t_ns = clock()
    stat_text = (proc / "stat").read_text()
    own = _own_pids(own_roots, proc)
    ticks, read = 0, 0
    for pid in own:
        try:
            ticks += parse_pid_cpu_ticks((proc / str(pid) / "stat").read_text())
        except (OSError, ValueError):  # exited since the listing
            continue
        read += 1
    gpu_other = None
    if gpu is not None:
        foreign = [(pid, used) for pid, used in gpu if pid not in own]
        gpu_other = GpuOthers(
            frozenset(pid for pid, _ in foreign), sum(u or 0 for _, u in foreign)
        )
    return HostSnapshot(
        t_ns,
        parse_proc_stat_cpu(stat_text),
        ticks,
        read,
        _count_cpus(stat_text),
        gpu_other,
    )


def unavailable_load() -> HostLoad:
    """The :class:`HostLoad` of a host that cannot be measured (no ``/proc``): all NaN."""
    nan = math.nan
    return HostLoad(nan, nan, nan, nan, nan, 0, None, None, "unavailable")


def host_load(
    before: HostSnapshot, after: HostSnapshot, clk_tck: float | None = None
) -> HostLoad:
    """Difference two snapshots (pure; formulas on :class:`HostLoad`).

    Args:
        before: the earlier snapshot.
        after: the later one.
        clk_tck: clock ticks per second; None reads ``os.sysconf("SC_CLK_TCK")``.

    Returns:
        The load, with NaN CPU figures when ``wall_s <= 0``.
    """
    tck = float(clk_tck or os.sysconf("SC_CLK_TCK"))
    wall_s = (after.t_ns - before.t_ns) / 1e9
    ncpu = after.ncpu
    g0, g1 = before.gpu_other, after.gpu_other
    counts = [len(g.pids) for g in (g0, g1) if g is not None]
    gpu_n = max(counts) if counts else None
    gpu_bytes = None if g1 is None else g1.used_bytes
    source = "proc+nvml" if counts else "proc"
    if wall_s <= 0:
        nan = math.nan
        return HostLoad(wall_s, nan, nan, nan, nan, ncpu, gpu_n, gpu_bytes, source)
    busy = max(0, after.cpu.busy_ticks - before.cpu.busy_ticks) / tck / wall_s
    own = max(0, after.own_ticks - before.own_ticks) / tck / wall_s
    other = max(0.0, busy - own)
    share = other / ncpu if ncpu > 0 else math.nan
    return HostLoad(wall_s, busy, own, other, share, ncpu, gpu_n, gpu_bytes, source)


def is_flagged(load: HostLoad, limit: float = OTHER_SHARE_LIMIT) -> bool:
    """True when others took more than ``limit`` of the host's CPU, or held a GPU.

    A NaN share (unmeasured) is never flagged on its own.
    """
    return load.other_share > limit or (load.gpu_other_processes or 0) > 0


class HostLoadMeter:
    """Measures one tier at a time; never raises into the load test.

    Args:
        own_roots: called at each snapshot (servers start and stop between tiers); returns
            the PIDs whose trees are ours, e.g. ``lambda: [os.getpid()]``.
        nvml: a :class:`~trtbench.profiling.memory.nvml.NvmlReader` (or alike), or None.
        proc: the procfs mount.
        clock: a monotonic ns clock.
    """

    def __init__(
        self,
        own_roots: Callable[[], Sequence[int]],
        nvml: Any = None,
        proc: Path = PROC,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self._own_roots = own_roots
        self._nvml = nvml
        self._proc = proc
        self._clock = clock
        self._warned = False

    def _snapshot(self) -> HostSnapshot | None:
        if not proc_available(self._proc):
            self._warn(f"{self._proc} is not a Linux procfs")
            return None
        try:
            return take_snapshot(self._own_roots(), self._proc, self._nvml, self._clock)
        except Exception as exc:  # a measurement must never end the run
            self._warn(f"{type(exc).__name__}: {exc}")
            return None

    def _warn(self, reason: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("host load unavailable (%s); tiers are not checked", reason)

    def start(self) -> HostSnapshot | None:
        """The snapshot at a tier's start (None when the host cannot be measured)."""
        return self._snapshot()

    def stop(self, start: HostSnapshot | None) -> HostLoad:
        """The tier's load since ``start`` (:func:`unavailable_load` when unmeasurable)."""
        if start is None:
            return unavailable_load()
        end = self._snapshot()
        return unavailable_load() if end is None else host_load(start, end)
