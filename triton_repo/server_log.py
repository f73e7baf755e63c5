"""Reading a tritonserver log: its tail, and the lines that say why the server failed."""

from __future__ import annotations

import re
from pathlib import Path

LOG_TAIL_LINES = 20
_ERROR_LINE = re.compile(r"^E\d{4} [\d:.]+\s+\d+\s+\S+\]\s*(.*)$")
_NOISE = ("CudaDriverHelper has not been initialized",)
_KEY_ERRORS = ("failed to load '", "failed to start", "already in use", "error: ")


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a text file ('' when absent)."""
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


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
