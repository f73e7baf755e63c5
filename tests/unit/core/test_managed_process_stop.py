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
