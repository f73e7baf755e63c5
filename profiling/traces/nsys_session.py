"""Record one window of a long-running process with an interactive Nsight Systems session.

``nsys profile`` (:mod:`trtbench.profiling.traces.nsys_profile`) records a command from start to
end, or inside a capture range that the *profiled process* opens: ``cudaProfilerStart``/``Stop`` or
an NVTX range (the nsys User Guide's ``--capture-range``). A tritonserver calls neither around a
load tier (the tier is decided by the client), and ``--delay``/``--duration`` would have to guess
how long the models take to load. So the server runs under an interactive session instead, the
sequence the nsys User Guide documents as "Run application, start/stop collection multiple times"
(Example Interactive CLI Command Sequences)::

    nsys launch --session-new=S --trace=cuda,nvtx --cuda-graph-trace=node <server argv>
    nsys start  --session=S --sample=none --cpuctxsw=none --export=sqlite \\
                --force-overwrite=true --output=OUT/NAME        # before the tier's first request
    nsys stop   --session=S                                     # after its last response
    nsys shutdown --session=S                                   # once the server is stopped

``launch`` starts the process instrumented but collects nothing; ``start``/``stop`` open and
close collection from outside the process (the server keeps running), and ``stop`` writes
``OUT/NAME.nsys-rep`` plus ``OUT/NAME.sqlite``. Tracing options belong to ``launch``; CPU
sampling, output and export belong to ``start`` (User Guide, Launch and Start command switch
tables). The argv builders are pure; :func:`run_nsys_command` runs one of them.
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trtbench.core.errors import ConfigError, NotAvailableError, TraceParseError
from trtbench.profiling.traces.nsys_profile import (
    NsysProfileSpec,
    collection_flags,
    trace_flags,
)

logger = logging.getLogger(__name__)

NSYS_COMMAND_TIMEOUT_S = 600.0
REPORT_WAIT_S = 120.0
EXPORT_GRACE_S = 10.0
_STDERR_TAIL = 400
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def session_name(*parts: str) -> str:
    """A session name nsys accepts (a letter first; here letters, digits, ``-``, ``_``).

    ``session_name("trtbench", "draft-k4", "1234")`` → ``"trtbench-draft-k4-1234"``.
    """
    text = "-".join(_NOT_NAME.sub("_", p) for p in parts if p)
    return text if text[:1].isalpha() else f"s{text}"


@dataclass(frozen=True)
class NsysSession:
    """One interactive session: its name, what ``start`` records, and the nsys executable.

    Attributes:
        name: the session name (:func:`session_name`).
        spec: output folder and report stem; ``capture_range`` must be ``none`` (the
            window is opened and closed by ``start``/``stop``).
        nsys: the nsys executable (:func:`~trtbench.profiling.traces.nsys_profile.find_nsys`).
    """

    name: str
    spec: NsysProfileSpec
    nsys: Path

    @property
    def report_path(self) -> Path:
        """``OUT/NAME.nsys-rep`` written by ``nsys stop``."""
        return self.spec.report_path


def nsys_launch_argv(session: NsysSession, command: Sequence[str] = ()) -> list[str]:
    """``nsys launch`` for ``command`` (CUDA + NVTX tracing, per-kernel graph rows; pure).

    With an empty ``command`` this is the prefix to put in front of one
    (``ServerConfig.wrapper_argv``).

    Raises:
        ConfigError: the spec asks for a capture range (not used in a session).
    """
    if session.spec.capture_range != "none" or session.spec.nvtx_capture:
        raise ConfigError(
            "an nsys session records between `nsys start` and `nsys stop`; use "
            "capture_range none (capture ranges are for `trtbench profile nsys`)"
        )
    return [
        str(session.nsys),
        "launch",
        f"--session-new={session.name}",
        *trace_flags(session.spec),
        *command,
    ]


def nsys_start_argv(session: NsysSession) -> list[str]:
    """``nsys start``: collect from now on into ``OUT/NAME`` with a SQLite export (pure)."""
    return [
        str(session.nsys),
        "start",
        f"--session={session.name}",
        *collection_flags(session.spec),
    ]


def nsys_stop_argv(session: NsysSession) -> list[str]:
    """``nsys stop``: end the collection and write the report; the process runs on (pure)."""
    return [str(session.nsys), "stop", f"--session={session.name}"]


def nsys_shutdown_argv(session: NsysSession) -> list[str]:
    """``nsys shutdown``: end the session (SIGTERM to what it launched, if still alive)."""
    return [str(session.nsys), "shutdown", f"--session={session.name}"]


def nsys_export_argv(nsys: Path, report: Path, sqlite: Path) -> list[str]:
    """``nsys export`` of ``report`` to ``sqlite`` (pure)."""
    return [
        str(nsys),
        "export",
        "--type=sqlite",
        "--force-overwrite=true",
        f"--output={sqlite}",
        str(report),
    ]


def run_nsys_command(
    argv: Sequence[str], timeout_s: float = NSYS_COMMAND_TIMEOUT_S
) -> None:
    """Run one nsys CLI command to completion.

    Raises:
        NotAvailableError: it exited non-zero or ran past ``timeout_s`` (message: the
            command, the end of its stderr and what to check).
    """
    logger.info("running %s", " ".join(argv))
    try:
        proc = subprocess.run(  # noqa: S603 - argv built by the functions above
            list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise NotAvailableError(
            f"`{' '.join(argv[:3])}` did not finish in {timeout_s:g} s; check "
            "`nsys sessions list` and `nsys status -e`"
        ) from None
    if proc.returncode != 0:
        raise NotAvailableError(
            f"`{' '.join(argv[:3])}` exited with {proc.returncode}: "
            f"{(proc.stderr or proc.stdout).strip()[-_STDERR_TAIL:]!r}; check "
            "`nsys status -e` (profiling permissions) and `nsys sessions list`"
        )


def collect_sqlite(
    session: NsysSession,
    wait_s: float = REPORT_WAIT_S,
    export_grace_s: float = EXPORT_GRACE_S,
) -> Path:
    """The SQLite export of a stopped collection, exporting it when ``start`` did not.

    ``nsys stop`` normally returns with both files written. In case it returns earlier,
    this waits up to ``wait_s`` for ``OUT/NAME.nsys-rep``; once the report is there and
    ``OUT/NAME.sqlite`` still is not after ``export_grace_s``, it runs ``nsys export``.

    Raises:
        TraceParseError: no report appeared.
        NotAvailableError: the export failed.
    """
    sqlite = session.spec.sqlite_path
    deadline = time.monotonic() + wait_s
    report_seen: float | None = None
    while not sqlite.is_file():
        now = time.monotonic()
        if session.report_path.is_file():
            report_seen = report_seen if report_seen is not None else now
            if now - report_seen >= export_grace_s:
                run_nsys_command(
                    nsys_export_argv(session.nsys, session.report_path, sqlite)
                )
                break
        elif now >= deadline:
            raise TraceParseError(
                f"nsys wrote no {session.report_path} within {wait_s:g} s of `nsys stop`; "
                "see the server log for nsys messages"
            )
        time.sleep(0.5)
    return sqlite
