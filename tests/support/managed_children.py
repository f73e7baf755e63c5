"""Real Python children as managed processes (a stand-in only for a server binary): the
hooks of ``ManagedProcess`` for a child that says it is ready by a line in a notes file."""

from __future__ import annotations

from pathlib import Path

from trtbench.core.managed_process import ManagedProcess, ProcessWording


class NotedChild(ManagedProcess):
    """A child started by ``start`` (its argv from the subclass's ``_next_argv``), ready
    once ``notes`` holds a ``ready`` line; no environment, no health URL, its log's tail as
    the reason of a failure."""

    notes: Path

    def start(self) -> NotedChild:
        self._start_attempts(False, "its ready note")
        return self

    def _launch_env(self) -> dict[str, str]:
        return {}

    def _waiting_for(self) -> str | None:
        ready = self.notes.is_file() and "ready" in self.notes.read_text()
        return None if ready else "its ready note"

    def _health_url(self) -> str | None:
        return None

    def _reason_in(self, text: str) -> str:
        return text.strip()[-200:]


def child_wording(label: str, stall_s: float | None = None) -> ProcessWording:
    """The wording of a child ``label``: polled every 50 ms, no ports, judged stalled
    after ``stall_s`` (None: never)."""
    return ProcessWording(
        label=label,
        header=label,
        not_serving="is not ready",
        port_taken=(),
        ports="its ports",
        retry_with="a retry",
        slow="the host is busy",
        poll_s=0.05,
        stall_s=stall_s,
    )
