"""A process and its descendants, and their resident memory, read from Linux ``/proc``.

Used by the memory sampler to find the server's processes (tritonserver and its Python backend
stubs) in NVML's per-process list, and to sample their RSS when there is no GPU.

Facts (proc(5)): ``/proc/<pid>/stat`` field 4 is the parent PID; the command name (field 2)
is parenthesised and may hold spaces or parentheses, so fields are split after the LAST
``)``. ``/proc/<pid>/statm`` field 2 is the resident set size in pages
(``os.sysconf("SC_PAGE_SIZE")`` bytes each). RSS counts shared pages (libraries, the
shared-memory regions the Python backend maps in both server and stub) in every process that
maps them, so the sum over a tree is an upper bound of the memory it holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

PROC = Path("/proc")


def _stat_rows(proc: Path) -> Iterator[tuple[int, list[str]]]:
    """``(pid, fields)`` of every process readable in ``proc``: ``/proc/<pid>/stat`` split
    after the LAST ``)`` (field 3, the state, first); vanished ones skipped."""
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # the process exited between listing and reading
            continue
        yield int(entry.name), stat[stat.rfind(")") + 2 :].split()


def parent_map(proc: Path = PROC) -> dict[int, int]:
    """``{pid: ppid}`` for every process readable in ``proc`` (vanished ones skipped)."""
    return {pid: int(f[1]) for pid, f in _stat_rows(proc) if len(f) > 1}


def descendants(root: int, parents: dict[int, int]) -> list[int]:
    """``root`` and every process below it (pure; ``root`` first, then breadth-first).

    Args:
        root: the tree's root PID (kept even when absent from ``parents``).
        parents: ``{pid: ppid}``, e.g. from :func:`parent_map`.
    """
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out, queue, seen = [], [root], {root}
    while queue:
        pid = queue.pop(0)
        out.append(pid)
        for child in sorted(children.get(pid, [])):
            if child not in seen:
                seen.add(child)
                queue.append(child)
    return out


def process_tree(root: int, proc: Path = PROC) -> list[int]:
    """PIDs of ``root`` and its living descendants ([] when ``root`` is gone)."""
    if not (proc / str(root)).is_dir():
        return []
    return descendants(root, parent_map(proc))


def group_members(pgid: int, proc: Path = PROC) -> list[int]:
    """PIDs of the living processes in process group ``pgid`` (sorted; [] when none).

    proc(5): ``/proc/<pid>/stat`` field 3 is the state and field 5 the process group ID.
    A zombie (``Z``) or dead (``X``) process has exited and holds no memory or port, so it
    is not counted: its parent may reap it any time later (an orphan is reaped by init).
    """
    return sorted(
        pid
        for pid, f in _stat_rows(proc)
        if len(f) > 2 and f[0] not in ("Z", "X") and int(f[2]) == pgid
    )


def rss_bytes(pid: int, proc: Path = PROC) -> int | None:
    """Resident set size of one process in bytes (None when it is gone or unreadable)."""
    try:
        pages = int((proc / str(pid) / "statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def tree_rss_bytes(pids: Iterable[int], proc: Path = PROC) -> int | None:
    """Sum of the RSS of ``pids`` that could be read (None when none could)."""
    values = [v for v in (rss_bytes(p, proc) for p in pids) if v is not None]
    return sum(values) if values else None


def parse_pid_cpu_ticks(stat_text: str) -> int:
    """``utime + stime + cutime + cstime`` of one ``/proc/<pid>/stat``, in clock ticks.

    proc(5): fields 14-17 (1-based) are utime and stime (this process, user and kernel mode)
    and cutime and cstime ("this process's waited-for children"), in clock ticks. The
    command name (field 2) is parenthesised and may hold spaces and parentheses, so the
    fields are split after the LAST ``)``; field 3 is then the first.

    Why the children's fields: when a tree member reaps an exited child, the kernel adds the
    child's utime+stime (and its own cutime+cstime) to the member's cutime+cstime. Summed over
    the tree at two instants, a child that ran and exited in between is thus still counted:
    before, in its own utime+stime; after, in its parent's cutime+cstime. Children never
    waited for (reaped by init, or with ``SIGCHLD`` ignored) are not.

    Raises:
        ValueError: when the text has too few fields.
    """
    fields = stat_text[stat_text.rfind(")") + 2 :].split()
    if len(fields) < 15:
        raise ValueError(f"/proc/<pid>/stat has {len(fields) + 2} fields, need 17")
    return sum(int(v) for v in fields[11:15])  # fields 14..17 (field 3 is index 0)


def tree_cpu_ticks(root: int, proc: Path = PROC) -> int | None:
    """CPU time ``root`` and its living descendants have used so far, in clock ticks
    (:func:`parse_pid_cpu_ticks` summed; None when ``root`` is gone). A member that exits
    between listing and reading is skipped."""
    pids = process_tree(root, proc)
    if not pids:
        return None
    ticks = 0
    for pid in pids:
        try:
            ticks += parse_pid_cpu_ticks((proc / str(pid) / "stat").read_text())
        except (OSError, ValueError):
            continue
    return ticks


def proc_available(proc: Path = PROC) -> bool:
    """True when ``proc`` looks like Linux procfs (``/proc/self/statm`` readable)."""
    return (proc / "self" / "statm").is_file()
