"""A server process trtbench starts and owns (tritonserver, a vLLM server).

Launched in its own session, so one signal to the process group reaches every child (Python
backend stubs, MPI ranks, vLLM's engine core and workers); its stdout and stderr appended to
a log, one header line per start, so reasons for a failure come only from what was written
since the latest start; a start retried with new ports when a picked port was taken between
the check and the bind; readiness awaited while watching for an early exit; ``health()`` for a
watchdog; ``stop()`` that sends SIGTERM to the leader, then SIGKILL to the whole group after a
grace period. Errors are one line carrying the log's reason and its path.

:class:`ManagedProcess` holds this; a server class (``TritonServer``, ``VllmServer``)
subclasses it and supplies its argv, what "ready" means, the URL that answers health checks
and how its log says why it failed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import ClassVar, TypeVar

from trtbench.core.errors import ServerStartError
from trtbench.core.proctree import group_members, tree_cpu_ticks

log = logging.getLogger(__name__)

START_ATTEMPTS = 3
STALL_CPU_S = 0.5
"""CPU seconds a starting process tree must use within ``stall_s`` to count as working
(an idle tritonserver with its stubs uses well under 0.1 s a minute)."""
NO_ERROR_LINES = "no error lines in the log since its start"
_DYING_S = 0.1  # how long health() waits for a process that stopped answering to exit
_GROUP_GONE_S = 30.0  # how long stop waits for a SIGKILLed group's members to exit

# No proxy: the server is on this host (or an address given literally), never behind one.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))

_Server = TypeVar("_Server", bound="ManagedProcess")


def http_get(url: str, timeout_s: float) -> tuple[str | None, bytes]:
    """GET ``url`` without a proxy.

    Returns:
        ``(None, body)`` when it answers 200 within ``timeout_s`` seconds, else
        ``(why not, b"")``: ``HTTP 503 from URL`` or ``no HTTP answer from URL within
        2 s: REASON``. Never raises (refused, reset, timeout: every failure is an answer).
    """
    try:
        with _DIRECT.open(url, timeout=timeout_s) as resp:
            body = resp.read()
            if resp.status != 200:
                return f"HTTP {resp.status} from {url}", b""
            return None, body
    except urllib.error.HTTPError as exc:
        exc.close()
        return f"HTTP {exc.code} from {url}", b""
    except Exception as exc:
        reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        return f"no HTTP answer from {url} within {timeout_s:g} s: {reason}", b""


def exit_text(code: int | None) -> str:
    """``exited with code 1``, or ``exited with code -9 (signal SIGKILL)`` for a signal
    (``Popen.returncode`` is minus the signal number)."""
    if code is None or code >= 0:
        return f"exited with code {code}"
    try:
        return f"exited with code {code} (signal {signal.Signals(-code).name})"
    except ValueError:
        return f"exited with code {code} (signal {-code})"


def start_header(
    label: str, attempt: int, argv: Sequence[str], when: datetime | None = None
) -> str:
    """The line written to a server's log before a start (pure but for the default time).

    ``==== LABEL start 2026-01-02T03:04:05Z (attempt 1): ARGV ====`` and a newline.

    Args:
        label: who starts what (``trtbench 0.1.0: tritonserver``, ``trtbench: vllm``).
        attempt: 1-based start attempt of this server (a retry after a taken port counts).
        argv: the command line started (shell-quoted in the header).
        when: the start time (default: now, UTC).
    """
    when = when or datetime.now(timezone.utc)
    stamp = when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"==== {label} start {stamp} (attempt {attempt}): {shlex.join(argv)} ====\n"


def read_since(path: Path, offset: int) -> str:
    """The text of ``path`` from byte ``offset`` on ('' when absent).

    Reads the whole file again when it is now shorter than ``offset`` (truncated by hand).
    Never raises for a missing or unreadable file.
    """
    try:
        with open(path, "rb") as file:
            file.seek(0, 2)
            file.seek(offset if offset <= file.tell() else 0)
            return file.read().decode(errors="replace")
    except OSError:
        return ""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class Stalled(Exception):
    """A start made no progress for ``stall_s``: no CPU, no log line (retried)."""


class PortTaken(Exception):
    """A picked port was taken before the server bound it (retry with new ports)."""


@dataclass(frozen=True)
class ProcessWording:
    """How one kind of server names itself and its troubles in logs and messages.

    Attributes:
        label: the process in health answers and log lines (``tritonserver``).
        header: the log header's label (see :func:`start_header`).
        not_serving: a health answer's verb while it runs but does not answer
            (``is not ready``).
        port_taken: log text meaning a port was taken (the start is retried).
        ports: what it could not bind (``its ports``).
        retry_with: what a retry picks (``new ports``).
        slow: why readiness may take long, after ``raise deploy.ready_timeout_s if``.
        poll_s: seconds between readiness checks.
        stall_s: a start whose process tree used under :data:`STALL_CPU_S` of CPU and
            wrote nothing to its log for this long, not ready, is stalled: stopped and
            started again (None: never judged stalled).
    """

    label: str
    header: str
    not_serving: str
    port_taken: tuple[str, ...]
    ports: str
    retry_with: str
    slow: str
    poll_s: float
    stall_s: float | None = None


class _Progress:
    """Whether a starting process tree still works: its CPU time or its log grew within
    the last ``stall_s`` seconds (``/proc``; never stalled without ``stall_s`` or
    ``/proc``). A load that computes or logs is never judged stalled, however slow."""

    def __init__(self, stall_s: float | None, log_path: Path) -> None:
        self._stall_s = stall_s
        self._log_path = log_path
        self._since = time.monotonic()
        self._ticks: int | None = None
        self._size = -1
        self._per_s = os.sysconf("SC_CLK_TCK")

    def stalled(self, pid: int) -> bool:
        if self._stall_s is None:
            return False
        now = time.monotonic()
        ticks = tree_cpu_ticks(pid)
        try:
            size = self._log_path.stat().st_size
        except OSError:
            size = -1
        if ticks is None:
            return False  # gone, or no /proc: the exit is judged elsewhere
        worked = self._ticks is None or ticks - self._ticks >= STALL_CPU_S * self._per_s
        if worked or size != self._size:
            self._since, self._ticks, self._size = now, ticks, size
            return False
        return now - self._since >= self._stall_s


class ManagedProcess:
    """What a managed server shares: ``process`` (the ``Popen`` of the group leader, None
    before the first start), ``argv``, ``health``, ``log_reason``, the start loop and the
    stop, and the context manager (``with`` starts it, leaving stops it).

    A subclass sets :attr:`wording`, defines ``start`` (its checks, then
    :meth:`_start_attempts`) and ``stop`` (its grace period, then :meth:`_stop_group`), and
    the hooks ``_next_argv``, ``_launch_env``, ``_waiting_for``, ``_health_url`` and
    ``_reason_in`` (and ``_failure_subject`` when its errors name more than its label).
    """

    wording: ClassVar[ProcessWording]

    def __init__(self, log_path: Path, ready_timeout_s: float) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.argv: list[str] = []
        self._log_path = log_path
        self._ready_timeout_s = ready_timeout_s
        # Byte offset in the log where the latest start's output begins.
        self._log_offset = 0
        # The process :meth:`signal_stop` sent SIGTERM to (stop() does not send it again).
        self._terminated: subprocess.Popen[bytes] | None = None
        # The process whose exit was logged.
        self._reported: subprocess.Popen[bytes] | None = None

    # --- what a subclass supplies -------------------------------------------------------

    def start(self: _Server) -> _Server:
        """Launch the process and block until it is ready (see the subclass)."""
        raise NotImplementedError

    def stop(self, grace_s: float = 15.0) -> int | None:
        """Stop the process group; the exit code (see the subclass)."""
        return self._stop_group(grace_s)

    def signal_stop(self) -> None:
        """Send SIGTERM to the leader now and return: a later :meth:`stop` waits for the
        exit (and kills the group after its grace period) without signalling again. Lets
        the servers of a run shut down side by side instead of one after another (a
        tritonserver takes about 2.5 s to unload its models and exit). No-op when the process
        has ended or was never started."""
        proc = self.process
        if proc is None or proc.poll() is not None or self._terminated is proc:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        self._terminated = proc

    def _next_argv(self) -> list[str]:
        """Pick the ports of one start attempt; the command line to run."""
        raise NotImplementedError

    def _launch_env(self) -> dict[str, str]:
        """The environment of the process."""
        raise NotImplementedError

    def _waiting_for(self) -> str | None:
        """None when the server is ready, else what it still waits for."""
        raise NotImplementedError

    def _health_url(self) -> str | None:
        """The URL that answers 200 while the server serves (None before a start)."""
        raise NotImplementedError

    def _reason_in(self, text: str) -> str:
        """Why the server failed, from its log text since the latest start (one line)."""
        raise NotImplementedError

    def _failure_subject(self) -> str:
        return self.wording.label

    # --- shared -------------------------------------------------------------------------

    def _start_attempts(self, fixed: bool, waiting: str) -> None:
        """Launch and wait, up to :data:`START_ATTEMPTS` times while a picked port was taken.

        Args:
            fixed: every port was given (a taken port is final, not retried).
            waiting: what readiness waits for first (named if it never comes).

        Raises:
            ServerStartError: the process exited or was not ready in time, or a port was
                taken (a given one, or a picked one on every attempt); the group is stopped.
        """
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, START_ATTEMPTS + 1):
            self.argv = self._next_argv()
            self._launch(attempt)
            try:
                self._wait_ready(waiting)
                return
            except PortTaken:
                self.stop()
                if fixed or attempt == START_ATTEMPTS:
                    raise self._failure(
                        f"could not bind {self.wording.ports}"
                    ) from None
                log.info(
                    "a picked port was taken; retrying with %s", self.wording.retry_with
                )
            except Stalled:
                self.stop()
                stalled = (
                    f"stalled while starting: no CPU and no log line for "
                    f"{self.wording.stall_s:g} s, not ready"
                )
                if attempt == START_ATTEMPTS:
                    raise self._failure(f"{stalled}, on {attempt} attempts") from None
                log.warning(
                    "%s %s (waiting for %s); starting it again",
                    self.wording.label,
                    stalled,
                    waiting,
                )
            except BaseException:
                self.stop()
                raise

    def _launch(self, attempt: int) -> None:
        """Append a header to the log, remember where this start's output begins, start."""
        log.info("starting %s", shlex.join(self.argv))
        with open(self._log_path, "ab") as log_file:
            log_file.write(
                start_header(self.wording.header, attempt, self.argv).encode()
            )
            log_file.flush()
            self._log_offset = log_file.tell()
            self.process = subprocess.Popen(  # noqa: S603 - argv built by the subclass
                self.argv,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=self._launch_env(),
                start_new_session=True,
                # Not the user's folder: Python models get the working directory on their
                # import path, and a ./trtbench checkout there would shadow the package.
                cwd=self._log_path.parent,
            )
        log.info(
            "%s pid %d, log %s", self.wording.label, self.process.pid, self._log_path
        )

    def _wait_ready(self, waiting: str) -> None:
        deadline = time.monotonic() + self._ready_timeout_s
        progress = _Progress(self.wording.stall_s, self._log_path)
        while time.monotonic() < deadline:
            proc = self.process
            if proc is None or proc.poll() is not None:
                text = read_since(self._log_path, self._log_offset)
                if any(p in text for p in self.wording.port_taken):
                    raise PortTaken
                code = None if proc is None else proc.returncode
                raise self._failure(f"{exit_text(code)} before it was ready")
            still = self._waiting_for()
            if still is None:
                return
            waiting = still
            if proc is not None and progress.stalled(proc.pid):
                raise Stalled
            time.sleep(self.wording.poll_s)
        raise self._failure(
            f"was not ready after {self._ready_timeout_s:g} s (waiting for {waiting}; "
            f"raise deploy.ready_timeout_s if {self.wording.slow})"
        )

    def _failure(self, what: str) -> ServerStartError:
        return ServerStartError(
            f"{self._failure_subject()} {what}: {self.log_reason()} "
            f"(log: {self._log_path})"
        )

    def log_reason(self) -> str:
        """Why the server failed, read from what its log holds since its latest start
        (``no error lines in the log since its start`` when nothing says). Never raises."""
        try:
            return self._reason_in(read_since(self._log_path, self._log_offset))
        except Exception as exc:  # a reason must never fail the caller
            return f"log unreadable: {exc}"

    def health(self, timeout_s: float = 0.5) -> str | None:
        """Whether the server still serves: None when its process runs and its health URL
        answers 200 within ``timeout_s`` seconds, else one line saying why.

        ``LABEL exited with code -9 (signal SIGKILL): <log reason since its latest start>
        (log: PATH)``, ``LABEL is not ready (HTTP 503 from URL)`` or ``LABEL has not been
        started``. Cheap (one ``waitpid`` and one local HTTP request; the log is read only
        once it has exited) and safe to call from another thread while the server runs.
        Never raises. A killed server may read "not ready" for a moment before it reads
        "exited".

        Args:
            timeout_s: seconds to wait for the answer; a server that does not answer costs
                up to ``timeout_s`` + 0.1 s (a last wait for its exit).
        """
        label = self.wording.label
        try:
            proc, url = self.process, self._health_url()
            if proc is None or url is None:
                return f"{label} has not been started"
            if proc.poll() is None:
                not_ok = http_get(url, timeout_s)[0]
                if not_ok is None:
                    return None
                # A killed server refuses connections a moment before it can be reaped.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=min(_DYING_S, timeout_s))
                if proc.returncode is None:  # running: it answers badly, or not at all
                    return f"{label} {self.wording.not_serving} ({not_ok})"
            return (
                f"{label} {exit_text(proc.returncode)}: {self.log_reason()} "
                f"(log: {self._log_path})"
            )
        except Exception as exc:  # never raise into a load generator's watchdog
            return f"{label} health check failed: {type(exc).__name__}: {exc}"

    def _stop_group(self, grace_s: float) -> int | None:
        """SIGTERM the leader, SIGKILL the group after ``grace_s`` (and always at the end, so
        no child outlives it); the leader's exit code (None: never started).

        A second Ctrl-C while waiting kills the group, then propagates.
        """
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            if self._terminated is not proc:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                log.warning(
                    "%s did not exit %.0f s after SIGTERM; killed it (log %s)",
                    self.wording.label,
                    grace_s,
                    self._log_path,
                )
                _kill_group(proc)
            except BaseException:
                _kill_group(proc)
                raise
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        gone = self._wait_group_gone(proc.pid)
        if self._reported is not proc:  # once per process, however often stopped
            self._reported = proc
            log.info(
                "%s pid %d %s%s",
                self.wording.label,
                proc.pid,
                exit_text(proc.returncode),
                "" if gone else " (a process of its group lives on)",
            )
        return proc.returncode

    def _wait_group_gone(self, pgid: int) -> bool:
        """Until no member of process group ``pgid`` is alive: SIGKILL is delivered
        asynchronously, and a child that holds much memory (vLLM's engine core) takes a
        while to exit on a busy host; stop returns once its ports and memory are free.
        Warns after ``_GROUP_GONE_S`` and returns False (a process in uninterruptible
        sleep); True once none is left."""
        deadline = time.monotonic() + _GROUP_GONE_S
        while left := group_members(pgid):
            if time.monotonic() > deadline:
                log.warning(
                    "%s: %d process(es) of its group still alive %.0f s after SIGKILL: %s",
                    self.wording.label,
                    len(left),
                    _GROUP_GONE_S,
                    " ".join(map(str, left)),
                )
                return False
            time.sleep(0.02)
        return True

    def __enter__(self: _Server) -> _Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
