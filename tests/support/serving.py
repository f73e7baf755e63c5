"""``trtbench deploy RUN --serve`` in its own process, as a user starts it, and Ctrl-C to stop."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

# The console script, not `python -m`: the working directory is then not on sys.path.
TRTBENCH = Path(sys.executable).parent / "trtbench"


def serve_cli(
    run_root: Path, variant: str, *options: str, cwd: Path | None = None
) -> tuple[subprocess.Popen, str]:
    """Start ``trtbench deploy RUN --variant V --serve OPTIONS…``; return the process and the
    endpoint line it prints once its server is ready (fails the test when there is none)."""
    proc = subprocess.Popen(  # noqa: S603
        [
            str(TRTBENCH),
            "deploy",
            str(run_root),
            "--variant",
            variant,
            "--serve",
            *options,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )
    line = proc.stdout.readline()
    if not line:
        proc.wait(60)
        pytest.fail(f"deploy --serve printed nothing: {proc.stderr.read()}")
    return proc, line


def stop_cli(proc: subprocess.Popen) -> str:
    """SIGINT (Ctrl-C) the serving command; assert it stopped on its own with 130 (128 +
    SIGINT), not by the kill that follows a 90 s wait; return its stderr."""
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGINT, err
    return err
