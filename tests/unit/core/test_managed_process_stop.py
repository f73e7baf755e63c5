"""Stopping several managed processes side by side (``ManagedProcess.signal_stop``).

The processes are real Python children that note every SIGTERM they get and exit only once
they had one and the test releases them, as a tritonserver exits only once its models are
unloaded; nothing depends on how fast the host is. A stand-in only for the
server binary: the signalling, waiting and group kill under test are trtbench's own.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.support.managed_children import NotedChild, child_wording
from trtbench.core.proctree import group_members

CHILD = """
import os, signal, sys, time
out, release = sys.argv[1], sys.argv[2]
def on_term(signum, frame):
    with open(out, "a") as f:
        f.write(f"term {time.monotonic_ns()}\\n")
signal.signal(signal.SIGTERM, on_term)
with open(out, "a") as f:
    f.write("ready\\n")
while True:
    time.sleep(0.05)
    terms = [l for l in open(out) if l.startswith("term")]
    if terms and os.path.exists(release):
        with open(out, "a") as f:
            f.write(f"exit {time.monotonic_ns()}\\n")
        sys.exit(0)
"""
"""Ready at once; notes each SIGTERM; exits (0) once it had one and ``release`` exists, as a
tritonserver exits only once its models are unloaded. No timing: the test decides when."""


class SlowToStop(NotedChild):
    """The CHILD script as a managed process (its notes in ``notes``)."""

    wording = child_wording("slow-to-stop")

    def __init__(self, folder: Path, release: Path) -> None:
        super().__init__(folder / "process.log", ready_timeout_s=60.0)
        self.notes = folder / "notes.txt"
        self.release = release

    def _next_argv(self) -> list[str]:
        return [sys.executable, "-c", CHILD, str(self.notes), str(self.release)]

    def stamps(self, kind: str) -> list[int]:
        """The monotonic ns of each ``kind`` note (``term`` or ``exit``)."""
        lines = self.notes.read_text().splitlines()
        return [int(line.split()[1]) for line in lines if line.startswith(kind)]


def wait_for_term(p: SlowToStop, timeout_s: float = 60.0) -> None:
    """Until ``p`` noted its SIGTERM (a generous bound: the child is only slow to run)."""
    deadline = time.monotonic() + timeout_s
    while not p.stamps("term"):
        assert time.monotonic() < deadline, "no SIGTERM noted"
        time.sleep(0.05)


def test_signalled_processes_stop_side_by_side_with_one_sigterm_each(tmp_path):
    release = tmp_path / "release"
    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        folder.mkdir()
    a, b = (SlowToStop(folder, release).start() for folder in folders)
    try:
        a.signal_stop()
        b.signal_stop()
        a.signal_stop()  # again: not signalled twice
        # both got SIGTERM while neither may exit yet: signal_stop did not wait for a
        wait_for_term(a)
        wait_for_term(b)
        assert a.process.poll() is None and b.process.poll() is None
        release.touch()
        assert a.stop() == 0  # waits for the exit; no second SIGTERM, no SIGKILL
        assert b.stop() == 0
    finally:
        release.touch()
        a.stop()
        b.stop()
    for p in (a, b):
        assert len(p.stamps("term")) == 1  # stop() did not signal it again
        assert len(p.stamps("exit")) == 1


def test_stop_without_signal_stop_signals_once_and_waits(tmp_path):
    (tmp_path / "release").touch()  # it may exit once signalled
    p = SlowToStop(tmp_path, tmp_path / "release").start()
    try:
        assert p.stop() == 0
    finally:
        p.stop()
    assert len(p.stamps("term")) == 1
    assert p.stamps("exit")[0] > p.stamps("term")[0]
    assert p.process is not None and p.process.poll() == 0


def test_signal_stop_of_an_ended_or_unstarted_process_does_nothing(tmp_path):
    (tmp_path / "release").touch()
    p = SlowToStop(tmp_path, tmp_path / "release")
    p.signal_stop()  # never started
    assert p.process is None
    p.start()
    p.stop()
    p.signal_stop()  # ended
    assert len(p.stamps("term")) == 1


PARENT_OF_STUBBORN = """
import os, signal, subprocess, sys, time
out = sys.argv[1]
child = subprocess.Popen([sys.executable, "-c",
    "import signal, sys, time\\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
    "open(sys.argv[1], 'a').write('child up\\\\n')\\n"
    "while True: time.sleep(1)\\n", out])
while "child up" not in open(out).read():
    time.sleep(0.05)
with open(out, "a") as f:
    f.write(f"pid {child.pid}\\nready\\n")
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
while True:
    time.sleep(0.05)
"""
"""A leader that exits on SIGTERM, and its child (same process group) that ignores SIGTERM
and would live on, as a server's worker that outlives its front end."""


class LeavesAChild(NotedChild):
    wording = child_wording("leaves-a-child")

    def __init__(self, folder: Path) -> None:
        super().__init__(folder / "process.log", ready_timeout_s=60.0)
        self.notes = folder / "notes.txt"
        self.notes.touch()

    def _next_argv(self) -> list[str]:
        return [sys.executable, "-c", PARENT_OF_STUBBORN, str(self.notes)]


def test_stop_returns_once_no_member_of_the_group_lives(tmp_path):
    p = LeavesAChild(tmp_path).start()
    [child] = [
        int(x.split()[1])
        for x in p.notes.read_text().splitlines()
        if x.startswith("pid ")
    ]
    assert p.process is not None
    pgid = p.process.pid
    assert child in group_members(pgid)  # the child is in the leader's group
    try:
        assert p.stop() == 0  # the leader exits on SIGTERM
    finally:
        p.stop()
    # the child ignored SIGTERM; the group's SIGKILL reached it before stop returned
    assert group_members(pgid) == []


def _fake_proc(root: Path, rows: dict[int, str]) -> Path:
    for pid, stat in rows.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(stat)
    (root / "self").mkdir()  # not a PID: skipped
    return root


def test_group_members_reads_state_and_group_after_the_last_parenthesis(tmp_path):
    # proc(5): pid (comm) state ppid pgrp ...; a comm may hold spaces and parentheses
    proc = _fake_proc(
        tmp_path / "proc",
        {
            10: "10 (tritonserver) S 1 10 10 0",
            11: "11 (stub (a) b) R 10 10 10 0",
            12: "12 (gone) Z 10 10 10 0",  # a zombie: exited
            13: "13 (other) S 1 13 13 0",
            14: "14 (10) S 1 7 7 0",  # its name is the group's number, its group is not
        },
    )
    assert group_members(10, proc) == [10, 11]
    assert group_members(13, proc) == [13]
    assert group_members(99, proc) == []
