"""A start that stalls — no CPU, no log line, not ready — is stopped and started again
(``ProcessWording.stall_s``), as a tritonserver whose Python-backend model hangs in its
start on a loaded host; a start that works, however slowly, is not.

The processes are real Python children (a stand-in only for the server binary): one that
sleeps without a word on its first attempts, one that logs while it starts. Nothing is
timed: a sleeping child uses no CPU on any host, and a logging one grows its log.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from tests.support.managed_children import NotedChild, child_wording
from trtbench.core.errors import ServerStartError

CHILD = """
import os, sys, time
notes, mode, stall_until = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(notes, "a") as f:
    f.write("start\\n")
starts = sum(1 for line in open(notes) if line == "start\\n")
if mode == "sleep" and starts <= stall_until:
    time.sleep(3600)  # a stalled start: no CPU, no output
for k in range(40 if mode == "log" else 0):
    print(f"loading {k}", flush=True)  # a slow start that says what it does
    time.sleep(0.2)
with open(notes, "a") as f:
    f.write("ready\\n")
time.sleep(3600)
"""


class Child(NotedChild):
    """CHILD as a managed process judged stalled after ``stall_s``."""

    def __init__(self, folder: Path, mode: str, stall_until: int, stall_s: float):
        super().__init__(folder / "process.log", ready_timeout_s=600.0)
        self.notes = folder / "notes.txt"
        self.mode, self.stall_until = mode, stall_until
        self.wording = child_wording("child", stall_s)

    def _next_argv(self) -> list[str]:
        return [
            sys.executable,
            "-c",
            CHILD,
            str(self.notes),
            self.mode,
            str(self.stall_until),
        ]

    def starts(self) -> int:
        return self.notes.read_text().splitlines().count("start")


def test_a_stalled_start_is_started_again(tmp_path, caplog):
    child = Child(tmp_path, "sleep", stall_until=1, stall_s=1.0)
    with caplog.at_level(logging.WARNING):
        child.start()
    try:
        assert child.starts() == 2  # the first stalled, the second was ready
        assert "child stalled while starting: no CPU and no log line for 1 s" in (
            caplog.text
        )
    finally:
        child.stop(grace_s=5.0)


def test_a_start_that_stalls_every_time_fails_naming_it(tmp_path):
    child = Child(tmp_path, "sleep", stall_until=99, stall_s=1.0)
    with pytest.raises(ServerStartError, match="stalled while starting.*on 3 attempts"):
        child.start()
    assert child.starts() == 3
    assert child.process is not None and child.process.poll() is not None  # stopped


def test_a_slow_start_that_logs_is_not_stalled(tmp_path):
    # 40 log lines 0.2 s apart: 8 s or more of starting, far beyond stall_s, with a line
    # every 0.2 s (a host would have to stall the child 3 s between two lines)
    child = Child(tmp_path, "log", stall_until=0, stall_s=3.0)
    child.start()
    try:
        assert child.starts() == 1
    finally:
        child.stop(grace_s=5.0)
