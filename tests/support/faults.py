"""Helpers of the fault-injection tests (``tests/integration/test_faults.py``).

``trtbench`` runs as a real subprocess in its own session (:func:`start_cli`) so that signals
reach it alone; its stdout and stderr go to files (a pipe nobody reads could block it).
Processes are found by a path in their command line (:func:`processes_mentioning`): every
process a test starts — the CLI, tritonserver, the Python backend stub — names the test's
temporary directory there, so "nothing of this test is left" is :func:`wait_gone`.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import psutil

from tests.support.data import REPO_ROOT

T = TypeVar("T")

CLI = (sys.executable, "-m", "trtbench.cli")
STAMPED = """\
import sys, time
import trtbench.cli, trtbench.commands.{command}
with open(sys.argv.pop(1), "w") as stamp:
    stamp.write(str(time.monotonic_ns()))
trtbench.cli.main(sys.argv[1:])
"""
"""``trtbench COMMAND …`` that first imports what the command needs, then writes the
CLOCK_MONOTONIC time into a stamp file: how long the command itself took, without the
interpreter's start and imports (seconds on a busy machine)."""
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
INF = re.compile(r"(?<![A-Za-z])[-+]?inf(inity)?(?![A-Za-z])", re.IGNORECASE)


@dataclass
class Cli:
    """A running ``trtbench`` subprocess and the files its output goes to."""

    proc: subprocess.Popen
    stdout_path: Path
    stderr_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait(self, timeout: float) -> int:
        """Its exit code; after ``timeout`` s it is killed (with its process group) and the
        test fails."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"trtbench (pid {self.pid}) still running after {timeout} s; "
                f"stderr: {self.stderr()[-2000:]}"
            ) from None

    def running_until(self, predicate: Callable[[], T], timeout: float, what: str) -> T:
        """:func:`wait_for` ``predicate`` while this CLI runs; the test fails (with its
        stderr) when the CLI ends first. Returns the predicate's value."""
        got = wait_for(
            lambda: self.proc.poll() is not None or predicate(), timeout, what
        )
        assert self.proc.poll() is None, self.stderr()
        return got

    def stop_with(self, sig: signal.Signals, code: int, timeout: float = 120) -> None:
        """Send ``sig`` to the CLI alone; assert it exits with ``code`` (128 + the signal
        number for a stop by signal) within ``timeout`` s, with no traceback on stderr."""
        self.proc.send_signal(sig)
        assert self.wait(timeout) == code, self.stderr()
        assert "Traceback" not in self.stderr()

    def kill(self) -> None:
        """SIGKILL its process group if it still runs (cleanup after a failed test)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


def start_cli(args: list, logs: Path, name: str, stamp: Path | None = None) -> Cli:
    """``python -m trtbench.cli ARGS…`` in a new session; output in ``logs/<name>.{out,err}``.

    With ``stamp``: run through :data:`STAMPED`, which writes the time the imports ended
    there (:func:`stamp_time`).
    """
    logs.mkdir(parents=True, exist_ok=True)
    out, err = logs / f"{name}.out", logs / f"{name}.err"
    argv = [*CLI, *(str(a) for a in args)]
    if stamp is not None:
        code = STAMPED.format(command=args[0])
        argv = [sys.executable, "-c", code, str(stamp), *(str(a) for a in args)]
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            argv,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            cwd=REPO_ROOT,
            start_new_session=True,
        )
    return Cli(proc, out, err)


def run_cli(
    args: list, logs: Path, name: str, timeout: float = 300, stamp: Path | None = None
) -> Cli:
    """:func:`start_cli` and wait for it to end."""
    cli = start_cli(args, logs, name, stamp)
    cli.wait(timeout)
    return cli


def stamp_time(stamp: Path) -> float:
    """The CLOCK_MONOTONIC time (``time.monotonic()``) written by :data:`STAMPED`."""
    return int(stamp.read_text()) / 1e9


def processes_mentioning(path: Path | str) -> list[psutil.Process]:
    """Live processes (not this one) with ``path`` in an argument of their command line."""
    needle = str(path)
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        if proc.pid == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if any(needle in arg for arg in proc.info["cmdline"] or ()):
            found.append(proc)
    return found


def describe(proc: psutil.Process) -> str:
    """``<pid> <command line>`` (shortened) of a process, for a failure message."""
    try:
        cmdline = " ".join(proc.cmdline())
    except psutil.Error:
        cmdline = "(gone)"
    return f"{proc.pid} {cmdline[:240]}"


def wait_gone(path: Path | str, timeout: float = 20.0) -> list[str]:
    """Wait up to ``timeout`` s for every process mentioning ``path`` to end.

    Returns:
        One line per process still there (they are then SIGKILLed, so later tests do not
        inherit them); empty when everything ended.
    """
    deadline = time.monotonic() + timeout
    while True:
        left = processes_mentioning(path)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    lines = [describe(p) for p in left]
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return lines


def still_running(procs: list[psutil.Process]) -> list[str]:
    """One line per process of ``procs`` still running (a zombie is not; psutil tells a
    reused PID from the process it recorded)."""
    left = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                left.append(describe(proc))
        except psutil.NoSuchProcess:
            continue
    return left


def wait_for(predicate: Callable[[], T], timeout: float, what: str) -> T:
    """Poll ``predicate`` every 20 ms until it returns something true; return it.

    Raises:
        AssertionError: still false after ``timeout`` s (``what`` says what was awaited).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def log_line(path: Path, pattern: str) -> str | None:
    """The first line of ``path`` matching the regex ``pattern`` (None: none, or no file)."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return None
    regex = re.compile(pattern)
    return next((line for line in text.splitlines() if regex.search(line)), None)


def log_time(line: str) -> float:
    """The ``time.time()`` of a ``trtbench.log`` record (its local ``asctime``, in ms)."""
    match = LOG_TIME.match(line)
    assert match, f"no timestamp in log line {line!r}"
    stamp = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()


def data_rows(path: Path) -> int:
    """Complete data lines of a CSV being appended to (0 when absent or header only)."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return 0
    return max(0, text.count(b"\n") - 1)


def find_inf(text: str) -> list[str]:
    """Every ``inf`` / ``-inf`` / ``Infinity`` token in ``text`` (not inside a word)."""
    return [m.group(0) for m in INF.finditer(text)]


def metric_total(metrics_url: str, family: str, model: str) -> float | None:
    """Sum of the ``family`` samples labelled ``model="<model>"`` on a Triton /metrics page
    (None: the page has no such sample)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(metrics_url, timeout=10) as page:
        text = page.read().decode()
    samples = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(family + "{") and f'model="{model}"' in line
    ]
    return sum(samples) if samples else None


def closed_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def can_listen(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a new server can listen on ``port`` (bound with ``SO_REUSEADDR``, as
    tritonserver binds: connections of the previous server in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen()
        except OSError:
            return False
    return True
