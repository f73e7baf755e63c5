"""Running the ``trtbench`` console entry point inside a test, as a user would."""

from __future__ import annotations

import pytest

from trtbench.cli import main


def run_cli(args: list, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``trtbench ARGS…`` through :func:`trtbench.cli.main`: (exit code, stdout, stderr)."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code
    cap = capsys.readouterr()
    return code, cap.out, cap.err
