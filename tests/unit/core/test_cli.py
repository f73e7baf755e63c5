"""The CLI wrapper: one-line errors with exit code 2, --debug anywhere before '--'."""

from __future__ import annotations

import pytest

from trtbench.cli import hoist_debug, main


def run(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code, capsys.readouterr().err


def test_usage_errors_are_one_line_with_exit_2(capsys):
    code, err = run(["analyze", "kineto", "/nonexistent/trace.json"], capsys)
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith("trtbench: error: Invalid value for 'TRACE'")
    assert "(see `trtbench analyze kineto --help`)" in err


def test_unknown_command_is_one_line(capsys):
    code, err = run(["biuld"], capsys)
    assert (code, err) == (
        2,
        "trtbench: error: No such command 'biuld'. (see `trtbench --help`)\n",
    )


def test_library_errors_are_one_line_and_debug_reraises(tmp_path, capsys):
    missing = str(tmp_path / "nope.yaml")
    code, err = run(["build", missing], capsys)
    assert code == 2
    assert (
        err
        == f"trtbench: error: spec file {missing} does not exist; pass the path to a bench spec YAML\n"
    )
    from trtbench.errors import ConfigError

    with pytest.raises(ConfigError):
        main(["build", missing, "--debug"])


def test_debug_is_hoisted_but_not_past_double_dash():
    assert hoist_debug(["build", "s.yaml", "--debug"]) == [
        "--debug",
        "build",
        "s.yaml",
    ]
    assert hoist_debug(["profile", "nsys", "--", "cmd", "--debug"]) == [
        "profile",
        "nsys",
        "--",
        "cmd",
        "--debug",
    ]
    assert hoist_debug(["report", "r"]) == ["report", "r"]
