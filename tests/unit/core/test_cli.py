"""The CLI wrapper: one-line errors with exit code 2, --debug anywhere before '--'."""

from __future__ import annotations

import io

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
    # --debug: the traceback first, then the same line and the same exit code
    code, err = run(["build", missing, "--debug"], capsys)
    assert code == 2
    assert "Traceback (most recent call last)" in err and "ConfigError" in err
    line = f"trtbench: error: spec file {missing} does not exist; "
    assert err.endswith(line + "pass the path to a bench spec YAML\n")


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


def all_commands():
    """(path, command) of the group and every sub-command, as ``--help`` walks them."""
    import click

    from trtbench.cli import cli

    found = [("trtbench", cli)]
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        found.append((f"trtbench {name}", cli.get_command(ctx, name)))
    return found


@pytest.mark.parametrize(("path", "command"), all_commands(), ids=lambda x: str(x))
def test_help_texts_show_no_rest_markup(path, command):
    """Click prints docstrings as they are: Sphinx roles and double backquotes would show."""
    import click

    with click.Context(command, info_name=path) as ctx:
        text = command.get_help(ctx)
    for markup in ("``", ":class:", ":func:", ":mod:", ":meth:", ":data:", ".. "):
        assert markup not in text, f"{path} --help shows {markup!r}"
    assert "Usage: " in text and path in text


def test_log_levels_of_the_terminal():
    import logging

    from trtbench.commands.logs import terminal_level

    assert terminal_level(None, verbose=False, debug=False) == logging.WARNING
    assert terminal_level(None, verbose=True, debug=False) == logging.INFO
    assert terminal_level(None, verbose=True, debug=True) == logging.DEBUG
    assert terminal_level("error", verbose=True, debug=True) == logging.ERROR


def summary_rows(n: int = 2):
    """A summary frame with every table column (values as the CSV would hold them)."""
    import pandas as pd

    from trtbench.commands.terminal import TABLE_COLUMNS

    row = {name: 1.5 for name, _, _ in TABLE_COLUMNS}
    return pd.DataFrame(
        [{**row, "variant": f"draft-k{i}", "tier": "c8"} for i in range(n)]
    )


@pytest.mark.parametrize(("width", "compact"), [(80, True), (200, False)])
def test_results_table_keeps_key_columns_in_a_narrow_terminal(width, compact):
    from rich.console import Console

    from trtbench.commands.terminal import COMPACT_COLUMNS, TABLE_COLUMNS, fitting_table

    console = Console(width=width, file=io.StringIO())
    table, was_compact = fitting_table(summary_rows(), console)
    expected = COMPACT_COLUMNS if compact else TABLE_COLUMNS
    assert was_compact is compact
    assert [c.header for c in table.columns] == [h for _, h, _ in expected]
    console.print(table)
    text = console.file.getvalue()
    assert "…" not in text  # no cell is cut
    assert "draft-k1" in text and max(map(len, text.splitlines())) <= width


def test_run_log_names_its_command_and_an_unwritable_one_is_one_line(tmp_path, capsys):
    import logging

    from trtbench.commands.logs import RunLogHandler

    handler = RunLogHandler(tmp_path / "run" / "trtbench.log", heading="=== heading")
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "hello", None, None)
    handler.handle(record)
    handler.handle(record)
    handler.close()
    assert (tmp_path / "run" / "trtbench.log").read_text().splitlines() == [
        "=== heading",
        "hello",
        "hello",
    ]
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    bad = RunLogHandler(blocker / "run" / "trtbench.log")
    bad.handle(record)
    bad.handle(record)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write the run log" in err
    assert "Traceback" not in err
