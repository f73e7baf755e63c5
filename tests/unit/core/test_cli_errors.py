"""An OSError anywhere is one line and exit 2; a dead server is exit 1; never a traceback."""

from __future__ import annotations

import errno

from tests.support.cli import run_cli
from tests.support.run_factory import summary_row, write_summary
from trtbench.cli import os_error_line


def test_os_error_line_names_both_paths_and_the_reason():
    exc = OSError(errno.EACCES, "Permission denied", "/runs/a/report.md", None)
    assert os_error_line(exc) == (
        "/runs/a/report.md: Permission denied; check the path, its permissions and free "
        "disk space"
    )
    moved = OSError(
        errno.EISDIR, "Is a directory", "/t/.report.md.x", None, "/t/report.md"
    )
    assert os_error_line(moved).startswith(
        "/t/.report.md.x -> /t/report.md: Is a directory"
    )


def test_an_unwritable_output_file_is_one_line_not_a_traceback(tmp_path, capsys):
    write_summary(
        tmp_path,
        [
            summary_row("baseline", 1, tpot=10.0, tok_s=100.0),
            summary_row("medusa", 1, tpot=5.0, tok_s=200.0),
        ],
    )
    (tmp_path / "report.md").mkdir()  # the report cannot replace a directory
    code, _, err = run_cli(["report", tmp_path], capsys)
    assert code == 2
    assert err.count("\n") == 1, err
    assert err.startswith("trtbench: error: ")
    assert "report.md" in err and "Is a directory" in err
    assert "Traceback" not in err
