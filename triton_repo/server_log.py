"""A tritonserver log: the header trtbench writes before each start, the part written since
the latest start, its tail, and the lines that say why the server failed.

The log is appended to, never truncated: every start adds a header line, so the output of an
earlier attempt (or an earlier ``deploy --serve``) stays readable below the previous header.
Writing and reading it is :mod:`trtbench.core.managed_process` (``read_since`` is named here too).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from trtbench import __version__
from trtbench.core import managed_process
from trtbench.core.managed_process import NO_ERROR_LINES, read_since

__all__ = ["HEADER", "log_errors", "log_reason", "read_since", "start_header", "tail"]

HEADER = f"trtbench {__version__}: tritonserver"  # the log header's label
LOG_TAIL_LINES = 20
_ERROR_LINE = re.compile(r"^E\d{4} [\d:.]+\s+\d+\s+\S+\]\s*(.*)$")
_NOISE = ("CudaDriverHelper has not been initialized",)
_KEY_ERRORS = ("failed to load '", "failed to start", "already in use", "error: ")


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a text file ('' when absent)."""
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def start_header(
    attempt: int, argv: Sequence[str], when: datetime | None = None
) -> str:
    """The line written to the log before a start (pure but for the default time).

    ``==== trtbench 0.1.0: tritonserver start 2026-01-02T03:04:05Z (attempt 1): ARGV ====``

    Args:
        attempt: 1-based start attempt of this server (a retry after a taken port counts).
        argv: the command line started (shell-quoted in the header).
        when: the start time (default: now, UTC).
    """
    return managed_process.start_header(HEADER, attempt, argv, when)


def log_reason(text: str) -> str:
    """The :func:`log_errors` of ``text`` joined with ``; `` (``no error lines in the log
    since its start`` when there are none; pure)."""
    return "; ".join(log_errors(text)) or NO_ERROR_LINES


def log_errors(text: str, limit: int = 3) -> list[str]:
    """The lines of a tritonserver log that say why it failed (pure).

    Error lines (``E1129 08:21:24.126 123 file.cc:642] "message"``) are reduced to their first
    message line; a model that failed to load, a service that failed to start and the final
    ``error: …`` line are preferred; CPU-only noise (CudaDriverHelper) is dropped.

    Returns:
        At most ``limit`` distinct messages, in log order.
    """
    found: list[str] = []
    for line in text.splitlines():
        match = _ERROR_LINE.match(line)
        message = (
            match.group(1) if match else (line if line.startswith("error: ") else "")
        )
        message = message.strip().strip('"').split("\\n")[0].strip()
        if message and not any(n in message for n in _NOISE) and message not in found:
            found.append(message[:300])
    key = [m for m in found if any(k in m for k in _KEY_ERRORS)]
    return (key or found)[-limit:]
